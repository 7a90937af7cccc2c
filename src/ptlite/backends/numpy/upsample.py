"""Upsampling kernels (bilinear and nearest, 2-D, NCHW or channels-last) with PyTorch's source-index arithmetic."""

from __future__ import annotations

import math

import numpy as np

from ptlite.backends.numpy import kernel

from ._layout import from_nhwc, spatial_view

F32 = np.float32


def _output_size(in_hw, output_size, scale_factors) -> tuple[tuple[int, int], tuple]:
    """(output H, W) and the scales PyTorch hands the kernel: from output_size, or floor(in * scale)."""
    if output_size is not None:
        if len(output_size) != 2:
            raise ValueError(f"upsample 2-D: output_size must have 2 values, got {output_size}")
        return (int(output_size[0]), int(output_size[1])), (None, None)
    if scale_factors is None:
        raise ValueError("upsample: either output_size or scale_factors must be given")
    scales = [float(s) for s in scale_factors]
    if len(scales) == 1:
        scales *= 2
    out = tuple(int(math.floor(n * s)) for n, s in zip(in_hw, scales, strict=True))
    return out, (scales[0], scales[1])


def _scale(in_size: int, out_size: int, align_corners: bool, scale: float | None) -> F32:
    """Step in input coordinates per output pixel (in float32, as PyTorch computes it for float input)."""
    if align_corners:
        return F32(in_size - 1) / F32(out_size - 1) if out_size > 1 else F32(0)
    if scale is not None and scale > 0:
        return F32(1.0 / scale)
    return F32(in_size) / F32(out_size)


def linear_taps(in_size: int, out_size: int, align_corners: bool, scale: float | None):
    """Per output index: the two input indices and their weights for linear interpolation along one axis."""
    step = _scale(in_size, out_size, align_corners, scale)
    dst = np.arange(out_size, dtype=F32)
    if align_corners:
        src = step * dst
    else:
        src = np.maximum(step * (dst + F32(0.5)) - F32(0.5), F32(0))
    i0 = np.minimum(src.astype(np.int64), in_size - 1)
    i1 = np.minimum(i0 + 1, in_size - 1)
    w1 = np.clip(src - i0.astype(F32), F32(0), F32(1))
    return i0, i1, F32(1) - w1, w1


def _interpolation_matrix(in_size, out_size, align_corners, scale, dtype) -> np.ndarray:
    """(out, in) matrix whose rows hold the two linear-interpolation weights."""
    i0, i1, w0, w1 = linear_taps(in_size, out_size, align_corners, scale)
    m = np.zeros((out_size, in_size), dtype=dtype)
    rows = np.arange(out_size)
    m[rows, i0] = w0
    m[rows, i1] += w1
    return m


def _lerp(x: np.ndarray, axis: int, taps) -> np.ndarray:
    """Linear interpolation along one axis by two gathers and a weighted sum."""
    i0, i1, w0, w1 = taps
    along = (-1,) + (1,) * (x.ndim - 1 - axis % x.ndim)  # weights shaped to vary along axis
    w0, w1 = w0.reshape(along), w1.reshape(along)
    out = x.take(i0, axis=axis)
    out *= w0.astype(out.dtype, copy=False)
    far = x.take(i1, axis=axis)
    far *= w1.astype(out.dtype, copy=False)
    out += far
    return out


# Axes up to this long are interpolated by a dense matmul: measured faster than two gathers up to ~100.
_MATMUL_MAX_INPUT = 96


def bilinear2d(x: np.ndarray, out_hw, align_corners: bool, scales=(None, None)) -> np.ndarray:
    """Bilinear resize of the last two axes: along W first, then H (PyTorch's order of operations)."""
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"upsample_bilinear2d expects a floating tensor, got {x.dtype}")
    h, w = x.shape[-2:]
    ho, wo = out_hw
    v, _, nhwc = spatial_view(x)
    if nhwc:
        return from_nhwc(_bilinear_nhwc(v, out_hw, align_corners, scales))
    lead = x.shape[:-2]
    if w <= _MATMUL_MAX_INPUT:
        m_w = _interpolation_matrix(w, wo, align_corners, scales[1], x.dtype)
        rows = np.matmul(x.reshape(-1, w), m_w.T).reshape(lead + (h, wo))
    else:
        rows = _lerp(x, -1, linear_taps(w, wo, align_corners, scales[1]))
    if h <= _MATMUL_MAX_INPUT:
        m_h = _interpolation_matrix(h, ho, align_corners, scales[0], x.dtype)
        return np.matmul(m_h, rows.reshape(-1, h, wo)).reshape(lead + (ho, wo))
    return _lerp(rows, -2, linear_taps(h, ho, align_corners, scales[0]))


