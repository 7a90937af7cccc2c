"""Objects of TorchScript classes that a model creates while running (torchvision's ImageList, LevelMapper):
created here, their attributes read and written with ptlite::get_attr / ptlite::set_attr (state.py)."""

DECLARATIONS = r"""
ptlite::create_object(str type) -> Any
"""
