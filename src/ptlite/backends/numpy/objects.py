"""Objects of TorchScript classes created while running: a dict of attributes (which ptlite::get_attr and
ptlite::set_attr read and write, as they do the module's state) that knows its class's name."""

from __future__ import annotations

from ptlite.backends.numpy import kernel
from ptlite.ops import CREATE_OBJECT


class ScriptObject(dict):
    """An object of a TorchScript class: its attributes by name."""

    __slots__ = ("type",)

    def __init__(self, type: str) -> None:
        super().__init__()
        self.type = type

    def __repr__(self) -> str:
        return f"{self.type}({', '.join(f'{k}={v!r}' for k, v in self.items())})"


@kernel(CREATE_OBJECT)
def create_object(type: str) -> ScriptObject:
    return ScriptObject(type)
