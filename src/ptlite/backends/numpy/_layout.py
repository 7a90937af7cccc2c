"""Memory layouts of 4-D image tensors: NCHW by shape always, channels-last (NHWC) in memory when a kernel chose it.

ptlite follows PyTorch's `channels_last` memory format: a tensor keeps its logical shape (N, C, H, W), so every
kernel stays correct on it, while its bytes are ordered N, H, W, C. Convolution kernels produce such tensors, and
layout-preserving kernels (elementwise, pooling, ...) keep them, so a network runs channels-last from its first
convolution to its last without conversions in between.
"""

from __future__ import annotations

import numpy as np


def is_channels_last(x: np.ndarray) -> bool:
    """True for a 4-D array whose memory is dense in N, H, W, C order (C-contiguous as NHWC)."""
    return x.ndim == 4 and x.transpose(0, 2, 3, 1).flags.c_contiguous and not _trivially_nchw(x)


def _trivially_nchw(x: np.ndarray) -> bool:
    # With C == 1 or H == W == 1 both orders coincide; call such arrays NCHW (C-contiguous) when they are.
    return x.flags.c_contiguous and (x.shape[1] == 1 or x.shape[2] * x.shape[3] == 1)


def nhwc_view(x: np.ndarray) -> np.ndarray | None:
    """x (N, C, H, W) as a C-contiguous (N, H, W, C) view, or None if its memory is not in that order."""
    if x.ndim != 4:
        return None
    view = x.transpose(0, 2, 3, 1)
    return view if view.flags.c_contiguous else None


def spatial_view(x: np.ndarray) -> tuple[np.ndarray, int, bool]:
    """(array, H axis, whether it is an NHWC view) for kernels that work on the two spatial axes: a
    channels-last x as its NHWC view (H axis 1, W axis 2, channels contiguous last), anything else as it is
    (H and W its last two axes). Results computed on the NHWC view go back with from_nhwc."""
    if is_channels_last(x):
        return x.transpose(0, 2, 3, 1), 1, True
    return x, x.ndim - 2, False


def fits_out(out: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype) -> bool:
    """Whether a kernel with an out variant may write its result (of `shape` and `dtype`) into `out`, a buffer of
    the memory plan: exactly that shape and dtype, and writeable. A kernel ignores any other `out` and allocates,
    so that a stale plan is never wrong, only unused. Any memory layout is written correctly; the plan gives the
    layout the kernel would have chosen (C order, or channels-last for what it returns channels-last)."""
    return (isinstance(out, np.ndarray) and out.shape == tuple(shape) and out.dtype == dtype
            and out.flags.writeable)


def to_nhwc(x: np.ndarray, dtype: np.dtype | None = None) -> np.ndarray:
    """x (N, C, H, W) as C-contiguous (N, H, W, C): a view when already channels-last, else one copy."""
    view = x.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(view, dtype=dtype)


def from_nhwc(y: np.ndarray) -> np.ndarray:
    """A C-contiguous (N, H, W, C) array as the (N, C, H, W) channels-last tensor the graph sees (a view)."""
    return y.transpose(0, 3, 1, 2)


def empty_like_layout(x: np.ndarray, shape: tuple[int, ...] | None = None, dtype=None) -> np.ndarray:
    """A new (N, C, H, W) array of `shape` (default x's) in x's layout: channels-last if x is, else C order."""
    shape = tuple(x.shape if shape is None else shape)
    dtype = x.dtype if dtype is None else dtype
    if len(shape) == 4 and x.ndim == 4 and is_channels_last(x):
        n, c, h, w = shape
        return np.empty((n, h, w, c), dtype=dtype).transpose(0, 3, 1, 2)
    return np.empty(shape, dtype=dtype)


