"""The reference's quantized kernels (ops/quantized.py has the arithmetic they define), exact in their integers.

The integer sums of products are computed as float GEMMs and convolutions on integer data (input minus its zero
point, weights): a float sum of integers is exact while every partial sum stays below the format's integer limit,
2**24 in float32 and 2**53 in float64, in any order of summation. With K products a sum, inputs within
`reach` of their zero point and weights at most `wmax` in magnitude, each partial sum is at most K * reach * wmax,
so `exact_dtype` takes float32 while that is below 2**24 (K <= 514 at the extremes 255 and 128) and float64 past it
(tests/quantization/test_int8_kernels.py checks the bound at its edge). The requantization then rounds as PyTorch's
kernels do: the int64 accumulator (bias added) converted to float32, times the float32 multiplier, rounded half to
even.
"""

from __future__ import annotations

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.errors import KernelArgumentError
from ptlite.ops import (
    ADD_INT8,
    CONV2D_INT8,
    DEQUANTIZE_PER_CHANNEL,
    DEQUANTIZE_PER_TENSOR,
    EMBEDDING_INT8,
    GRU_DYNAMIC_INT8,
    LINEAR_DYNAMIC_INT8,
    LINEAR_INT8,
    LSTM_DYNAMIC_INT8,
    QUANTIZE_PER_TENSOR,
)

from ._derived import derived
from ._layout import fits_out, nhwc_view
from .prepacked import conv2d_prepacked

QMIN, QMAX = 0, 255  # an activation's range (uint8)
FLOAT32_EXACT = 1 << 24  # every integer up to this is a float32


def exact_dtype(k: int, zero_point: int, weight: np.ndarray) -> np.dtype:
    """float32 when sums of k products (input - zero_point) * weight are exact in it, else float64."""
    reach = max(zero_point - QMIN, QMAX - zero_point)
    wmax = derived((weight,), ("int8 max",), lambda: int(np.abs(weight.astype(np.int16)).max(initial=0)))
    return np.dtype(np.float32) if k * reach * wmax < FLOAT32_EXACT else np.dtype(np.float64)


