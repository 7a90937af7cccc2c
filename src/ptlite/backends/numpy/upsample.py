"""Upsampling kernels (bilinear and nearest, 2-D, NCHW or channels-last) with PyTorch's source-index arithmetic, and
grid sampling (grid_sample: 2-D bilinear, nearest, bicubic; 3-D (volumes) trilinear and nearest; zeros, border,
reflection padding) as PyTorch's CPU kernels compute it."""

from __future__ import annotations

import math

import numpy as np

from ptlite.backends.numpy import kernel

from ._layout import from_nhwc, is_channels_last, spatial_view, to_nhwc

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


# ------------------------------------------------------------------------------------------------ grid sampling
# PyTorch's grid_sampler_2d as its CPU kernel computes it (aten/src/ATen/native/cpu/GridSamplerKernel.cpp), in the
# input's float dtype and in the same order of operations: output[n, c, h, w] samples input[n, c] at the point
# grid[n, h, w] = (x, y), -1..1 spanning the input's width and height (pixel centres, or corners with align_corners).

BILINEAR, NEAREST, BICUBIC = 0, 1, 2  # interpolation_mode, as F.grid_sample numbers them
ZEROS, BORDER, REFLECTION = 0, 1, 2  # padding_mode
_CUBIC_A = -0.75  # the cubic convolution constant, as PyTorch's bicubic upsampling uses


class _Axis:
    """Source coordinates along one input axis of `size` pixels: grid values un-normalized to pixels, and the
    padding mode's rule for points outside (zeros: as they are, masked later; border: clipped; reflection:
    reflected about the edges, then clipped)."""

    def __init__(self, size: int, padding: int, align_corners: bool, dtype: np.dtype) -> None:
        t = dtype.type
        self.padding, self.dtype = padding, dtype
        self.max = t(size - 1)
        if align_corners:  # -1 and 1 are the centres of the first and last pixels
            self.scale, self.shift, self.low = t(size - 1) / t(2), None, t(0)
            self.twice_span, self.empty = t(size - 1) * t(2), size <= 1
        else:  # -1 and 1 are the outer edges of the first and last pixels
            self.scale, self.shift, self.low = t(size) / t(2), t(0.5), t(-0.5)
            self.twice_span, self.empty = t(size) * t(2), size <= 0

    def unnormalize(self, g: np.ndarray) -> np.ndarray:
        x = (g + self.dtype.type(1)) * self.scale
        return x - self.shift if self.shift is not None else x

    def clip(self, x: np.ndarray) -> np.ndarray:
        """Into [0, size - 1]; NaN becomes 0 (fmax), as PyTorch's operand order makes it."""
        return np.fmin(np.fmax(x, self.dtype.type(0)), self.max)

    def reflect(self, x: np.ndarray) -> np.ndarray:
        if self.empty:
            return np.zeros_like(x)
        distance = np.abs(x - self.low)
        extra = distance - np.trunc(distance / self.twice_span) * self.twice_span
        return np.minimum(extra, self.twice_span - extra) + self.low

    def pad(self, x: np.ndarray) -> np.ndarray:
        """Where a point (in pixels) reads, by the padding mode."""
        if self.padding == BORDER:
            return self.clip(x)
        if self.padding == REFLECTION:
            return self.clip(self.reflect(x))
        return x

    def source(self, g: np.ndarray) -> np.ndarray:
        """Grid values to the pixel coordinates bilinear and nearest sampling read around."""
        return self.pad(self.unnormalize(g))