def dense_order(x: np.ndarray) -> tuple[int, ...] | None:
    """The axis permutation p for which x.transpose(p) is C-contiguous (its memory order), or None if x is not
    dense in any order (a slice with gaps, a broadcast, negative strides)."""
    if x.flags.c_contiguous:
        return tuple(range(x.ndim))
    if is_channels_last(x):  # the common case, without sorting
        return 0, 2, 3, 1
    order = tuple(sorted(range(x.ndim), key=lambda a: -x.strides[a]))
    return order if x.transpose(order).flags.c_contiguous else None


def flat_pair(x: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """x and out (same shape) as 1-D views that pair element for element, when both are dense in one memory
    order (both NCHW, both channels-last, ...); None otherwise."""
    if x.shape != out.shape:
        return None
    order = dense_order(x)
    if order is None or not out.transpose(order).flags.c_contiguous:
        return None
    return x.transpose(order).reshape(-1), out.transpose(order).reshape(-1)


# Elements in one row of tiled per-channel values: long enough that a ufunc's per-row overhead vanishes
# (measured: rows of 8-16 K elements beat both shorter rows and NumPy's own per-pixel loops).
_TILE = 8192
# Below this many elements NumPy's own loop (C elements per pixel) is as fast as tiling, whose setup costs ~10 us.
_TILE_MIN_SIZE = 1 << 17


def _per_channel_rows(y: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """y as an (N or 1, C) matrix when it broadcasts to the 4-D `shape` varying only along N and C."""
    n, c = shape[:2]
    if y.ndim > 4 or c == 1:
        return None
    padded = (1,) * (4 - y.ndim) + y.shape
    if padded[1] != c or padded[2:] != (1, 1) or padded[0] not in (1, n):
        return None
    return np.ascontiguousarray(y.reshape(padded[0], c))


def channel_broadcast(ufunc: np.ufunc, a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None
                      ) -> np.ndarray | None:
    """ufunc(a, b) when one operand is channels-last (N, C, H, W) and the other varies only along N and C
    ((N, C, 1, 1), (C, 1, 1), ...); else None, and the caller runs the plain ufunc.

    NumPy handles this case with an inner loop of only C elements per pixel (several times slower than NCHW,
    where the per-channel value is broadcast along H * W). Here the per-channel values are tiled into rows of
    about _TILE elements and the NHWC view is processed as such rows: long contiguous inner loops. out, if
    given, must be channels-last of the result's shape (it may be a or b). The result is channels-last. Small
    images are left to NumPy, whose result (order 'K') is channels-last too.
    """
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)) or max(a.size, b.size) < _TILE_MIN_SIZE:
        return None
    if is_channels_last(a) and (rows := _per_channel_rows(b, a.shape)) is not None:
        x, x_first = a, True
    elif is_channels_last(b) and (rows := _per_channel_rows(a, b.shape)) is not None:
        x, x_first = b, False
    else:
        return None
    n, c, h, w = x.shape
    if out is None:
        out = empty_like_layout(x, dtype=ufunc.resolve_dtypes((a.dtype, b.dtype, None))[-1])
    elif out.shape != x.shape or not is_channels_last(out):
        return None
    src = x.transpose(0, 2, 3, 1).reshape(n, h * w * c)
    dst = out.transpose(0, 2, 3, 1).reshape(n, h * w * c)
    per_row = max(1, _TILE // c)  # pixels per tiled row
    groups, rest = divmod(h * w, per_row)
    full = groups * per_row * c

    def run(x_part: np.ndarray, y_part: np.ndarray, out_part: np.ndarray) -> None:
        if x_first:
            ufunc(x_part, y_part, out=out_part)
        else:
            ufunc(y_part, x_part, out=out_part)

    if groups:
        tiled = np.empty((rows.shape[0], per_row, c), dtype=rows.dtype)
        tiled[...] = rows[:, None, :]
        run(src[:, :full].reshape(n, groups, -1), tiled.reshape(-1, 1, per_row * c),
            dst[:, :full].reshape(n, groups, -1))
    if rest:
        run(src[:, full:].reshape(n, rest, c), rows[:, None, :], dst[:, full:].reshape(n, rest, c))
    return out
