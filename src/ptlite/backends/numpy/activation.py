"""Activation kernels (relu family, hard*, sigmoid, gelu, softmax, clamp, ...) and inference-time dropout."""

from __future__ import annotations

import math

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.ir.dtypes import to_numpy

from ._fastnp import clip
from ._layout import fits_out, flat_pair
from ._parallel import elementwise

# ---------------------------------------------------------------- helpers


def _float(x: np.ndarray) -> np.ndarray:
    """Integer and bool tensors compute in float32, as PyTorch's floating activations do."""
    return x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float32)


def _category(dtype: np.dtype) -> int:
    return 0 if dtype == np.bool_ else 1 if np.issubdtype(dtype, np.integer) else 2


def _result_dtype(x: np.ndarray, *others) -> np.dtype:
    """PyTorch type promotion of a tensor with Python scalars, 0-d tensors and tensors (None ignored)."""
    dtype = x.dtype
    for o in others:
        if o is None:
            continue
        if isinstance(o, np.ndarray) and o.ndim > 0:
            dtype = np.result_type(dtype, o.dtype)
            continue
        o_dtype = o.dtype if isinstance(o, np.ndarray) else np.asarray(o).dtype
        if _category(o_dtype) > _category(dtype):
            if isinstance(o, np.ndarray):
                dtype = o_dtype
            else:
                dtype = np.dtype(np.float32) if _category(o_dtype) == 2 else np.dtype(np.int64)
    return dtype


def _inplace_target(self: np.ndarray) -> np.ndarray:
    """Where an in-place op writes: self, or a new array when self is read-only (a memory-mapped weight)."""
    return self if self.flags.writeable else np.empty_like(self)


def _target(out: np.ndarray | None, x: np.ndarray) -> np.ndarray:
    """Where an out variant writes its result (x's shape and dtype): `out` when it fits, else a new array in x's
    layout."""
    return out if out is not None and fits_out(out, x.shape, x.dtype) else np.empty_like(x)


def _unary(fn):
    """Register-friendly wrapper: fn(x, out) computes into out; returns (kernel with an out variant, in-place
    kernel)."""
    def apply(self, *, out=None):
        x = _float(self)
        return elementwise(fn, x, _target(out, x))

    def apply_(self):
        return elementwise(fn, self, _inplace_target(self))

    return apply, apply_


# ---------------------------------------------------------------- relu family and hard activations


def _relu(x, out):
    """max(x, 0) with NaN kept; for floats clip with both bounds is NumPy's fastest path."""
    if x.dtype.kind == "f":
        return clip(x, x.dtype.type(0), x.dtype.type(np.inf), out=out)
    return np.maximum(x, x.dtype.type(0), out=out)


@kernel("aten::relu")
def relu(self, *, out=None):
    return _relu(self, _target(out, self))


@kernel("aten::relu_")
def relu_(self):
    return _relu(self, _inplace_target(self))


def _clip(x: np.ndarray, lo, hi, out: np.ndarray | None) -> np.ndarray:
    """np.clip(x, lo, hi), into `out` when the result (NumPy's type promotion) fits it exactly."""
    if out is not None and fits_out(out, x.shape, np.result_type(x, lo, hi)):
        return np.clip(x, lo, hi, out=out)
    return np.clip(x, lo, hi)


@kernel("aten::hardtanh")
def hardtanh(self, min_val=-1, max_val=1, *, out=None):
    return _clip(self, min_val, max_val, out)


@kernel("aten::hardtanh_")
def hardtanh_(self, min_val=-1, max_val=1):
    return np.clip(self, min_val, max_val, out=_inplace_target(self))


@kernel("aten::relu6")
def relu6(self, *, out=None):
    return _clip(self, 0, 6, out)


@kernel("aten::relu6_")
def relu6_(self):
    return np.clip(self, 0, 6, out=_inplace_target(self))


def _hardswish(x, out):
    """x * min(max(x + 3, 0), 6) / 6"""
    gate = np.add(x, x.dtype.type(3))
    np.clip(gate, 0, 6, out=gate)
    np.multiply(x, gate, out=out)
    np.divide(out, out.dtype.type(6), out=out)
    return out


