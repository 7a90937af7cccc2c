"""The .ptlite file: writer, verified reader, and (later) the legacy PyTorch Mobile reader."""

from .reader import read_program
from .writer import save

__all__ = ["read_program", "save"]
