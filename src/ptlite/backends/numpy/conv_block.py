"""A pointwise (1x1) convolution feeding a depthwise one, run in bands of output rows so that the expanded tensor
between them never leaves the cache (MobileNet's and EfficientNet's inverted-residual blocks).

The `FUSE_POINTWISE_DEPTHWISE` pass makes `ptlite::conv2d_pointwise_depthwise` from two prepacked convolutions
(their fused activations included) when the depthwise one is the pointwise one's only user. Run separately, the
expanded tensor (6x the block's channels, the largest in these networks) goes through memory five times: written
by the matrix product, read and written by the bias and by the activation, read and written again into the
depthwise's padded copy. Here, for each band of output rows, the matrix product fills a small buffer, the bias add
copies it into the band's zero-bordered input (one pass doing both), the activation runs on that in place, and the
depthwise sums, bias and activation follow while everything is in cache: each expanded value is written once, to
cache, and the depthwise output is written once to memory.

With a relu or clamp after the pointwise convolution, its bias b is not added at all: the band holds
act(g + b) - b, which is clip(g, lo - b, hi - b), one np.maximum / np.minimum pass each against a bound row (NumPy's
vectorised path, where clip with array bounds is not) writing straight from the product into the band. The
depthwise sums of the b taken out (zero where a tap reads padding, so it depends on the output position only near
the border) are added back with the depthwise bias: a handful of distinct bias rows, computed once per weights and
image size. That saves a pass over the expanded tensor; the rounding differs from adding b first by about float
epsilon times |b| times the taps' sum.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.ops import CONV2D_POINTWISE_DEPTHWISE

from ._derived import derived
from ._fastnp import tile_row
from ._layout import to_nhwc
from .prepacked import (
    BLOCK,
    apply_activation,
    check_activation,
    conv_out_size,
    depthwise_sum,
    depthwise_taps,
    image_call,
    nhwc_result,
)

# Size of one band's padded input (bytes): about half of a typical L2 cache, so that it, the matrix product's
# output and the band's depthwise output stay in cache together.
BAND_BYTES = 1 << 20


class _Plan:
    """What a call of pointwise_depthwise_nhwc derives from its weights, geometry and input shape alone: computed
    once and kept by `derived` (the derived rows and taps cost ~50-90 us a call to remake, ~3 % of MobileNetV2's
    run). A plain class: a dataclass would cost ~2 ms at import, which loading a program pays."""

    __slots__ = ("dtype", "out_hw", "band", "bounds", "pw_tiled", "dw_rows", "dw_runs", "taps")

    def __init__(self, dtype: np.dtype, out_hw: tuple[int, int], band: int,
                 bounds: tuple[np.ndarray | None, np.ndarray | None] | None, pw_tiled: np.ndarray | None,
                 dw_rows: np.ndarray, dw_runs: list[tuple[int, int, int]], taps: np.ndarray) -> None:
        self.dtype = dtype
        self.out_hw = out_hw
        self.band = band  # output rows per band
        self.bounds = bounds  # shifted clamp bounds (see the module doc)
        self.pw_tiled = pw_tiled  # the pointwise bias tiled to a row (when not shifted)
        self.dw_rows = dw_rows  # depthwise bias rows
        self.dw_runs = dw_runs  # output rows [start, stop) that add dw_rows[row]
        self.taps = taps  # depthwise_taps


def pointwise_depthwise_nhwc(xh: np.ndarray, pw_weight: np.ndarray, pw_bias: np.ndarray | None,
                             pw_activation: str, pw_args: Sequence[float], dw_weight: np.ndarray,
                             dw_bias: np.ndarray | None, kernel_hw: Sequence[int], stride: Sequence[int],
                             pads: Sequence[int], dilation: Sequence[int], activation: str, args: Sequence[float],
                             out: np.ndarray | None = None) -> np.ndarray:
    """depthwise(act(pointwise(xh))) of C-contiguous NHWC xh, as C-contiguous NHWC (`out` when it fits).
    pw_weight (C, E) and dw_weight (kh*kw, E) are prepacked; pads: top, bottom, left, right."""
    key = (xh.shape, xh.dtype.str, pw_weight.shape, pw_weight.dtype.str, pw_activation, tuple(pw_args), activation,
           tuple(args), tuple(kernel_hw), tuple(stride), tuple(pads), tuple(dilation), BAND_BYTES)
    plan = derived((dw_weight, pw_bias, dw_bias), key, lambda: _make_plan(
        xh.shape, xh.dtype, (pw_weight, pw_bias, dw_weight, dw_bias), pw_activation, pw_args, kernel_hw, stride,
        pads, dilation, activation, args))
    n, h, w, c = xh.shape
    e = pw_weight.shape[1]
    kh = kernel_hw[0]
    sh = stride[0]
    dh = dilation[0]
    top, _, left, right = pads
    (ho, wo), band, dtype = plan.out_hw, plan.band, plan.dtype
    bounds, pw_tiled, dw_rows, dw_runs, taps = plan.bounds, plan.pw_tiled, plan.dw_rows, plan.dw_runs, plan.taps
    xh = xh if xh.dtype == dtype else xh.astype(dtype)
    out = nhwc_result(out, (n, ho, wo, e), dtype)
    wp = w + left + right

    def rows_for(band: int) -> int:  # padded input rows that `band` output rows read
        return (band - 1) * sh + (kh - 1) * dh + 1

    pad = np.empty((1, rows_for(band), wp, e), dtype=dtype)
    pad[:, :, :left] = 0
    pad[:, :, left + w:] = 0
    product = np.empty((rows_for(band) * w, e), dtype=dtype)
    for img in range(n):
        held = (0, 0)  # padded rows [i, j) of this image that pad holds, from its first row
        for r0 in range(0, ho, band):
            nr = min(band, ho - r0)
            rows = rows_for(nr)
            i0 = r0 * sh - top  # padded row (in image coordinates) of the band's first row
            reuse = max(0, held[1] - i0) if held[0] <= i0 < held[1] else 0
            if reuse:  # the rows the previous band shares with this one (the kernel's overlap): moved, not remade
                pad[0, :reuse] = pad[0, i0 - held[0]:i0 - held[0] + reuse]
            held = (i0, i0 + rows)
            p = pad[:, :rows]
            a0, a1 = max(0, i0 + reuse), min(h, i0 + rows)  # the image rows still to compute
            p[0, reuse:max(reuse, min(rows, a0 - i0))] = 0
            p[0, max(reuse, a1 - i0):] = 0
            if a1 > a0:
                m = (a1 - a0) * w
                g = product[:m]
                np.matmul(xh[img, a0:a1].reshape(m, c), pw_weight, out=g)
                inner = p[0, a0 - i0:a1 - i0, left:left + w].reshape(a1 - a0, w * e)
                rows2 = g.reshape(a1 - a0, w * e)
                if bounds is not None:  # act(g + b) - b, straight from the product
                    _clip_rows(rows2, bounds, inner)
                elif pw_tiled is None:
                    np.copyto(inner, rows2)
                    _activate(inner, pw_activation, pw_args)
                else:
                    np.add(rows2, pw_tiled, out=inner)
                    _activate(inner, pw_activation, pw_args)
            block = out[img:img + 1, r0:r0 + nr]
            depthwise_sum(p, taps, kernel_hw, stride, dilation, (nr, wo), block)
            flat = block.reshape(nr, wo * e)
            for start, stop, row in dw_runs:
                if start < r0 + nr and stop > r0:
                    seg = flat[max(start, r0) - r0:min(stop, r0 + nr) - r0]
                    np.add(seg, dw_rows[row], out=seg)
            _activate(flat, activation, args)
    return out


def _make_plan(shape: tuple[int, ...], in_dtype: np.dtype, weights: tuple, pw_activation: str,
               pw_args: Sequence[float], kernel_hw: Sequence[int], stride: Sequence[int], pads: Sequence[int],
               dilation: Sequence[int], activation: str, args: Sequence[float]) -> _Plan:
    """Check the arguments and derive the call's plan (see _Plan)."""
    pw_weight, pw_bias, dw_weight, dw_bias = weights
    check_activation(pw_activation, pw_args)
    check_activation(activation, args)
    n, h, w, c = shape
    e = pw_weight.shape[1]
    kh, kw = kernel_hw
    sh, sw = stride
    dh, dw = dilation
    top, bottom, left, right = pads
    if pw_weight.shape[0] != c or dw_weight.shape != (kh * kw, e):
        raise ValueError(f"conv2d_pointwise_depthwise: input with {c} channels does not match the packed weights "
                         f"{tuple(pw_weight.shape)} and {tuple(dw_weight.shape)} (kernel {kh}x{kw})")
    ho = conv_out_size(h, kh, sh, top, bottom, dh)
    wo = conv_out_size(w, kw, sw, left, right, dw)
    dtype = np.result_type(in_dtype, pw_weight.dtype, dw_weight.dtype)
    row_bytes = (w + left + right) * e * dtype.itemsize
    # the most output rows whose padded input rows ((band - 1) * sh + (kh - 1) * dh + 1) fit in BAND_BYTES
    fit = (BAND_BYTES // row_bytes - (kh - 1) * dh - 1) // sh + 1
    band = max(1, min(ho, fit))
    bounds = _shifted_bounds(pw_bias, pw_activation, pw_args, dtype, w)
    if bounds is None:
        pw_tiled = None if pw_bias is None else tile_row(np.asarray(pw_bias, dtype=dtype), w)
        dw_rows, dw_runs = _plain_bias_rows(dw_bias, dtype, wo, ho)
    else:
        pw_tiled = None
        dw_rows, dw_runs = _shifted_bias_rows(pw_bias, dw_weight, dw_bias, kernel_hw, stride, pads, dilation,
                                              (h, w), (ho, wo), dtype)
    taps = depthwise_taps(dw_weight.astype(dtype, copy=False), kernel_hw, sw, wo)
    if np.may_share_memory(taps, dw_weight):  # a view (strided depthwise) would keep the weight alive
        taps = taps.copy()
    return _Plan(dtype, (ho, wo), band, bounds, pw_tiled, dw_rows, dw_runs, taps)


def _shifted_bounds(pw_bias: np.ndarray | None, activation: str, args: Sequence[float], dtype: np.dtype,
                    w: int) -> tuple[np.ndarray | None, np.ndarray | None] | None:
    """The bound rows (lo - b, hi - b), tiled to a band row of w pixels, that make clip(g, lo - b, hi - b) =
    act(g + b) - b, for a relu or clamp after a pointwise convolution with bias b (None: no such shift)."""
    if pw_bias is None or activation not in ("relu", "clamp") or dtype.kind != "f" or dtype.itemsize < 4:
        return None  # float16 would sum the shifted values (around -b) at half precision: left to the plain path
    lo, hi = (0.0, np.inf) if activation == "relu" else (float(args[0]), float(args[1]))
    if np.isnan(lo) or np.isnan(hi) or lo > hi:
        return None  # torch's clamp semantics for these are left to the plain path
    b = np.asarray(pw_bias, dtype=dtype)
    low = None if lo == -np.inf else tile_row(dtype.type(lo) - b, w)
    high = None if hi == np.inf else tile_row(dtype.type(hi) - b, w)
    return low, high


def _clip_rows(src: np.ndarray, bounds: tuple[np.ndarray | None, np.ndarray | None], dst: np.ndarray) -> None:
    """dst = min(max(src, lo), hi) with the bound rows broadcast over the rows of src (a missing bound is skipped).
    np.maximum / np.minimum take two passes where np.clip with array bounds takes one, but each is several times
    faster than that one (measured: NumPy vectorises only clip's scalar-bound loop)."""
    low, high = bounds
    if low is None and high is None:
        np.copyto(dst, src)
    elif low is None:
        np.minimum(src, high, out=dst)
    else:
        np.maximum(src, low, out=dst)
        if high is not None:
            np.minimum(dst, high, out=dst)


_Runs = list[tuple[int, int, int]]  # output rows [start, stop) that add bias row `row`


def _plain_bias_rows(dw_bias: np.ndarray | None, dtype: np.dtype, wo: int, ho: int) -> tuple[np.ndarray, _Runs]:
    if dw_bias is None:
        return np.empty((0, 0), dtype=dtype), []
    return tile_row(np.asarray(dw_bias, dtype=dtype), wo)[None], [(0, ho, 0)]


def _shifted_bias_rows(pw_bias: np.ndarray, dw_weight: np.ndarray, dw_bias: np.ndarray | None,
                       kernel_hw: Sequence[int], stride: Sequence[int], pads: Sequence[int],
                       dilation: Sequence[int], in_hw: tuple[int, int], out_hw: tuple[int, int],
                       dtype: np.dtype) -> tuple[np.ndarray, _Runs]:
    """The depthwise bias plus the depthwise sums of the pointwise bias b taken out of the band: per output
    position, b times the sum of the taps that read inside the image. Returns distinct rows (k, Wo*E) and the runs
    of output rows using each (interior rows share one row; rows near the top and bottom border get their own)."""
    (kh, kw), (sh, sw), (top, _, left, _), (dh, dw) = kernel_hw, stride, pads, dilation
    (h, w), (ho, wo) = in_hw, out_hw
    e = dw_weight.shape[1]
    ry = np.arange(ho)[:, None] * sh + np.arange(kh)[None, :] * dh - top  # input row of each (output row, tap row)
    qx = np.arange(wo)[:, None] * sw + np.arange(kw)[None, :] * dw - left
    codes = ((ry >= 0) & (ry < h)).astype(np.int64) @ (np.int64(1) << np.arange(kh, dtype=np.int64))
    classes, index = np.unique(codes, return_inverse=True)
    inside_rows = ((classes[:, None] >> np.arange(kh)) & 1).astype(np.float64)  # (k, kh)
    inside_cols = ((qx >= 0) & (qx < w)).astype(np.float64)  # (wo, kw)
    per_col = (inside_rows @ dw_weight.astype(np.float64).reshape(kh, kw * e)).reshape(-1, kw, e)
    rows = np.matmul(inside_cols, per_col) * np.asarray(pw_bias, dtype=np.float64)  # (k, wo, E)
    if dw_bias is not None:
        rows += np.asarray(dw_bias, dtype=np.float64)
    rows = rows.astype(dtype).reshape(len(classes), wo * e)
    index = index.reshape(-1)
    cuts = [0, *(np.flatnonzero(np.diff(index)) + 1).tolist(), ho]
    return rows, [(a, b, int(index[a])) for a, b in zip(cuts[:-1], cuts[1:])]


def _activate(rows: np.ndarray, activation: str, args: Sequence[float]) -> None:
    """apply_activation over a (rows, width) view whose rows are contiguous, in cache-sized row blocks."""
    if activation == "none":
        return
    step = max(1, BLOCK // max(rows.shape[1], 1))
    for a in range(0, rows.shape[0], step):
        apply_activation(rows[a:a + step], activation, args)


@kernel(CONV2D_POINTWISE_DEPTHWISE)
def conv2d_pointwise_depthwise(input, pw_weight, pw_bias, pw_activation, pw_activation_args, dw_weight, dw_bias,
                               kernel_size, stride, padding, dilation, activation="none", activation_args=(), *,
                               out=None):
    """A prepacked 1x1 convolution (weight (C, E)) with its activation, feeding a prepacked depthwise convolution
    (weight (kh*kw, E), padding top, bottom, left, right) with its own; takes (N, C, H, W) or (C, H, W) in any
    layout, returns channels-last (`out` when it is a channels-last array of the result's shape and dtype)."""
    dtype = np.result_type(input.dtype, pw_weight.dtype, dw_weight.dtype)

    def compute(x: np.ndarray, target: np.ndarray | None) -> np.ndarray:
        return pointwise_depthwise_nhwc(to_nhwc(x, dtype), pw_weight, pw_bias, pw_activation, pw_activation_args,
                                        dw_weight, dw_bias, kernel_size, stride, padding, dilation, activation,
                                        activation_args, target)

    return image_call(input, out, compute)
