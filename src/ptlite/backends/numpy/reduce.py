"""Reduction kernels: sum, mean, max/min (and indices), argmax, all/any, prod, var/std, norm, cumsum."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.ir.dtypes import to_numpy

from ._sums import fast_sum
from .elementwise import as_float, maximum, minimum, wrap

_I64 = np.dtype(np.int64)
_BOOL = np.dtype(np.bool_)

Dims = Any  # int, list of ints, or None


def axes(dim: Dims, ndim: int) -> tuple[int, ...] | None:
    """NumPy axes for a torch `dim` argument; None (every axis) for None or []. A 0-d tensor has one dim."""
    if dim is None:
        return None
    dims = [dim] if isinstance(dim, int) else list(dim)
    if not dims:
        return None
    rank = max(ndim, 1)
    for d in dims:
        if not -rank <= d < rank:
            raise IndexError(f"dimension {d} out of range for a tensor with {ndim} dimension(s)")
    if ndim == 0:
        return None
    return tuple(d % ndim for d in dims)


def _integers_as_int64(x: np.ndarray, dtype: int | None) -> np.ndarray:
    """sum/prod/cumsum input: cast to `dtype` if given; bool and integers accumulate in int64, as in torch."""
    if dtype is not None:
        return x.astype(to_numpy(dtype), copy=False)
    return x.astype(_I64) if x.dtype.kind in "biu" else x


def _float_input(x: np.ndarray, dtype: int | None, op: str) -> np.ndarray:
    if dtype is not None:
        return x.astype(to_numpy(dtype), copy=False)
    if x.dtype.kind != "f":
        raise TypeError(f"{op}(): could not infer output dtype; input dtype {x.dtype} is not floating point")
    return x


# ----------------------------------------------------------------------------------------------------
# sum, mean, prod
# ----------------------------------------------------------------------------------------------------

@kernel("aten::sum.dim_IntList")
def sum_dim(self: np.ndarray, dim: Dims, keepdim: bool = False, dtype: int | None = None) -> np.ndarray:
    return fast_sum(_integers_as_int64(self, dtype), axes(dim, self.ndim), keepdim)


@kernel("aten::sum")
def sum_all(self: np.ndarray, dtype: int | None = None) -> np.ndarray:
    return fast_sum(_integers_as_int64(self, dtype), None, False)


@kernel("aten::mean.dim")
def mean_dim(self: np.ndarray, dim: Dims, keepdim: bool = False, dtype: int | None = None) -> np.ndarray:
    x = _float_input(self, dtype, "mean")
    axis = axes(dim, self.ndim)
    total = fast_sum(x, axis, keepdim)
    count = x.size if axis is None else math.prod(x.shape[a] for a in axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.true_divide(total, x.dtype.type(count), out=total)


@kernel("aten::mean")
def mean_all(self: np.ndarray, dtype: int | None = None) -> np.ndarray:
    return mean_dim(self, None, False, dtype)


@kernel("aten::prod")
def prod_all(self: np.ndarray, dtype: int | None = None) -> np.ndarray:
    return wrap(np.prod(_integers_as_int64(self, dtype)))


@kernel("aten::prod.dim_int")
def prod_dim(self: np.ndarray, dim: int, keepdim: bool = False, dtype: int | None = None) -> np.ndarray:
    x = _integers_as_int64(self, dtype)
    return wrap(np.prod(x, axis=axes(dim, self.ndim), keepdims=keepdim))


# ----------------------------------------------------------------------------------------------------
# max, min, amax, amin, argmax, argmin
# ----------------------------------------------------------------------------------------------------

@kernel("aten::max")
def max_all(self: np.ndarray) -> np.ndarray:
    return wrap(np.max(self))


@kernel("aten::min")
def min_all(self: np.ndarray) -> np.ndarray:
    return wrap(np.min(self))


kernel("aten::max.other")(maximum)
kernel("aten::min.other")(minimum)


def _extremum_dim(self: np.ndarray, dim: int, keepdim: bool, arg: Any, value: Any) -> tuple[np.ndarray, ...]:
    if self.ndim == 0:
        axes(dim, 0)
        return self.copy(), np.zeros((), _I64)
    (axis,) = axes(dim, self.ndim)
    indices = arg(self, axis=axis, keepdims=keepdim).astype(_I64, copy=False)
    return wrap(value(self, axis=axis, keepdims=keepdim)), wrap(indices)


@kernel("aten::max.dim")
def max_dim(self: np.ndarray, dim: int, keepdim: bool = False) -> tuple[np.ndarray, ...]:
    return _extremum_dim(self, dim, keepdim, np.argmax, np.max)


@kernel("aten::min.dim")
def min_dim(self: np.ndarray, dim: int, keepdim: bool = False) -> tuple[np.ndarray, ...]:
    return _extremum_dim(self, dim, keepdim, np.argmin, np.min)


@kernel("aten::amax")
def amax(self: np.ndarray, dim: Dims = (), keepdim: bool = False) -> np.ndarray:
    return wrap(np.max(self, axis=axes(dim, self.ndim), keepdims=keepdim))


@kernel("aten::amin")
def amin(self: np.ndarray, dim: Dims = (), keepdim: bool = False) -> np.ndarray:
    return wrap(np.min(self, axis=axes(dim, self.ndim), keepdims=keepdim))


def _arg_extremum(fn: Any, self: np.ndarray, dim: int | None, keepdim: bool) -> np.ndarray:
    if dim is None or self.ndim == 0:
        if dim is not None:
            axes(dim, 0)
        index = np.asarray(fn(self.reshape(-1)), _I64)
        return index.reshape((1,) * self.ndim) if keepdim else index
    (axis,) = axes(dim, self.ndim)
    return wrap(fn(self, axis=axis, keepdims=keepdim).astype(_I64, copy=False))


@kernel("aten::argmax")
def argmax(self: np.ndarray, dim: int | None = None, keepdim: bool = False) -> np.ndarray:
    return _arg_extremum(np.argmax, self, dim, keepdim)


@kernel("aten::argmin")
def argmin(self: np.ndarray, dim: int | None = None, keepdim: bool = False) -> np.ndarray:
    return _arg_extremum(np.argmin, self, dim, keepdim)


# ----------------------------------------------------------------------------------------------------
# all, any
# ----------------------------------------------------------------------------------------------------

def _logical_reduce(fn: Any, self: np.ndarray, dim: Dims, keepdim: bool) -> np.ndarray:
    """all/any: the result is bool, except for uint8 input where torch keeps uint8."""
    out = wrap(fn(self, axis=axes(dim, self.ndim), keepdims=keepdim))
    return out.astype(np.uint8) if self.dtype == np.uint8 else out


@kernel("aten::all")
def all_(self: np.ndarray) -> np.ndarray:
    return _logical_reduce(np.all, self, None, False)


@kernel("aten::all.dim",
        "aten::all.dims")
def all_dim(self: np.ndarray, dim: Dims = None, keepdim: bool = False) -> np.ndarray:
    return _logical_reduce(np.all, self, dim, keepdim)


@kernel("aten::any")
def any_(self: np.ndarray) -> np.ndarray:
    return _logical_reduce(np.any, self, None, False)


@kernel("aten::any.dim",
        "aten::any.dims")
def any_dim(self: np.ndarray, dim: Dims = None, keepdim: bool = False) -> np.ndarray:
    return _logical_reduce(np.any, self, dim, keepdim)


# ----------------------------------------------------------------------------------------------------
# var, std (and the fused *_mean variants)
# ----------------------------------------------------------------------------------------------------

def _variance(self: np.ndarray, dim: Dims, correction: Any, keepdim: bool) -> tuple[np.ndarray, np.ndarray]:
    """(variance, mean) with Bessel-style `correction` (1 = unbiased)."""
    x = _float_input(self, None, "var")
    axis = axes(dim, self.ndim)
    mean = np.mean(x, axis=axis, keepdims=True, dtype=x.dtype)
    centered = x - mean
    np.square(centered, out=centered)
    count = x.size if axis is None else math.prod(x.shape[a] for a in axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = np.sum(centered, axis=axis, keepdims=keepdim) / x.dtype.type(max(count - correction, 0))
    if not keepdim:
        mean = mean.reshape(np.shape(var))
    return wrap(var.astype(x.dtype, copy=False)), wrap(mean)


def _correction(unbiased: bool) -> int:
    return 1 if unbiased else 0


@kernel("aten::var")
def var(self: np.ndarray, unbiased: bool = True) -> np.ndarray:
    return _variance(self, None, _correction(unbiased), False)[0]


@kernel("aten::var.dim")
def var_dim(self: np.ndarray, dim: Dims, unbiased: bool = True, keepdim: bool = False) -> np.ndarray:
    return _variance(self, dim, _correction(unbiased), keepdim)[0]


@kernel("aten::var.correction")
def var_correction(self: np.ndarray, dim: Dims = None, correction: Any = None,
                   keepdim: bool = False) -> np.ndarray:
    return _variance(self, dim, 1 if correction is None else correction, keepdim)[0]


@kernel("aten::std")
def std(self: np.ndarray, unbiased: bool = True) -> np.ndarray:
    return wrap(np.sqrt(var(self, unbiased)))


@kernel("aten::std.dim")
def std_dim(self: np.ndarray, dim: Dims, unbiased: bool = True, keepdim: bool = False) -> np.ndarray:
    return wrap(np.sqrt(var_dim(self, dim, unbiased, keepdim)))


@kernel("aten::std.correction")
def std_correction(self: np.ndarray, dim: Dims = None, correction: Any = None,
                   keepdim: bool = False) -> np.ndarray:
    return wrap(np.sqrt(var_correction(self, dim, correction, keepdim)))


@kernel("aten::var_mean")
def var_mean(self: np.ndarray, unbiased: bool = True) -> tuple[np.ndarray, np.ndarray]:
    return _variance(self, None, _correction(unbiased), False)


@kernel("aten::var_mean.dim")
def var_mean_dim(self: np.ndarray, dim: Dims, unbiased: bool = True,
                 keepdim: bool = False) -> tuple[np.ndarray, np.ndarray]:
    return _variance(self, dim, _correction(unbiased), keepdim)


@kernel("aten::var_mean.correction")
def var_mean_correction(self: np.ndarray, dim: Dims = None, correction: Any = None,
                        keepdim: bool = False) -> tuple[np.ndarray, np.ndarray]:
    return _variance(self, dim, 1 if correction is None else correction, keepdim)


@kernel("aten::std_mean")
def std_mean(self: np.ndarray, unbiased: bool = True) -> tuple[np.ndarray, np.ndarray]:
    v, m = var_mean(self, unbiased)
    return wrap(np.sqrt(v)), m


@kernel("aten::std_mean.dim")
def std_mean_dim(self: np.ndarray, dim: Dims, unbiased: bool = True,
                 keepdim: bool = False) -> tuple[np.ndarray, np.ndarray]:
    v, m = var_mean_dim(self, dim, unbiased, keepdim)
    return wrap(np.sqrt(v)), m


@kernel("aten::std_mean.correction")
def std_mean_correction(self: np.ndarray, dim: Dims = None, correction: Any = None,
                        keepdim: bool = False) -> tuple[np.ndarray, np.ndarray]:
    v, m = var_mean_correction(self, dim, correction, keepdim)
    return wrap(np.sqrt(v)), m


# ----------------------------------------------------------------------------------------------------
# norm, logsumexp
# ----------------------------------------------------------------------------------------------------

def _vector_norm(x: np.ndarray, p: Any, dim: Dims, keepdim: bool) -> np.ndarray:
    axis = axes(dim, x.ndim)
    p = 2 if p is None else p
    a = np.abs(x)
    if p == 2:
        out = np.sqrt(np.sum(np.square(a), axis=axis, keepdims=keepdim))
    elif p == 1:
        out = np.sum(a, axis=axis, keepdims=keepdim)
    elif p == float("inf"):
        out = np.max(a, axis=axis, keepdims=keepdim)
    elif p == float("-inf"):
        out = np.min(a, axis=axis, keepdims=keepdim)
    elif p == 0:
        out = np.sum(a != 0, axis=axis, keepdims=keepdim).astype(x.dtype)
    else:
        total = np.sum(np.power(a, x.dtype.type(p)), axis=axis, keepdims=keepdim)
        out = np.power(total, x.dtype.type(1.0 / p))
    return wrap(np.asarray(out, x.dtype))


@kernel("aten::norm.Scalar")
def norm(self: np.ndarray, p: Any = 2) -> np.ndarray:
    return _vector_norm(as_float(self), p, None, False)


@kernel("aten::norm.ScalarOpt_dim")
def norm_dim(self: np.ndarray, p: Any, dim: Dims, keepdim: bool = False) -> np.ndarray:
    return _vector_norm(as_float(self), p, dim, keepdim)


@kernel("aten::norm.ScalarOpt_dim_dtype")
def norm_dim_dtype(self: np.ndarray, p: Any, dim: Dims, keepdim: bool, dtype: int) -> np.ndarray:
    return _vector_norm(self.astype(to_numpy(dtype), copy=False), p, dim, keepdim)


@kernel("aten::norm.ScalarOpt_dtype")
def norm_dtype(self: np.ndarray, p: Any, dtype: int) -> np.ndarray:
    return _vector_norm(self.astype(to_numpy(dtype), copy=False), p, None, False)


@kernel("aten::linalg_vector_norm")
def linalg_vector_norm(self: np.ndarray, ord: Any = 2, dim: Dims = None, keepdim: bool = False,
                       dtype: int | None = None) -> np.ndarray:
    x = as_float(self) if dtype is None else self.astype(to_numpy(dtype), copy=False)
    return _vector_norm(x, ord, dim, keepdim)


@kernel("aten::logsumexp")
def logsumexp(self: np.ndarray, dim: Dims, keepdim: bool = False) -> np.ndarray:
    x = as_float(self)
    axis = axes(dim, x.ndim)
    if x.size == 0:
        return wrap(np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdim)))
    peak = np.max(x, axis=axis, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, x.dtype.type(0))
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(x - peak), axis=axis, keepdims=True)) + peak
    if not keepdim:
        out = out.reshape(()) if axis is None else np.squeeze(out, axis=axis)
    return wrap(out)


# ----------------------------------------------------------------------------------------------------
# cumulative
# ----------------------------------------------------------------------------------------------------

def _cumulative(fn: Any, self: np.ndarray, dim: int, dtype: int | None) -> np.ndarray:
    x = _integers_as_int64(self, dtype)
    if x.ndim == 0:
        axes(dim, 0)
        return x.copy()
    (axis,) = axes(dim, x.ndim)
    return fn(x, axis=axis)


@kernel("aten::cumsum")
def cumsum(self: np.ndarray, dim: int, dtype: int | None = None) -> np.ndarray:
    return _cumulative(np.cumsum, self, dim, dtype)


@kernel("aten::cumprod")
def cumprod(self: np.ndarray, dim: int, dtype: int | None = None) -> np.ndarray:
    return _cumulative(np.cumprod, self, dim, dtype)


# ----------------------------------------------------------------------------------------------------
# sorting, topk, unique
# ----------------------------------------------------------------------------------------------------
# NaN sorts above every number, as in torch. Equal values keep their index order (a stable sort): torch's CPU sort
# and topk leave the order of ties unspecified (small inputs come out stable, large ones need not), so a model
# whose result depends on the order of exactly equal values may differ there.

def descending_order(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """Indices sorting x along `axis` from the largest (NaN first) down, equal values in index order."""
    flipped = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return x.shape[axis] - 1 - np.flip(flipped, axis)


def _order(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    return descending_order(x, axis) if descending else np.argsort(x, axis=axis, kind="stable")


def _sort(self: np.ndarray, dim: int, descending: bool) -> tuple[np.ndarray, np.ndarray]:
    x = self.reshape(1) if self.ndim == 0 else self
    (axis,) = axes(dim, self.ndim) or (0,)
    index = _order(x, axis, descending)
    values = np.take_along_axis(x, index, axis=axis)
    return values.reshape(self.shape), index.reshape(self.shape).astype(np.int64)


@kernel("aten::sort")
def sort(self: np.ndarray, dim: int = -1, descending: bool = False) -> tuple[np.ndarray, np.ndarray]:
    return _sort(self, dim, descending)


@kernel("aten::sort.stable")
def sort_stable(self: np.ndarray, stable: bool | None, dim: int = -1,
                descending: bool = False) -> tuple[np.ndarray, np.ndarray]:
    return _sort(self, dim, descending)


@kernel("aten::argsort")
def argsort(self: np.ndarray, dim: int = -1, descending: bool = False) -> np.ndarray:
    return _sort(self, dim, descending)[1]


@kernel("aten::argsort.stable")
def argsort_stable(self: np.ndarray, stable: bool, dim: int = -1, descending: bool = False) -> np.ndarray:
    return _sort(self, dim, descending)[1]


@kernel("aten::topk")
def topk(self: np.ndarray, k: int, dim: int = -1, largest: bool = True,
         sorted: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The k largest (smallest) values along dim and their indices, best first (also for sorted=False, where torch
    gives them in an unspecified order)."""
    x = self.reshape(1) if self.ndim == 0 else self
    (axis,) = axes(dim, self.ndim) or (0,)
    if not 0 <= k <= x.shape[axis]:
        raise IndexError(f"topk: k ({k}) is out of range for dimension {dim} of size {x.shape[axis]}")
    index = np.take(_order(x, axis, largest), np.arange(k), axis=axis)
    values = np.take_along_axis(x, index, axis=axis)
    if self.ndim == 0:
        return values.reshape(()), index.reshape(()).astype(np.int64)
    return values, index.astype(np.int64)


@kernel("aten::_unique2")
def unique2(self: np.ndarray, sorted: bool = True, return_inverse: bool = False,
            return_counts: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """torch.unique: the distinct values (always sorted; each NaN is distinct), the index of each element's value
    in them (input's shape) and how often each occurs; those not asked for are empty int64 tensors."""
    values, inverse, counts = np.unique(self.reshape(-1), return_inverse=True, return_counts=True, equal_nan=False)
    empty = np.empty(0, np.int64)
    return (values, inverse.reshape(self.shape).astype(np.int64) if return_inverse else empty,
            counts.astype(np.int64) if return_counts else empty)
