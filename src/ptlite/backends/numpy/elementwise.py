"""Elementwise arithmetic kernels (add, sub, mul, div, pow, remainder, minimum/maximum, ...) and torch's type
promotion, which the other elementwise families (comparison.py, unary.py) share."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ptlite.backends.numpy import kernel

from ._layout import channel_broadcast, fits_out

_BOOL = np.dtype(np.bool_)
_I64 = np.dtype(np.int64)
_F16 = np.dtype(np.float16)
_F32 = np.dtype(np.float32)  # PyTorch's default dtype: what Python floats and integer true division become

Operand = Any  # np.ndarray, or a Python / NumPy number


# ----------------------------------------------------------------------------------------------------
# Type promotion and helpers the elementwise families share
# ----------------------------------------------------------------------------------------------------

def category(dt: np.dtype) -> int:
    """0 for bool, 1 for integers, 2 for floating point: promotion only looks across these categories."""
    if dt.kind == "b":
        return 0
    if dt.kind in "iu":
        return 1
    return 2


def promote_types(a: np.dtype, b: np.dtype) -> np.dtype:
    """torch.promote_types: the higher category wins outright; within a category, the wider type."""
    if a == b:
        return a
    ca, cb = category(a), category(b)
    if ca != cb:
        return a if ca > cb else b
    return np.promote_types(a, b)


def scalar_dtype(value: Any) -> np.dtype:
    """The dtype a Python number takes part in promotion with (floats count as the default dtype)."""
    if isinstance(value, (bool, np.bool_)):
        return _BOOL
    if isinstance(value, (int, np.integer)):
        return _I64
    if isinstance(value, (float, np.floating)):
        return _F32
    raise TypeError(f"expected a tensor or a number, got {type(value).__name__}")


def result_type(*operands: Operand) -> np.dtype:
    """torch.result_type over tensors and numbers (None entries are skipped).

    Operands come in three priority tiers: tensors with dimensions, 0-d tensors, then Python numbers. A lower
    tier changes the result only when its category (bool < integer < float) is higher than the result so far.
    """
    tiers: list[np.dtype | None] = [None, None, None]
    for x in operands:
        if x is None:
            continue
        if isinstance(x, np.ndarray):
            tier, dt = (0 if x.ndim else 1), x.dtype
        else:
            tier, dt = 2, scalar_dtype(x)
        tiers[tier] = dt if tiers[tier] is None else promote_types(tiers[tier], dt)
    result = None
    for dt in tiers:
        if dt is not None and (result is None or category(dt) > category(result)):
            result = dt
    if result is None:
        raise TypeError("no operand to infer a dtype from")
    return result


def cast(x: Operand, dt: np.dtype) -> Any:
    """x as dtype dt: arrays are converted only when needed, numbers become NumPy scalars of dt."""
    if isinstance(x, np.ndarray):
        return x if x.dtype == dt else x.astype(dt)
    try:
        return dt.type(x)
    except OverflowError:  # e.g. 300 into uint8: wrap around as a C cast does
        return np.array(x).astype(dt)[()]


def wrap(x: Any) -> np.ndarray:
    """Ufuncs on 0-d arrays return NumPy scalars; kernels return 0-d arrays instead."""
    return x if isinstance(x, np.ndarray) else np.asarray(x)


def write_into(self: np.ndarray, result: Any) -> np.ndarray:
    """Finish an in-place op: store result into self and return self.

    torch refuses to store a float result into an integer tensor, and so do we. A read-only self (a
    memory-mapped weight) cannot be written: then a new array holding the result is returned instead.
    """
    result = wrap(result)
    if category(result.dtype) > category(self.dtype):
        raise TypeError(f"result type {result.dtype} can't be cast to the desired output type {self.dtype}")
    if not self.flags.writeable:
        out = np.empty_like(self)  # in self's layout (channels-last stays so)
        np.copyto(out, result, casting="unsafe")
        return out
    np.copyto(self, result, casting="unsafe")
    return self


def as_float(x: np.ndarray) -> np.ndarray:
    """Integer and bool tensors are computed (and returned) in the default float dtype."""
    return x if x.dtype.kind == "f" else x.astype(_F32)


def select(condition: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """np.where(condition, a, b) for a and b of one dtype, broadcast.

    Large inputs are blended on their bit patterns, (a & m) | (b & ~m) with m all ones where condition holds:
    no branch per element, so it is several times faster than np.where on irregular masks, and exact.
    """
    shape = np.broadcast_shapes(condition.shape, a.shape, b.shape)
    if math.prod(shape) < 8192 or a.dtype.itemsize not in (1, 2, 4, 8):
        return wrap(np.where(condition, a, b))
    bits_type = np.dtype(f"u{a.dtype.itemsize}")
    keep = condition if condition.dtype == _BOOL else condition != 0
    mask = np.broadcast_to(keep, shape).astype(bits_type)
    np.negative(mask, out=mask)  # 1 -> all ones
    out = np.bitwise_and(a.view(bits_type), mask)
    np.invert(mask, out=mask)
    np.bitwise_or(out, np.bitwise_and(b.view(bits_type), mask, out=mask), out=out)
    return out.view(a.dtype)


# ----------------------------------------------------------------------------------------------------
# Arithmetic
# ----------------------------------------------------------------------------------------------------

def binary_ufunc(ufunc: np.ufunc, a: Any, b: Any) -> Any:
    """ufunc(a, b) on operands of one dtype. The result has a channels-last operand's layout (NumPy's order
    'K'); a per-channel operand ((N, C, 1, 1), (C, 1, 1)) of a channels-last one is applied on long rows."""
    out = channel_broadcast(ufunc, a, b)
    return ufunc(a, b) if out is None else out


def _binary_into(ufunc: np.ufunc, a: Operand, b: Operand, dt: np.dtype, out: np.ndarray | None) -> np.ndarray | None:
    """ufunc(a, b) written into `out` and returned, when the result (dtype dt, a and b already of dt) fits it
    exactly (an out variant's common path); None otherwise, and the caller computes as usual."""
    if out is None or not fits_out(out, np.broadcast_shapes(np.shape(a), np.shape(b)), dt):
        return None
    if channel_broadcast(ufunc, a, b, out=out) is None:
        ufunc(a, b, out=out)
    return out


def binary(ufunc: np.ufunc, a: Operand, b: Operand, out: np.ndarray | None = None) -> np.ndarray:
    """ufunc(a, b) with torch's type promotion (float16 computed in float32); into `out` when it fits exactly."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype:
        if out is not None and (into := _binary_into(ufunc, a, b, a.dtype, out)) is not None:
            return into
        return wrap(binary_ufunc(ufunc, a, b))
    dt = result_type(a, b)
    if dt == _F16:
        return _in_float32(binary_ufunc(ufunc, cast(a, _F32), cast(b, _F32)))
    a, b = cast(a, dt), cast(b, dt)
    if out is not None and (into := _binary_into(ufunc, a, b, dt, out)) is not None:
        return into
    return wrap(binary_ufunc(ufunc, a, b))


def _in_float32(result: Any) -> np.ndarray:
    """float16 ops run in float32, so that a Python number is not rounded to float16 first (as in torch)."""
    result = wrap(result)
    return result.astype(_F16) if result.dtype == _F32 else result


def _binary_(ufunc: np.ufunc, self: np.ndarray, other: Operand) -> np.ndarray:
    """In-place binary op: computed straight into self when the promoted type is self's own."""
    dt = result_type(self, other)
    if dt == self.dtype and self.flags.writeable:
        other = cast(other, dt)
        if channel_broadcast(ufunc, self, other, out=self) is None:
            ufunc(self, other, out=self)
        return self
    return write_into(self, binary_ufunc(ufunc, cast(self, dt), cast(other, dt)))


def _scaled(other: Operand, alpha: Any, dt: np.dtype) -> Any:
    """alpha * other in dtype dt (add/sub/rsub's alpha)."""
    y = cast(other, dt)
    if alpha == 1:
        return y
    if category(dt) < 2 and isinstance(alpha, float):
        raise TypeError(f"for integral tensors, argument alpha must not be a floating point number ({alpha})")
    return np.multiply(y, cast(alpha, dt))


@kernel("aten::add.Tensor",
        "aten::add.Scalar")
def add(self: Operand, other: Operand, alpha: Any = 1, *, out: np.ndarray | None = None) -> np.ndarray:
    """self + alpha * other; into `out` when given and the result (not float16) fits it exactly."""
    if alpha == 1 and isinstance(self, np.ndarray) and isinstance(other, np.ndarray) \
            and self.dtype == other.dtype and self.dtype != _F16:
        if out is not None and (into := _binary_into(np.add, self, other, self.dtype, out)) is not None:
            return into
        return wrap(binary_ufunc(np.add, self, other))
    dt = result_type(self, other)
    if dt == _F16:
        return _in_float32(binary_ufunc(np.add, cast(self, _F32), _scaled(other, alpha, _F32)))
    a, b = cast(self, dt), _scaled(other, alpha, dt)
    if out is not None and (into := _binary_into(np.add, a, b, dt, out)) is not None:
        return into
    return wrap(binary_ufunc(np.add, a, b))


@kernel("aten::add_.Tensor",
        "aten::add_.Scalar")
def add_(self: np.ndarray, other: Operand, alpha: Any = 1) -> np.ndarray:
    if alpha != 1:
        other = _scaled(other, alpha, result_type(self, other))
    return _binary_(np.add, self, other)


@kernel("aten::sub.Tensor",
        "aten::sub.Scalar")
def sub(self: Operand, other: Operand, alpha: Any = 1) -> np.ndarray:
    if alpha == 1 and isinstance(self, np.ndarray) and isinstance(other, np.ndarray) \
            and self.dtype == other.dtype and self.dtype != _F16:
        return wrap(binary_ufunc(np.subtract, self, other))
    dt = result_type(self, other)
    if dt == _F16:
        return _in_float32(binary_ufunc(np.subtract, cast(self, _F32), _scaled(other, alpha, _F32)))
    return wrap(binary_ufunc(np.subtract, cast(self, dt), _scaled(other, alpha, dt)))


@kernel("aten::sub_.Tensor",
        "aten::sub_.Scalar")
def sub_(self: np.ndarray, other: Operand, alpha: Any = 1) -> np.ndarray:
    if alpha != 1:
        other = _scaled(other, alpha, result_type(self, other))
    return _binary_(np.subtract, self, other)


@kernel("aten::rsub.Tensor",
        "aten::rsub.Scalar")
def rsub(self: Operand, other: Operand, alpha: Any = 1) -> np.ndarray:
    """other - alpha * self."""
    dt = result_type(self, other)
    if dt == _F16:
        return _in_float32(binary_ufunc(np.subtract, cast(other, _F32), _scaled(self, alpha, _F32)))
    return wrap(binary_ufunc(np.subtract, cast(other, dt), _scaled(self, alpha, dt)))


@kernel("aten::mul.Tensor",
        "aten::mul.Scalar")
def mul(self: Operand, other: Operand, *, out: np.ndarray | None = None) -> np.ndarray:
    """self * other; into `out` when given, the operands share a dtype and the result fits it exactly."""
    return binary(np.multiply, self, other, out)


@kernel("aten::mul_.Tensor",
        "aten::mul_.Scalar")
def mul_(self: np.ndarray, other: Operand) -> np.ndarray:
    return _binary_(np.multiply, self, other)


def _trunc_divide_int(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Integer division rounding toward zero (C semantics), from floor division."""
    q = np.floor_divide(x, y)
    inexact = (q * y != x) & ((x < 0) != (y < 0))
    return wrap(q + inexact.astype(q.dtype))


def _divide(self: Operand, other: Operand, rounding_mode: str | None) -> np.ndarray:
    dt = result_type(self, other)
    with np.errstate(divide="ignore", invalid="ignore"):
        if rounding_mode is None:
            if category(dt) < 2:
                dt = _F32
            return wrap(binary_ufunc(np.true_divide, cast(self, dt), cast(other, dt)))
        x, y = cast(self, dt), cast(other, dt)
        if rounding_mode == "floor":
            return wrap(np.floor_divide(x, y))
        if rounding_mode == "trunc":
            return wrap(np.trunc(np.true_divide(x, y))) if category(dt) == 2 else _trunc_divide_int(x, y)
    raise ValueError(f"div expected rounding_mode None, 'trunc' or 'floor', not {rounding_mode!r}")


@kernel("aten::div.Tensor",
        "aten::div.Scalar",
        "aten::true_divide.Tensor",
        "aten::true_divide.Scalar")
def div(self: Operand, other: Operand) -> np.ndarray:
    if isinstance(self, np.ndarray) and isinstance(other, np.ndarray) and self.dtype == other.dtype \
            and category(self.dtype) == 2:
        with np.errstate(divide="ignore", invalid="ignore"):
            return wrap(binary_ufunc(np.true_divide, self, other))
    return _divide(self, other, None)


@kernel("aten::div.Tensor_mode",
        "aten::div.Scalar_mode")
def div_mode(self: Operand, other: Operand, rounding_mode: str | None = None) -> np.ndarray:
    return _divide(self, other, rounding_mode)


@kernel("aten::div_.Tensor",
        "aten::div_.Scalar")
def div_(self: np.ndarray, other: Operand) -> np.ndarray:
    if category(self.dtype) == 2 and result_type(self, other) == self.dtype:
        return _binary_(np.true_divide, self, other)
    return write_into(self, _divide(self, other, None))


@kernel("aten::div_.Tensor_mode",
        "aten::div_.Scalar_mode")
def div_mode_(self: np.ndarray, other: Operand, rounding_mode: str | None = None) -> np.ndarray:
    return write_into(self, _divide(self, other, rounding_mode))


@kernel("aten::floor_divide",
        "aten::floor_divide.Scalar")
def floor_divide(self: Operand, other: Operand) -> np.ndarray:
    return _divide(self, other, "floor")


@kernel("aten::remainder.Tensor",
        "aten::remainder.Scalar",
        "aten::remainder.Scalar_Tensor")
def remainder(self: Operand, other: Operand) -> np.ndarray:
    """Python-style modulo: the result takes the divisor's sign."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return binary(np.remainder, self, other)


@kernel("aten::fmod.Tensor",
        "aten::fmod.Scalar")
def fmod(self: Operand, other: Operand) -> np.ndarray:
    """C-style modulo: the result takes the dividend's sign."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return binary(np.fmod, self, other)


def _pow(base: Operand, exponent: Operand) -> np.ndarray:
    dt = result_type(base, exponent)
    x = cast(base, dt)
    if category(dt) == 2 and not isinstance(exponent, np.ndarray):
        if exponent == 2:
            return wrap(np.square(x))
        if exponent == 0.5:
            return wrap(np.sqrt(x))
        if exponent == 1:
            return np.array(x, copy=True)
        if exponent == -1:
            return wrap(np.reciprocal(x))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return wrap(np.power(x, cast(exponent, dt)))


@kernel("aten::pow.Tensor_Tensor",
        "aten::pow.Tensor_Scalar",
        "aten::pow.Scalar")
def power(self: Operand, exponent: Operand) -> np.ndarray:
    return _pow(self, exponent)


@kernel("aten::pow_.Scalar",
        "aten::pow_.Tensor")
def power_(self: np.ndarray, exponent: Operand) -> np.ndarray:
    return write_into(self, _pow(self, exponent))


@kernel("aten::minimum")
def minimum(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return binary(np.minimum, self, other)


@kernel("aten::maximum")
def maximum(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return binary(np.maximum, self, other)


@kernel("aten::fmin")
def fmin(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return binary(np.fmin, self, other)


@kernel("aten::fmax")
def fmax(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return binary(np.fmax, self, other)
