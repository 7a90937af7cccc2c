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
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ptlite.ir.registry import kernel

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


def pointwise_depthwise_nhwc(xh: np.ndarray, pw_weight: np.ndarray, pw_bias: np.ndarray | None,
                             pw_activation: str, pw_args: Sequence[float], dw_weight: np.ndarray,
                             dw_bias: np.ndarray | None, kernel_hw: Sequence[int], stride: Sequence[int],
                             pads: Sequence[int], dilation: Sequence[int], activation: str, args: Sequence[float],
                             out: np.ndarray | None = None) -> np.ndarray:
    """depthwise(act(pointwise(xh))) of C-contiguous NHWC xh, as C-contiguous NHWC (`out` when it fits).
    pw_weight (C, E) and dw_weight (kh*kw, E) are prepacked; pads: top, bottom, left, right."""
    check_activation(pw_activation, pw_args)
    check_activation(activation, args)
    n, h, w, c = xh.shape
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
    dtype = np.result_type(xh.dtype, pw_weight.dtype, dw_weight.dtype)
    xh = xh if xh.dtype == dtype else xh.astype(dtype)
    out = nhwc_result(out, (n, ho, wo, e), dtype)
    wp = w + left + right

    def rows_for(band: int) -> int:  # padded input rows that `band` output rows read
        return (band - 1) * sh + (kh - 1) * dh + 1

    band = 1
    while band < ho and rows_for(band + 1) * wp * e * dtype.itemsize <= BAND_BYTES:
        band += 1
    pad = np.empty((1, rows_for(band), wp, e), dtype=dtype)
    pad[:, :, :left] = 0
    pad[:, :, left + w:] = 0
    product = np.empty((rows_for(band) * w, e), dtype=dtype)
    pw_tiled = None if pw_bias is None else np.tile(np.asarray(pw_bias, dtype=dtype), w)
    dw_tiled = None if dw_bias is None else np.tile(np.asarray(dw_bias, dtype=dtype), wo)
    taps = depthwise_taps(dw_weight.astype(dtype, copy=False), kernel_hw, sw, wo)
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
                if pw_tiled is None:
                    np.copyto(inner, g.reshape(a1 - a0, w * e))
                else:
                    np.add(g.reshape(a1 - a0, w * e), pw_tiled, out=inner)
                _activate(inner, pw_activation, pw_args)
            block = out[img:img + 1, r0:r0 + nr]
            depthwise_sum(p, taps, kernel_hw, stride, dilation, (nr, wo), block)
            flat = block.reshape(nr, wo * e)
            if dw_tiled is not None:
                np.add(flat, dw_tiled, out=flat)
            _activate(flat, activation, args)
    return out


def _activate(rows: np.ndarray, activation: str, args: Sequence[float]) -> None:
    """apply_activation over a (rows, width) view whose rows are contiguous, in cache-sized row blocks."""
    if activation == "none":
        return
    step = max(1, BLOCK // max(rows.shape[1], 1))
    for a in range(0, rows.shape[0], step):
        apply_activation(rows[a:a + step], activation, args)


@kernel("ptlite::conv2d_pointwise_depthwise(Tensor input, Tensor pw_weight, Tensor? pw_bias, str pw_activation, "
        "float[] pw_activation_args, Tensor dw_weight, Tensor? dw_bias, int[2] kernel_size, int[2] stride, "
        "int[4] padding, int[2] dilation, str activation=\"none\", float[] activation_args=[]) -> Tensor", out=True)
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
