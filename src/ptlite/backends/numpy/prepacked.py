"""Prepacked convolution and linear kernels: weights stored in the layout the kernel consumes, images run
channels-last, and an activation fused into the pass that writes the output.

The `INSERT_FOLD_PREPACK_OPS` pass rewrites aten::conv2d / aten::linear with constant weights into these operators
and stores the packed weights in the file; `FUSE_ACTIVATIONS` then folds a following relu / relu6 / hardtanh /
clamp / hardswish into them. Packed layouts (C: input channels, O: output channels, kh x kw: kernel):

- groups == 1:                (kh * kw * C, O), rows ordered (kh, kw, C): out (pixels, O) = patches @ W
- depthwise (groups == C == O): (kh * kw, C): one row of per-channel taps per kernel position
- other groups:               (groups, kh * kw * C/groups, O/groups)
- linear:                     (in_features, out_features): out = x @ W

Inputs may be NCHW or channels-last (see _layout.py); outputs are channels-last (N, C, H, W) views. Both
kernels have out variants: given `out=` of the result's shape and dtype (channels-last for convolutions, as
they return it; C order for linear), they write their result there (through its NHWC view) and return it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ptlite.backends.numpy import kernel
from ptlite.errors import KernelArgumentError
from ptlite.ops import CONV2D_PREPACKED, LINEAR_PREPACKED

from ._fastnp import clip, strided_view, tile_cols, tile_row
from ._layout import fits_out, from_nhwc, nhwc_view, to_nhwc
from ._parallel import parallel_for

ACTIVATIONS = ("none", "relu", "clamp", "hardswish", "silu", "gelu", "gelu_tanh")

# Elements per piece of work: below this a kernel runs on one thread, and bias + activation run over output
# blocks of about this size while they are in cache.
BLOCK = 1 << 16


def check_activation(activation: str, args: Sequence[float]) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown fused activation {activation!r}; expected one of {', '.join(ACTIVATIONS)}")
    if activation == "clamp" and len(args) != 2:
        raise ValueError(f"a fused clamp takes [min, max], got {list(args)}")


def apply_activation(out: np.ndarray, activation: str, args: Sequence[float]) -> None:
    """Apply a fused activation to `out` in place (a block of a kernel's output, still in cache)."""
    if activation == "none":
        return
    # clip, also for one-sided bounds: NumPy's maximum/minimum with a scalar are several times slower.
    if activation == "relu":
        clip(out, out.dtype.type(0), out.dtype.type(np.inf), out=out)
    elif activation == "clamp":
        lo, hi = args
        clip(out, out.dtype.type(lo), out.dtype.type(hi), out=out)
    elif activation in ("gelu", "gelu_tanh"):  # the activation family's own kernels, imported when first used
        from .activation import _gelu_fn
        _gelu_fn("none" if activation == "gelu" else "tanh")(out, out)  # in place: out is also its input
    elif activation in ("hardswish", "silu"):
        # in cache-sized pieces, with one scratch buffer: a whole-output temporary would cost a pass over memory
        flat = out.reshape(-1) if out.flags.c_contiguous else None
        if flat is None or flat.size <= BLOCK:
            _SMOOTH[activation](out, np.empty_like(out))
            return
        scratch = np.empty(BLOCK, dtype=out.dtype)
        for a in range(0, flat.size, BLOCK):
            piece = flat[a:a + BLOCK]
            _SMOOTH[activation](piece, scratch[:piece.size])
    else:
        check_activation(activation, args)


def _hardswish(x: np.ndarray, t: np.ndarray) -> None:
    """x = x * relu6(x + 3) / 6 in place; t: scratch of x's shape."""
    np.add(x, x.dtype.type(3), out=t)
    clip(t, x.dtype.type(0), x.dtype.type(6), out=t)
    np.multiply(x, t, out=x)
    np.multiply(x, x.dtype.type(1 / 6), out=x)


def _silu(x: np.ndarray, t: np.ndarray) -> None:
    """x = x / (1 + exp(-x)) in place (exp overflow for very negative x gives the right limit, -0)."""
    np.negative(x, out=t)
    with np.errstate(over="ignore", invalid="ignore"):
        np.exp(t, out=t)
        np.add(t, x.dtype.type(1), out=t)
        np.divide(x, t, out=x)


_SMOOTH = {"hardswish": _hardswish, "silu": _silu}


def finish_rows(out2: np.ndarray, bias: np.ndarray | None, activation: str, args: Sequence[float]) -> None:
    """Bias and activation over a C-contiguous (rows, O) output, in blocks of whole rows split across threads.
    The bias is tiled to the block length so that the add runs over two flat arrays (broadcasting a short bias
    row over a large output makes NumPy's inner loop only O long, several times slower); an output of one block
    takes the broadcast, where tiling would cost more than it saves."""
    if bias is None and activation == "none":
        return
    if out2.size <= BLOCK:  # one block: the bias broadcast in one call beats tiling it (~3 vs ~9 us on 12 x 64)
        if bias is not None:
            np.add(out2, bias, out=out2)
        apply_activation(out2, activation, args)
        return
    width = max(out2.shape[1], 1)
    step = max(1, BLOCK // width)
    tiled = None if bias is None else tile_row(bias, min(step, out2.shape[0]))

    def rows(r0: int, r1: int) -> None:
        for a in range(r0, r1, step):
            block = out2[a:min(a + step, r1)].reshape(-1)
            if tiled is not None:
                np.add(block, tiled[:block.size], out=block)
            apply_activation(block, activation, args)

    parallel_for(rows, out2.shape[0], step)


def nhwc_result(out: np.ndarray | None, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """Where a convolution writes its NHWC result: `out` if it fits and is C-contiguous, else a new array."""
    if out is not None and fits_out(out, shape, dtype) and out.flags.c_contiguous:
        return out
    return np.empty(shape, dtype=dtype)


def conv_out_size(size: int, k: int, stride: int, before: int, after: int, dilation: int) -> int:
    out = (size + before + after - dilation * (k - 1) - 1) // stride + 1
    if out <= 0:
        raise ValueError(f"convolution output size {out} is not positive (input {size}, kernel {k}, stride "
                         f"{stride}, padding {before}+{after}, dilation {dilation})")
    return out


def _padded(xh: np.ndarray, top: int, bottom: int, left: int, right: int) -> np.ndarray:
    """NHWC x in a zero-bordered buffer (x itself when there is no padding)."""
    if top == bottom == left == right == 0:
        return xh
    n, h, w, c = xh.shape
    buf = np.empty((n, h + top + bottom, w + left + right, c), dtype=xh.dtype)
    buf[:, :top] = 0
    buf[:, top + h:] = 0
    buf[:, top:top + h, :left] = 0
    buf[:, top:top + h, left + w:] = 0
    buf[:, top:top + h, left:left + w] = xh
    return buf


def _patches(xp: np.ndarray, kernel_hw, stride, dilation, out_hw) -> np.ndarray:
    """A read-only (N, Ho, Wo, kh, kw, C) view of padded NHWC x: the input patch of every output pixel."""
    s_n, s_h, s_w, s_c = xp.strides
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel_hw, stride, dilation, out_hw
    return strided_view(xp, (xp.shape[0], ho, wo, kh, kw, xp.shape[3]),
                        (s_n, s_h * sh, s_w * sw, s_h * dh, s_w * dw, s_c))


def _conv_gemm(xh, weight, pads, kernel_hw, stride, dilation, out_hw, out2):
    """groups == 1: out2 (N*Ho*Wo, O) = patches (N*Ho*Wo, kh*kw*C) @ weight, im2col by one strided copy."""
    n, _, _, c = xh.shape
    (kh, kw), (sh, sw), (ho, wo) = kernel_hw, stride, out_hw
    if kh == kw == 1 and not any(pads):
        if sh != 1 or sw != 1:
            xh = xh[:, ::sh, ::sw]
        cols = np.ascontiguousarray(xh[:, :ho, :wo]).reshape(n * ho * wo, c)
    else:
        taps = _dense_taps(xh.shape, pads, kernel_hw, stride, dilation, out_hw)
        if sum((r1 - r0) * (q1 - q0) for *_, r0, r1, q0, q1 in taps) < _SPARSE_TAPS * kh * kw * ho * wo:
            _conv_by_taps(xh, weight, taps, stride, out_hw, out2)
            return
        xp = _padded(xh, *pads)
        cols = np.empty((n, ho, wo, kh, kw, c), dtype=xh.dtype)
        np.copyto(cols, _patches(xp, kernel_hw, stride, dilation, out_hw))
        cols = cols.reshape(n * ho * wo, kh * kw * c)
    np.matmul(cols, weight, out=out2)


# Below this fraction of (tap, output pixel) pairs that read the image rather than padding, a dense convolution
# runs one GEMM per tap over the pixels it reaches instead of im2col over all: atrous convolutions on small
# feature maps (DeepLab's ASPP, dilation 12-36 on 14x14) have most of their taps in the padding.
_SPARSE_TAPS = 0.5


def _dense_taps(shape, pads, kernel_hw, stride, dilation, out_hw):
    """For each kernel tap: (tap index, first input row, first input col, output rows [r0, r1), cols [q0, q1))
    where the tap reads inside the (unpadded) image; taps that only read padding are left out."""
    _, h, w, _ = shape
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel_hw, stride, dilation, out_hw
    top, _, left, _ = pads
    taps = []
    for i in range(kh):
        y_off = i * dh - top
        r0, r1 = _tap_range(ho, h, y_off, sh)
        for j in range(kw):
            x_off = j * dw - left
            q0, q1 = _tap_range(wo, w, x_off, sw)
            if r0 < r1 and q0 < q1:
                taps.append((i * kw + j, y_off + sh * r0, x_off + sw * q0, r0, r1, q0, q1))
    return taps


def _conv_by_taps(xh, weight, taps, stride, out_hw, out2):
    """out (N, Ho, Wo, O) = sum over taps of (the pixels the tap reaches) @ (its (C, O) block of the weight)."""
    n, _, _, c = xh.shape
    (sh, sw), (ho, wo) = stride, out_hw
    out = out2.reshape(n, ho, wo, -1)
    out[...] = 0
    for t, y0, x0, r0, r1, q0, q1 in taps:
        rows, cols = r1 - r0, q1 - q0
        src = xh[:, y0:y0 + sh * (rows - 1) + 1:sh, x0:x0 + sw * (cols - 1) + 1:sw]
        part = np.matmul(np.ascontiguousarray(src).reshape(n * rows * cols, c), weight[t * c:(t + 1) * c])
        region = out[:, r0:r1, q0:q1]
        np.add(region, part.reshape(region.shape), out=region)


def _conv_grouped(xh, weight, pads, kernel_hw, stride, dilation, out_hw, out2, groups):
    """Grouped (not depthwise) convolution: one batched matmul over groups."""
    n, _, _, c = xh.shape
    (kh, kw), (ho, wo) = kernel_hw, out_hw
    cg, og = c // groups, weight.shape[2]
    xp = _padded(xh, *pads)
    patches = _patches(xp, kernel_hw, stride, dilation, out_hw)
    cols = np.empty((groups, n, ho, wo, kh, kw, cg), dtype=xh.dtype)
    np.copyto(cols, _split_groups(patches, groups).transpose(5, 0, 1, 2, 3, 4, 6))
    res = np.matmul(cols.reshape(groups, n * ho * wo, kh * kw * cg), weight)  # (groups, pixels, og)
    np.copyto(out2.reshape(n * ho * wo, groups, og), res.transpose(1, 0, 2))


def _split_groups(patches: np.ndarray, groups: int) -> np.ndarray:
    """(N, Ho, Wo, kh, kw, C) -> (N, Ho, Wo, kh, kw, groups, C/groups), a view."""
    shape = patches.shape[:-1] + (groups, patches.shape[-1] // groups)
    strides = patches.strides[:-1] + (patches.strides[-1] * shape[-1], patches.strides[-1])
    return as_strided(patches, shape=shape, strides=strides, writeable=False)


def _tap_range(out_len: int, in_len: int, offset: int, step: int) -> tuple[int, int]:
    """Output positions [lo, hi) whose input position step * o + offset lies in [0, in_len)."""
    lo = -(offset // step) if offset < 0 else 0  # ceil(-offset / step)
    hi = min(out_len, (in_len - 1 - offset) // step + 1)
    return lo, max(lo, hi)


def _conv_depthwise(xh, weight, bias, pads, kernel_hw, stride, dilation, out_hw, out4, activation, args):
    """Depthwise convolution into the NHWC `out4`: by einsum over a padded copy, unless most kernel taps would
    read padding (atrous convolutions on small images), where the per-tap kernel skips them."""
    (kh, kw), (ho, wo) = kernel_hw, out_hw
    taps = _dense_taps(xh.shape, pads, kernel_hw, stride, dilation, out_hw)
    if sum((r1 - r0) * (q1 - q0) for *_, r0, r1, q0, q1 in taps) < _SPARSE_TAPS * kh * kw * ho * wo:
        _conv_depthwise_taps(xh, weight, bias, pads, kernel_hw, stride, dilation, out_hw, out4, activation, args)
        return
    _conv_depthwise_einsum(xh, weight, pads, kernel_hw, stride, dilation, out_hw, out4)
    n, c = xh.shape[0], xh.shape[3]
    finish_rows(out4.reshape(n * ho * wo, c), bias, activation, args)


def _conv_depthwise_einsum(xh, weight, pads, kernel_hw, stride, dilation, out_hw, out4):
    """Depthwise without bias, by one np.einsum over a padded copy of x (depthwise_sum)."""
    depthwise_sum(_padded(xh, *pads), depthwise_taps(weight, kernel_hw, stride[1], out_hw[1]), kernel_hw, stride,
                  dilation, out_hw, out4)


def depthwise_taps(weight: np.ndarray, kernel_hw: Sequence[int], stride_w: int, wo: int) -> np.ndarray:
    """A packed depthwise weight (kh*kw, C) as depthwise_sum reads it: without a horizontal stride tiled to the
    output row width, (kh, kw, Wo*C); with one, (kh, kw, C)."""
    kh, kw = kernel_hw
    if stride_w == 1:
        return tile_cols(weight, wo).reshape(kh, kw, -1)
    return weight.reshape(kh, kw, -1)


def depthwise_sum(xp: np.ndarray, taps: np.ndarray, kernel_hw: Sequence[int], stride: Sequence[int],
                  dilation: Sequence[int], out_hw: Sequence[int], out4: np.ndarray) -> np.ndarray:
    """out4 (N, Ho, Wo, C) = the depthwise convolution of the zero-padded NHWC xp (rows and columns already
    padded) by `taps` (depthwise_taps), without bias, by one np.einsum: einsum sums products in one SIMD pass per
    tap (out += a * b) where separate multiply and add ufuncs take two, ~1.5-2x faster on MobileNet's and
    EfficientNet's depthwise layers (measured). Without a horizontal stride each output row is Wo*C contiguous
    values read from Wo*C contiguous input values per tap, and the taps are broadcast over rows by zero strides;
    with one, the innermost loop runs over the C channels. xp and out4 must be C-contiguous (the strided views
    assume it)."""
    if not (xp.flags.c_contiguous and out4.flags.c_contiguous):
        raise ValueError("depthwise_sum needs C-contiguous input and output arrays")
    n, c = xp.shape[0], xp.shape[3]
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel_hw, stride, dilation, out_hw
    s_n, s_h, s_w, s_c = xp.strides
    if sw == 1:
        row = wo * c
        t_i, t_j, t_k = taps.strides
        shape = (kh, kw, n, ho, row)
        view = strided_view(xp, shape, (s_h * dh, s_w * dw, s_n, s_h * sh, s_c))
        wview = strided_view(taps, shape, (t_i, t_j, 0, 0, t_k))
        np.einsum("ijnrk,ijnrk->nrk", view, wview, out=out4.reshape(n, ho, row))
        return out4
    t_i, t_j, t_c = taps.strides
    shape = (kh, kw, n, ho, wo, c)
    view = strided_view(xp, shape, (s_h * dh, s_w * dw, s_n, s_h * sh, s_w * sw, s_c))
    wview = strided_view(taps, shape, (t_i, t_j, 0, 0, 0, t_c))
    np.einsum("ijnrqc,ijnrqc->nrqc", view, wview, out=out4)
    return out4


def _conv_depthwise_taps(xh, weight, bias, pads, kernel_hw, stride, dilation, out_hw, out4, activation, args):
    """Depthwise: accumulate kernel taps over rows of Wo*C contiguous values, with the per-channel taps tiled to
    the row width so that every multiply runs over two long contiguous rows. No padded copy: each tap covers only
    the output pixels whose input pixel is inside the image (padding contributes zeros). A horizontal stride reads
    from column-phase planes (one copy) so that rows stay contiguous. Rows are split across threads."""
    n, h, w, c = xh.shape
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel_hw, stride, dilation, out_hw
    top, _, left, _ = pads
    planes = [xh] if sw == 1 else [np.ascontiguousarray(xh[:, :, b::sw]) for b in range(sw)]
    tiled = tile_cols(weight, wo)  # (kh*kw, Wo*C)
    taps = []  # (tap index, plane, first input row, output rows [r0, r1), output cols [q0, q1), plane col shift)
    for i in range(kh):
        y_off = i * dh - top  # input row = sh * r + y_off
        r0, r1 = _tap_range(ho, h, y_off, sh)
        for j in range(kw):
            x_off = j * dw - left  # input col = sw * q + x_off
            phase = x_off % sw
            plane = planes[phase]
            shift = (x_off - phase) // sw  # plane col = q + shift
            q0, q1 = _tap_range(wo, plane.shape[2], shift, 1)
            if r0 < r1 and q0 < q1:
                taps.append((i * kw + j, plane, y_off, r0, r1, q0, q1, shift))
    full = [t for t in taps if (t[3], t[4], t[5], t[6]) == (0, ho, 0, wo)]
    taps.sort(key=lambda t: t not in full[:1])  # a tap covering every output pixel initialises the sums
    row = wo * c
    tiled_bias = None if bias is None else tile_row(bias, wo)
    acc3 = out4.reshape(n, ho, row)

    def rows(a: int, b: int) -> None:
        # Each thread takes its rows in one piece: NumPy's per-call overhead outweighs what smaller, cache-sized
        # pieces would gain (measured).
        tmp = np.empty((n, b - a, row), dtype=out4.dtype)
        if not full:
            out4[:, a:b] = 0
        for k, (t, plane, y_off, r0, r1, q0, q1, shift) in enumerate(taps):
            lo, hi = max(a, r0), min(b, r1)
            if lo >= hi:
                continue
            y0 = sh * lo + y_off
            src = plane[:, y0:y0 + sh * (hi - lo - 1) + 1:sh, q0 + shift:q1 + shift].reshape(n, hi - lo, -1)
            wt = tiled[t, q0 * c:q1 * c]
            if k == 0 and full:
                np.multiply(src, wt, out=acc3[:, lo:hi])
                continue
            dst = acc3[:, lo:hi, q0 * c:q1 * c]
            part = tmp[:, :hi - lo, :(q1 - q0) * c]
            np.multiply(src, wt, out=part)
            np.add(dst, part, out=dst)
        block = acc3[:, a:b]
        if tiled_bias is not None:
            np.add(block, tiled_bias, out=block)
        apply_activation(block, activation, args)

    parallel_for(rows, ho, max(1, BLOCK // max(row * n, 1)))


def conv2d_prepacked_nhwc(xh: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, kernel_hw: Sequence[int],
                          stride: Sequence[int], pads: Sequence[int], dilation: Sequence[int], groups: int,
                          activation: str = "none", args: Sequence[float] = (),
                          out: np.ndarray | None = None) -> np.ndarray:
    """Convolution of C-contiguous NHWC `xh` by a packed weight; returns C-contiguous NHWC output (`out` when it
    is a C-contiguous NHWC array of the output's shape and dtype). pads: top, bottom, left, right."""
    check_activation(activation, args)
    n, h, w, c = xh.shape
    kh, kw = kernel_hw
    sh, sw = stride
    dh, dw = dilation
    top, bottom, left, right = pads
    depthwise = groups > 1 and weight.ndim == 2
    if groups == 1:
        o = weight.shape[-1]
        ok = weight.ndim == 2 and weight.shape[0] == kh * kw * c
    elif depthwise:
        o = c
        ok = groups == c and weight.shape == (kh * kw, c)
    else:
        o = groups * weight.shape[2] if weight.ndim == 3 else -1
        ok = weight.ndim == 3 and c % groups == 0 and weight.shape[:2] == (groups, kh * kw * (c // groups))
    if not ok:
        raise ValueError(f"conv2d_prepacked: input with {c} channels does not match the packed weight "
                         f"{tuple(weight.shape)} (kernel {kh}x{kw}, groups={groups})")
    ho = conv_out_size(h, kh, sh, top, bottom, dh)
    wo = conv_out_size(w, kw, sw, left, right, dw)
    dtype = np.result_type(xh.dtype, weight.dtype)
    xh = xh if xh.dtype == dtype else xh.astype(dtype)
    out = nhwc_result(out, (n, ho, wo, o), dtype)
    bias = None if bias is None else np.asarray(bias, dtype=dtype)
    geometry = (pads, (kh, kw), (sh, sw), (dh, dw), (ho, wo))
    if depthwise:
        _conv_depthwise(xh, weight, bias, *geometry, out, activation, args)
        return out
    out2 = out.reshape(n * ho * wo, o)
    if groups == 1:
        _conv_gemm(xh, weight, pads, (kh, kw), (sh, sw), (dh, dw), (ho, wo), out2)
    else:
        _conv_grouped(xh, weight, pads, (kh, kw), (sh, sw), (dh, dw), (ho, wo), out2, groups)
    finish_rows(out2, bias, activation, args)
    return out


@kernel(CONV2D_PREPACKED)
def conv2d_prepacked(input, weight, bias, kernel_size, stride, padding, dilation, groups, activation="none",
                     activation_args=(), *, out=None):
    """2-D convolution by a prepacked weight (layouts in the module docstring); padding is top, bottom, left,
    right. Takes (N, C, H, W) or (C, H, W) in any memory layout; returns channels-last: `out` when it is a
    channels-last array of the result's shape and dtype (written through its NHWC view)."""
    if groups == 1 and input.ndim == 4 and weight.ndim == 2 and input.dtype == weight.dtype \
            and tuple(kernel_size) == (1, 1) and tuple(stride) == (1, 1) and not any(padding):
        fast = _pointwise_fast(input, weight, bias, activation, activation_args, out)
        if fast is not None:
            return fast
    dtype = np.result_type(input.dtype, weight.dtype)
    groups = int(groups)

    def compute(x: np.ndarray, target: np.ndarray | None) -> np.ndarray:
        if groups == 1 and x.shape[1] <= _FEW_CHANNELS and tuple(kernel_size) != (1, 1) \
                and weight.shape[0] == x.shape[1] * kernel_size[0] * kernel_size[1]:
            return _conv_few_channels(x.astype(dtype, copy=False), weight, bias, kernel_size, stride, padding,
                                      dilation, activation, activation_args, target)
        return conv2d_prepacked_nhwc(to_nhwc(x, dtype), weight, bias, kernel_size, stride, padding, dilation, groups,
                                     activation, activation_args, target)

    return image_call(input, out, compute)


def _pointwise_fast(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, activation: str,
                    args: Sequence[float], out: np.ndarray | None) -> np.ndarray | None:
    """A 1x1, stride-1, unpadded dense convolution of a channels-last (or 1x1-pixel) image whose dtype is the
    weight's, as one product of its pixel matrix, without the general path's layout handling (~30 us a call, as
    much as the work on squeeze-and-excitation layers' 1x1 maps); None when x is not such an image."""
    n, c, h, w = x.shape
    if weight.shape[0] != c:
        return None
    view = x.transpose(0, 2, 3, 1)
    if not view.flags.c_contiguous:
        if h * w != 1:
            return None
        view = x.reshape(n, 1, 1, c)  # one pixel: NCHW and NHWC coincide (any strides reshape to a view or copy)
    check_activation(activation, args)
    o = weight.shape[1]
    result = None if out is None else nhwc_view(out)  # out's NHWC view when out is channels-last
    if result is not None and fits_out(result, (n, h, w, o), weight.dtype):
        given = out
    else:
        given, result = None, np.empty((n, h, w, o), dtype=weight.dtype)
    out2 = result.reshape(n * h * w, o)
    np.matmul(view.reshape(n * h * w, c), weight, out=out2)
    if out2.size <= BLOCK:  # in cache already: no blocks, no threads
        if bias is not None:
            np.add(out2, bias, out=out2)
        apply_activation(out2, activation, args)
    else:
        finish_rows(out2, None if bias is None else np.asarray(bias, dtype=weight.dtype), activation, args)
    return from_nhwc(result) if given is None else given


def image_call(input: np.ndarray, out: np.ndarray | None,
               compute: Callable[[np.ndarray, np.ndarray | None], np.ndarray]) -> np.ndarray:
    """The shape and layout handling of a kernel taking images: compute(x, target) gets x as (N, C, H, W) in any
    layout (a 3-D (C, H, W) input gets a batch of one) and, when `out` is a dense channels-last array of its rank,
    out's NHWC view as target; it returns its C-contiguous NHWC result (target itself when it wrote there), which
    becomes a channels-last (N, C, H, W) result (`out`, when written)."""
    unbatched = input.ndim == 3
    x = input[None] if unbatched else input
    if x.ndim != 4:
        raise ValueError(f"conv2d expects a 3-D or 4-D input, got shape {tuple(input.shape)}")
    target = None
    if out is not None and out.ndim == x.ndim - unbatched:
        target = nhwc_view(out[None] if unbatched else out)  # None unless out is dense in N, H, W, C order
    y = compute(x, target)
    if target is not None and y is target:
        return out
    y = from_nhwc(y)
    return y[0] if unbatched else y


# Input channels up to which a dense convolution (an RGB stem) gathers its patches from the NCHW image: the
# channels-last gather would copy runs of only kw * C values, the NCHW one copies whole output rows.
_FEW_CHANNELS = 4


def _conv_few_channels(x, weight, bias, kernel_hw, stride, pads, dilation, activation, args, out=None):
    """Dense convolution of an image with few channels: patches gathered as (kh, kw, C, N*Ho*Wo) from the padded
    NCHW image (long inner copies), then out (N*Ho*Wo, O) = patches.T @ weight — BLAS reads the transposed
    operand in place — so the output is NHWC as the other paths give it."""
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = kernel_hw, stride, dilation
    top, bottom, left, right = pads
    ho = conv_out_size(h, kh, sh, top, bottom, dh)
    wo = conv_out_size(w, kw, sw, left, right, dw)
    xp = np.zeros((n, c, h + top + bottom, w + left + right), dtype=weight.dtype)
    xp[:, :, top:top + h, left:left + w] = x
    s_n, s_c, s_h, s_w = xp.strides
    patches = strided_view(xp, (kh, kw, c, n, ho, wo), (s_h * dh, s_w * dw, s_c, s_n, s_h * sh, s_w * sw))
    cols = np.empty(patches.shape, dtype=xp.dtype)
    np.copyto(cols, patches)
    o = weight.shape[1]
    out = nhwc_result(out, (n, ho, wo, o), np.result_type(x.dtype, weight.dtype))
    out2 = out.reshape(n * ho * wo, o)
    np.matmul(cols.reshape(kh * kw * c, n * ho * wo).T, weight, out=out2)
    finish_rows(out2, None if bias is None else np.asarray(bias, dtype=out.dtype), activation, args)
    return out


@kernel(LINEAR_PREPACKED)
def linear_prepacked(input, weight, bias, activation="none", activation_args=(), *, out=None):
    """y = input @ weight + bias with weight stored (in_features, out_features), activation fused; written into
    `out` (and returned) when it is a C-contiguous array of the result's shape and dtype."""
    check_activation(activation, activation_args)
    k, o = weight.shape
    if input.ndim == 0:
        raise KernelArgumentError("linear: the input is a 0-d array (a scalar); it needs at least 1 dimension, the "
                                  f"last holding the {k} input features")
    if input.shape[-1] != k:
        raise KernelArgumentError(f"linear: input's last dimension is {input.shape[-1]}, the weight expects {k}")
    dtype = np.result_type(input.dtype, weight.dtype)
    lead = input.shape[:-1]
    x2 = input.reshape(-1, k)
    into = out is not None and fits_out(out, lead + (o,), dtype) and out.flags.c_contiguous
    out2 = out.reshape(x2.shape[0], o) if into else np.empty((x2.shape[0], o), dtype=dtype)  # a view of out
    np.matmul(x2, weight, out=out2)
    finish_rows(out2, None if bias is None else np.asarray(bias, dtype=dtype), activation, activation_args)
    return out if into else out2.reshape(lead + (o,))
