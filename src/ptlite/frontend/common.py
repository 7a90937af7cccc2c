"""Pieces shared by the capture front ends: weights, constants, operator checks, input/output specs."""

from __future__ import annotations

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
    from ptlite.ir.verifier import unknown_operators

    missing = unknown_operators(program)
    if missing:
        lines = []
        for op, places in sorted(missing.items()):
            uniq = list(dict.fromkeys(places))
            more = f" and {len(uniq) - 4} more" if len(uniq) > 4 else ""
            lines.append(f"  {op}: used at {'; '.join(uniq[:4])}{more}")
        raise CaptureError(
            f"cannot capture the model ({how}): it uses {len(missing)} operator(s) that ptlite cannot run:\n"
            + "\n".join(lines)
            + "\nReplace these operations in the model, or open an issue asking for the operators.")


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
