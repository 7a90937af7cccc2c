"""The native backend's int8 kernels, bit for bit the reference's results (the same integer sums, the same float32
requantization). linear_int8 and dense (groups == 1) conv2d_int8 run on the library's int8 GEMM (csrc/qgemm.c:
AVX-512 VNNI where the CPU has it, plain C elsewhere), which gathers a convolution's patches from its channels-last
input a tile of rows at a time (a pointwise convolution's pixels are the GEMM's rows as they are). A depthwise
conv2d_int8 runs on the library's depthwise kernel (csrc/qdepthwise.c), channels-last too. Other arguments (other
grouped convolutions, offsets past int32) go to the reference's kernels. add_int8, quantize_per_tensor and
dequantize_per_tensor run on the library's elementwise kernels (csrc/qelementwise.c) where their operands are
dense in one memory order (C or channels-last); quantizing a C-contiguous image returns it channels-last, the
layout the convolutions after it read.
"""

from __future__ import annotations

import copy
import weakref

import numpy as np

from ptlite.backends.numpy._derived import derived
from ptlite.ops import ADD_INT8, CONV2D_INT8, DEQUANTIZE_PER_TENSOR, LINEAR_INT8, QUANTIZE_PER_TENSOR

from . import _native as lib
from .kernels import _kernel, _reference

QNR = 16  # the GEMM's columns are padded to a multiple of this (PL_QNR)
QNB = 64  # the packed weight's panel width (PL_QNB)
MAX_K = 60000  # PL_QGEMM_MAX_K
MAX_TAPS = 16384  # PL_QDEPTHWISE_MAX_TAPS
INT32 = 1 << 31


