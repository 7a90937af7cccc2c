"""Convolution kernels (1-D, 2-D and 3-D, grouped, depthwise, transposed) on NCHW / NCDHW arrays, as NumPy + BLAS."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ptlite.backends.numpy import kernel

from ._args import expand
from ._parallel import parallel_for


def pad2d(x: np.ndarray, top: int, bottom: int, left: int, right: int, value: float = 0.0) -> np.ndarray:
    """x[..., H, W] in a new buffer grown (or, for negative sizes, cropped) per side, borders set to value.

    Only the borders are written besides the one copy of the interior.
    """
    if top == bottom == left == right == 0:
        return x
    h, w = x.shape[-2:]
    hp, wp = h + top + bottom, w + left + right
    out = np.empty(x.shape[:-2] + (hp, wp), dtype=x.dtype)
    # Source rows/columns that land inside the buffer.
    r0, r1 = max(0, -top), min(h, hp - top)
    c0, c1 = max(0, -left), min(w, wp - left)
    dr, dc = r0 + top, c0 + left
    out[..., :dr, :] = value
    out[..., dr + (r1 - r0):, :] = value
    out[..., dr:dr + (r1 - r0), :dc] = value
    out[..., dr:dr + (r1 - r0), dc + (c1 - c0):] = value
    out[..., dr:dr + (r1 - r0), dc:dc + (c1 - c0)] = x[..., r0:r1, c0:c1]
    return out


def _out_size(size: int, k: int, stride: int, pad_total: int, dilation: int) -> int:
    out = (size + pad_total - dilation * (k - 1) - 1) // stride + 1
    if out <= 0:
        raise ValueError(f"convolution output size {out} is not positive (input {size}, kernel {k}, "
                         f"stride {stride}, padding {pad_total}, dilation {dilation})")
    return out


def _add_bias(out: np.ndarray, bias: np.ndarray | None, channel_axis: int = 1) -> np.ndarray:
    if bias is None:
        return out
    shape = [1] * out.ndim
    shape[channel_axis] = -1
    b = np.asarray(bias).reshape(shape)
    if b.dtype == out.dtype or np.can_cast(b.dtype, out.dtype, "same_kind"):
        np.add(out, b, out=out, casting="same_kind")
        return out
    return out + b


def _conv_pointwise(x, weight, groups, stride):
    """1x1 convolution without padding: one matmul (per group) over the channel axis."""
    n, c = x.shape[:2]
    o = weight.shape[0]
    sh, sw = stride
    if sh != 1 or sw != 1:
        x = x[:, :, ::sh, ::sw]
    ho, wo = x.shape[2:]
    out = _gemm_columns(weight, x.reshape(n, c, ho * wo), groups, np.result_type(x.dtype, weight.dtype))
    return out.reshape(n, o, ho, wo)


def _gemm_columns(weight, cols, groups, dtype):
    """out (N, O, L) = weight (O, K per group) @ cols (N, groups * K, L), group by group: one BLAS call."""
    n, rows, length = cols.shape
    o, k = weight.shape[0], rows // groups
    if groups == 1:
        w2 = weight.reshape(o, k)
        out = np.empty((n, o, length), dtype=dtype)
        if n == 1:
            np.matmul(w2, cols[0], out=out[0])
        else:
            np.matmul(w2, cols, out=out)
        return out
    out = np.empty((n, groups, o // groups, length), dtype=dtype)
    np.matmul(weight.reshape(groups, o // groups, k), cols.reshape(n, groups, k, length), out=out)
    return out.reshape(n, o, length)


def phase_buffer(x, top: int, left: int, stride, dilation, kernel, out_hw) -> tuple[np.ndarray, int]:
    """x zero-padded and split into stride phases, rows flattened, so that each kernel tap is one slice.

    Returns (buffer of shape (sh, sw, N, C, hq * wq), wq). Phase (a, b) holds padded pixel
    (a + sh * r, b + sw * q) at r * wq + q. Output pixel (r, q) of tap (i, j) then reads
    base(i, j) + r * wq + q, so a tap over the whole output is buffer[a, b, :, :, base:base + ho * wq]:
    a "wide" image whose last wq - wo columns are discarded. Long slices keep NumPy's inner loops long.
    """
    n, c, h, w = x.shape
    (sh, sw), (dh, dw), (kh, kw), (ho, wo) = stride, dilation, kernel, out_hw
    hq = ho + (kh - 1) * dh // sh + 1  # + 1: the wide rows of the last output row spill into the next
    wq = wo + (kw - 1) * dw // sw
    buf = np.zeros((sh, sw, n, c, hq, wq), dtype=x.dtype)
    for a in range(sh):
        y0 = (a - top) % sh  # first input row that lands in phase row set a
        r0 = (y0 + top - a) // sh
        rows = min(len(range(y0, h, sh)), hq - r0)
        for b in range(sw):
            x0 = (b - left) % sw
            q0 = (x0 + left - b) // sw
            cols = min(len(range(x0, w, sw)), wq - q0)
            if rows > 0 and cols > 0:
                buf[a, b, :, :, r0:r0 + rows, q0:q0 + cols] = \
                    x[:, :, y0:y0 + sh * (rows - 1) + 1:sh, x0:x0 + sw * (cols - 1) + 1:sw]
    return buf.reshape(sh, sw, n, c, hq * wq), wq


def _phase_taps(kernel, stride, dilation, wq):
    """(i, j, phase row, phase column, flat offset) of every kernel tap in a phase buffer."""
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            di, dj = i * dilation[0], j * dilation[1]
            yield i, j, di % stride[0], dj % stride[1], (di // stride[0]) * wq + dj // stride[1]


def _conv_depthwise(x, weight, bias, pads, stride, dilation, out_hw):
    """groups == in_channels: accumulate kernel taps (long contiguous slices of a phase buffer) with
    per-channel weights broadcast; no im2col. Crop of the wide rows and bias share one final pass.
    Channels are split across threads."""
    n, c = x.shape[:2]
    o, _, kh, kw = weight.shape
    mult, (ho, wo) = o // c, out_hw
    buf, wq = phase_buffer(x, pads[0], pads[2], stride, dilation, (kh, kw), out_hw)
    length = ho * wq
    dtype = np.result_type(x.dtype, weight.dtype)
    taps = weight.reshape(c, mult, kh, kw)
    out = np.empty((n, o, ho, wo), dtype=dtype)
    bias4 = None if bias is None else np.asarray(bias, dtype=dtype).reshape(1, c, mult, 1, 1)
    out5 = out.reshape(n, c, mult, ho, wo)
    tap_list = list(_phase_taps((kh, kw), stride, dilation, wq))

    def channels(c0: int, c1: int) -> None:
        acc = np.empty((n, c1 - c0, mult, length), dtype=dtype)
        tmp = np.empty_like(acc)
        for t, (i, j, a, b, base) in enumerate(tap_list):
            view = buf[a, b, :, c0:c1, None, base:base + length]
            np.multiply(view, taps[c0:c1, :, i, j, None], out=acc if t == 0 else tmp)
            if t:
                np.add(acc, tmp, out=acc)
        wide = acc.reshape(n, c1 - c0, mult, ho, wq)[..., :wo]
        if bias4 is None:
            np.copyto(out5[:, c0:c1], wide)
        else:
            np.add(wide, bias4[:, c0:c1], out=out5[:, c0:c1])

    parallel_for(channels, c, max(1, _PARALLEL_GRAIN // max(1, n * mult * length * len(tap_list))))
    return out


# Work (multiply-adds) below which a depthwise convolution stays on one thread.
_PARALLEL_GRAIN = 1 << 18


def _conv_depthwise_nhwc(x, weight, bias, pads, stride, dilation, out_hw):
    """groups == in_channels with many channels and few pixels: the padded input in channels-last order, viewed
    (without copying) as patches (N, Ho, Wo, kh, kw, C), reduced against the taps by one einsum, which accumulates
    in a single pass per tap with channels as the contiguous inner loop. Output rows are split across threads."""
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    (ho, wo), (sh, sw), (dh, dw) = out_hw, stride, dilation
    top, bottom, left, right = pads
    dtype = np.result_type(x.dtype, weight.dtype)
    buf = np.zeros((n, h + top + bottom, w + left + right, c), dtype=dtype)
    buf[:, top:top + h, left:left + w, :] = x.transpose(0, 2, 3, 1)
    taps = np.ascontiguousarray(weight.reshape(c, kh, kw).transpose(1, 2, 0), dtype=dtype)  # (kh, kw, C)
    s_n, s_h, s_w, s_c = buf.strides
    patches = as_strided(buf, shape=(n, ho, wo, kh, kw, c),
                         strides=(s_n, s_h * sh, s_w * sw, s_h * dh, s_w * dw, s_c), writeable=False)
    acc = np.empty((n, ho, wo, c), dtype=dtype)

    def rows(r0: int, r1: int) -> None:
        np.einsum("nhwijc,ijc->nhwc", patches[:, r0:r1], taps, out=acc[:, r0:r1])

    parallel_for(rows, ho, max(1, _PARALLEL_GRAIN // max(1, n * wo * c * kh * kw)))
    out = np.empty((n, o, ho, wo), dtype=dtype)
    if bias is None:
        np.copyto(out, acc.transpose(0, 3, 1, 2))
    else:
        np.add(acc.transpose(0, 3, 1, 2), np.asarray(bias, dtype=dtype).reshape(1, o, 1, 1), out=out)
    return out


def _conv_im2col(x, weight, groups, stride, dilation, out_hw):
    """General convolution: im2col by one strided copy, then one (batched) BLAS matmul."""
    n, c = x.shape[:2]
    o, cg, kh, kw = weight.shape
    ho, wo = out_hw
    sh, sw = stride
    dh, dw = dilation
    dtype = np.result_type(x.dtype, weight.dtype)
    s_n, s_c, s_h, s_w = x.strides
    patches = as_strided(x, shape=(n, groups, cg, kh, kw, ho, wo),
                         strides=(s_n, s_c * cg, s_c, s_h * dh, s_w * dw, s_h * sh, s_w * sw),
                         writeable=False)
    cols = np.empty((n, groups, cg, kh, kw, ho, wo), dtype=x.dtype)
    np.copyto(cols, patches)
    out = _gemm_columns(weight, cols.reshape(n, groups * cg * kh * kw, ho * wo), groups, dtype)
    return out.reshape(n, o, ho, wo)


def conv2d_nchw(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, stride: Sequence[int],
                pads: Sequence[int], dilation: Sequence[int], groups: int) -> np.ndarray:
    """2-D convolution of x (N, C, H, W) by weight (O, C/groups, kh, kw); pads: top, bottom, left, right."""
    n, c, h, w = x.shape
    o, cg, kh, kw = weight.shape
    if c != cg * groups or o % groups:
        raise ValueError(f"conv2d: input has {c} channels, weight {tuple(weight.shape)} with groups={groups}")
    top, bottom, left, right = pads
    ho = _out_size(h, kh, stride[0], top + bottom, dilation[0])
    wo = _out_size(w, kw, stride[1], left + right, dilation[1])
    if kh == kw == 1 and not any(pads):
        return _add_bias(_conv_pointwise(x, weight, groups, stride), bias)
    if groups == c and groups > 1 and cg == 1:
        if o == c and 8 * c >= ho * wo:  # many channels, few pixels: channels-last inner loops are longer
            return _conv_depthwise_nhwc(x, weight, bias, pads, stride, dilation, (ho, wo))
        return _conv_depthwise(x, weight, bias, pads, stride, dilation, (ho, wo))
    xp = pad2d(x, top, bottom, left, right)
    return _add_bias(_conv_im2col(xp, weight, groups, stride, dilation, (ho, wo)), bias)


def conv_transpose_nchw(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, stride: Sequence[int],
                        padding: Sequence[int], output_padding: Sequence[int], groups: int,
                        dilation: Sequence[int]) -> np.ndarray:
    """Transposed convolution over the spatial axes of x (N, C, *spatial), 2-D or 3-D: one matmul to per-tap
    columns, then a strided scatter-add per kernel tap."""
    n, c, *sizes = x.shape
    cin, og, *kernel = weight.shape
    if cin != c or c % groups or len(kernel) != len(sizes):
        raise ValueError(f"conv_transpose{len(sizes)}d: input of shape {tuple(x.shape)}, weight "
                         f"{tuple(weight.shape)}, groups={groups}")
    o, cg = og * groups, c // groups
    full = [(i - 1) * s + d * (k - 1) + 1 for i, k, s, d in zip(sizes, kernel, stride, dilation, strict=True)]
    outs = [f - 2 * p + op for f, p, op in zip(full, padding, output_padding, strict=True)]
    if any(size <= 0 for size in outs):
        raise ValueError(f"conv_transpose{len(sizes)}d: output size {tuple(outs)} is not positive")
    dtype = np.result_type(x.dtype, weight.dtype)
    taps = math.prod(kernel)
    w_t = weight.reshape(groups, cg, og * taps).transpose(0, 2, 1)
    cols = np.matmul(w_t, x.reshape(n, groups, cg, math.prod(sizes)))  # (n, groups, og * taps, pixels)
    cols = cols.reshape(n, o, *kernel, *sizes)
    canvas = [max(f + op, p + size) for f, op, p, size in zip(full, output_padding, padding, outs, strict=True)]
    acc = np.zeros((n, o, *canvas), dtype=dtype)
    for tap in itertools.product(*(range(k) for k in kernel)):
        where = tuple(slice(t * d, t * d + s * (i - 1) + 1, s)
                      for t, d, s, i in zip(tap, dilation, stride, sizes, strict=True))
        dst = acc[(slice(None), slice(None), *where)]
        np.add(dst, cols[(slice(None), slice(None), *tap)], out=dst)
    crop = tuple(slice(p, p + size) for p, size in zip(padding, outs, strict=True))
    return _add_bias(np.ascontiguousarray(acc[(slice(None), slice(None), *crop)]), bias)


# Elements of im2col columns a 3-D convolution builds at once: it fills them a slab of output frames at a time, so
# that a video's columns (kernel taps x input channels x every output voxel) never take gigabytes.
_COLUMNS_BUDGET = 1 << 24


def _zero_pad(x: np.ndarray, pads: Sequence[tuple[int, int]]) -> np.ndarray:
    """x in a new zero-bordered buffer, (before, after) >= 0 per trailing axis; x itself when nothing is padded."""
    if not any(before or after for before, after in pads):
        return x
    lead = x.ndim - len(pads)
    out = np.zeros(x.shape[:lead] + tuple(size + b + a for size, (b, a) in zip(x.shape[lead:], pads)),
                   dtype=x.dtype)
    out[(Ellipsis, *(slice(b, b + size) for size, (b, _) in zip(x.shape[lead:], pads)))] = x
    return out


def conv3d_ncdhw(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, stride: Sequence[int],
                 pads: Sequence[tuple[int, int]], dilation: Sequence[int], groups: int) -> np.ndarray:
    """3-D convolution of x (N, C, D, H, W) by weight (O, C/groups, kd, kh, kw); pads: (before, after) per axis.

    1x1x1 unpadded: one matmul over the channels. Otherwise im2col, a slab of output frames at a time (at most
    _COLUMNS_BUDGET elements of columns): one strided copy of the slab's patches, then one matmul per group (a
    batched one)."""
    n, c = x.shape[:2]
    o, cg, *kernel = weight.shape
    if c != cg * groups or o % groups:
        raise ValueError(f"conv3d: input has {c} channels, weight {tuple(weight.shape)} with groups={groups}")
    outs = [_out_size(size, k, s, b + a, d)
            for size, k, s, (b, a), d in zip(x.shape[2:], kernel, stride, pads, dilation, strict=True)]
    dtype = np.result_type(x.dtype, weight.dtype)
    if kernel == [1, 1, 1] and not any(b or a for b, a in pads):
        picked = x[:, :, ::stride[0], ::stride[1], ::stride[2]]
        out = _gemm_columns(weight, picked.reshape(n, c, math.prod(outs)), groups, dtype)
        return _add_bias(out.reshape(n, o, *outs), bias)
    xp = _zero_pad(x, pads)
    (do, ho, wo), (kd, kh, kw), (sd, sh, sw), (dd, dh, dw) = outs, kernel, stride, dilation
    k = cg * kd * kh * kw
    frames = max(1, min(do, _COLUMNS_BUDGET // (groups * k * ho * wo)))
    w3 = weight.reshape(groups, o // groups, k)
    out = np.empty((n, o, do, ho, wo), dtype=dtype)
    columns = np.empty(groups * k * frames * ho * wo, dtype=x.dtype)  # reused by every slab: no new pages each time
    _, s_c, s_d, s_h, s_w = xp.strides
    for b in range(n):
        by_frame = out[b].reshape(groups, o // groups, do, ho * wo)
        for f0 in range(0, do, frames):
            f1 = min(do, f0 + frames)
            patches = as_strided(xp[b, :, f0 * sd:], shape=(groups, cg, kd, kh, kw, f1 - f0, ho, wo),
                                 strides=(s_c * cg, s_c, s_d * dd, s_h * dh, s_w * dw, s_d * sd, s_h * sh, s_w * sw),
                                 writeable=False)
            cols = columns[:patches.size].reshape(patches.shape)
            np.copyto(cols, patches)
            # the slab's output frames, a (groups, O / groups, frames * Ho * Wo) view with rows BLAS can write
            target = by_frame[:, :, f0:f1].reshape(groups, o // groups, (f1 - f0) * ho * wo)
            np.matmul(w3, cols.reshape(groups, k, (f1 - f0) * ho * wo), out=target)
    return _add_bias(out, bias)


def _same_pads(weight_shape: Sequence[int], dilation: Sequence[int], stride: Sequence[int]) -> list[int]:
    """padding='same': d*(k-1) per axis, the odd one on the far side -> [before0, after0, before1, ...]."""
    if any(s != 1 for s in stride):
        raise ValueError("padding='same' is not supported for strided convolutions")
    pads = []
    for k, d in zip(weight_shape, dilation, strict=True):
        total = d * (k - 1)
        pads += [total // 2, total - total // 2]
    return pads


def _string_pads(padding: str, kernel_shape, dilation, stride) -> list[int]:
    if padding == "valid":
        return [0] * (2 * len(kernel_shape))
    if padding == "same":
        return _same_pads(kernel_shape, dilation, stride)
    raise ValueError(f"padding must be 'valid' or 'same', got {padding!r}")


def _convolution_nd(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """Any 1-D/2-D/3-D convolution, batched or not; padding is per axis (ints) or a string."""
    spatial = weight.ndim - 2
    if spatial not in (1, 2, 3):
        raise NotImplementedError(f"ptlite supports 1-D, 2-D and 3-D convolutions, not {spatial}-D (weight of "
                                  f"shape {tuple(weight.shape)})")
    unbatched = x.ndim == spatial + 1
    if unbatched:
        x = x[None]
    if x.ndim != spatial + 2:
        raise ValueError(f"convolution: input of shape {x.shape} does not match weight {weight.shape}")
    stride = expand(stride, spatial, "stride")
    dilation = expand(dilation, spatial, "dilation")
    groups = int(groups)
    if spatial == 3:
        out = _convolution_3d(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
        return out[0] if unbatched else out
    if spatial == 1:  # as 2-D with H = 1
        x, weight = x[:, :, None, :], weight[:, :, None, :]
        stride, dilation = (1,) + stride, (1,) + dilation
    if transposed:
        if isinstance(padding, str):
            raise ValueError("transposed convolution takes integer padding")
        pad = (0,) * (2 - spatial) + expand(padding, spatial, "padding")
        opad = (0,) * (2 - spatial) + expand(output_padding, spatial, "output_padding")
        out = conv_transpose_nchw(x, weight, bias, stride, pad, opad, groups, dilation)
    else:
        if isinstance(padding, str):
            pads = _string_pads(padding, weight.shape[2:], dilation, stride)
        else:
            pads = [p for v in (0,) * (2 - spatial) + expand(padding, spatial, "padding") for p in (v, v)]
        out = conv2d_nchw(x, weight, bias, stride, pads, dilation, groups)
    if spatial == 1:
        out = out[:, :, 0, :]
    return out[0] if unbatched else out


def _convolution_3d(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    """A batched 3-D convolution (N, C, D, H, W), transposed or not."""
    if transposed:
        if isinstance(padding, str):
            raise ValueError("transposed convolution takes integer padding")
        return conv_transpose_nchw(x, weight, bias, stride, expand(padding, 3, "padding"),
                                   expand(output_padding, 3, "output_padding"), groups, dilation)
    if isinstance(padding, str):
        flat = _string_pads(padding, weight.shape[2:], dilation, stride)
        pads = list(zip(flat[::2], flat[1::2]))
    else:
        pads = [(p, p) for p in expand(padding, 3, "padding")]
    return conv3d_ncdhw(x, weight, bias, stride, pads, dilation, groups)


@kernel("aten::conv2d",
        "aten::conv2d.padding",
        "aten::conv1d",
        "aten::conv1d.padding",
        "aten::conv3d",
        "aten::conv3d.padding")
def conv(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _convolution_nd(input, weight, bias, stride, padding, dilation, False, 0, groups)


@kernel("aten::_convolution_mode")
def _convolution_mode(input, weight, bias, stride, padding, dilation, groups):
    """What jit.trace records for string padding ('same' / 'valid')."""
    return _convolution_nd(input, weight, bias, stride, padding, dilation, False, 0, groups)


@kernel("aten::conv_transpose2d.input",
        "aten::conv_transpose1d",
        "aten::conv_transpose3d.input")
def conv_transpose(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _convolution_nd(input, weight, bias, stride, padding, dilation, True, output_padding, groups)


@kernel("aten::convolution")
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return _convolution_nd(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)


@kernel("aten::_convolution",
        "aten::_convolution.deprecated")
def _convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups, *flags):
    return _convolution_nd(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
