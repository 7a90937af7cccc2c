"""Pooling kernels (max, average, adaptive; 1-D, 2-D and 3-D) over the spatial axes of NCHW or channels-last arrays
(NCDHW for 3-D)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ptlite.backends.numpy import kernel

from ._args import expand
from ._layout import fits_out, from_nhwc, spatial_view
from ._sums import fast_sum


def _lowest(dtype: np.dtype):
    """The value padding must have so that max() ignores it."""
    if np.issubdtype(dtype, np.floating):
        return -np.inf
    if dtype == np.bool_:
        return False
    return np.iinfo(dtype).min


def pool_out_size(size: int, k: int, stride: int, pad: int, dilation: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output size; in ceil mode the last window must start inside the input or left pad."""
    if pad > (dilation * (k - 1) + 1) // 2:
        raise ValueError(f"pad {pad} should be at most half of the kernel extent {dilation * (k - 1) + 1}")
    span = size + 2 * pad - dilation * (k - 1) - 1
    out = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= size + pad:
        out -= 1
    if out <= 0:
        raise ValueError(f"pooling output size {out} is not positive (input {size}, kernel {k})")
    return out


def _given(stride) -> bool:
    """stride=[] (or None) means 'same as the kernel size'."""
    return stride is not None and not (isinstance(stride, (list, tuple)) and len(stride) == 0)


def _pool_args(kernel_size, stride, padding, dilation):
    k = expand(kernel_size, 2, "kernel_size")
    s = expand(stride, 2, "stride") if _given(stride) else k
    return k, s, expand(padding, 2, "padding"), expand(dilation, 2, "dilation")


def _grid(g: np.ndarray, nhwc: bool) -> np.ndarray:
    """A per-output-position (Ho, Wo) array shaped to broadcast against pooled NCHW or NHWC data."""
    return g[:, :, None] if nhwc else g


def _pad_hw(x, ax: int, top: int, bottom: int, left: int, right: int, value) -> np.ndarray:
    """x in a new buffer grown (or, for negative sizes, cropped) per side along axes ax (H) and ax + 1 (W),
    borders set to value; only the borders are written besides the one copy of the interior."""
    if top == bottom == left == right == 0:
        return x
    h, w = x.shape[ax], x.shape[ax + 1]
    hp, wp = h + top + bottom, w + left + right
    out = np.empty(x.shape[:ax] + (hp, wp) + x.shape[ax + 2:], dtype=x.dtype)
    r0, r1 = max(0, -top), min(h, hp - top)
    c0, c1 = max(0, -left), min(w, wp - left)
    dr, dc, nr, nc = r0 + top, c0 + left, r1 - r0, c1 - c0
    lead = (slice(None),) * ax
    rows = slice(dr, dr + nr)
    out[lead + (slice(0, dr),)] = value
    out[lead + (slice(dr + nr, None),)] = value
    out[lead + (rows, slice(0, dc))] = value
    out[lead + (rows, slice(dc + nc, None))] = value
    out[lead + (rows, slice(dc, dc + nc))] = x[lead + (slice(r0, r1), slice(c0, c1))]
    return out


def _window_buffer(x, ax, k, s, p, d, out_hw, value):
    """x padded with value so that every window of the output is in range (rows/cols never read cut off)."""
    h, w = x.shape[ax], x.shape[ax + 1]
    need_h = (out_hw[0] - 1) * s[0] + d[0] * (k[0] - 1) + 1
    need_w = (out_hw[1] - 1) * s[1] + d[1] * (k[1] - 1) + 1
    if p[0] == p[1] == 0 and need_h <= h and need_w <= w:
        return x  # windows never reach past the input: no copy
    return _pad_hw(x, ax, p[0], need_h - h - p[0], p[1], need_w - w - p[1], value)


