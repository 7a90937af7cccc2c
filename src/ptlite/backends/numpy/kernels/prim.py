"""TorchScript-level operators on Python values: lists, tuples, dicts, strings, None checks, scalar math.

TorchScript values map to Python ones: int/float/bool/str/None as themselves, `List` as a (mutable, shared)
Python list, `Tuple` as a tuple, `Dict` as an insertion-ordered dict. Tensors only pass through here.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from ptlite.errors import ScriptError
from ptlite.ir.registry import kernel

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


@kernel("aten::format(...) -> str")
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


@kernel("aten::str(t elem) -> str")
def str_(elem: Any) -> str:
    return script_str(elem)


# ---------------------------------------------------------------------------------------------------------
# Exceptions, warnings, global state
# ---------------------------------------------------------------------------------------------------------

@kernel("prim::RaiseException(str msg, str? cls=None) -> ()")
def raise_exception(msg: str, cls: str | None = None) -> None:
    raise ScriptError(msg, cls)


@kernel("aten::warn(str message, int stacklevel=2) -> ()")
def warn(message: str, stacklevel: int = 2) -> None:
    warnings.warn(message, UserWarning, stacklevel=2)


@kernel("aten::is_grad_enabled() -> bool",
        "aten::is_autocast_enabled() -> bool",
        "aten::is_autocast_cpu_enabled() -> bool")
def never_enabled() -> bool:
    """ptlite only runs inference: no gradients, no autocast."""
    return False


@kernel("aten::set_grad_enabled(bool val) -> ()")
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


@kernel("aten::__is__(t1 self, t2 obj) -> bool")
def is_(self: Any, obj: Any) -> bool:
    return _same(self, obj)


@kernel("aten::__isnot__(t1 self, t2 obj) -> bool")
def isnot(self: Any, obj: Any) -> bool:
    return not _same(self, obj)


@kernel("aten::__not__(bool self) -> bool")
def not_(self: bool) -> bool:
    return not self


@kernel("prim::unchecked_cast(t x) -> t",
        "aten::_unwrap_optional(t(a)? optional) -> t(a)",
        "prim::unchecked_unwrap_optional(t(a)? optional) -> t(a)")
def identity(x: Any) -> Any:
    return x


@kernel("prim::Uninitialized() -> Any")
def uninitialized() -> None:
    return None


@kernel("prim::IfThenElse(bool cond, Any(a) x, Any(b) y) -> Any(b|a)")
def if_then_else(cond: bool, x: Any, y: Any) -> Any:
    return x if cond else y


# ---------------------------------------------------------------------------------------------------------
# Tuples
# ---------------------------------------------------------------------------------------------------------

@kernel("prim::TupleConstruct(...) -> ...")
def tuple_construct(*items: Any) -> tuple:
    return tuple(items)


@kernel("prim::TupleUnpack(Any tup) -> ...",
        "prim::ListUnpack(...) -> ...")
def unpack(container: Any) -> tuple:
    """Several outputs, one per element; the interpreter assigns them to the node's outputs."""
    return tuple(container)


@kernel("prim::TupleIndex(Any tup, int i) -> Any")
def tuple_index(tup: tuple, i: int) -> Any:
    return tup[i]


@kernel("prim::TupleSlice(...) -> ...")
def tuple_slice(tup: tuple, begin: int, end: int, step: int = 1) -> tuple:
    return tuple(tup[begin:end:step])


# ---------------------------------------------------------------------------------------------------------
# Lists
# ---------------------------------------------------------------------------------------------------------

@kernel("prim::ListConstruct(...) -> ...")
def list_construct(*items: Any) -> list:
    return list(items)


def _check_index(length: int, idx: int) -> int:
    if idx < -length or idx >= length:
        raise IndexError("list index out of range")
    return idx


@kernel("aten::__getitem__.t(t[](a) list, int idx) -> t(*)")
def list_getitem(lst: list, idx: int) -> Any:
    return lst[_check_index(len(lst), idx)]


@kernel("aten::_set_item.t(t[](a!) l, int idx, t(b -> *) el) -> t[](a!)")
def list_setitem(lst: list, idx: int, el: Any) -> list:
    lst[_check_index(len(lst), idx)] = el
    return lst