class _Pixels:
    """The input as rows of channels, (N, H * W, C), and gathers of the pixels at integral coordinates: a pixel
    outside the input reads 0 (the zeros padding; the other modes only read inside)."""

    def __init__(self, input: np.ndarray) -> None:
        n, c, h, w = input.shape
        self.h, self.w = h, w
        nhwc = input.reshape(n, 1, h, w).transpose(0, 2, 3, 1) if c == 1 else to_nhwc(input)
        self.rows = nhwc.reshape(n, h * w, c)
        self.batch = np.arange(n).reshape(n, 1)

    def at(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """(N, P, C): the pixels at (x, y), each (N, P) of whole numbers as floats (any value, NaN included)."""
        inside = (x >= 0) & (x <= self.w - 1) & (y >= 0) & (y <= self.h - 1)
        everywhere = bool(inside.all())
        if not everywhere:
            x, y = np.where(inside, x, 0), np.where(inside, y, 0)
        index = y.astype(np.intp) * self.w + x.astype(np.intp)
        values = self.rows[self.batch, index]
        if not everywhere:
            values[~inside] = 0
        return values


def _cubic_coefficients(t: np.ndarray) -> list[np.ndarray]:
    """The weights of the 4 taps at -1, 0, 1, 2 for a point t in [0, 1) past the second, PyTorch's expressions."""
    a = t.dtype.type(_CUBIC_A)
    one, two = t.dtype.type(1), t.dtype.type(2)

    def near(x):  # |x| <= 1
        return ((a + two) * x - (a + t.dtype.type(3))) * x * x + one

    def far(x):  # 1 < |x| < 2
        return ((a * x - t.dtype.type(5) * a) * x + t.dtype.type(8) * a) * x - t.dtype.type(4) * a

    return [far(t + one), near(t), near(one - t), far(two - t)]


def _bilinear(pixels: _Pixels, ax: _Axis, ay: _Axis, gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
    x, y = ax.source(gx), ay.source(gy)
    x_w, y_n = np.floor(x), np.floor(y)
    w = x - x_w
    n = y - y_n
    e, s = 1 - w, 1 - n
    x_e, y_s = x_w + 1, y_n + 1
    out = pixels.at(x_w, y_n)
    out *= (s * e)[..., None]
    for cx, cy, weight in ((x_e, y_n, s * w), (x_w, y_s, n * e), (x_e, y_s, n * w)):
        corner = pixels.at(cx, cy)
        corner *= weight[..., None]
        out += corner
    return out


def _nearest(pixels: _Pixels, ax: _Axis, ay: _Axis, gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
    return pixels.at(np.rint(ax.source(gx)), np.rint(ay.source(gy)))  # rint: halves to even, as PyTorch rounds


def _bicubic(pixels: _Pixels, ax: _Axis, ay: _Axis, gx: np.ndarray, gy: np.ndarray) -> np.ndarray:
    x, y = ax.unnormalize(gx), ay.unnormalize(gy)
    x0, y0 = np.floor(x), np.floor(y)
    wx, wy = _cubic_coefficients(x - x0), _cubic_coefficients(y - y0)
    xs = [ax.pad(x0 + x0.dtype.type(k)) for k in (-1, 0, 1, 2)]  # each tap padded on its own
    out = None
    for i, k in enumerate((-1, 0, 1, 2)):
        yk = ay.pad(y0 + y0.dtype.type(k))
        row = None
        for xk, weight in zip(xs, wx, strict=True):
            tap = pixels.at(xk, yk)
            tap *= weight[..., None]
            row = tap if row is None else np.add(row, tap, out=row)
        row *= wy[i][..., None]
        out = row if out is None else np.add(out, row, out=out)
    return out


_SAMPLERS = {BILINEAR: _bilinear, NEAREST: _nearest, BICUBIC: _bicubic}


# -------------------------------------------------------------------------------------------- 3-D grid sampling
# PyTorch's grid_sampler_3d (F.grid_sample on a 5-D volume) as its CPU kernel computes it: the scalar loop of
# aten/src/ATen/native/GridSampler.cpp (grid_sampler_3d_cpu_impl) with the coordinate helpers of GridSampler.h, whose
# expressions round differently from the vectorized 2-D kernel's. output[n, c, d, h, w] samples input[n, c] at the
# point grid[n, d, h, w] = (x, y, z): x along the width, y the height, z the depth. Trilinear and nearest only.

class _ScalarAxis(_Axis):
    """_Axis with GridSampler.h's scalar expressions: un-normalizing as ((g + 1) / 2) * (size - 1) or
    ((g + 1) * size - 1) / 2, clipping as std::min(size - 1, std::max(x, 0)) (NaN becomes size - 1), reflecting
    with fmod and the parity of the number of flips."""

    def __init__(self, size: int, padding: int, align_corners: bool, dtype: np.dtype) -> None:
        super().__init__(size, padding, align_corners, dtype)
        t = dtype.type
        self.align_corners, self.size = align_corners, t(size)
        self.span = self.twice_span / t(2)  # (twice_high - twice_low) / 2: size - 1 or size

    def unnormalize(self, g: np.ndarray) -> np.ndarray:
        t = self.dtype.type
        if self.align_corners:
            return (g + t(1)) / t(2) * (self.size - t(1))
        return ((g + t(1)) * self.size - t(1)) / t(2)

    def clip(self, x: np.ndarray) -> np.ndarray:
        x = np.where(x < 0, self.dtype.type(0), x)  # std::max(x, 0) keeps NaN ...
        return np.where(x < self.max, x, self.max)  # ... which std::min(size - 1, x) turns into size - 1

    def reflect(self, x: np.ndarray) -> np.ndarray:
        if self.empty:
            return np.zeros_like(x)
        distance = np.abs(x - self.low)
        extra = np.fmod(distance, self.span)
        even = np.fmod(np.floor(distance / self.span), 2) == 0
        return np.where(even, extra + self.low, self.span - extra + self.low)


class _Voxels(_Pixels):
    """The input volume as rows of channels, (N, D * H * W, C), and gathers of the voxels at integral coordinates: a
    voxel outside the input (or at a coordinate that is not finite) reads 0."""

    def __init__(self, input: np.ndarray) -> None:  # noqa: A002
        n, c, d, h, w = input.shape
        self.d, self.h, self.w = d, h, w
        self.rows = (input.reshape(n, d * h * w, 1) if c == 1
                     else np.ascontiguousarray(np.moveaxis(input, 1, -1)).reshape(n, d * h * w, c))
        self.batch = np.arange(n).reshape(n, 1)

    def at(self, x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:  # type: ignore[override]
        """(N, P, C): the voxels at (x, y, z), each (N, P) of whole numbers as floats (any value, NaN included)."""
        inside = (x >= 0) & (x <= self.w - 1) & (y >= 0) & (y <= self.h - 1) & (z >= 0) & (z <= self.d - 1)
        everywhere = bool(inside.all())
        if not everywhere:
            x, y, z = np.where(inside, x, 0), np.where(inside, y, 0), np.where(inside, z, 0)
        index = (z.astype(np.intp) * self.h + y.astype(np.intp)) * self.w + x.astype(np.intp)
        values = self.rows[self.batch, index]
        if not everywhere:
            values[~inside] = 0
        return values


def _trilinear(voxels: _Voxels, axes: tuple[_ScalarAxis, ...], points: np.ndarray) -> np.ndarray:
    """The 8 corners around each point, weighted by the products of the distances to the opposite corner (tnw: top
    (low z), north (low y), west (low x), ..., bse), summed in PyTorch's order tnw, tne, tsw, tse, bnw, bne, bsw,
    bse; a corner outside the input adds nothing."""
    x, y, z = (axis.source(points[..., k]) for k, axis in enumerate(axes))
    if axes[0].padding == ZEROS:  # a coordinate that is not finite reads outside: every corner 0, weights finite
        x, y, z = (np.where(np.isfinite(v), v, v.dtype.type(-2)) for v in (x, y, z))
    x_w, y_n, z_t = np.floor(x), np.floor(y), np.floor(z)
    one = x.dtype.type(1)
    x_e, y_s, z_b = x_w + one, y_n + one, z_t + one
    west, east = x_e - x, x - x_w  # the weights of the west corner (the distance to the east one) and the east's
    north, south = y_s - y, y - y_n
    top, bottom = z_b - z, z - z_t
    out = None
    for cz, dz in ((z_t, top), (z_b, bottom)):
        for cy, cx, weight in ((y_n, x_w, west * north), (y_n, x_e, east * north), (y_s, x_w, west * south),
                               (y_s, x_e, east * south)):
            corner = voxels.at(cx, cy, cz)
            corner *= (weight * dz)[..., None]
            out = corner if out is None else np.add(out, corner, out=out)
    return out


def _nearest3d(voxels: _Voxels, axes: tuple[_ScalarAxis, ...], points: np.ndarray) -> np.ndarray:
    return voxels.at(*(np.rint(axis.source(points[..., k])) for k, axis in enumerate(axes)))  # halves to even


_SAMPLERS_3D = {BILINEAR: _trilinear, NEAREST: _nearest3d}


def grid_sample3d(input: np.ndarray, grid: np.ndarray, mode: int, padding: int,  # noqa: A002
                  align_corners: bool) -> np.ndarray:
    """input (N, C, D, H, W) sampled at grid (N, Do, Ho, Wo, 3) -> (N, C, Do, Ho, Wo), C-contiguous."""
    _check_grid_arguments(input, grid, mode, padding, 5)
    if mode == BICUBIC:
        raise ValueError(f"grid_sampler: bicubic interpolation only supports 4-D input (as in PyTorch), got 5-D "
                         f"input {input.shape}; use mode 'bilinear' or 'nearest' for a volume")
    n, c = input.shape[:2]
    do, ho, wo = grid.shape[1:4]
    points = grid.reshape(n, do * ho * wo, 3)
    axes = tuple(_ScalarAxis(size, padding, align_corners, input.dtype) for size in input.shape[:1:-1])  # W, H, D
    with np.errstate(invalid="ignore", over="ignore"):  # inf and NaN points give what PyTorch's give
        out = _SAMPLERS_3D[mode](_Voxels(input), axes, points).reshape(n, do, ho, wo, c)
    return np.ascontiguousarray(np.moveaxis(out, -1, 1))


def _check_grid_arguments(input: np.ndarray, grid: np.ndarray, mode: int, padding: int,  # noqa: A002
                          rank: int) -> None:
    """PyTorch's checks of grid_sampler's arguments, for a `rank`-D input (4 or 5)."""
    if input.ndim != rank or grid.ndim != rank or grid.shape[-1] != rank - 2:
        what = "4-D input at a 4-D grid of (x, y) points" if rank == 4 else \
            "5-D input at a 5-D grid of (x, y, z) points"
        raise ValueError(f"grid_sampler: ptlite samples {what}, got input {input.shape} and grid {grid.shape}")
    if grid.shape[0] != input.shape[0]:
        raise ValueError(f"grid_sampler: grid and input have different batch sizes ({grid.shape[0]} and "
                         f"{input.shape[0]})")
    if input.dtype != grid.dtype or input.dtype.kind != "f":
        raise TypeError(f"grid_sampler: input and grid must have the same floating dtype, got {input.dtype} and "
                        f"{grid.dtype}")
    if mode not in _SAMPLERS or padding not in (ZEROS, BORDER, REFLECTION):
        raise ValueError(f"grid_sampler: unknown interpolation mode {mode} or padding mode {padding} (modes: 0 "
                         "bilinear, 1 nearest, 2 bicubic; padding: 0 zeros, 1 border, 2 reflection)")
    if 0 in input.shape[2:]:
        raise ValueError(f"grid_sampler: the input {input.shape} has empty spatial dimensions")


def grid_sample2d(input: np.ndarray, grid: np.ndarray, mode: int, padding: int, align_corners: bool) -> np.ndarray:
    """input (N, C, H, W) sampled at grid (N, Ho, Wo, 2) -> (N, C, Ho, Wo); channels-last in, channels-last out."""
    _check_grid_arguments(input, grid, mode, padding, 4)
    n, c, h, w = input.shape
    ho, wo = grid.shape[1:3]
    points = grid.reshape(n, ho * wo, 2)
    pixels = _Pixels(input)
    ax, ay = (_Axis(size, padding, align_corners, input.dtype) for size in (w, h))
    with np.errstate(invalid="ignore", over="ignore"):  # inf and NaN points give what PyTorch's give
        out = _SAMPLERS[mode](pixels, ax, ay, points[..., 0], points[..., 1]).reshape(n, ho, wo, c)
    if c > 1 and is_channels_last(input):
        return from_nhwc(out)
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))


@kernel("aten::grid_sampler")
def grid_sampler(input, grid, interpolation_mode, padding_mode, align_corners):
    """grid_sample: a 4-D input (N, C, H, W) by grid_sampler_2d, a 5-D volume (N, C, D, H, W) by grid_sampler_3d."""
    if input.ndim not in (4, 5) or grid.ndim != input.ndim or grid.shape[-1] != input.ndim - 2:
        raise ValueError(f"grid_sampler: ptlite samples 4-D input (N, C, H, W) at a grid (N, Ho, Wo, 2) of (x, y) "
                         f"points or 5-D input (N, C, D, H, W) at a grid (N, Do, Ho, Wo, 3) of (x, y, z) points, got "
                         f"input {input.shape} and grid {grid.shape}")
    sample = grid_sample3d if input.ndim == 5 else grid_sample2d
    return sample(input, grid, int(interpolation_mode), int(padding_mode), bool(align_corners))


@kernel("aten::grid_sampler_2d")
def grid_sampler_2d(input, grid, interpolation_mode, padding_mode, align_corners):
    return grid_sample2d(input, grid, int(interpolation_mode), int(padding_mode), bool(align_corners))
