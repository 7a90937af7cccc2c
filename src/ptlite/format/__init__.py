"""The .ptlite file: writer, verified reader, and the legacy PyTorch Mobile reader (`ptlite.format.ptl`)."""

from typing import Any

from .reader import read_program

__all__ = ["read_program", "save"]


def __getattr__(name: str) -> Any:
    """`save`, imported when first asked for: loading a file never needs the writer (nor its json import)."""
    if name == "save":
        from .writer import save

        return save
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