@kernel("aten::append.t(t[](a!) self, t(c -> *) el) -> t[](a!)")
def append(self: list, el: Any) -> list:
    self.append(el)
    return self


@kernel("aten::len.t(t[] a) -> int",
        "aten::len.any(Any[] a) -> int",
        "aten::len.str(str s) -> int",
        "aten::len.Dict_str(Dict(str, t) self) -> int",
        "aten::len.Dict_int(Dict(int, t) self) -> int",
        "aten::len.Dict_bool(Dict(bool, t) self) -> int",
        "aten::len.Dict_float(Dict(float, t) self) -> int")
def len_(a: Any) -> int:
    return len(a)


@kernel("aten::list.t(t[] l) -> t[]",
        "aten::copy.t(t[](a) self) -> t[]",
        "aten::list(str t) -> str[]")
def list_copy(items: Any) -> list:
    return list(items)


@kernel("aten::add.t(t[] a, t[] b) -> t[]")
def list_add(a: list, b: list) -> list:
    return a + b


@kernel("aten::mul.left_t(t[] l, int n) -> t[]")
def list_repeat(lst: list, n: int) -> list:
    return lst * max(n, 0)


@kernel("aten::mul.right_(int n, t[] l) -> t[]")
def list_repeat_right(n: int, lst: list) -> list:
    return lst * max(n, 0)


@kernel("aten::slice.t(t[] l, int? start=None, int? end=None, int step=1) -> t[]",
        "aten::slice.str(str string, int? start=None, int? end=None, int step=1) -> str")
def slice_(seq: Any, start: int | None = None, end: int | None = None, step: int = 1) -> Any:
    if step == 0:
        raise ValueError("slice step cannot be zero")
    return seq[start:end:step]


@kernel("aten::extend.t(t[](a!) self, t[] other) -> ()")
def extend(self: list, other: list) -> None:
    self.extend(list(other))


@kernel("aten::insert.t(t[](a!) self, int idx, t(b -> *) el) -> ()")
def insert(self: list, idx: int, el: Any) -> None:
    self.insert(idx, el)


@kernel("aten::pop.t(t[](a!) self, int idx=-1) -> t(*)")
def list_pop(self: list, idx: int = -1) -> Any:
    if not self:
        raise IndexError("pop from empty list")
    return self.pop(_check_index(len(self), idx))


@kernel("aten::clear.t(t[](a!) self) -> ()",
        "aten::clear.str(Dict(str, t)(a!) self) -> ()",
        "aten::clear.int(Dict(int, t)(a!) self) -> ()",
        "aten::clear.bool(Dict(bool, t)(a!) self) -> ()",
        "aten::clear.float(Dict(float, t)(a!) self) -> ()")
def clear(self: Any) -> None:
    self.clear()


@kernel("aten::reverse.t(t[](a!) self) -> ()")
def reverse(self: list) -> None:
    self.reverse()


@kernel("aten::sort.int(int[](a!) self, bool reverse=False) -> ()",
        "aten::sort.float(float[](a!) self, bool reverse=False) -> ()",
        "aten::sort.bool(bool[](a!) self, bool reverse=False) -> ()",
        "aten::sort.str(str[](a!) self, bool reverse=False) -> ()",
        "aten::sort.any(t[](a!) self, bool reverse=False) -> ()")
def sort(self: list, reverse: bool = False) -> None:
    self.sort(reverse=reverse)


@kernel("aten::sorted.int(int[](a) input) -> int[]",
        "aten::sorted.float(float[](a) input) -> float[]",
        "aten::sorted.bool(bool[](a) input) -> bool[]",
        "aten::sorted.str(str[](a) input) -> str[]",
        "aten::sorted.any(t[](a) self) -> t[]")
def sorted_(items: list) -> list:
    return sorted(items)


@kernel("aten::__contains__.int_list(int[] l, int item) -> bool",
        "aten::__contains__.str_list(str[] l, str item) -> bool",
        "aten::__contains__.float_list(float[] l, float item) -> bool",
        "aten::__contains__.str(Dict(str, t) dict, str key) -> bool",
        "aten::__contains__.int(Dict(int, t) dict, int key) -> bool",
        "aten::__contains__.bool(Dict(bool, t) dict, bool key) -> bool",
        "aten::__contains__.float(Dict(float, t) dict, float key) -> bool")