def _bilinear_nhwc(v: np.ndarray, out_hw, align_corners: bool, scales) -> np.ndarray:
    """bilinear2d on a C-contiguous (N, H, W, C) array: along W as a product batched over rows, then along H
    as one product over rows of W * C contiguous values (gathers instead where an axis is long)."""
    n, h, w, c = v.shape
    ho, wo = out_hw
    if w <= _MATMUL_MAX_INPUT:
        m_w = _interpolation_matrix(w, wo, align_corners, scales[1], v.dtype)
        rows = np.matmul(m_w, v.reshape(n * h, w, c)).reshape(n, h, wo, c)
    else:
        rows = _lerp(v, 2, linear_taps(w, wo, align_corners, scales[1]))
    if h <= _MATMUL_MAX_INPUT:
        m_h = _interpolation_matrix(h, ho, align_corners, scales[0], v.dtype)
        return np.matmul(m_h, rows.reshape(n, h, wo * c)).reshape(n, ho, wo, c)
    return _lerp(rows, 1, linear_taps(h, ho, align_corners, scales[0]))


def nearest_index(in_size: int, out_size: int, scale: float | None) -> np.ndarray:
    """PyTorch's 'nearest' source index: min(floor(dst * scale), in - 1), scale in float32."""
    if out_size == in_size:
        return np.arange(out_size)
    if out_size == 2 * in_size:
        return np.arange(out_size) >> 1
    step = _scale(in_size, out_size, False, scale)
    src = np.floor(np.arange(out_size, dtype=F32) * step).astype(np.int64)
    return np.minimum(src, in_size - 1)


def nearest2d(x: np.ndarray, out_hw, scales=(None, None)) -> np.ndarray:
    """Nearest-neighbour resize of the spatial axes; channels-last in, channels-last out."""
    v, ax, nhwc = spatial_view(x)
    h, w = v.shape[ax], v.shape[ax + 1]
    ho, wo = out_hw
    ih, iw = nearest_index(h, ho, scales[0]), nearest_index(w, wo, scales[1])
    lead, trail = v.shape[:ax], v.shape[ax + 2:]
    if ho % h == 0 and wo % w == 0 and np.array_equal(ih, np.arange(ho) // (ho // h)) \
            and np.array_equal(iw, np.arange(wo) // (wo // w)):
        # Integer factors: one broadcast copy into the (.., h, fh, w, fw, ..) view of the output.
        fh, fw = ho // h, wo // w
        out = np.empty(lead + (h, fh, w, fw) + trail, dtype=x.dtype)
        out[...] = v[(slice(None),) * ax + (slice(None), None, slice(None), None)]
        out = out.reshape(lead + (ho, wo) + trail)
    else:
        out = v.take(ih, axis=ax).take(iw, axis=ax + 1)
    return from_nhwc(out) if nhwc else out


@kernel("aten::upsample_bilinear2d.vec")
def upsample_bilinear2d_vec(input, output_size, align_corners, scale_factors):
    out_hw, scales = _output_size(input.shape[-2:], output_size, scale_factors)
    return bilinear2d(input, out_hw, align_corners, scales)


@kernel("aten::upsample_bilinear2d")
def upsample_bilinear2d(self, output_size, align_corners, scales_h=None, scales_w=None):
    return bilinear2d(self, (int(output_size[0]), int(output_size[1])), align_corners, (scales_h, scales_w))


@kernel("aten::upsample_nearest2d.vec")
def upsample_nearest2d_vec(input, output_size, scale_factors):
    out_hw, scales = _output_size(input.shape[-2:], output_size, scale_factors)
    return nearest2d(input, out_hw, scales)


@kernel("aten::upsample_nearest2d")
def upsample_nearest2d(self, output_size, scales_h=None, scales_w=None):
    return nearest2d(self, (int(output_size[0]), int(output_size[1])), (scales_h, scales_w))