def _hardsigmoid(x, out):
    """min(max(x + 3, 0), 6) / 6"""
    np.add(x, x.dtype.type(3), out=out)
    np.clip(out, 0, 6, out=out)
    np.divide(out, out.dtype.type(6), out=out)
    return out


def _sigmoid(x, out):
    """1 / (1 + exp(-x)); exp overflow for very negative x gives the right limit 0."""
    with np.errstate(over="ignore"):
        np.negative(x, out=out)
        np.exp(out, out=out)
    np.add(out, out.dtype.type(1), out=out)
    np.reciprocal(out, out=out)
    return out


def _silu(x, out):
    """x / (1 + exp(-x)): four passes; exp overflow for very negative x gives the right limit -0."""
    denominator = np.negative(x)
    with np.errstate(over="ignore"):
        np.exp(denominator, out=denominator)
    np.add(denominator, denominator.dtype.type(1), out=denominator)
    with np.errstate(invalid="ignore"):  # -inf / inf: nan, as in torch
        np.divide(x, denominator, out=out)
    return out


def _tanh(x, out):
    return np.tanh(x, out=out)


def _mish(x, out):
    """x * tanh(softplus(x)), with softplus(x) = log1p(exp(-|x|)) + max(x, 0) computed without overflow."""
    soft = np.abs(x)
    np.negative(soft, out=soft)
    np.exp(soft, out=soft)
    np.log1p(soft, out=soft)
    soft += np.maximum(x, 0)
    np.tanh(soft, out=soft)
    np.multiply(x, soft, out=out)
    return out


hardswish, hardswish_ = _unary(_hardswish)
hardsigmoid, hardsigmoid_ = _unary(_hardsigmoid)
sigmoid, sigmoid_ = _unary(_sigmoid)
silu, silu_ = _unary(_silu)
tanh, tanh_ = _unary(_tanh)
mish, mish_ = _unary(_mish)
kernel("aten::hardswish")(hardswish)
kernel("aten::hardswish_")(hardswish_)
kernel("aten::hardsigmoid")(hardsigmoid)
kernel("aten::hardsigmoid_")(hardsigmoid_)
kernel("aten::sigmoid")(sigmoid)
kernel("aten::sigmoid_")(sigmoid_)
kernel("aten::silu")(silu)
kernel("aten::silu_")(silu_)
kernel("aten::tanh")(tanh)
kernel("aten::tanh_")(tanh_)
kernel("aten::mish")(mish)
kernel("aten::mish_")(mish_)


# ---------------------------------------------------------------- gelu

# erfc(z) ~= t * exp(-z^2 + P(t)), t = 1 / (1 + z / 2), z >= 0: a Chebyshev fit with fractional error
# below 1.2e-7 everywhere (Numerical Recipes, "erfcc"); coefficients of P from the constant term up.
_ERFC_POLY = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
              0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277)


_BLOCK = 1 << 18


def erfc_nonnegative(z: np.ndarray) -> np.ndarray:
    """erfc(z) for z >= 0, vectorized in z's dtype (NumPy has no erf); overwrites z."""
    dt = z.dtype.type
    t = np.multiply(z, dt(0.5))
    t += dt(1)
    np.reciprocal(t, out=t)
    poly = np.multiply(t, dt(_ERFC_POLY[-1]))
    poly += dt(_ERFC_POLY[-2])
    for c in reversed(_ERFC_POLY[:-2]):
        poly *= t
        poly += dt(c)
    np.multiply(z, z, out=z)
    poly -= z
    np.exp(poly, out=poly)
    poly *= t
    return poly


def _gelu_erf(x, out):
    """x * Phi(x) = relu(x) - |x| * erfc(|x| / sqrt 2) / 2: one-sided erfc keeps accuracy in both tails."""
    size = x.size
    pair = flat_pair(x, out) if size > _BLOCK else None  # flat in memory order: NCHW or channels-last
    if pair is not None:
        flat_x, flat_out = pair
        for start in range(0, size, _BLOCK):  # blocks that stay in cache through the ~30 passes
            _gelu_erf(flat_x[start:start + _BLOCK], flat_out[start:start + _BLOCK])
        return out
    dt = x.dtype.type
    magnitude = np.abs(x)
    half_tail = erfc_nonnegative(magnitude * dt(1 / math.sqrt(2)))
    half_tail *= dt(0.5)
    half_tail *= magnitude
    _relu(x, out)
    out -= half_tail
    return out