def contains(container: Any, item: Any) -> bool:
    return item in container


@kernel("aten::index.list_int(int[] self, int el) -> int",
        "aten::index.list_float(float[] self, float el) -> int",
        "aten::index.list_bool(bool[] self, bool el) -> int",
        "aten::index.list_str(str[] self, str el) -> int")
def list_index(self: list, el: Any) -> int:
    return self.index(el)


@kernel("aten::count.int(int[] self, int el) -> int",
        "aten::count.float(float[] self, float el) -> int",
        "aten::count.bool(bool[] self, bool el) -> int",
        "aten::count.str(str[] self, str el) -> int")
def list_count(self: list, el: Any) -> int:
    return self.count(el)


@kernel("aten::sum.int(int[] self) -> int", "aten::sum.bool(bool[] self) -> int")
def list_sum_int(self: list) -> int:
    return int(sum(self))


@kernel("aten::sum.float(float[] self) -> float")
def list_sum_float(self: list) -> float:
    return float(sum(self))


@kernel("aten::any.int(int[] self) -> bool",
        "aten::any.float(float[] self) -> bool",
        "aten::any.bool(bool[] self) -> bool",
        "aten::any.str(str[] self) -> bool")
def list_any(self: list) -> bool:
    return any(self)


@kernel("aten::all.int(int[] self) -> bool",
        "aten::all.float(float[] self) -> bool",
        "aten::all.bool(bool[] self) -> bool")
def list_all(self: list) -> bool:
    return all(self)


@kernel("aten::__range_length(int lo, int hi, int step) -> int")
def range_length(lo: int, hi: int, step: int) -> int:
    if step == 0:
        raise ValueError("range() arg 3 must not be zero")
    return len(range(lo, hi, step))


@kernel("aten::__derive_index(int index, int start, int step) -> int")
def derive_index(index: int, start: int, step: int) -> int:
    return start + index * step


# ---------------------------------------------------------------------------------------------------------
# Dicts
# ---------------------------------------------------------------------------------------------------------

@kernel("prim::DictConstruct(...) -> ...")
def dict_construct(*keys_and_values: Any) -> dict:
    return dict(zip(keys_and_values[0::2], keys_and_values[1::2], strict=True))


@kernel("aten::dict() -> Dict(str, Tensor)")
def dict_empty() -> dict:
    return {}


@kernel("aten::dict.str((str, tVal)[] inputs) -> Dict(str, tVal)",
        "aten::dict.int((int, tVal)[] inputs) -> Dict(int, tVal)",
        "aten::dict.bool((bool, tVal)[] inputs) -> Dict(bool, tVal)",
        "aten::dict.float((float, tVal)[] inputs) -> Dict(float, tVal)",
        "aten::dict.Dict_str(Dict(str, t)(a) self) -> Dict(str, t)",
        "aten::dict.Dict_int(Dict(int, t)(a) self) -> Dict(int, t)",
        "aten::dict.Dict_bool(Dict(bool, t)(a) self) -> Dict(bool, t)",
        "aten::dict.Dict_float(Dict(float, t)(a) self) -> Dict(float, t)",
        "aten::copy.Dict_str(Dict(str, t)(a) self) -> Dict(str, t)",
        "aten::copy.Dict_int(Dict(int, t)(a) self) -> Dict(int, t)",
        "aten::copy.Dict_bool(Dict(bool, t)(a) self) -> Dict(bool, t)",
        "aten::copy.Dict_float(Dict(float, t)(a) self) -> Dict(float, t)")
def dict_copy(items: Any) -> dict:
    return dict(items)


@kernel("aten::__getitem__.Dict_str(Dict(str, t) self, str key) -> t(*)",
        "aten::__getitem__.Dict_int(Dict(int, t) self, int key) -> t(*)",
        "aten::__getitem__.Dict_bool(Dict(bool, t) self, bool key) -> t(*)",
        "aten::__getitem__.Dict_float(Dict(float, t) self, float key) -> t(*)")
def dict_getitem(self: dict, key: Any) -> Any:
    try:
        return self[key]
    except KeyError:
        raise KeyError(script_str(key)) from None


