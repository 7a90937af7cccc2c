"""PyTorch models named on a command line: 'module:function' (or 'file.py:function'), TorchScript files,
example inputs; and the name a converted file records of the model it came from."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import warnings
from typing import Any

import ptlite

from .errors import ToolError, require_file

TORCH_INSTALL = "pip install 'ptlite[export]'"
SOURCE_KEY = "source"  # metadata: the 'module:function' a file was converted from
SOURCE_PATTERN = re.compile(r"[\w./-]+:[\w.]+")  # what convert records, and all that inspect and compare show


def import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise ToolError(f"this command needs PyTorch, which is not installed: {TORCH_INSTALL}") from None
    return torch


def import_callable(spec: str, what: str = "MODEL") -> Any:
    """The object named by 'package.module:attr.path' or 'path/to/file.py:attr' (`what`: the argument that gave it,
    for errors)."""
    module_name, _, attr_path = spec.rpartition(":")
    if not module_name or not attr_path:
        raise ToolError(f"{what} {spec!r} must be 'module:function' or a TorchScript file")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        if module_name.endswith(".py"):
            module = _import_file(module_name)
        else:
            module = importlib.import_module(module_name)
    except ToolError:
        raise
    except ModuleNotFoundError as exc:
        raise ToolError(f"cannot import {module_name!r}: {exc}") from None
    except Exception as exc:
        raise ToolError(f"importing {module_name!r} failed: {type(exc).__name__}: {exc}") from None
    obj: Any = module
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise ToolError(f"{module_name!r} has no attribute {attr_path!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ToolError(f"{spec} is not callable: it must be a function or class returning an nn.Module")
    return obj


def _import_file(path: str) -> Any:
    require_file(path)
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ToolError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # torch.jit.script reads the source of classes through their module
    spec.loader.exec_module(module)
    return module


def make_model(spec: str, torch: Any, what: str = "MODEL") -> tuple[Any, tuple | None]:
    factory = import_callable(spec, what)
    try:
        made = factory()
    except Exception as exc:
        raise ToolError(f"calling {spec}() failed: {type(exc).__name__}: {exc}") from None
    example = None
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module):
        made, example = made
        example = (example,) if isinstance(example, torch.Tensor) else tuple(example)
    if not isinstance(made, torch.nn.Module):
        raise ToolError(f"{spec}() returned {type(made).__name__}, not an nn.Module")
    return made, example


def load_torchscript(path: str, torch: Any) -> Any:
    try:
        with warnings.catch_warnings():  # torch.jit.load warns that TorchScript is deprecated
            warnings.filterwarnings("ignore", message=r".*torch\.jit\..*deprecated", category=FutureWarning)
            return torch.jit.load(path, map_location="cpu")
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0].split(". ")[0]
        raise ToolError(f"{path}: not a TorchScript file that torch.jit.load can read ({first})") from None


def example_inputs(shapes: list[tuple[int, ...]], dtypes: list[str], torch: Any) -> tuple | None:
    if not shapes:
        if dtypes:
            raise ToolError("--input-dtype needs --input-shape")
        return None
    if len(dtypes) > 1 and len(dtypes) != len(shapes):
        raise ToolError(f"give --input-dtype once, or once per --input-shape ({len(shapes)}), "
                       f"not {len(dtypes)} times")
    dtypes = dtypes if len(dtypes) > 1 else [dtypes[0] if dtypes else "float32"] * len(shapes)
    generator = torch.Generator().manual_seed(0)
    examples = []
    for shape, name in zip(shapes, dtypes, strict=True):
        dtype = getattr(torch, name)
        if dtype.is_floating_point:
            examples.append(torch.randn(shape, generator=generator).to(dtype))
        else:
            examples.append(torch.zeros(shape, dtype=dtype))  # zeros are valid indices, masks and lengths
    return tuple(examples)


def dynamic_batch(example: tuple | None, torch: Any) -> tuple[tuple, tuple]:
    """Examples and torch.export dynamic_shapes in which the first dimension of every input may vary.

    torch.export fixes a dimension whose example size is 1, so a batch of 1 is repeated to make 2.
    """
    if example is None:
        raise ToolError("--dynamic-batch needs --input-shape")
    example = tuple(torch.cat([t, t]) if t.dim() > 0 and t.shape[0] == 1 else t for t in example)
    return example, tuple({0: torch.export.Dim.AUTO} if t.dim() > 0 else None for t in example)


def recorded_source(program: ptlite.Program) -> str | None:
    """The 'module:function' a file records it was converted from, if it looks like one (it is the file's text:
    never imported here, and shown only when it cannot carry shell syntax or terminal escapes)."""
    source = program.metadata.get(SOURCE_KEY)
    return source if isinstance(source, str) and SOURCE_PATTERN.fullmatch(source) else None
