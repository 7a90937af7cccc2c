"""ptlite: capture a PyTorch model into a small safe file and run it anywhere with NumPy alone.

Workstation side (needs torch)::

    program = ptlite.capture(model, (example,))      # torch.export / jit.script / jit.trace
    ptlite.save(program, "model.ptlite")

Device side (NumPy only)::

    module = ptlite.load("model.ptlite")
    logits = module(image)
"""

from __future__ import annotations

import os
from typing import Any

from .errors import (
    CaptureError,
    ExecutionError,
    FormatError,
    InputError,
    PtliteError,
    ScriptError,
    UnsupportedOperatorError,
)
from .ir.graph import Program, ValueSpec
from .runtime.module import Module

__version__ = "0.1.0"

__all__ = ["capture", "save", "load", "export_opnames", "Program", "Module", "ValueSpec", "PtliteError",
           "FormatError", "CaptureError", "InputError", "UnsupportedOperatorError", "ExecutionError",
           "ScriptError", "__version__"]


def capture(model: Any, example_inputs: tuple | None = None, method: str = "auto", **options: Any) -> Program:
    """Capture a PyTorch model into a ptlite Program (needs torch; see `ptlite.frontend.capture`)."""
    from .frontend import capture as _capture

    return _capture(model, example_inputs, method=method, **options)


def save(program: Program, path: str | os.PathLike) -> None:
    """Write `program` to a .ptlite file."""
    from .format.writer import save as _save

    _save(program, path)


def load_program(path: str | os.PathLike) -> Program:
    """Read a .ptlite file into a Program without preparing it to run."""
    from .format.reader import read_program

    return read_program(path)


def load(path: str | os.PathLike) -> Module:
    """Load a .ptlite file, check that every operator it uses is available, and return a runnable Module."""
    return Module(load_program(path))


def export_opnames(program_or_path: Program | str | os.PathLike) -> list[str]:
    """Sorted names of the operators a program (or a saved file) uses, as PyTorch's `_export_operator_list`."""
    program = program_or_path if isinstance(program_or_path, Program) else load_program(program_or_path)
    return [name for name in program.operator_names() if name not in _STRUCTURAL_OPS]


# Nodes that structure the program rather than compute (PyTorch Mobile has instructions for them, not operators).
_STRUCTURAL_OPS = frozenset({"prim::Constant", "prim::If", "prim::Loop"})