@kernel("aten::_set_item.str(Dict(str, t)(a!) l, str(b -> *) idx, t(c -> *) v) -> ()",
        "aten::_set_item.int(Dict(int, t)(a!) l, int(b -> *) idx, t(c -> *) v) -> ()",
        "aten::_set_item.bool(Dict(bool, t)(a!) l, bool(b -> *) idx, t(c -> *) v) -> ()",
        "aten::_set_item.float(Dict(float, t)(a!) l, float(b -> *) idx, t(c -> *) v) -> ()")
def dict_setitem(d: dict, key: Any, value: Any) -> None:
    d[key] = value


@kernel("aten::keys.str(Dict(str, t) self) -> str[](*)",
        "aten::keys.int(Dict(int, t) self) -> int[](*)",
        "aten::keys.bool(Dict(bool, t) self) -> bool[](*)",
        "aten::keys.float(Dict(float, t) self) -> float[](*)")
def dict_keys(self: dict) -> list:
    return list(self.keys())


@kernel("aten::values.str(Dict(str, t) self) -> t[](*)",
        "aten::values.int(Dict(int, t) self) -> t[](*)",
        "aten::values.bool(Dict(bool, t) self) -> t[](*)",
        "aten::values.float(Dict(float, t) self) -> t[](*)")
def dict_values(self: dict) -> list:
    return list(self.values())


@kernel("aten::items.str(Dict(str, t) self) -> ((str, t)[])",
        "aten::items.int(Dict(int, t) self) -> ((int, t)[])",
        "aten::items.bool(Dict(bool, t) self) -> ((bool, t)[])",
        "aten::items.float(Dict(float, t) self) -> ((float, t)[])")
def dict_items(self: dict) -> list:
    return list(self.items())


@kernel("aten::get.str(Dict(str, t) self, str key) -> t(*)?",
        "aten::get.int(Dict(int, t) self, int key) -> t(*)?",
        "aten::get.bool(Dict(bool, t) self, bool key) -> t(*)?",
        "aten::get.float(Dict(float, t) self, float key) -> t(*)?",
        "aten::get.default_str(Dict(str, t) self, str key, t default_value) -> t(*)",
        "aten::get.default_int(Dict(int, t) self, int key, t default_value) -> t(*)",
        "aten::get.default_bool(Dict(bool, t) self, bool key, t default_value) -> t(*)",
        "aten::get.default_float(Dict(float, t) self, float key, t default_value) -> t(*)")
def dict_get(self: dict, key: Any, default_value: Any = None) -> Any:
    return self.get(key, default_value)


@kernel("aten::setdefault.str(Dict(str, t)(a!) self, str(b -> *) key, t(c -> *) default_value) -> t(*)",
        "aten::setdefault.int(Dict(int, t)(a!) self, int(b -> *) key, t(c -> *) default_value) -> t(*)",
        "aten::setdefault.bool(Dict(bool, t)(a!) self, bool(b -> *) key, t(c -> *) default_value) -> t(*)",
        "aten::setdefault.float(Dict(float, t)(a!) self, float(b -> *) key, t(c -> *) default_value) -> t(*)")
def dict_setdefault(self: dict, key: Any, default_value: Any) -> Any:
    return self.setdefault(key, default_value)


@kernel("aten::pop.Dict_str(Dict(str, t)(a!) self, str key) -> t(*)",
        "aten::pop.Dict_int(Dict(int, t)(a!) self, int key) -> t(*)",
        "aten::pop.Dict_bool(Dict(bool, t)(a!) self, bool key) -> t(*)",
        "aten::pop.Dict_float(Dict(float, t)(a!) self, float key) -> t(*)")
def dict_pop(self: dict, key: Any) -> Any:
    try:
        return self.pop(key)
    except KeyError:
        raise KeyError(script_str(key)) from None


@kernel("aten::pop.Dict_default_str(Dict(str, t)(a!) self, str key, t default_value) -> t(*)",
        "aten::pop.Dict_default_int(Dict(int, t)(a!) self, int key, t default_value) -> t(*)",
        "aten::pop.Dict_default_bool(Dict(bool, t)(a!) self, bool key, t default_value) -> t(*)",
        "aten::pop.Dict_default_float(Dict(float, t)(a!) self, float key, t default_value) -> t(*)")
