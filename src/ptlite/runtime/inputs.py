"""Checking a call's arguments against a method's input specs, before anything runs: binding positional and
keyword arguments, filling defaults, and refusing a wrong type, dtype, rank or static size by name."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ptlite.errors import InputError
from ptlite.ir.graph import ValueSpec

_SCALAR_TYPES = {"int": (int, np.integer), "float": (float, int, np.floating, np.integer), "bool": (bool, np.bool_),
                 "str": (str,)}


def _check_tensor(spec: ValueSpec, value: Any, method: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        if hasattr(value, "__array__") or isinstance(value, (list, tuple, int, float)):
            value = np.asarray(value)
        else:
            raise InputError(f"{method}: input '{spec.name}' must be a NumPy array, got {type(value).__name__}")
    if spec.dtype is not None and value.dtype != np.dtype(spec.dtype):
        raise InputError(f"{method}: input '{spec.name}' must have dtype {spec.dtype}, got {value.dtype} "
                         f"(convert it with .astype(np.{spec.dtype}))")
    if spec.shape is not None:
        if value.ndim != len(spec.shape):
            raise InputError(f"{method}: input '{spec.name}' must have {len(spec.shape)} dimensions "
                             f"{_shape_text(spec.shape)}, got {value.ndim}: {tuple(value.shape)}")
        bad = [i for i, (want, got) in enumerate(zip(spec.shape, value.shape)) if want is not None and want != got]
        if bad:
            raise InputError(f"{method}: input '{spec.name}' must have shape {_shape_text(spec.shape)}, got "
                             f"{tuple(value.shape)} (dimension {bad[0]} differs); this program was captured with "
                             f"static shapes: capture again with dynamic shapes or use the captured size")
    return value


def _shape_text(shape: tuple) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


def _check_union(spec: ValueSpec, value: Any, method: str) -> Any:
    """An Optional or Union input: the value must have one of the types (arrays from other libraries become NumPy
    arrays); types ptlite cannot check pass unchecked."""
    from ptlite.ir.types import check_type, has_type  # here: only Optional and Union inputs need it

    try:
        check_type(spec.type)
    except ValueError:
        return value
    if value is not None and not isinstance(value, (np.ndarray, np.generic, int, float, str, list, tuple, dict)) \
            and hasattr(value, "__array__"):
        value = np.asarray(value)
    if not has_type(value, spec.type):
        raise InputError(f"{method}: input '{spec.name}' must be {spec.type}, got {type(value).__name__}")
    return value


def _check_tensor_list(spec: ValueSpec, value: Any, method: str) -> list[np.ndarray]:
    """A List[Tensor] input (a detector's images): a list or tuple of arrays (other libraries' arrays become NumPy
    arrays)."""
    if not isinstance(value, (list, tuple)):
        raise InputError(f"{method}: input '{spec.name}' must be a list of arrays, got {type(value).__name__}")
    items = []
    for i, item in enumerate(value):
        if not isinstance(item, np.ndarray):
            if not hasattr(item, "__array__"):
                raise InputError(f"{method}: input '{spec.name}' must be a list of arrays; item {i} is a "
                                 f"{type(item).__name__}")
            item = np.asarray(item)
        items.append(item)
    return items


def _check_scalar(spec: ValueSpec, value: Any, method: str) -> Any:
    kinds = _SCALAR_TYPES.get(spec.type)
    if kinds is not None and not isinstance(value, kinds):
        raise InputError(f"{method}: input '{spec.name}' must be {spec.type}, got {type(value).__name__}")
    if spec.type == "int" and isinstance(value, (bool, np.bool_)):
        raise InputError(f"{method}: input '{spec.name}' must be int, got bool")
    return value


def check_args(specs: list[ValueSpec], args: tuple[Any, ...], kwargs: dict[str, Any], name: str,
               signature: Callable[[], str]) -> list[Any]:
    """Bind positional and keyword arguments to the inputs `specs` of method `name` (whose signature(), made only
    for an error, errors quote), fill defaults and check each one; InputError names the first problem."""
    if len(args) > len(specs):
        raise InputError(f"{signature()} takes {len(specs)} input(s), got {len(args)}")
    bound: list[Any] = list(args)
    names = [s.name for s in specs]
    for key in kwargs:
        if key not in names:
            raise InputError(f"{signature()} has no input named '{key}'")
    for spec in specs[len(args):]:
        if spec.name in kwargs:
            bound.append(kwargs[spec.name])
        elif spec.has_default:
            bound.append(spec.default)
        else:
            raise InputError(f"{signature()}: missing input '{spec.name}'")
    checked = []
    for spec, value in zip(specs, bound):
        if spec.type == "Tensor":
            checked.append(_check_tensor(spec, value, name))
        elif spec.type in _SCALAR_TYPES:
            checked.append(_check_scalar(spec, value, name))
        elif spec.type.replace(" ", "") == "List[Tensor]":
            checked.append(_check_tensor_list(spec, value, name))
        elif spec.type.startswith(("Optional[", "Union[")):
            checked.append(_check_union(spec, value, name))
        else:
            checked.append(value)
    return checked
