"""Sums as BLAS products with a vector of ones: 3-6x faster than NumPy's pairwise sum where they apply.

Shared by the reduction kernels (sum, mean) and the pooling kernels (average pooling over a whole image), so that
neither family has to import the other.
"""

from __future__ import annotations

import math

import numpy as np

from ._layout import is_channels_last

_ONES: dict[tuple[int, str], np.ndarray] = {}


def _ones(n: int, dt: np.dtype) -> np.ndarray:
    key = (n, dt.str)
    if key not in _ONES:
        if len(_ONES) > 64:
            _ONES.clear()
        _ONES[key] = np.ones(n, dt)
    return _ONES[key]


def fast_sum(x: np.ndarray, axis: tuple[int, ...] | None, keepdims: bool) -> np.ndarray:
    """np.sum(x, axis, keepdims=keepdims), as a BLAS product with a vector of ones where that is possible.

    That needs a C-contiguous float32/float64 array reduced over one run of adjacent axes, with nothing kept
    before or nothing kept after that run, or a channels-last image summed over H and W (the column sums of
    its (H * W, C) pixel matrix). It is 3-6x faster than NumPy's pairwise sum; BLAS accumulates in several
    lanes, which stays within about 3e-7 relative error (float32) up to a million terms.
    """
    shape = x.shape
    axis = tuple(range(x.ndim)) if axis is None else axis
    if x.ndim == 4 and sorted(axis) == [2, 3] and is_channels_last(x):
        return _spatial_sum(x, keepdims)
    blas_type = x.dtype.kind == "f" and x.dtype.itemsize in (4, 8)
    if blas_type and x.size >= 4096 and x.flags.c_contiguous and axis:
        lo, hi = min(axis), max(axis) + 1
        outer, mid, inner = math.prod(shape[:lo]), math.prod(shape[lo:hi]), math.prod(shape[hi:])
        if len(set(axis)) == hi - lo and mid > 1 and (inner == 1 or outer == 1):
            ones = _ones(mid, x.dtype)
            out = x.reshape(outer, mid) @ ones if inner == 1 else ones @ x.reshape(mid, inner)
            return out.reshape(shape[:lo] + ((1,) * (hi - lo) if keepdims else ()) + shape[hi:])
    return np.asarray(np.add.reduce(x, axis=axis, keepdims=keepdims))  # a 0-d array, not a NumPy scalar


def _spatial_sum(x: np.ndarray, keepdims: bool) -> np.ndarray:
    """Sum over H and W of a channels-last (N, C, H, W) image, from its NHWC view: (N, C) (or (N, C, 1, 1))."""
    n, c, h, w = x.shape
    pixels = x.transpose(0, 2, 3, 1).reshape(n, h * w, c)  # a view
    if x.dtype.kind == "f" and x.dtype.itemsize in (4, 8) and x.size >= 4096:
        total = np.matmul(_ones(h * w, x.dtype), pixels)
    else:
        total = np.add.reduce(pixels, axis=1)
    return total.reshape(n, c, 1, 1) if keepdims else total
