"""TorchScript's scalar arithmetic, comparisons and conversions on Python ints, floats and bools."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ptlite.backends.numpy import kernel

# ---------------------------------------------------------------------------------------------------------
# Scalar arithmetic (int, float, and the generic Scalar overloads)
# ---------------------------------------------------------------------------------------------------------

def _binary(name: str, generic: bool = True) -> list[str]:
    """The keys of an operator's int/float overload family: 'aten::add.int', ..., and 'aten::add' on Scalars."""
    keys = [f"{name}.{overload}" for overload in ("int", "float", "int_float", "float_int")]
    return [*keys, name] if generic else keys


@kernel(*_binary("aten::add"))
def add(a, b):
    return a + b


@kernel(*_binary("aten::sub"))
def sub(a, b):
    return a - b


@kernel(*_binary("aten::mul"))
def mul(a, b):
    return a * b


@kernel("aten::div.int", "aten::div.float",
        "aten::div")
def div(a, b) -> float:
    if b == 0:
        raise ZeroDivisionError("division by 0")
    return a / b


@kernel(*_binary("aten::floordiv"))
def floordiv(a, b):
    if b == 0:
        raise ZeroDivisionError("division by 0")
    return a // b


@kernel(*_binary("aten::remainder"))
def remainder(a, b):
    if b == 0:
        raise ZeroDivisionError("division by 0")
    return a % b


@kernel("aten::divmod.int",
        "aten::divmod.float",
        "aten::divmod.int_float",
        "aten::divmod.float_int")
def divmod_(x, y) -> tuple:
    if y == 0:
        raise ZeroDivisionError("division by 0")
    return divmod(x, y)


@kernel(*_binary("aten::pow", generic=False),
        "aten::pow.Scalar_Scalar")
def pow_(a, b) -> float:
    try:
        return float(a) ** b
    except ZeroDivisionError:
        return math.inf
    except OverflowError:
        return math.inf


@kernel("aten::pow.int_to_int")
def pow_int(a: int, b: int) -> int:
    if b < 0:
        raise ValueError("Integers to negative integer powers are not allowed")
    return a**b


@kernel("aten::neg.int", "aten::neg.float",
        "aten::neg.Scalar")
def neg(a):
    return -a


@kernel("prim::abs.int", "prim::abs.float",
        "prim::abs.Scalar")
def abs_(a):
    return abs(a)


@kernel("aten::floor.int", "aten::floor.float",
        "aten::floor.Scalar")
def floor(a) -> int:
    return math.floor(a)


@kernel("aten::ceil.int", "aten::ceil.float",
        "aten::ceil.Scalar")
def ceil(a) -> int:
    return math.ceil(a)


@kernel("aten::round.int", "aten::round.float",
        "aten::round.Scalar")
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


@kernel("aten::sqrt.int", "aten::sqrt.float",
        "aten::sqrt.Scalar")
def sqrt(a) -> float:
    return math.nan if a < 0 else math.sqrt(a)


@kernel("aten::exp.int", "aten::exp.float",
        "aten::exp.Scalar")
def exp(a) -> float:
    return _math1(math.exp, a)


@kernel("aten::log.int", "aten::log.float",
        "aten::log.Scalar")
def log(a) -> float:
    return _math1(math.log, a)


@kernel(*_binary("prim::min"))
def min_(a, b):
    return a if a <= b else b


@kernel(*_binary("prim::max"))
def max_(a, b):
    return a if a >= b else b


@kernel("prim::min.int_list",
        "prim::min.float_list",
        "prim::min.bool_list")
def min_list(a: list, b: list) -> list:
    return list(min(a, b))


@kernel("prim::max.int_list",
        "prim::max.float_list",
        "prim::max.bool_list")
def max_list(a: list, b: list) -> list:
    return list(max(a, b))


@kernel("prim::min.self_int", "prim::min.self_float",
        "prim::min.self_bool")
def min_of(self: list):
    if not self:
        raise ValueError("min() arg is an empty sequence")
    return min(self)


@kernel("prim::max.self_int", "prim::max.self_float",
        "prim::max.self_bool")
def max_of(self: list):
    if not self:
        raise ValueError("max() arg is an empty sequence")
    return max(self)


@kernel("aten::__and__.bool", "aten::__and__.int")
def and_(a, b):
    return a & b


@kernel("aten::__or__.bool", "aten::__or__.int")
def or_(a, b):
    return a | b


@kernel("aten::__xor__.bool", "aten::__xor__.int")
def xor(a, b):
    return a ^ b


@kernel("aten::__lshift__.int")
def lshift(a: int, b: int) -> int:
    return a << b


@kernel("aten::__rshift__.int")
def rshift(a: int, b: int) -> int:
    return a >> b


# ---------------------------------------------------------------------------------------------------------
# Comparisons
# ---------------------------------------------------------------------------------------------------------

def _equality(name: str) -> list[str]:
    return _binary(name) + [f"{name}.{overload}" for overload in ("str", "bool", "int_list", "float_list", "bool_list",
                                                                  "str_list")]


def _ordering(name: str) -> list[str]:
    return [*_binary(name), f"{name}.str"]


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

@kernel("aten::Int.bool", "aten::Int.float",
        "aten::Int.Scalar", "aten::Int.str")
def to_int(a) -> int:
    return int(a)


@kernel("aten::Float.int", "aten::Float.bool",
        "aten::Float.Scalar", "aten::Float.str")
def to_float(a) -> float:
    return float(a)


@kernel("aten::Bool.int", "aten::Bool.float")
def to_bool(a) -> bool:
    return bool(a)


@kernel("aten::hash.generic")
def hash_(value: Any) -> int:
    if isinstance(value, np.ndarray):
        return id(value)
    return hash(value)