def dict_pop_default(self: dict, key: Any, default_value: Any) -> Any:
    return self.pop(key, default_value)


# ---------------------------------------------------------------------------------------------------------
# Strings
# ---------------------------------------------------------------------------------------------------------

@kernel("aten::add.str(str a, str b) -> str")
def str_add(a: str, b: str) -> str:
    return a + b


@kernel("aten::__getitem__.str(str s, int index) -> str",
        "prim::StringIndex(str string, int index) -> str")
def str_getitem(s: str, index: int) -> str:
    if index < -len(s) or index >= len(s):
        raise IndexError("string index out of range")
    return s[index]


def _span(s: str, start: int, end: int) -> tuple[int, int]:
    """TorchScript's (start, end=-1) string window: negative values count from the end, -1 means the end."""
    n = len(s)
    start = start + n if start < 0 else start
    end = end + n + 1 if end < 0 else end
    return max(0, min(start, n)), max(0, min(end, n))


@kernel("aten::startswith(str self, str substr, int start=0, int end=-1) -> bool")
def startswith(self: str, substr: str, start: int = 0, end: int = -1) -> bool:
    lo, hi = _span(self, start, end)
    return self[lo:hi].startswith(substr)


@kernel("aten::endswith(str self, str substr, int start=0, int end=-1) -> bool")
def endswith(self: str, substr: str, start: int = 0, end: int = -1) -> bool:
    lo, hi = _span(self, start, end)
    return self[lo:hi].endswith(substr)


@kernel("aten::count(str self, str substr, int start=0, int end=-1) -> int")
def str_count(self: str, substr: str, start: int = 0, end: int = -1) -> int:
    lo, hi = _span(self, start, end)
    return self[lo:hi].count(substr)


@kernel("aten::index.str(str self, str substr, int start=0, int end=-1) -> int")
def str_index(self: str, substr: str, start: int = 0, end: int = -1) -> int:
    lo, hi = _span(self, start, end)
    return self.index(substr, lo, hi)


@kernel("aten::replace(str self, str old, str new, int max=-1) -> str")
def replace(self: str, old: str, new: str, max: int = -1) -> str:  # noqa: A002  (schema name)
    return self.replace(old, new, max)


@kernel("aten::split.str(str self, str? separator=None, int max=-1) -> str[]")
def str_split(self: str, separator: str | None = None, max: int = -1) -> list:  # noqa: A002
    return self.split(separator, max)


@kernel("aten::join(str self, str[] values) -> str")
def join(self: str, values: list) -> str:
    return self.join(values)


@kernel("aten::strip(str self, str chars=\" \\n\\t\\f\\v\") -> str")
def strip(self: str, chars: str = " \n\t\f\v") -> str:
    return self.strip(chars)


@kernel("aten::lower(str self) -> str")
def lower(self: str) -> str:
    return self.lower()


@kernel("aten::upper(str self) -> str")
def upper(self: str) -> str:
    return self.upper()


@kernel("aten::ord(str string) -> int")
def ord_(string: str) -> int:
    return ord(string)


@kernel("aten::chr(int i) -> str")
def chr_(i: int) -> str:
    return chr(i)


# ---------------------------------------------------------------------------------------------------------
# Scalar arithmetic (int, float, and the generic Scalar overloads)
# ---------------------------------------------------------------------------------------------------------

_PAIRS = ("int(int a, int b)", "float(float a, float b)", "int_float(int a, float b)",
          "float_int(float a, int b)")


def _binary(name: str, result: dict[str, str], generic: str | None = "Scalar") -> list[str]:
    """Schemas 'aten::name.int(int a, int b) -> int', ... for the int/float overload family of an operator."""
    schemas = []
    for pair in _PAIRS:
        overload = pair.split("(")[0]
        schemas.append(f"{name}.{pair} -> {result[overload]}")
    if generic:
        schemas.append(f"{name}(Scalar a, Scalar b) -> {generic}")
    return schemas


_NUMERIC = {"int": "int", "float": "float", "int_float": "float", "float_int": "float"}
_FLOATING = {"int": "float", "float": "float", "int_float": "float", "float_int": "float"}
_BOOLEAN = {"int": "bool", "float": "bool", "int_float": "bool", "float_int": "bool"}