def as_float(weight: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The int8 weight in a float dtype, made once per weight (a Module's calls reuse it)."""
    return derived((weight,), ("int8 as", dtype.name), lambda: weight.astype(dtype))


def check_qparams(where: str, name: str, scale: float, zero_point: int) -> None:
    if not (np.isfinite(scale) and scale > 0):
        raise KernelArgumentError(f"{where}: {name} scale is {scale}; a scale must be a positive finite number")
    if not QMIN <= zero_point <= QMAX:
        raise KernelArgumentError(f"{where}: {name} zero point is {zero_point}; uint8 zero points lie in "
                                  f"[{QMIN}, {QMAX}]")


def check_quantized(where: str, name: str, x: np.ndarray) -> None:
    if x.dtype != np.uint8:
        raise KernelArgumentError(f"{where}: {name} is a {x.dtype} tensor; it takes the uint8 tensor "
                                  f"{QUANTIZE_PER_TENSOR} makes of a float one")


def check_weight(where: str, weight: np.ndarray, weight_scale: np.ndarray, bias: np.ndarray | None,
                 channels: int) -> None:
    if weight.dtype != np.int8:
        raise KernelArgumentError(f"{where}: the weight is {weight.dtype}; it takes int8 weights (ptlite.quantize "
                                  "makes them)")
    if weight_scale.shape != (channels,) or weight_scale.dtype != np.float32:
        raise KernelArgumentError(f"{where}: weight_scale is {weight_scale.dtype}{list(weight_scale.shape)}; it "
                                  f"takes a float32 scale per output channel ({channels})")
    if bias is not None and bias.shape != (channels,):
        raise KernelArgumentError(f"{where}: bias has shape {list(bias.shape)}, not ({channels},)")


def requantize(acc: np.ndarray, bias: np.ndarray | None, product_scale: np.ndarray, output_scale: float,
               output_zero_point: int, output_min: int, output_max: int, out: np.ndarray | None = None) -> np.ndarray:
    """uint8 outputs of exact integer accumulators `acc` (..., O) (float arrays holding integers) with a float32
    bias per channel: the bias rounded to int at product_scale (input scale x weight scale, per channel) and added,
    then round(float32(acc) x float32(product_scale / output_scale)) + output_zero_point, clamped."""
    total = acc.astype(np.int64)
    if bias is not None:
        total += np.rint(bias.astype(np.float64) / product_scale.astype(np.float64)).astype(np.int64)
    multiplier = (product_scale / np.float32(output_scale)).astype(np.float32)
    scaled = np.rint(total.astype(np.float32) * multiplier)
    scaled += np.float32(output_zero_point)
    np.clip(scaled, output_min, output_max, out=scaled)
    if out is not None:
        out[...] = scaled
        return out
    return scaled.astype(np.uint8)


def _clamp_range(where: str, output_min: int, output_max: int) -> None:
    if not QMIN <= output_min <= output_max <= QMAX:
        raise KernelArgumentError(f"{where}: output range [{output_min}, {output_max}] is not within "
                                  f"[{QMIN}, {QMAX}]")


@kernel(QUANTIZE_PER_TENSOR)
def quantize_per_tensor(input, scale, zero_point, *, out=None):
    """uint8 q = clamp(round_half_even(x * float32(1 / scale)) + zero_point, 0, 255), in x's memory layout."""
    where = "quantize_per_tensor"
    check_qparams(where, "the", scale, zero_point)
    if input.dtype.kind != "f":
        raise KernelArgumentError(f"{where}: the input is a {input.dtype} tensor; it quantizes float tensors")
    scaled = np.multiply(input, np.float32(1 / scale), dtype=np.float32)
    np.rint(scaled, out=scaled)
    scaled += np.float32(zero_point)
    np.clip(scaled, QMIN, QMAX, out=scaled)
    if fits_out(out, scaled.shape, np.dtype(np.uint8)):
        out[...] = scaled
        return out
    return scaled.astype(np.uint8, order="K")


@kernel(DEQUANTIZE_PER_TENSOR)
def dequantize_per_tensor(input, scale, zero_point, *, out=None):
    """float32 (q - zero_point) * scale, in q's memory layout."""
    where = "dequantize_per_tensor"
    check_qparams(where, "the", scale, zero_point)
    check_quantized(where, "the input", input)
    result = out if fits_out(out, input.shape, np.dtype(np.float32)) else np.empty_like(input, dtype=np.float32)
    np.subtract(input, np.float32(zero_point), out=result, dtype=np.float32)
    result *= np.float32(scale)
    return result


@kernel(DEQUANTIZE_PER_CHANNEL)
def dequantize_per_channel(input, scales, axis):
    """float32 q * scales[channel] along `axis` (symmetric int8 weights)."""
    where = "dequantize_per_channel"
    if input.dtype != np.int8:
        raise KernelArgumentError(f"{where}: the input is {input.dtype}; it takes an int8 weight")
    if not -input.ndim <= axis < input.ndim or scales.shape != (input.shape[axis],):
        raise KernelArgumentError(f"{where}: {list(scales.shape)} scales for axis {axis} of a "
                                  f"{list(input.shape)} weight")
    shape = [1] * input.ndim
    shape[axis] = -1
    return input.astype(np.float32) * scales.astype(np.float32).reshape(shape)


@kernel(CONV2D_INT8)
def conv2d_int8(input, input_scale, input_zero_point, weight, weight_scale, bias, kernel_size, stride, padding,
                dilation, groups, output_scale, output_zero_point, output_min=0, output_max=255, *, out=None):
    """2-D convolution of a quantized image by int8 weights in a prepacked layout; returns uint8, channels-last
    (`out` when it is such an array of the result's shape). Padding stands for the real 0 (the zero point)."""
    where = "conv2d_int8"
    check_quantized(where, "the input", input)
    check_qparams(where, "the input", input_scale, input_zero_point)
    check_qparams(where, "the output", output_scale, output_zero_point)
    _clamp_range(where, output_min, output_max)
    groups = int(groups)
    channels = weight.shape[-1] * (groups if weight.ndim == 3 else 1)
    check_weight(where, weight, weight_scale, bias, channels)
    k = weight.shape[1] if weight.ndim == 3 else weight.shape[0]
    if weight.ndim == 2 and groups > 1:
        k = weight.shape[0]  # depthwise: a tap per kernel position
    dtype = exact_dtype(k, input_zero_point, weight)
    shifted = np.subtract(input, dtype.type(input_zero_point), dtype=dtype)  # the real 0 is 0 now: zero padding
    acc = conv2d_prepacked(shifted, as_float(weight, dtype), None, kernel_size, stride, padding, dilation, groups)
    batched = acc if acc.ndim == 4 else acc[None]
    product_scale = np.float32(input_scale) * weight_scale
    target = None
    if out is not None and fits_out(out, acc.shape, np.dtype(np.uint8)):
        target = nhwc_view(out if out.ndim == 4 else out[None])
    result = requantize(nhwc_view(batched), bias, product_scale, output_scale, output_zero_point, output_min,
                        output_max, target)
    if target is not None:
        return out
    result = result.transpose(0, 3, 1, 2)
    return result if acc.ndim == 4 else result[0]


@kernel(LINEAR_INT8)
def linear_int8(input, input_scale, input_zero_point, weight, weight_scale, bias, output_scale, output_zero_point,
                output_min=0, output_max=255, *, out=None):
    """Quantized input (..., in_features) times int8 weight (in_features, out_features); returns uint8."""
    where = "linear_int8"
    check_quantized(where, "the input", input)
    check_qparams(where, "the input", input_scale, input_zero_point)
    check_qparams(where, "the output", output_scale, output_zero_point)
    _clamp_range(where, output_min, output_max)
    k, o = _linear_shape(where, input, weight)
    check_weight(where, weight, weight_scale, bias, o)
    dtype = exact_dtype(k, input_zero_point, weight)
    shifted = np.subtract(input.reshape(-1, k), dtype.type(input_zero_point), dtype=dtype)
    acc = shifted @ as_float(weight, dtype)
    shape = input.shape[:-1] + (o,)
    target = out.reshape(-1, o) if fits_out(out, shape, np.dtype(np.uint8)) and out.flags.c_contiguous else None
    result = requantize(acc, bias, np.float32(input_scale) * weight_scale, output_scale, output_zero_point,
                        output_min, output_max, target)
    return out if target is not None else result.reshape(shape)


@kernel(ADD_INT8)
def add_int8(self, self_scale, self_zero_point, other, other_scale, other_zero_point, output_scale,
             output_zero_point, output_min=0, output_max=255, *, out=None):
    """Quantized a + b (broadcasting): both dequantized in float32, summed, quantized at the output's scale."""
    where = "add_int8"
    for name, x, scale, zero_point in (("self", self, self_scale, self_zero_point),
                                       ("other", other, other_scale, other_zero_point)):
        check_quantized(where, name, x)
        check_qparams(where, name, scale, zero_point)
    check_qparams(where, "the output", output_scale, output_zero_point)
    _clamp_range(where, output_min, output_max)
    try:
        shape = np.broadcast_shapes(self.shape, other.shape)
    except ValueError:
        raise KernelArgumentError(f"{where}: shapes {list(self.shape)} and {list(other.shape)} do not broadcast") \
            from None
    real = np.subtract(self, np.float32(self_zero_point), dtype=np.float32)
    real *= np.float32(self_scale)
    if real.shape != shape:
        real = np.broadcast_to(real, shape).copy(order="K")
    part = np.subtract(other, np.float32(other_zero_point), dtype=np.float32)
    part *= np.float32(other_scale)
    real += part
    real *= np.float32(1 / output_scale)
    np.rint(real, out=real)
    real += np.float32(output_zero_point)
    np.clip(real, output_min, output_max, out=real)
    if fits_out(out, shape, np.dtype(np.uint8)):
        out[...] = real
        return out
    return real.astype(np.uint8, order="K")


def dynamic_qparams(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row (scale, zero point) of a float matrix: each row's range with 0 in it, over uint8's 256 levels
    (PyTorch's MinMaxObserver arithmetic): float32 scales and int zero points, a row each."""
    lo = np.minimum(rows.min(axis=1, initial=0.0), 0.0).astype(np.float64)
    hi = np.maximum(rows.max(axis=1, initial=0.0), 0.0).astype(np.float64)
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        raise KernelArgumentError("linear_dynamic_int8: the input holds infinities or NaN, which 8-bit "
                                  "quantization cannot represent")
    scale = np.maximum((hi - lo) / (QMAX - QMIN), float(np.finfo(np.float32).eps)).astype(np.float32)
    zero_point = np.clip(QMIN - np.rint(lo / scale.astype(np.float64)), QMIN, QMAX)
    return scale, zero_point


@kernel(LINEAR_DYNAMIC_INT8)
def linear_dynamic_int8(input, weight, weight_scale, bias, *, out=None):
    """Float input (..., in_features), each row (a token's features) quantized on its own range at this call
    (dynamic_qparams), times int8 weight (in_features, out_features); returns float32 accumulator x row scale x
    weight scale + bias."""
    where = "linear_dynamic_int8"
    if input.dtype.kind != "f":
        raise KernelArgumentError(f"{where}: the input is a {input.dtype} tensor; it takes a float tensor")
    k, o = _linear_shape(where, input, weight)
    check_weight(where, weight, weight_scale, bias, o)
    rows = input.reshape(-1, k)
    scale, zero_point = dynamic_qparams(rows)
    q = np.multiply(rows, (1 / scale)[:, None], dtype=np.float32)
    np.rint(q, out=q)
    q += zero_point[:, None].astype(np.float32)
    np.clip(q, QMIN, QMAX, out=q)
    dtype = exact_dtype(k, QMIN, weight)  # the widest reach: a zero point at either end
    q -= zero_point[:, None].astype(np.float32)  # exact: integers below 2**8
    acc = q.astype(dtype, copy=False) @ as_float(weight, dtype)
    shape = input.shape[:-1] + (o,)
    into = fits_out(out, shape, np.dtype(np.float32)) and out.flags.c_contiguous
    result = out.reshape(-1, o) if into else np.empty((acc.shape[0], o), np.float32)
    np.multiply(acc, scale[:, None] * weight_scale[None, :], out=result, casting="same_kind")
    if bias is not None:
        result += bias.astype(np.float32, copy=False)
    return out if into else result.reshape(shape)


def _linear_shape(where: str, input: np.ndarray, weight: np.ndarray) -> tuple[int, int]:
    if weight.ndim != 2:
        raise KernelArgumentError(f"{where}: the weight has {weight.ndim} dimensions; it takes (in_features, "
                                  "out_features)")
    k, o = weight.shape
    if input.ndim == 0 or input.shape[-1] != k:
        raise KernelArgumentError(f"{where}: the input's last dimension is "
                                  f"{input.shape[-1] if input.ndim else 'missing'}, the weight expects {k}")
    return k, o


@kernel(EMBEDDING_INT8)
def embedding_int8(weight, scales, indices):
    """Rows `indices` of an int8 table (V, D), each times its float32 scale."""
    where = "embedding_int8"
    if weight.dtype != np.int8 or weight.ndim != 2 or scales.shape != (weight.shape[0],):
        raise KernelArgumentError(f"{where}: a {weight.dtype}{list(weight.shape)} table with {list(scales.shape)} "
                                  "scales; it takes an int8 (rows, features) table and a scale per row")
    if indices.dtype.kind not in "iu":
        raise KernelArgumentError(f"{where}: the indices are {indices.dtype}; they must be integers")
    if indices.size and (indices.min() < 0 or indices.max() >= weight.shape[0]):
        bad = int(indices.min()) if indices.min() < 0 else int(indices.max())
        raise KernelArgumentError(f"{where}: index {bad} is out of range for a table of {weight.shape[0]} rows")
    rows = np.take(weight, indices, axis=0).astype(np.float32)
    rows *= np.take(scales, indices)[..., None]
    return rows


@kernel(LSTM_DYNAMIC_INT8)
def lstm_dynamic_int8(input, hx, params, has_biases, num_layers, bidirectional, batch_first):
    """aten::lstm with int8 weight matrices (ops/quantized.py): (output, h_n, c_n)."""
    return _dynamic_rnn("lstm", input, hx[0], hx[1], params, has_biases, num_layers, bidirectional, batch_first)


@kernel(GRU_DYNAMIC_INT8)
def gru_dynamic_int8(input, hx, params, has_biases, num_layers, bidirectional, batch_first):
    """aten::gru with int8 weight matrices (ops/quantized.py): (output, h_n)."""
    return _dynamic_rnn("gru", input, hx, None, params, has_biases, num_layers, bidirectional, batch_first)[:2]


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * np.tanh(0.5 * x) + 0.5


def _dynamic_rnn(mode: str, input: np.ndarray, h0: np.ndarray, c0: np.ndarray | None, params: list,
                 has_biases: bool, num_layers: int, bidirectional: bool, batch_first: bool) -> tuple:
    where = f"{mode}_dynamic_int8"
    gates = 4 if mode == "lstm" else 3
    dirs = 2 if bidirectional else 1
    per = 6 if has_biases else 4
    if len(params) != per * num_layers * dirs:
        raise KernelArgumentError(f"{where}: {len(params)} parameters do not fit {num_layers} layer(s) x {dirs} "
                                  f"direction(s) of {per}")
    if input.ndim != 3:
        raise KernelArgumentError(f"{where}: the input has {input.ndim} dimensions; it takes 3 (steps, batch, "
                                  "features), or (batch, steps, features) with batch_first")
    seq = np.ascontiguousarray(np.swapaxes(input, 0, 1) if batch_first else input, dtype=np.float32)
    steps, batch = seq.shape[:2]
    hidden = params[2].shape[0]
    for name, state in (("h0", h0), ("c0", c0)):
        if state is not None and state.shape != (num_layers * dirs, batch, hidden):
            raise KernelArgumentError(f"{where}: the initial state {name} has shape {list(state.shape)}; the "
                                      f"weights and the input need {[num_layers * dirs, batch, hidden]}")
    h_n, c_n = [], []
    for layer in range(num_layers):
        outputs = []
        for d in range(dirs):
            row = layer * dirs + d
            w_ih, s_ih, w_hh, s_hh, *biases = params[row * per:(row + 1) * per]
            b_ih, b_hh = biases if has_biases else (None, None)
            projected = linear_dynamic_int8(seq.reshape(steps * batch, -1), w_ih, s_ih, b_ih)
            projected = projected.reshape(steps, batch, gates * hidden)
            h = np.array(h0[row], dtype=np.float32)
            c = None if c0 is None else np.array(c0[row], dtype=np.float32)
            out = np.empty((steps, batch, hidden), np.float32)
            for t in (range(steps - 1, -1, -1) if d else range(steps)):
                recurrent = linear_dynamic_int8(h, w_hh, s_hh, b_hh)
                x_t = projected[t]
                if mode == "lstm":
                    total = x_t + recurrent
                    i, f, g, o = (total[:, k * hidden:(k + 1) * hidden] for k in range(4))
                    c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
                    h = _sigmoid(o) * np.tanh(c)
                else:
                    r = _sigmoid(x_t[:, :hidden] + recurrent[:, :hidden])
                    z = _sigmoid(x_t[:, hidden:2 * hidden] + recurrent[:, hidden:2 * hidden])
                    n = np.tanh(x_t[:, 2 * hidden:] + r * recurrent[:, 2 * hidden:])
                    h = (1 - z) * n + z * h
                out[t] = h
            outputs.append(out)
            h_n.append(h)
            c_n.append(c)
        seq = np.concatenate(outputs, axis=2) if dirs > 1 else outputs[0]
    output = np.ascontiguousarray(np.swapaxes(seq, 0, 1)) if batch_first else seq
    return output, np.stack(h_n), None if c0 is None else np.stack(c_n)
