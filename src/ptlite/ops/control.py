"""Constants and control flow: the nodes the interpreter runs itself, on every backend."""

DECLARATIONS = r"""
prim::Constant(...) -> ...  @structural
prim::If(...) -> ...  @structural
prim::Loop(...) -> ...  @structural
"""