def _gelu_tanh(x, out):
    """x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))"""
    dt = x.dtype.type
    inner = x * x
    inner *= dt(0.044715)
    inner += dt(1)
    inner *= x
    inner *= dt(math.sqrt(2 / math.pi))
    np.tanh(inner, out=inner)
    inner += dt(1)
    inner *= x
    np.multiply(inner, dt(0.5), out=out)
    return out


def _gelu_fn(approximate: str):
    if approximate == "none":
        return _gelu_erf
    if approximate == "tanh":
        return _gelu_tanh
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


@kernel("aten::gelu")
def gelu(self, approximate="none"):
    x = _float(self)
    return _gelu_fn(approximate)(x, np.empty_like(x))


@kernel("aten::gelu_")
def gelu_(self, approximate="none"):
    return _gelu_fn(approximate)(self, _inplace_target(self))


# ---------------------------------------------------------------- elu, leaky relu, softplus, prelu


def _elu(x, out, alpha, scale, input_scale):
    """x > 0: x * scale; else (exp(x * input_scale) - 1) * alpha * scale, as max/min parts (no masks)."""
    dt = x.dtype.type
    neg = np.clip(x, dt(-np.inf), dt(0))
    neg *= dt(input_scale)
    np.expm1(neg, out=neg)
    neg *= dt(alpha * scale)
    _relu(x, out)
    out *= dt(scale)
    out += neg
    return out


@kernel("aten::elu")
def elu(self, alpha=1, scale=1, input_scale=1):
    x = _float(self)
    return _elu(x, np.empty_like(x), alpha, scale, input_scale)


@kernel("aten::elu_")
def elu_(self, alpha=1, scale=1, input_scale=1):
    return _elu(self, self, alpha, scale, input_scale)


def _leaky_relu(x, out, negative_slope):
    """max(x, 0) + slope * min(x, 0): exact on both sides and faster than masked writes."""
    dt = x.dtype.type
    neg = np.clip(x, dt(-np.inf), dt(0))
    neg *= dt(negative_slope)
    _relu(x, out)
    out += neg
    return out


@kernel("aten::leaky_relu")
def leaky_relu(self, negative_slope=0.01):
    x = _float(self)
    return _leaky_relu(x, np.empty_like(x), negative_slope)


@kernel("aten::leaky_relu_")
def leaky_relu_(self, negative_slope=0.01):
    return _leaky_relu(self, self, negative_slope)


@kernel("aten::softplus")
def softplus(self, beta=1, threshold=20):
    """log(1 + exp(beta x)) / beta, and x itself where beta x > threshold."""
    x = _float(self)
    dt = x.dtype.type
    bx = x * dt(beta)
    soft = np.abs(bx)
    np.negative(soft, out=soft)
    np.exp(soft, out=soft)
    np.log1p(soft, out=soft)
    soft += np.maximum(bx, dt(0))
    soft /= dt(beta)
    np.copyto(soft, x, where=bx > threshold)
    return soft


@kernel("aten::prelu",
        "aten::_prelu_kernel")
def prelu(self, weight):
    """x where x > 0, else weight * x; weight has one value or one per channel (axis 1)."""
    w = weight.reshape(-1)
    if w.size != 1 and self.ndim >= 2:
        w = w.reshape((1, -1) + (1,) * (self.ndim - 2))
    return np.where(self > 0, self, self * w.astype(self.dtype, copy=False))


# ---------------------------------------------------------------- softmax


def _softmax_dtype(self, dtype):
    return self.astype(to_numpy(dtype)) if dtype is not None else _float(self)


def _softmax(x: np.ndarray, dim: int, log: bool) -> np.ndarray:
    if x.ndim == 0:
        return _softmax(x.reshape(1), 0, log).reshape(())
    with np.errstate(invalid="ignore", over="ignore"):
        shifted = np.subtract(x, np.max(x, axis=dim, keepdims=True))
        if log:
            total = np.add.reduce(np.exp(shifted), axis=dim, keepdims=True)
            shifted -= np.log(total)
            return shifted
        np.exp(shifted, out=shifted)
        shifted /= np.add.reduce(shifted, axis=dim, keepdims=True)
        return shifted