@kernel(*_binary("aten::add", _NUMERIC))
def add(a, b):
    return a + b


@kernel(*_binary("aten::sub", _NUMERIC))
def sub(a, b):
    return a - b


@kernel(*_binary("aten::mul", _NUMERIC))
def mul(a, b):
    return a * b


@kernel("aten::div.int(int a, int b) -> float", "aten::div.float(float a, float b) -> float",
        "aten::div(Scalar a, Scalar b) -> float")
def div(a, b) -> float:
    if b == 0:
        raise ZeroDivisionError("division by 0")
    return a / b


@kernel(*_binary("aten::floordiv", _NUMERIC))
def floordiv(a, b):
    if b == 0:
        raise ZeroDivisionError("division by 0")
    return a // b


@kernel(*_binary("aten::remainder", _NUMERIC))
def remainder(a, b):
    if b == 0:
        raise ZeroDivisionError("division by 0")
    return a % b


@kernel("aten::divmod.int(int x, int y) -> (int, int)",
        "aten::divmod.float(float x, float y) -> (float, float)",
        "aten::divmod.int_float(int x, float y) -> (float, float)",
        "aten::divmod.float_int(float x, int y) -> (float, float)")
def divmod_(x, y) -> tuple:
    if y == 0:
        raise ZeroDivisionError("division by 0")
    return divmod(x, y)


@kernel(*_binary("aten::pow", {"int": "float", "float": "float", "int_float": "float", "float_int": "float"},
                 generic=None),
        "aten::pow.Scalar_Scalar(Scalar a, Scalar b) -> float")
def pow_(a, b) -> float:
    try:
        return float(a) ** b
    except ZeroDivisionError:
        return math.inf
    except OverflowError:
        return math.inf


@kernel("aten::pow.int_to_int(int a, int b) -> int")
def pow_int(a: int, b: int) -> int:
    if b < 0:
        raise ValueError("Integers to negative integer powers are not allowed")
    return a**b


@kernel("aten::neg.int(int a) -> int", "aten::neg.float(float a) -> float",
        "aten::neg.Scalar(Scalar a) -> Scalar")
def neg(a):
    return -a


@kernel("prim::abs.int(int a) -> int", "prim::abs.float(float a) -> float",
        "prim::abs.Scalar(Scalar a) -> Scalar")
def abs_(a):
    return abs(a)


@kernel("aten::floor.int(int a) -> int", "aten::floor.float(float a) -> int",
        "aten::floor.Scalar(Scalar a) -> Scalar")
def floor(a) -> int:
    return math.floor(a)


@kernel("aten::ceil.int(int a) -> int", "aten::ceil.float(float a) -> int",
        "aten::ceil.Scalar(Scalar a) -> Scalar")
def ceil(a) -> int:
    return math.ceil(a)


@kernel("aten::round.int(int a) -> float", "aten::round.float(float a) -> float",
        "aten::round.Scalar(Scalar a) -> Scalar")
def round_(a) -> float:
    """Half to even, like Python's round (TorchScript uses the same rule)."""
    return float(round(a)) if math.isfinite(a) else a


def _math1(fn, a) -> float:
    """A libm function with C semantics (nan / inf) instead of Python's ValueError."""
    try:
        return fn(a)
    except ValueError:
        return -math.inf if a == 0 else math.nan
    except OverflowError:
        return math.inf


@kernel("aten::sqrt.int(int a) -> float", "aten::sqrt.float(float a) -> float",
        "aten::sqrt.Scalar(Scalar a) -> Scalar")
def sqrt(a) -> float:
    return math.nan if a < 0 else math.sqrt(a)


@kernel("aten::exp.int(int a) -> float", "aten::exp.float(float a) -> float",
        "aten::exp.Scalar(Scalar a) -> Scalar")
def exp(a) -> float:
    return _math1(math.exp, a)


@kernel("aten::log.int(int a) -> float", "aten::log.float(float a) -> float",
        "aten::log.Scalar(Scalar a) -> Scalar")
def log(a) -> float:
    return _math1(math.log, a)


@kernel(*_binary("prim::min", _NUMERIC))
def min_(a, b):
    return a if a <= b else b