def _taps(buf, axis: int, k: int, s: int, d: int, n_out: int):
    """The k shifted, strided views of buf along axis whose elementwise reduction pools that axis."""
    lead = (slice(None),) * axis
    for i in range(k):
        yield buf[lead + (slice(i * d, i * d + s * (n_out - 1) + 1, s),)]


def _reduce_views(views, ufunc, into: np.ndarray | None = None) -> np.ndarray:
    """ufunc-fold of equally shaped views into `into`, or a fresh array (the first call allocates it, in their
    layout)."""
    first = next(views)
    second = next(views, None)
    if second is None:
        if into is None:
            return np.array(first, copy=True)
        np.copyto(into, first)
        return into
    out = ufunc(first, second, out=into)
    for v in views:
        ufunc(out, v, out=out)
    return out


def _separable_reduce(buf, ax, k, s, d, out_hw, ufunc, rows_first: bool, into: np.ndarray | None = None):
    """Reduce windows along W then H (NCHW), or H then W (NHWC, rows_first: each H tap is a view whose W * C
    elements are contiguous, so the bigger first pass runs long inner loops), with np.maximum or np.add; the
    second pass writes into `into` when given."""
    passes = [(ax, 0), (ax + 1, 1)] if rows_first else [(ax + 1, 1), (ax, 0)]
    out = buf
    for n, (axis, i) in enumerate(passes):
        out = _reduce_views(_taps(out, axis, k[i], s[i], d[i], out_hw[i]), ufunc, into if n == 1 else None)
    return out


def _max_pool_geometry(x, ax, kernel_size, stride, padding, dilation, ceil_mode):
    k, s, p, d = _pool_args(kernel_size, stride, padding, dilation)
    h, w = x.shape[ax], x.shape[ax + 1]
    out_hw = (pool_out_size(h, k[0], s[0], p[0], d[0], ceil_mode),
              pool_out_size(w, k[1], s[1], p[1], d[1], ceil_mode))
    return k, s, p, d, out_hw


@kernel("aten::max_pool2d")
def max_pool2d(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False, *, out=None):
    """Max over the taps of strided views of a padded buffer; channels-last in, channels-last out (into `out`, and
    returned, when it has the result's shape and dtype)."""
    x, ax, nhwc = spatial_view(self)
    k, s, p, d, out_hw = _max_pool_geometry(x, ax, kernel_size, stride, padding, dilation, ceil_mode)
    if out is not None and not fits_out(out, self.shape[:-2] + out_hw, self.dtype):
        out = None
    buf = _window_buffer(x, ax, k, s, p, d, out_hw, _lowest(x.dtype))
    into = None if out is None else out.transpose(0, 2, 3, 1) if nhwc else out
    result = _separable_reduce(buf, ax, k, s, d, out_hw, np.maximum, rows_first=nhwc, into=into)
    if out is not None:
        return out
    return from_nhwc(result) if nhwc else result


