"""TorchScript-level operators on Python values: text conversions, exceptions, None checks, tuples.

TorchScript values map to Python ones: int/float/bool/str/None as themselves, `List` as a (mutable, shared)
Python list, `Tuple` as a tuple, `Dict` as an insertion-ordered dict. Tensors only pass through here.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.errors import ScriptError

# ---------------------------------------------------------------------------------------------------------
# Converting values to text as TorchScript's str() and format() do
# ---------------------------------------------------------------------------------------------------------

_CPU_TYPE_NAMES = {
    "float32": "Float", "float64": "Double", "float16": "Half", "int64": "Long", "int32": "Int",
    "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool",
}


def _float_text(value: float) -> str:
    """Doubles print as '2.' when integral (and within int64), else with 17 significant digits."""
    if math.isfinite(value) and -2.0**63 <= value < 2.0**63 and value == int(value):
        return f"{int(value)}."
    if math.isnan(value):
        return "nan"
    return f"{value:.17g}"


def _tensor_text(array: np.ndarray) -> str:
    """An approximation of PyTorch's C++ tensor printing ('1.5\\n[ CPUFloatType{} ]')."""
    type_name = _CPU_TYPE_NAMES.get(array.dtype.name, array.dtype.name)
    shape = ",".join(str(d) for d in array.shape)
    if array.ndim == 0:
        body = script_str(array.item())
    else:
        body = np.array2string(np.asarray(array), separator=" ").replace("[", "").replace("]", "")
    return f"{body}\n[ CPU{type_name}Type{{{shape}}} ]"


def script_str(value: Any) -> str:
    """Text of a value as TorchScript's `str()` writes it (strings inside containers are not quoted)."""
    if value is None:
        return "None"
    if isinstance(value, (bool, np.bool_)):
        return "True" if value else "False"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return _float_text(float(value))
    if isinstance(value, str):
        return value
    if isinstance(value, np.ndarray):
        return _tensor_text(value)
    if isinstance(value, list):
        return "[" + ", ".join(script_str(v) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(script_str(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{script_str(k)}: {script_str(v)}" for k, v in value.items()) + "}"
    return str(value)


@kernel("aten::format")
def format_(template: str, *args: Any) -> str:
    """Replace each '{}' in turn by the next argument (TorchScript knows no other placeholder)."""
    pieces, begin = [], 0
    for index in range(len(args) + 1):
        at = template.find("{}", begin)
        if at < 0:
            pieces.append(template[begin:])
            return "".join(pieces)
        if index == len(args):
            raise ScriptError(f"Too few arguments for format string: {template}", "builtins.RuntimeError")
        pieces.append(template[begin:at])
        pieces.append(script_str(args[index]))
        begin = at + 2
    return "".join(pieces)  # pragma: no cover  (the loop always returns)


@kernel("aten::str")
def str_(elem: Any) -> str:
    return script_str(elem)


# ---------------------------------------------------------------------------------------------------------
# Exceptions, warnings, global state
# ---------------------------------------------------------------------------------------------------------

@kernel("prim::RaiseException")
def raise_exception(msg: str, cls: str | None = None) -> None:
    raise ScriptError(msg, cls)


@kernel("aten::warn")
def warn(message: str, stacklevel: int = 2) -> None:
    warnings.warn(message, UserWarning, stacklevel=2)


@kernel("aten::is_grad_enabled",
        "aten::is_autocast_enabled",
        "aten::is_autocast_cpu_enabled")
def never_enabled() -> bool:
    """ptlite only runs inference: no gradients, no autocast."""
    return False


@kernel("aten::set_grad_enabled")
def set_grad_enabled(val: bool) -> None:
    return None


# ---------------------------------------------------------------------------------------------------------
# None, identity, optional
# ---------------------------------------------------------------------------------------------------------

def _same(a: Any, b: Any) -> bool:
    """TorchScript's `is`: identity for objects and tensors, value for None/bool/int/float."""
    if a is None or b is None:
        return a is b
    scalar = (bool, int, float)
    if isinstance(a, scalar) and isinstance(b, scalar):
        return type(a) is type(b) and a == b
    return a is b


@kernel("aten::__is__")
def is_(self: Any, obj: Any) -> bool:
    return _same(self, obj)


@kernel("aten::__isnot__")
def isnot(self: Any, obj: Any) -> bool:
    return not _same(self, obj)


@kernel("aten::__not__")
def not_(self: bool) -> bool:
    return not self


@kernel("prim::unchecked_cast",
        "aten::_unwrap_optional",
        "prim::unchecked_unwrap_optional")
def identity(x: Any) -> Any:
    return x


@kernel("prim::Uninitialized")
def uninitialized() -> None:
    return None


@kernel("prim::IfThenElse")
def if_then_else(cond: bool, x: Any, y: Any) -> Any:
    return x if cond else y


# ---------------------------------------------------------------------------------------------------------
# Tuples
# ---------------------------------------------------------------------------------------------------------

@kernel("prim::TupleConstruct")
def tuple_construct(*items: Any) -> tuple:
    return tuple(items)


@kernel("prim::TupleUnpack",
        "prim::ListUnpack")
def unpack(container: Any) -> tuple:
    """Several outputs, one per element; the interpreter assigns them to the node's outputs."""
    return tuple(container)


@kernel("prim::TupleIndex")
def tuple_index(tup: tuple, i: int) -> Any:
    return tup[i]


@kernel("prim::TupleSlice")
def tuple_slice(tup: tuple, begin: int, end: int, step: int = 1) -> tuple:
    return tuple(tup[begin:end:step])