@kernel(*_binary("prim::max", _NUMERIC))
def max_(a, b):
    return a if a >= b else b


@kernel("prim::min.int_list(int[] l, int[] r) -> int[]",
        "prim::min.float_list(float[] l, float[] r) -> float[]",
        "prim::min.bool_list(bool[] l, bool[] r) -> bool[]")
def min_list(a: list, b: list) -> list:
    return list(min(a, b))


@kernel("prim::max.int_list(int[] l, int[] r) -> int[]",
        "prim::max.float_list(float[] l, float[] r) -> float[]",
        "prim::max.bool_list(bool[] l, bool[] r) -> bool[]")
def max_list(a: list, b: list) -> list:
    return list(max(a, b))


@kernel("prim::min.self_int(int[] self) -> int", "prim::min.self_float(float[] self) -> float",
        "prim::min.self_bool(bool[] self) -> bool")
def min_of(self: list):
    if not self:
        raise ValueError("min() arg is an empty sequence")
    return min(self)


@kernel("prim::max.self_int(int[] self) -> int", "prim::max.self_float(float[] self) -> float",
        "prim::max.self_bool(bool[] self) -> bool")
def max_of(self: list):
    if not self:
        raise ValueError("max() arg is an empty sequence")
    return max(self)


@kernel("aten::__and__.bool(bool a, bool b) -> bool", "aten::__and__.int(int a, int b) -> int")
def and_(a, b):
    return a & b


@kernel("aten::__or__.bool(bool a, bool b) -> bool", "aten::__or__.int(int a, int b) -> int")
def or_(a, b):
    return a | b


@kernel("aten::__xor__.bool(bool a, bool b) -> bool", "aten::__xor__.int(int a, int b) -> int")
def xor(a, b):
    return a ^ b


@kernel("aten::__lshift__.int(int a, int b) -> int")
def lshift(a: int, b: int) -> int:
    return a << b


@kernel("aten::__rshift__.int(int a, int b) -> int")
def rshift(a: int, b: int) -> int:
    return a >> b


# ---------------------------------------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------------------------------------

_EQ_EXTRA = ("str(str a, str b)", "bool(bool a, bool b)", "int_list(int[] a, int[] b)",
             "float_list(float[] a, float[] b)", "bool_list(bool[] a, bool[] b)",
             "str_list(str[] a, str[] b)")


def _equality(name: str) -> list[str]:
    return _binary(name, _BOOLEAN, generic="bool") + [f"{name}.{pair} -> bool" for pair in _EQ_EXTRA]


def _ordering(name: str) -> list[str]:
    return _binary(name, _BOOLEAN, generic="bool") + [f"{name}.str(str a, str b) -> bool"]


@kernel(*_equality("aten::eq"))
def eq(a, b) -> bool:
    return a == b


@kernel(*_equality("aten::ne"))
def ne(a, b) -> bool:
    return a != b


@kernel(*_ordering("aten::lt"))
def lt(a, b) -> bool:
    return a < b


@kernel(*_ordering("aten::gt"))
def gt(a, b) -> bool:
    return a > b


@kernel(*_ordering("aten::le"))
def le(a, b) -> bool:
    return a <= b


@kernel(*_ordering("aten::ge"))
def ge(a, b) -> bool:
    return a >= b


# ---------------------------------------------------------------------------------------------------------
# Conversions between Python scalars
# ---------------------------------------------------------------------------------------------------------

@kernel("aten::Int.bool(bool a) -> int", "aten::Int.float(float a) -> int",
        "aten::Int.Scalar(Scalar a) -> int", "aten::Int.str(str a) -> int")
def to_int(a) -> int:
    return int(a)


@kernel("aten::Float.int(int a) -> float", "aten::Float.bool(bool a) -> float",
        "aten::Float.Scalar(Scalar a) -> float", "aten::Float.str(str a) -> float")
def to_float(a) -> float:
    return float(a)


@kernel("aten::Bool.int(int a) -> bool", "aten::Bool.float(float a) -> bool")
def to_bool(a) -> bool:
    return bool(a)


@kernel("aten::hash.generic(t value) -> int")
def hash_(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return id(value)
    return hash(value)