@kernel("aten::softmax.int")
def softmax(self, dim, dtype=None):
    return _softmax(_softmax_dtype(self, dtype), dim, log=False)


@kernel("aten::log_softmax.int")
def log_softmax(self, dim, dtype=None):
    return _softmax(_softmax_dtype(self, dtype), dim, log=True)


@kernel("aten::_softmax")
def _softmax_kernel(self, dim, half_to_float):
    x = self.astype(np.float32) if half_to_float else _float(self)
    return _softmax(x, dim, log=False)


@kernel("aten::_log_softmax")
def _log_softmax_kernel(self, dim, half_to_float):
    x = self.astype(np.float32) if half_to_float else _float(self)
    return _softmax(x, dim, log=True)


# ---------------------------------------------------------------- clamp


def _clamp_into(x: np.ndarray, lo, hi, out: np.ndarray | None) -> np.ndarray:
    """min(max(x, lo), hi) (NaN propagates); out None means a fresh buffer of the promoted dtype."""
    if lo is None and hi is None:
        raise ValueError("clamp: at least one of 'min' and 'max' must be given")
    if out is None:
        shape = np.broadcast_shapes(x.shape, *(np.shape(b) for b in (lo, hi) if b is not None))
        out = np.empty_like(x, dtype=_result_dtype(x, lo, hi), shape=shape)  # in x's layout (channels-last)
    if out.dtype.kind == "f" and np.ndim(lo) == 0 and np.ndim(hi) == 0:
        # np.clip with two bounds is NumPy's fastest path; a missing bound becomes an infinite one.
        dt = out.dtype.type
        low = dt(-np.inf) if lo is None else dt(lo)
        high = dt(np.inf) if hi is None else dt(hi)
        return np.clip(x, low, high, out=out, casting="unsafe")
    src = x
    if lo is not None:
        np.maximum(src, lo, out=out, casting="unsafe")
        src = out
    if hi is not None:
        np.minimum(src, hi, out=out, casting="unsafe")
    return out


@kernel("aten::clamp",
        "aten::clamp.Tensor")
def clamp(self, min=None, max=None):
    return _clamp_into(self, min, max, None)


@kernel("aten::clamp_",
        "aten::clamp_.Tensor")
def clamp_(self, min=None, max=None):
    if not np.can_cast(_result_dtype(self, min, max), self.dtype, "same_kind"):
        raise TypeError(f"clamp_: result type {_result_dtype(self, min, max)} can't be cast to {self.dtype}")
    return _clamp_into(self, min, max, _inplace_target(self))


@kernel("aten::clamp_min",
        "aten::clamp_min.Tensor")
def clamp_min(self, min):
    return clamp(self, min, None)


@kernel("aten::clamp_max",
        "aten::clamp_max.Tensor")
def clamp_max(self, max):
    return clamp(self, None, max)


@kernel("aten::clamp_min_",
        "aten::clamp_min_.Tensor")
def clamp_min_(self, min):
    return clamp_(self, min, None)


@kernel("aten::clamp_max_",
        "aten::clamp_max_.Tensor")
def clamp_max_(self, max):
    return clamp_(self, None, max)


# ---------------------------------------------------------------- dropout (inference only)


def _check_eval(op: str, p: float, train) -> None:
    if train and p > 0:
        raise RuntimeError(f"aten::{op} with train=True (p={p}) is random: ptlite runs inference only; "
                           "call model.eval() before capturing it")


@kernel("aten::dropout",
        "aten::feature_dropout",
        "aten::alpha_dropout",
        "aten::feature_alpha_dropout")
def dropout(input, p, train):
    """Identity at inference: returns input itself (PyTorch returns the same tensor too)."""
    _check_eval("dropout", p, train)
    return input


@kernel("aten::dropout_",
        "aten::feature_dropout_",
        "aten::alpha_dropout_",
        "aten::feature_alpha_dropout_")
def dropout_(self, p, train):
    _check_eval("dropout_", p, train)
    return self


@kernel("aten::native_dropout")
def native_dropout(input, p, train):
    """(input, all-true keep mask); train=None means training, as in PyTorch."""
    _check_eval("native_dropout", p, True if train is None else train)
    return input.copy(order="K"), np.ones_like(input, dtype=np.bool_)
