"""Unary math kernels and their in-place forms: exp, log, sqrt, rsqrt, erf, sin/cos, rounding, neg/abs/sign,
square, isnan/isinf/isfinite."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ptlite.backends.numpy import kernel

from .elementwise import as_float, select, wrap, write_into

_BOOL = np.dtype(np.bool_)
_I64 = np.dtype(np.int64)


def _float_unary(name: str, fn: Callable[[np.ndarray], Any]) -> None:
    """Register aten::<name> (float result) and its in-place aten::<name>_."""

    def run(self: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return wrap(fn(as_float(self)))

    def run_(self: np.ndarray) -> np.ndarray:
        return write_into(self, run(self))

    run.__name__, run_.__name__ = name, name + "_"
    kernel(f"aten::{name}")(run)
    kernel(f"aten::{name}_")(run_)


def _rsqrt(x: np.ndarray) -> np.ndarray:
    r = wrap(np.sqrt(x))
    return np.reciprocal(r, out=r)


_ERF_SERIES = (1.0, -1.0 / 3, 1.0 / 10, -1.0 / 42, 1.0 / 216, -1.0 / 1320, 1.0 / 9360, -1.0 / 75600)
# Chebyshev-fitted coefficients of erfc(z) = t * exp(-z^2 + P(t)), t = 1 / (1 + z/2): relative error < 1.2e-7.
_ERFC_POLY = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
              0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def _horner(coefficients: tuple[float, ...], x: np.ndarray) -> np.ndarray:
    """sum(c[i] * x**i), evaluated in place in x's dtype."""
    out = np.full_like(x, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        out *= x
        out += c
    return out


def erf(x: np.ndarray) -> np.ndarray:
    """The error function in x's precision: a Taylor series below 0.5, the erfc fit above.

    On float32 both pieces are accurate to a few units in the last place (max |error| < 2.5e-7).
    """
    if x.ndim == 0:
        return erf(x.reshape(1)).reshape(())
    z = np.abs(x)
    z2 = np.square(z)
    near_zero = _horner(_ERF_SERIES, z2)
    near_zero *= z
    near_zero *= x.dtype.type(2.0 / math.sqrt(math.pi))
    t = np.multiply(z, x.dtype.type(0.5))
    t += 1
    np.reciprocal(t, out=t)
    tail = _horner(_ERFC_POLY, t)
    tail -= z2
    np.exp(tail, out=tail)
    tail *= t
    np.subtract(1, tail, out=tail)
    out = select(z < 0.5, near_zero, tail)
    return np.copysign(out, x, out=out)


for _name, _fn in [("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("rsqrt", _rsqrt),
                   ("reciprocal", np.reciprocal), ("erf", erf), ("sin", np.sin), ("cos", np.cos),
                   ("log2", np.log2), ("log10", np.log10), ("log1p", np.log1p), ("expm1", np.expm1)]:
    _float_unary(_name, _fn)


def _same_type_unary(name: str, fn: Callable[[np.ndarray], Any], bool_ok: bool) -> None:
    """Register aten::<name> and aten::<name>_ for a unary op whose result keeps the input's dtype."""

    def run(self: np.ndarray) -> np.ndarray:
        if self.dtype == _BOOL and not bool_ok:
            raise TypeError(f"{name} is not implemented for bool tensors")
        return wrap(fn(self))

    def run_(self: np.ndarray) -> np.ndarray:
        return write_into(self, run(self))

    run.__name__, run_.__name__ = name, name + "_"
    kernel(f"aten::{name}")(run)
    kernel(f"aten::{name}_")(run_)


def _rounding(fn: np.ufunc) -> Callable[[np.ndarray], np.ndarray]:
    """floor/ceil/round/trunc: identity (a copy) on integers, where NumPy would return float64."""
    return lambda x: fn(x) if x.dtype.kind == "f" else x.copy(order="K")


def _sign(x: np.ndarray) -> np.ndarray:
    if x.dtype == _BOOL:
        return x.copy(order="K")
    out = wrap(np.sign(x))
    if x.dtype.kind == "f":
        out[np.isnan(out)] = 0  # torch: sign(nan) == 0
    return out


for _name, _fn, _bool_ok in [("neg", np.negative, False), ("abs", np.abs, False), ("sign", _sign, True),
                             ("floor", _rounding(np.floor), False), ("ceil", _rounding(np.ceil), False),
                             ("round", _rounding(np.round), False), ("trunc", _rounding(np.trunc), False)]:
    _same_type_unary(_name, _fn, _bool_ok)


@kernel("aten::round.decimals")
def round_decimals(self: np.ndarray, decimals: int) -> np.ndarray:
    if self.dtype.kind != "f":
        return self.copy(order="K")
    return wrap(np.round(self, decimals))


@kernel("aten::square")
def square(self: np.ndarray) -> np.ndarray:
    if self.dtype == _BOOL:
        self = self.astype(_I64)  # torch computes pow(self, 2), which promotes bool with an int
    return wrap(np.square(self))


@kernel("aten::isnan")
def isnan(self: np.ndarray) -> np.ndarray:
    return wrap(np.isnan(self)) if self.dtype.kind == "f" else np.zeros_like(self, _BOOL)


@kernel("aten::isinf")
def isinf(self: np.ndarray) -> np.ndarray:
    return wrap(np.isinf(self)) if self.dtype.kind == "f" else np.zeros_like(self, _BOOL)


@kernel("aten::isfinite")
def isfinite(self: np.ndarray) -> np.ndarray:
    return wrap(np.isfinite(self)) if self.dtype.kind == "f" else np.ones_like(self, _BOOL)
