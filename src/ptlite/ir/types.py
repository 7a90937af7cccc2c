"""TorchScript type strings as the IR writes them ('Tensor', 'List[int]', 'Optional[Dict[str, Tensor]]'): their
parts, and whether a run-time value has one. Values map to Python ones as the prim kernels keep them: int, float,
bool, str and None as themselves, lists, tuples and dicts as such, tensors as NumPy arrays."""

from __future__ import annotations

from typing import Any

import numpy as np


def has_type(value: Any, type_: str) -> bool:
    """Whether a run-time value has a TorchScript type (ValueError for a type ptlite cannot check: check_type)."""
    return _has_type(value, type_.replace(" ", ""))


def _has_type(value: Any, type_: str) -> bool:
    head, args = type_arguments(type_)
    if head == "Any":
        return True
    if head == "Tensor":
        return isinstance(value, np.ndarray)
    if head == "bool":
        return isinstance(value, (bool, np.bool_))
    if head == "int":
        return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))
    if head == "float":
        return isinstance(value, (float, np.floating))
    if head in ("number", "Scalar"):
        return _has_type(value, "int") or _has_type(value, "float")
    if head == "str":
        return isinstance(value, str)
    if head in ("NoneType", "None"):
        return value is None
    if head == "Optional" and len(args) == 1:
        return value is None or _has_type(value, args[0])
    if head == "Union":
        return any(_has_type(value, a) for a in args)
    if head == "List" and len(args) == 1:
        return isinstance(value, list) and all(_has_type(v, args[0]) for v in value)
    if head == "Tuple":
        args = [a for a in args if a != "()"]
        return isinstance(value, tuple) and len(value) == len(args) and all(map(_has_type, value, args))
    if head == "Dict" and len(args) == 2:
        return isinstance(value, dict) and all(_has_type(k, args[0]) and _has_type(v, args[1])
                                               for k, v in value.items())
    raise ValueError(f"isinstance() against the type {type_}: ptlite cannot check it at run time")


_SIMPLE = frozenset({"Any", "Tensor", "bool", "int", "float", "number", "Scalar", "str", "NoneType", "None"})
_PARAMETERS = {"Optional": 1, "List": 1, "Dict": 2}


def check_type(type_: str) -> None:
    """Raise ValueError unless ptlite::isinstance can check values against this type (classes, devices, complex
    numbers and the like it cannot)."""
    head, args = type_arguments(type_.replace(" ", ""))
    if head in _SIMPLE and not args:
        return
    if head in ("Union", "Tuple") or _PARAMETERS.get(head) == len(args):
        for a in args:
            if a != "()":
                check_type(a)
        return
    raise ValueError(f"isinstance() against the type {type_}: ptlite cannot check it at run time")


def type_arguments(type_: str) -> tuple[str, list[str]]:
    """A TorchScript type string's head and parameters: 'Dict[str, List[int]]' -> ('Dict', ['str', 'List[int]']);
    'int' -> ('int', [])."""
    if not type_.endswith("]") or "[" not in type_:
        return type_, []
    head, inner = type_[:type_.index("[")], type_[type_.index("[") + 1:-1]
    args, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(inner[start:i].strip())
            start = i + 1
    if inner[start:].strip():
        args.append(inner[start:].strip())
    return head, args
