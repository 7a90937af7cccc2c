"""Pieces shared by the capture front ends: weights, constants, operator checks, input/output specs, failures."""

from __future__ import annotations

import os
import re
import traceback
from enum import IntEnum
from typing import Any

import numpy as np
import torch

from ptlite.errors import CaptureError
from ptlite.ir.dtypes import SCALAR_TYPE_OF, normalize_dtype_name
from ptlite.ir.graph import Program, ValueSpec

# torch.memory_format / torch.layout constants as TorchScript passes them (ints).
_MEMORY_FORMATS = {torch.contiguous_format: 0, torch.preserve_format: 1, torch.channels_last: 2,
                   torch.channels_last_3d: 3}
_LAYOUTS = {torch.strided: 0}


class Relevance(IntEnum):
    """How much a capture method's failure tells the user, most first: auto lists the failures in this order."""

    OPERATORS = 0  # the model was captured, but uses operators ptlite cannot run
    EXPLAINED = 1  # a known cause in the user's code, with its fix
    FROZEN = 2  # a trace refused: it would freeze control flow or values
    OTHER = 3


class MethodFailure(CaptureError):
    """Why one capture method failed: `reason` in one line (auto lists one per method), str() the whole story."""

    def __init__(self, message: str, reason: str | None = None, relevance: Relevance = Relevance.OTHER) -> None:
        super().__init__(message)
        self.reason = reason or one_line(message)
        self.relevance = relevance