def pack(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An int8 (K, N) weight as the GEMM reads it (native.h): panels of QNB columns, each (ceil(K / 4), width, 4),
    the width QNB or the rest of N rounded up to QNR, rows and columns past K and N zero; and its columns' sums
    (int64)."""
    k, n = weight.shape
    k4, np_ = -(-k // 4), -(-n // QNR) * QNR
    padded = np.zeros((k4 * 4, np_), np.int8)
    padded[:k, :n] = weight
    panels = [padded[:, j:j + QNB].reshape(k4, 4, -1).transpose(0, 2, 1).ravel() for j in range(0, np_, QNB)]
    return np.concatenate(panels), weight.astype(np.int64).sum(axis=0)


def _requantization(weight: np.ndarray, weight_scale: np.ndarray, bias: np.ndarray | None, input_scale: float,
                    input_zero_point: int, output_scale: float) -> tuple[np.ndarray, np.ndarray] | None:
    """The GEMM's int32 offsets (the bias rounded at the product's scale, minus the input's zero point times each
    column's sum) and float32 multipliers, padded to the packed weight's width; None where an offset and the sums
    could pass int32 (the reference sums in int64)."""
    k, n = weight.shape
    packed, colsum = derived((weight,), ("qgemm pack",), lambda: pack(weight))
    made = _bias_and_multipliers(weight_scale, bias, input_scale, output_scale, k * 255 * 128 + int(
        np.abs(colsum).max(initial=0)) * int(input_zero_point))
    if made is None:
        return None
    rounded, product_multipliers = made
    width = -(-n // QNR) * QNR  # read 16 columns at a time
    offsets = np.zeros(width, np.int32)
    offsets[:n] = rounded - int(input_zero_point) * colsum
    multipliers = np.zeros(width, np.float32)
    multipliers[:n] = product_multipliers
    return offsets, multipliers


def _bias_and_multipliers(weight_scale: np.ndarray, bias: np.ndarray | None, input_scale: float,
                          output_scale: float, reach: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The bias rounded to integers at the product's scale (int64) and the float32 multipliers (product scale /
    output scale), as the reference's requantize makes them; None where the library cannot give the reference's
    results: a rounded bias plus `reach` (the largest the rest of a sum can be) past int32, or a multiplier or
    rounded bias that is not finite (the reference's NaN and overflowed values are its own)."""
    product_scale = np.float32(input_scale) * weight_scale
    with np.errstate(all="ignore"):
        multipliers = (product_scale / np.float32(output_scale)).astype(np.float32)
        rounded = np.zeros(weight_scale.shape[0]) if bias is None else \
            np.rint(bias.astype(np.float64) / product_scale.astype(np.float64))
    if not (np.all(np.isfinite(multipliers)) and np.all(np.isfinite(rounded))) \
            or np.abs(rounded).max(initial=0) + reach >= INT32:
        return None
    return rounded.astype(np.int64), multipliers


def _gemm(x2: np.ndarray, input_scale: float, input_zero_point: int, weight: np.ndarray, weight_scale: np.ndarray,
          bias: np.ndarray | None, output_scale: float, output_zero_point: int, output_min: int, output_max: int,
          y2: np.ndarray) -> bool:
    """y2 (m, n) uint8 = the int8 GEMM of x2 (m, k) uint8 and weight (k, n); False (nothing written) where the
    library does not take the arguments. The packed weight, offsets and multipliers are made once per weight and
    quantization parameters (derived), not at every call."""
    k, n = weight.shape
    if k > MAX_K or not (0 <= output_min <= output_max <= 255) or not 0 <= output_zero_point <= 255:
        return False
    packed, _ = derived((weight,), ("qgemm pack",), lambda: pack(weight))
    key = ("qgemm requantization", float(input_scale), int(input_zero_point), float(output_scale))
    made = derived((weight, weight_scale, bias), key, lambda: _requantization(
        weight, weight_scale, bias, input_scale, input_zero_point, output_scale))
    if made is None:
        return False
    lib.qgemm(x2, packed, made[0], made[1], y2,
              (y2.shape[0], k, n, k, int(output_zero_point), int(output_min), int(output_max)))
    return True


@_kernel(LINEAR_INT8)
def linear_int8(input, input_scale, input_zero_point, weight, weight_scale, bias, output_scale, output_zero_point,
                output_min=0, output_max=255, *, out=None):
    if isinstance(input, np.ndarray) and input.dtype == np.uint8 and weight.dtype == np.int8 and weight.ndim == 2 \
            and input.ndim >= 1 and input.shape[-1] == weight.shape[0] and input.size and weight.shape[1] \
            and weight_scale.dtype == np.float32 and weight_scale.shape == (weight.shape[1],) \
            and (bias is None or bias.shape == weight_scale.shape) and _qparams(input_scale, input_zero_point) \
            and _qparams(output_scale, output_zero_point) and not (isinstance(out, np.ndarray)
                                                                   and np.may_share_memory(out, input)):
        shape = input.shape[:-1] + (weight.shape[1],)
        into = isinstance(out, np.ndarray) and out.shape == shape and out.dtype == np.uint8 \
            and out.flags.c_contiguous and out.flags.writeable
        y = out if into else np.empty(shape, np.uint8)
        x2 = np.ascontiguousarray(input).reshape(-1, weight.shape[0])
        if _gemm(x2, input_scale, input_zero_point, weight, weight_scale, bias, output_scale, output_zero_point,
                 output_min, output_max, y.reshape(-1, weight.shape[1])):
            return y
    return _reference(LINEAR_INT8)(input, input_scale, input_zero_point, weight, weight_scale, bias, output_scale,
                                   output_zero_point, output_min, output_max, out=out)


class _Conv:
    """A conv2d_int8 node's library call for one input shape, made once (derived) so that a call only checks the
    input's layout and runs: the GEMM on the pixels (pointwise) or on the patches it gathers (`patches`), or the
    depthwise kernel; with the packed weight, offsets, multipliers and sizes."""

    __slots__ = ("depthwise", "weight", "offsets", "multipliers", "sizes", "patches", "shape", "__weakref__")

    def __init__(self, depthwise: bool, weight: np.ndarray, offsets: np.ndarray, multipliers: np.ndarray,
                 sizes: tuple[int, ...], patches: tuple[int, ...] | None, shape: tuple[int, int, int, int]) -> None:
        self.depthwise, self.weight, self.offsets, self.multipliers = depthwise, weight, offsets, multipliers
        self.sizes, self.patches, self.shape = sizes, patches, shape  # shape: the result's, NHWC


def _prepare_conv(shape, input_scale, input_zero_point, weight, weight_scale, bias, kernel_size, stride, padding,
                  dilation, groups, output_scale, output_zero_point, output_min, output_max) -> _Conv | None:
    """The library's call for these arguments and an input of `shape`; None where it does not take them (the
    reference's kernel runs, and says what is wrong where something is)."""
    n, c, h, w = shape
    try:
        kernel_size, stride, padding, dilation = (tuple(int(v) for v in a) for a in (kernel_size, stride, padding,
                                                                                      dilation))
    except (TypeError, ValueError):
        return None
    if weight.dtype != np.int8 or weight.ndim != 2 or weight.shape[1] < 1 or weight_scale.dtype != np.float32 \
            or weight_scale.shape != (weight.shape[1],) or (bias is not None and bias.shape != weight_scale.shape) \
            or not _qparams(input_scale, input_zero_point) or not _qparams(output_scale, output_zero_point) \
            or max(*kernel_size, *stride, *padding, *dilation) >= 1 << 30 \
            or not 0 <= output_min <= output_max <= 255 or len(kernel_size) != 2 or len(padding) != 4 \
            or len(stride) != 2 or len(dilation) != 2:
        return None
    kh, kw = kernel_size
    sh, sw = stride
    dh, dw = dilation
    top, bottom, left, right = padding
    ho = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    wo = (w + left + right - dw * (kw - 1) - 1) // sw + 1
    if ho < 1 or wo < 1 or min(top, bottom, left, right) < 0 or min(kh, kw, sh, sw, dh, dw) < 1 or n * c * h * w == 0:
        return None
    o = weight.shape[1]
    if groups == 1 and weight.shape[0] == c * kh * kw:
        packed, _ = derived((weight,), ("qgemm pack",), lambda: pack(weight))
        made = _requantization(weight, weight_scale, bias, input_scale, input_zero_point, output_scale)
        if made is None or weight.shape[0] > MAX_K:
            return None
        pointwise = (kh, kw, sh, sw, top, bottom, left, right) == (1, 1, 1, 1, 0, 0, 0, 0)
        sizes = (n * ho * wo, c * kh * kw, o, c * kh * kw, output_zero_point, output_min, output_max)
        patches = None if pointwise else (n, h, w, c, kh, kw, sh, sw, dh, dw, top, left, ho, wo, input_zero_point)
        return _Conv(False, packed, made[0], made[1], sizes, patches, (n, ho, wo, o))
    if groups == c == o > 1 and weight.shape[0] == kh * kw <= MAX_TAPS:
        made = _depthwise_requantization(weight_scale, bias, input_scale, output_scale, kh * kw)
        if made is None:
            return None
        taps = derived((weight,), ("qdepthwise weight",), lambda: np.ascontiguousarray(weight, dtype=np.int32))
        sizes = (n, h, w, c, kh, kw, sh, sw, dh, dw, top, left, ho, wo, input_zero_point, output_zero_point,
                 output_min, output_max)
        return _Conv(True, taps, made[0], made[1], sizes, None, (n, ho, wo, o))
    return None


# id(weight) -> the last call of conv2d_int8 on that weight: weak references to the weight, its scales and bias
# (or None), the input's shape, the other arguments as given, and a weak reference to the prepared _Conv (derived
# keeps it while the weight lives). An interpreter's step passes the same argument objects at every call, so a
# repeated call finds its _Conv here without building and hashing derived's key; anything else goes to derived.
# Only for read-only weights (a loaded file's): derived compares writeable ones with a snapshot at every call.
_LAST_CONV: dict[int, tuple] = {}


def _last_conv(input: np.ndarray, weight: np.ndarray, weight_scale: np.ndarray, bias: np.ndarray | None,
               others: tuple) -> _Conv | None:
    last = _LAST_CONV.get(id(weight))
    if last is None or last[0]() is not weight or last[1]() is not weight_scale or last[3] != input.shape \
            or (bias is not None if last[2] is None else last[2]() is not bias) or last[4] != others:
        return None
    return last[5]()


@_kernel(CONV2D_INT8)
def conv2d_int8(input, input_scale, input_zero_point, weight, weight_scale, bias, kernel_size, stride, padding,
                dilation, groups, output_scale, output_zero_point, output_min=0, output_max=255, *, out=None):
    if isinstance(input, np.ndarray) and input.dtype == np.uint8 and input.ndim == 4 \
            and isinstance(weight, np.ndarray) and isinstance(weight_scale, np.ndarray):
        others = (input_scale, input_zero_point, kernel_size, stride, padding, dilation, groups, output_scale,
                  output_zero_point, output_min, output_max)
        call = _last_conv(input, weight, weight_scale, bias, others)
        if call is None:
            args = (float(input_scale), int(input_zero_point), tuple(kernel_size), tuple(stride), tuple(padding),
                    tuple(dilation), int(groups), float(output_scale), int(output_zero_point), int(output_min),
                    int(output_max))
            call = derived((weight, weight_scale, bias), ("conv2d_int8", input.shape, args), lambda: _prepare_conv(
                input.shape, args[0], args[1], weight, weight_scale, bias, *args[2:]))
            from ptlite.ir.weights import frozen  # here, as in derived: a load need not import it

            if call is not None and all(a is None or frozen(a) for a in (weight, weight_scale, bias)):
                if len(_LAST_CONV) >= 4096:
                    _LAST_CONV.clear()
                _LAST_CONV[id(weight)] = (weakref.ref(weight), weakref.ref(weight_scale),
                                          None if bias is None else weakref.ref(bias), input.shape,
                                          copy.deepcopy(others), weakref.ref(call))
        if call is not None:
            nhwc = input.transpose(0, 2, 3, 1)
            if not nhwc.flags.c_contiguous:
                nhwc = np.ascontiguousarray(nhwc)
            n, ho, wo, o = call.shape
            fits = isinstance(out, np.ndarray) and out.shape == (n, o, ho, wo) and out.dtype == np.uint8 \
                and out.flags.writeable
            target = out.transpose(0, 2, 3, 1) if fits else None
            into = target is not None and target.flags.c_contiguous
            y = target if into else np.empty(call.shape, np.uint8)
            try:
                if call.depthwise:
                    lib.qdepthwise(nhwc, call.weight, call.offsets, call.multipliers, y, call.sizes)
                elif call.patches is None:
                    lib.qgemm(nhwc, call.weight, call.offsets, call.multipliers, y, call.sizes)
                else:
                    lib.qgemm(nhwc, call.weight, call.offsets, call.multipliers, y, call.sizes, call.patches)
            except ValueError:  # what the library's checks refuse (an out overlapping the input, ...): the reference
                return _reference(CONV2D_INT8)(input, input_scale, input_zero_point, weight, weight_scale, bias,
                                               kernel_size, stride, padding, dilation, groups, output_scale,
                                               output_zero_point, output_min, output_max, out=out)
            if into:
                return out
            if fits:  # out in another layout: written as the reference would
                out[...] = y.transpose(0, 3, 1, 2)
                return out
            return y.transpose(0, 3, 1, 2)
    return _reference(CONV2D_INT8)(input, input_scale, input_zero_point, weight, weight_scale, bias, kernel_size,
                                   stride, padding, dilation, groups, output_scale, output_zero_point, output_min,
                                   output_max, out=out)


def _depthwise_requantization(weight_scale: np.ndarray, bias: np.ndarray | None, input_scale: float,
                              output_scale: float, taps: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The depthwise kernel's int32 offsets (the bias rounded at the product's scale) and float32 multipliers, as
    the reference's requantize makes them; None where the library cannot give its results (see
    _bias_and_multipliers)."""
    made = _bias_and_multipliers(weight_scale, bias, input_scale, output_scale, taps * 255 * 128)
    return None if made is None else (made[0].astype(np.int32), made[1])


# ------------------------------------------------------------------------------------------------ elementwise

ADD, QUANTIZE, QUANTIZE_NHWC, DEQUANTIZE = range(4)  # enum pl_q_op


def _memory(x: np.ndarray) -> tuple[str, np.ndarray] | None:
    """x's values in memory order as a 1-D view, and that order ("C", or "NHWC" for a channels-last image); None
    where x is dense in neither."""
    if x.flags.c_contiguous:
        return "C", x.reshape(-1)
    if x.ndim == 4:
        nhwc = x.transpose(0, 2, 3, 1)
        if nhwc.flags.c_contiguous:
            return "NHWC", nhwc.reshape(-1)
    return None


def _target(out, shape: tuple[int, ...], dtype: type, order: str) -> tuple[np.ndarray, np.ndarray]:
    """The result array of `shape` in memory `order` and its 1-D view: `out` where it is a writeable array of that
    shape, dtype and order, else a new one."""
    if isinstance(out, np.ndarray) and out.shape == shape and out.dtype == dtype and out.flags.writeable:
        found = _memory(out)
        if found is not None and found[0] == order:
            return out, found[1]
    if order == "C":
        y = np.empty(shape, dtype)
        return y, y.reshape(-1)
    n, c, h, w = shape
    nhwc = np.empty((n, h, w, c), dtype)
    return nhwc.transpose(0, 3, 1, 2), nhwc.reshape(-1)


def _qparams(scale, zero_point) -> bool:
    return 0 <= int(zero_point) <= 255 and 0 < float(scale) < np.inf


@_kernel(ADD_INT8)
def add_int8(self, self_scale, self_zero_point, other, other_scale, other_zero_point, output_scale,
             output_zero_point, output_min=0, output_max=255, *, out=None):
    if isinstance(self, np.ndarray) and isinstance(other, np.ndarray) and self.dtype == other.dtype == np.uint8 \
            and self.shape == other.shape and _qparams(self_scale, self_zero_point) \
            and _qparams(other_scale, other_zero_point) and _qparams(output_scale, output_zero_point) \
            and 0 <= int(output_min) <= int(output_max) <= 255:
        a, b = _memory(self), _memory(other)
        if a is not None and b is not None and a[0] == b[0]:
            y, flat = _target(out, self.shape, np.uint8, a[0])
            lib.qelementwise(ADD, a[1], b[1], flat,
                             (flat.size, 1, 1, int(self_zero_point), int(other_zero_point), int(output_zero_point),
                              int(output_min), int(output_max)),
                             (float(np.float32(self_scale)), float(np.float32(other_scale)),
                              float(np.float32(1 / output_scale))))
            return y
    return _reference(ADD_INT8)(self, self_scale, self_zero_point, other, other_scale, other_zero_point,
                                output_scale, output_zero_point, output_min, output_max, out=out)


@_kernel(QUANTIZE_PER_TENSOR)
def quantize_per_tensor(input, scale, zero_point, *, out=None):
    if isinstance(input, np.ndarray) and input.dtype == np.float32 and _qparams(scale, zero_point):
        found = _memory(input)
        if found is not None:
            order, flat = found
            image = input.ndim == 4 and input.shape[1] > 1 and input.shape[2] * input.shape[3] > 1
            given = _memory(out) if isinstance(out, np.ndarray) and out.shape == input.shape \
                and out.dtype == np.uint8 and out.flags.writeable else None
            # out's layout where it has one; else a C-contiguous image (the model's input) becomes channels-last on
            # the way, the layout a convolution reads
            wanted = given[0] if given is not None else "NHWC" if order == "C" and image else order
            op = QUANTIZE if wanted == order else QUANTIZE_NHWC if order == "C" and image else None
            if op is not None:
                y, target = _target(out, input.shape, np.uint8, wanted)
                channels, pixels = (input.shape[1], input.shape[2] * input.shape[3]) if op == QUANTIZE_NHWC \
                    else (1, 1)
                lib.qelementwise(op, flat, None, target, (flat.size, channels, pixels, 0, 0, int(zero_point), 0, 255),
                                 (1.0, 1.0, float(np.float32(1 / scale))))
                return y
    return _reference(QUANTIZE_PER_TENSOR)(input, scale, zero_point, out=out)


@_kernel(DEQUANTIZE_PER_TENSOR)
def dequantize_per_tensor(input, scale, zero_point, *, out=None):
    if isinstance(input, np.ndarray) and input.dtype == np.uint8 and _qparams(scale, zero_point):
        found = _memory(input)
        if found is not None:
            order, flat = found
            y, target = _target(out, input.shape, np.float32, order)
            lib.qelementwise(DEQUANTIZE, flat, None, target, (flat.size, 1, 1, int(zero_point), 0, 0, 0, 255),
                             (float(np.float32(scale)), 1.0, 1.0))
            return y
    return _reference(DEQUANTIZE_PER_TENSOR)(input, scale, zero_point, out=out)