def _first_valid(n_out: int, s: int, p: int, d: int) -> np.ndarray:
    """Per output position, the first input index of its window that is not padding."""
    start = np.arange(n_out) * s - p
    return np.where(start < 0, start - (start // d) * d, start)


@kernel("aten::max_pool2d_with_indices")
def max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """Max pooling that also returns, per output, the flat index h * W + w of the maximum in its plane."""
    x, ax, nhwc = spatial_view(self)
    k, s, p, d, (ho, wo) = _max_pool_geometry(x, ax, kernel_size, stride, padding, dilation, ceil_mode)
    w = x.shape[ax + 1]
    buf = _window_buffer(x, ax, k, s, p, d, (ho, wo), _lowest(x.dtype))
    best = np.full(x.shape[:ax] + (ho, wo) + x.shape[ax + 2:], _lowest(x.dtype), dtype=x.dtype)
    first = _first_valid(ho, s[0], p[0], d[0])[:, None] * w + _first_valid(wo, s[1], p[1], d[1])[None, :]
    index = np.broadcast_to(_grid(first, nhwc), best.shape).copy()
    rows, cols = np.arange(ho) * s[0] - p[0], np.arange(wo) * s[1] - p[1]
    floating = np.issubdtype(x.dtype, np.floating)
    for i, row_view in enumerate(_taps(buf, ax, k[0], s[0], d[0], ho)):
        for j, view in enumerate(_taps(row_view, ax + 1, k[1], s[1], d[1], wo)):
            take = view > best
            if floating:
                take |= np.isnan(view)
            np.copyto(best, view, where=take)
            tap_index = (rows + i * d[0])[:, None] * w + (cols + j * d[1])[None, :]
            np.copyto(index, _grid(tap_index, nhwc), where=take)
    index = index.astype(np.int64, copy=False)
    return (from_nhwc(best), from_nhwc(index)) if nhwc else (best, index)


@kernel("aten::max_pool1d")
def max_pool1d(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    k = expand(kernel_size, 1, "kernel_size")[0]
    s = expand(stride, 1, "stride")[0] if _given(stride) else k
    out = max_pool2d(self[..., None, :], [1, k], [1, s], [0, expand(padding, 1)[0]],
                     [1, expand(dilation, 1)[0]], ceil_mode)
    return out[..., 0, :]


def _avg_divisors(size, k, s, p, n_out, count_include_pad):
    """Per output position along one axis: window length counting padding (clipped at size + pad), or not."""
    start = np.arange(n_out) * s - p
    end = np.minimum(start + k, size + p)
    if count_include_pad:
        return end - start
    return np.minimum(end, size) - np.maximum(start, 0)


@kernel("aten::avg_pool2d")
def avg_pool2d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    x, ax, nhwc = spatial_view(self)
    k, s, p, _ = _pool_args(kernel_size, stride, padding, 1)
    d = (1, 1)
    h, w = x.shape[ax], x.shape[ax + 1]
    out_hw = (pool_out_size(h, k[0], s[0], p[0], 1, ceil_mode),
              pool_out_size(w, k[1], s[1], p[1], 1, ceil_mode))
    buf = _window_buffer(x, ax, k, s, p, d, out_hw, 0)
    out = _separable_reduce(buf, ax, k, s, d, out_hw, np.add, rows_first=nhwc)
    if divisor_override:
        divisor = np.asarray(divisor_override, dtype=out.dtype)
    else:
        dh = _avg_divisors(h, k[0], s[0], p[0], out_hw[0], count_include_pad)
        dw = _avg_divisors(w, k[1], s[1], p[1], out_hw[1], count_include_pad)
        divisor = _grid((dh[:, None] * dw[None, :]).astype(out.dtype), nhwc)
    if np.issubdtype(out.dtype, np.floating):
        np.divide(out, divisor, out=out)
    else:
        out = (out // divisor).astype(x.dtype)
    return from_nhwc(out) if nhwc else out


@kernel("aten::avg_pool1d")
def avg_pool1d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True):
    k = expand(kernel_size, 1, "kernel_size")[0]
    s = expand(stride, 1, "stride")[0] if _given(stride) else k
    out = avg_pool2d(self[..., None, :], [1, k], [1, s], [0, expand(padding, 1)[0]], ceil_mode,
                     count_include_pad, None)
    return out[..., 0, :]


def adaptive_bounds(size: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's adaptive windows: start = floor(i * size / n), end = ceil((i + 1) * size / n)."""
    i = np.arange(n_out)
    return (i * size) // n_out, -((-(i + 1) * size) // n_out)


def _averaging_matrix(size: int, n_out: int, dtype) -> np.ndarray:
    """(n_out, size) matrix whose row i averages the i-th adaptive window."""
    start, end = adaptive_bounds(size, n_out)
    pos = np.arange(size)
    inside = (pos[None, :] >= start[:, None]) & (pos[None, :] < end[:, None])
    return (inside / (end - start)[:, None]).astype(dtype)


def _output_hw(x, output_size) -> tuple[int, int]:
    """Adaptive output size; None entries (allowed by TorchScript's F.adaptive_*) keep the input size."""
    size = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size]
    if len(size) == 1:
        size = size * 2
    h, w = x.shape[-2:]
    return (h if size[0] is None else int(size[0])), (w if size[1] is None else int(size[1]))


def _adaptive_avg_nhwc(v: np.ndarray, ho: int, wo: int) -> np.ndarray:
    """Adaptive average pooling of a C-contiguous (N, H, W, C) array into a new (N, ho, wo, C) one."""
    n, h, w, c = v.shape
    if h % ho == 0 and w % wo == 0:
        return v.reshape(n, ho, h // ho, wo, w // wo, c).mean(axis=(2, 4), dtype=v.dtype)
    # General sizes: average along W with a batched product, then along H on rows of W * C contiguous values.
    a_h, a_w = _averaging_matrix(h, ho, v.dtype), _averaging_matrix(w, wo, v.dtype)
    cols = np.matmul(a_w, v.reshape(n * h, w, c))
    return np.matmul(a_h, cols.reshape(n, h, wo * c)).reshape(n, ho, wo, c)


@kernel("aten::adaptive_avg_pool2d",
        "aten::_adaptive_avg_pool2d")
def adaptive_avg_pool2d(self, output_size, *, out=None):
    """Adaptive average pooling; into `out` (returned) when it has the result's shape and dtype: global pooling of
    a channels-last image divides into it, other cases copy their (pooled, so smaller) result there."""
    ho, wo = _output_hw(self, output_size)
    h, w = self.shape[-2:]
    x = self if np.issubdtype(self.dtype, np.floating) else self.astype(np.float32)
    if out is not None and not fits_out(out, x.shape[:-2] + (ho, wo), x.dtype):
        out = None
    v, _, nhwc = spatial_view(x)
    if nhwc and (ho, wo) == (1, 1):  # global pooling: column sums of the (H * W, C) pixel matrix
        total = fast_sum(x, (2, 3), keepdims=True)
        return np.true_divide(total, x.dtype.type(h * w), out=total if out is None else out)
    result = _adaptive_avg_pool2d(x, v, nhwc, ho, wo)
    if out is None:
        return result
    np.copyto(out, result)
    return out


def _adaptive_avg_pool2d(x: np.ndarray, v: np.ndarray, nhwc: bool, ho: int, wo: int) -> np.ndarray:
    """adaptive_avg_pool2d's paths other than global pooling of a channels-last image, into a new array."""
    h, w = x.shape[-2:]
    if nhwc:
        return from_nhwc(_adaptive_avg_nhwc(v, ho, wo))
    lead = x.shape[:-2]
    if (ho, wo) == (1, 1):
        flat = x.reshape(lead + (h * w,))
        return (np.add.reduce(flat, axis=-1, keepdims=True) / (h * w)).astype(x.dtype).reshape(lead + (1, 1))
    if h % ho == 0 and w % wo == 0:
        blocks = x.reshape(lead + (ho, h // ho, wo, w // wo))
        return blocks.mean(axis=(-3, -1), dtype=x.dtype)
    # General sizes: out = A_h @ x @ A_w^T with per-axis averaging matrices (two BLAS calls).
    a_h, a_w = _averaging_matrix(h, ho, x.dtype), _averaging_matrix(w, wo, x.dtype)
    cols = np.matmul(x.reshape(-1, w), a_w.T).reshape(-1, h, wo)
    return np.matmul(a_h, cols).reshape(lead + (ho, wo))


@kernel("aten::adaptive_avg_pool1d")
def adaptive_avg_pool1d(self, output_size):
    return adaptive_avg_pool2d(self[..., None, :], [1, expand(output_size, 1)[0]])[..., 0, :]


def _window_index(size: int, n_out: int) -> np.ndarray:
    """(n_out, longest window) input indices of each adaptive window; short ones repeat their last index."""
    start, end = adaptive_bounds(size, n_out)
    longest = int((end - start).max())
    idx = start[:, None] + np.arange(longest)[None, :]
    return np.minimum(idx, (end - 1)[:, None])


@kernel("aten::adaptive_max_pool2d")
def adaptive_max_pool2d(self, output_size):
    """Gathers every adaptive window (padded by repeating an index, harmless to max) and reduces it."""
    ho, wo = _output_hw(self, output_size)
    x, ax, nhwc = spatial_view(self)
    h, w = x.shape[ax], x.shape[ax + 1]
    ih, iw = _window_index(h, ho), _window_index(w, wo)
    lh, lw = ih.shape[1], iw.shape[1]
    win = x.take(ih.ravel(), axis=ax).take(iw.ravel(), axis=ax + 1)
    flat = (ih[:, None, :, None] * w + iw[None, :, None, :]).reshape(ho, wo, lh * lw)
    if nhwc:  # windows on axis 3, channels stay contiguous last
        n, c = x.shape[0], x.shape[3]
        win = win.reshape(n, ho, lh, wo, lw, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, ho, wo, lh * lw, c)
        axis, flat = 3, flat[..., None]
    else:
        lead = x.shape[:-2]
        win = win.reshape(lead + (ho, lh, wo, lw))
        win = np.moveaxis(win, -3, -2).reshape(lead + (ho, wo, lh * lw))
        axis = -1
    arg = np.expand_dims(np.argmax(win, axis=axis), axis)
    values = np.take_along_axis(win, arg, axis=axis).squeeze(axis)
    index = np.take_along_axis(np.broadcast_to(flat, win.shape), arg, axis=axis).squeeze(axis).astype(np.int64)
    return (from_nhwc(values), from_nhwc(index)) if nhwc else (values, index)


@kernel("aten::adaptive_max_pool1d")
def adaptive_max_pool1d(self, output_size):
    values, index = adaptive_max_pool2d(self[..., None, :], [1, expand(output_size, 1)[0]])
    return values[..., 0, :], index[..., 0, :]


# ------------------------------------------------------------------------------------------------ 3-D
# Pooling over the last three axes (D, H, W) of (N, C, D, H, W) or (C, D, H, W) arrays, in whatever memory order
# they come (3-D tensors are never channels-last here: no kernel makes them so).

def _pool3d_args(kernel_size, stride, padding, dilation):
    k = expand(kernel_size, 3, "kernel_size")
    s = expand(stride, 3, "stride") if _given(stride) else k
    return k, s, expand(padding, 3, "padding"), expand(dilation, 3, "dilation")


def _spatial3d(x: np.ndarray, what: str) -> int:
    """The D axis of a 4-D or 5-D input; ValueError naming the operator for other ranks."""
    if x.ndim not in (4, 5):
        raise ValueError(f"{what} expects a 4-D (C, D, H, W) or 5-D (N, C, D, H, W) input, got shape "
                         f"{tuple(x.shape)}")
    return x.ndim - 3


def _pad_axes(x: np.ndarray, ax: int, before: Sequence[int], after: Sequence[int], value) -> np.ndarray:
    """x in a new buffer grown by before / after (>= 0) along axes ax, ax + 1, ..., the border set to value; x
    itself when nothing is added."""
    if not any(before) and not any(after):
        return x
    sizes = x.shape[ax:ax + len(before)]
    padded = tuple(size + b + a for size, b, a in zip(sizes, before, after, strict=True))
    out = np.full(x.shape[:ax] + padded + x.shape[ax + len(before):], value, dtype=x.dtype)
    out[(slice(None),) * ax + tuple(slice(b, b + size) for size, b in zip(sizes, before, strict=True))] = x
    return out


def _pool3d_geometry(x, ax, k, s, p, d, ceil_mode):
    """Output sizes, and the padding after the input's end that the last windows (ceil mode) reach into."""
    outs = tuple(pool_out_size(x.shape[ax + i], k[i], s[i], p[i], d[i], ceil_mode) for i in range(3))
    need = [(outs[i] - 1) * s[i] + d[i] * (k[i] - 1) + 1 for i in range(3)]
    return outs, [max(0, need[i] - x.shape[ax + i] - p[i]) for i in range(3)]


def _reduce3d(buf, ax, k, s, d, outs, ufunc):
    """Windows reduced along D, then H, then W (each pass over views whose inner axes stay contiguous longest)."""
    out = buf
    for i in range(3):
        out = _reduce_views(_taps(out, ax + i, k[i], s[i], d[i], outs[i]), ufunc)
    return out


@kernel("aten::max_pool3d")
def max_pool3d(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """Max over kernel taps, axis by axis (max of a box is the max of its rows' maxima), on a -inf padded copy."""
    ax = _spatial3d(self, "max_pool3d")
    k, s, p, d = _pool3d_args(kernel_size, stride, padding, dilation)
    outs, after = _pool3d_geometry(self, ax, k, s, p, d, ceil_mode)
    buf = _pad_axes(self, ax, p, after, _lowest(self.dtype))
    return _reduce3d(buf, ax, k, s, d, outs, np.maximum)


@kernel("aten::max_pool3d_with_indices")
def max_pool3d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    """Max pooling that also returns, per output, the flat index (d * H + h) * W + w of the maximum in its volume:
    the first maximum in window order (a NaN wins, as in PyTorch); a window of -inf points at its first input."""
    ax = _spatial3d(self, "max_pool3d_with_indices")
    k, s, p, d = _pool3d_args(kernel_size, stride, padding, dilation)
    outs, after = _pool3d_geometry(self, ax, k, s, p, d, ceil_mode)
    sizes = self.shape[ax:]
    buf = _pad_axes(self, ax, p, after, _lowest(self.dtype))
    best = np.full(self.shape[:ax] + outs, _lowest(self.dtype), dtype=self.dtype)
    starts = [np.arange(outs[i]) * s[i] - p[i] for i in range(3)]

    def flat(per_axis):  # per-axis input positions -> flat indices over the (Do, Ho, Wo) grid
        return (per_axis[0][:, None, None] * sizes[1] + per_axis[1][None, :, None]) * sizes[2] \
            + per_axis[2][None, None, :]

    index = np.broadcast_to(flat([_first_valid(outs[i], s[i], p[i], d[i]) for i in range(3)]), best.shape).copy()
    floating = np.issubdtype(self.dtype, np.floating)
    lead = (slice(None),) * ax
    for tap in np.ndindex(*k):
        view = buf[lead + tuple(slice(t * d[i], t * d[i] + s[i] * (outs[i] - 1) + 1, s[i])
                                for i, t in enumerate(tap))]
        take = view > best
        if floating:
            take |= np.isnan(view)
        np.copyto(best, view, where=take)
        np.copyto(index, np.broadcast_to(flat([starts[i] + t * d[i] for i, t in enumerate(tap)]), best.shape),
                  where=take)
    return best, index.astype(np.int64, copy=False)


@kernel("aten::avg_pool3d")
def avg_pool3d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Window sums axis by axis on a zero-padded copy, divided by the window's size (PyTorch's: padding counted up
    to the padded input's end, or not at all; or divisor_override)."""
    ax = _spatial3d(self, "avg_pool3d")
    k, s, p, _ = _pool3d_args(kernel_size, stride, padding, 1)
    d = (1, 1, 1)
    outs, after = _pool3d_geometry(self, ax, k, s, p, d, ceil_mode)
    out = _reduce3d(_pad_axes(self, ax, p, after, 0), ax, k, s, d, outs, np.add)
    if divisor_override:
        divisor = np.asarray(divisor_override, dtype=out.dtype)
    else:
        per_axis = [_avg_divisors(self.shape[ax + i], k[i], s[i], p[i], outs[i], count_include_pad)
                    for i in range(3)]
        divisor = (per_axis[0][:, None, None] * per_axis[1][None, :, None] * per_axis[2][None, None, :])
        divisor = divisor.astype(out.dtype)
    if np.issubdtype(out.dtype, np.floating):
        np.divide(out, divisor, out=out)
        return out
    return (out // divisor).astype(self.dtype)


def _output3d(x: np.ndarray, output_size) -> tuple[int, int, int]:
    """Adaptive output size; None entries (allowed by F.adaptive_*) keep the input size."""
    size = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size]
    if len(size) == 1:
        size = size * 3
    if len(size) != 3:
        raise ValueError(f"output_size must have 1 or 3 values, got {list(size)}")
    return tuple(x.shape[x.ndim - 3 + i] if v is None else int(v) for i, v in enumerate(size))


@kernel("aten::adaptive_avg_pool3d",
        "aten::_adaptive_avg_pool3d")
def adaptive_avg_pool3d(self, output_size):
    """Global pooling as one sum per plane; evenly dividing sizes as a blocked mean; others by one averaging matrix
    per axis (PyTorch's windows: floor(i * size / n) to ceil((i + 1) * size / n))."""
    ax = _spatial3d(self, "adaptive_avg_pool3d")
    outs = _output3d(self, output_size)
    x = self if np.issubdtype(self.dtype, np.floating) else self.astype(np.float32)
    lead, sizes = x.shape[:ax], x.shape[ax:]
    if outs == (1, 1, 1):
        total = np.add.reduce(x.reshape(lead + (-1,)), axis=-1, dtype=x.dtype)
        return np.true_divide(total, x.dtype.type(math.prod(sizes)), out=total)[..., None, None, None]
    if all(size % n == 0 for size, n in zip(sizes, outs)):
        blocks = x.reshape(lead + tuple(v for size, n in zip(sizes, outs) for v in (n, size // n)))
        return blocks.mean(axis=tuple(range(ax + 1, ax + 6, 2)), dtype=x.dtype)
    out = x
    for i, (size, n) in enumerate(zip(sizes, outs)):  # out = A_d, A_h, A_w each applied along its axis
        moved = np.moveaxis(out, ax + i, -2)
        out = np.moveaxis(np.matmul(_averaging_matrix(size, n, x.dtype), moved), -2, ax + i)
    return np.ascontiguousarray(out)


@kernel("aten::adaptive_max_pool3d")
def adaptive_max_pool3d(self, output_size):
    """Every adaptive window gathered (short ones padded by repeating an index, harmless to max) and reduced; the
    indices are flat (d * H + h) * W + w in the input's volume, the first maximum's."""
    ax = _spatial3d(self, "adaptive_max_pool3d")
    outs = _output3d(self, output_size)
    lead, sizes = self.shape[:ax], self.shape[ax:]
    windows = [_window_index(size, n) for size, n in zip(sizes, outs)]  # (n_out, longest) each
    win = self
    for i, idx in enumerate(windows):
        win = win.take(idx.ravel(), axis=ax + i)
    (do, ld), (ho, lh), (wo, lw) = (w.shape for w in windows)
    win = win.reshape(lead + (do, ld, ho, lh, wo, lw))
    order = tuple(range(ax)) + tuple(ax + i for i in (0, 2, 4, 1, 3, 5))
    win = win.transpose(order).reshape(lead + (do, ho, wo, ld * lh * lw))
    flat = (windows[0][:, None, None, :, None, None] * sizes[1] + windows[1][None, :, None, None, :, None]) \
        * sizes[2] + windows[2][None, None, :, None, None, :]
    flat = flat.reshape(do, ho, wo, ld * lh * lw)
    arg = np.argmax(win, axis=-1)[..., None]
    values = np.take_along_axis(win, arg, axis=-1)[..., 0]
    index = np.take_along_axis(np.broadcast_to(flat, win.shape), arg, axis=-1)[..., 0].astype(np.int64)
    return values, index