def one_line(message: str) -> str:
    """The first line of a message; when it ends with a colon, the line it introduces too."""
    lines = [ln.strip() for ln in str(message).strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    if lines[0].endswith(":") and len(lines) > 1:
        return f"{lines[0]} {lines[1]}"
    return lines[0]


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_FRONTEND_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB_DIR = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
_MESSAGE_FRAME = re.compile(r'File "(?P<path>[^"]+)", line (?P<line>\d+)[^\n]*\n[ \t]*(?P<code>[^\n]*)')


def _users(path: str) -> bool:
    full = os.path.abspath(path)
    installed = f"{os.sep}site-packages{os.sep}" in full or f"{os.sep}dist-packages{os.sep}" in full
    stdlib = full.startswith(_STDLIB_DIR) and not installed
    return not (path.startswith("<") or stdlib or full.startswith((_TORCH_DIR, _FRONTEND_DIR)))


def user_line(exc: BaseException) -> str:
    """'path:line `code`' of the innermost place in the user's code (not torch's, nor ptlite's capture code) that
    an exception names in its message (as torch.export's do) or passed through; '' when none."""
    found = [(m["path"], int(m["line"]), m["code"].strip()) for m in _MESSAGE_FRAME.finditer(str(exc))
             if _users(m["path"])]
    if not found:
        found = [(f.filename, f.lineno or 0, (f.line or "").strip()) for f in traceback.extract_tb(exc.__traceback__)
                 if _users(f.filename)]
    if not found:
        return ""
    path, line, code = found[-1]
    return f"{path}:{line}" + (f" `{code}`" if code else "")


def dtype_name(dtype: torch.dtype) -> str:
    return normalize_dtype_name(str(dtype))


def scalar_type(dtype: torch.dtype) -> int:
    name = dtype_name(dtype)
    if name not in SCALAR_TYPE_OF:
        raise CaptureError(f"dtype {dtype} is not supported by ptlite")
    return SCALAR_TYPE_OF[name]


def python_constant(value: Any) -> Any:
    """A torch-side constant (dtype, device, memory format, ...) as the plain Python value the IR stores."""
    if isinstance(value, torch.dtype):
        return scalar_type(value)
    if isinstance(value, torch.device):
        return str(value)
    if isinstance(value, torch.memory_format):
        return _MEMORY_FORMATS.get(value, 0)
    if isinstance(value, torch.layout):
        return _LAYOUTS.get(value, 0)
    if isinstance(value, list):
        return [python_constant(v) for v in value]
    if isinstance(value, tuple):
        return tuple(python_constant(v) for v in value)
    if isinstance(value, dict):
        return {python_constant(k): python_constant(v) for k, v in value.items()}
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        raise CaptureError(f"symbolic value {value} cannot be stored as a constant")
    return value


def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """A detached, contiguous CPU copy of a tensor as a NumPy array."""
    t = tensor.detach().cpu()
    if t.dtype == torch.bfloat16:
        raise CaptureError("bfloat16 weights are not supported by ptlite's NumPy runtime; convert the model to "
                           "float32 first (model.float())")
    if t.is_quantized:
        raise CaptureError("quantized tensors are not supported yet; capture the float model")
    return np.ascontiguousarray(t.numpy())


class WeightStore:
    """Collects tensor constants into the program's weights, giving each a stable, readable name."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self._by_identity: dict[tuple, str] = {}
        self._alive: list[torch.Tensor] = []  # keeps storages alive so a data_ptr is never reused meanwhile

    def add(self, tensor: torch.Tensor, hint: str) -> str:
        key = (tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype) \
            if tensor.numel() else None
        if key is not None and key in self._by_identity:
            return self._by_identity[key]
        name = _unique_name(hint or "weight", self.program.weights)
        self.program.weights[name] = to_numpy(tensor)
        if key is not None:
            self._by_identity[key] = name
            self._alive.append(tensor)
        return name


def _unique_name(hint: str, taken: dict) -> str:
    name = hint.replace("/", ".")
    i = 1
    while name in taken:
        i += 1
        name = f"{hint}_{i}"
    return name


def check_operators(program: Program, how: str) -> None:
    """Raise one CaptureError listing every operator ptlite cannot run, with where each comes from."""
    from ptlite.ir.verifier import unknown_operators, unsupported_uses

    missing = unknown_operators(program)
    if missing:
        raise MethodFailure(
            f"cannot capture the model ({how}): it uses {len(missing)} operator(s) that ptlite cannot run:\n"
            + _places(missing, "used at ")
            + "\nReplace these operations in the model, or open an issue asking for the operators.",
            reason=f"uses {len(missing)} operator(s) that ptlite cannot run: {', '.join(sorted(missing))}",
            relevance=Relevance.OPERATORS)
    misused = unsupported_uses(program)  # declared operators on arguments the kernels cannot take (their limits)
    if misused:
        raise MethodFailure(
            f"cannot capture the model ({how}): it uses {len(misused)} operator(s) in ways ptlite cannot run "
            "(it would fail there when run):\n" + _places(misused, "at ")
            + "\nChange these operations in the model, or open an issue asking for them.",
            reason=f"uses {', '.join(sorted(misused))} in ways ptlite cannot run",
            relevance=Relevance.OPERATORS)


def _places(found: dict[str, list[str]], lead: str) -> str:
    """One line per operator: the first four distinct places it is found, and how many more."""
    lines = []
    for op, places in sorted(found.items()):
        uniq = list(dict.fromkeys(places))
        more = f" and {len(uniq) - 4} more" if len(uniq) > 4 else ""
        lines.append(f"  {op}: {lead}{'; '.join(uniq[:4])}{more}")
    return "\n".join(lines)


def tensor_spec(name: str, example: Any, static_shape: bool) -> ValueSpec:
    """Spec of a tensor input from an example tensor: dtype, rank, and sizes when the shape is static."""
    if isinstance(example, torch.Tensor):
        shape = tuple(int(d) for d in example.shape) if static_shape else tuple(None for _ in example.shape)
        return ValueSpec(name=name, type="Tensor", dtype=dtype_name(example.dtype), shape=shape)
    return ValueSpec(name=name, type="Tensor")


def module_path(hierarchy: str) -> str:
    """'SELF(ResNet).layer1(Sequential).0(BasicBlock).conv1(Conv2d).SELF(Conv2d)' -> 'layer1.0.conv1 (Conv2d)'."""
    parts, kind = [], ""
    for item in _split_hierarchy(hierarchy):
        name, _, rest = item.partition("(")
        if rest.rstrip(")") not in ("", "UNKNOWN_TYPE"):
            kind = rest.rstrip(")")
        if name not in ("SELF", "UNKNOWN_INSTANCE"):
            parts.append(name)
    if not parts and not kind:
        return ""
    return f"{'.'.join(parts) or '<root>'} ({kind})" if kind else ".".join(parts)


def _split_hierarchy(text: str) -> list[str]:
    items, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "." and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if cur:
        items.append("".join(cur))
    return [i for i in items if i]
