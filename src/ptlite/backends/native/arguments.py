"""How the C library takes an operator's arguments: the fused activations' codes, convolution and pooling output
sizes, pooling windows, bilinear tables and padding. The node-by-node kernels (kernels.py, elementwise.py) and the
executor's steps (steps.py) both read them; this module imports neither, so that a load whose nodes all run in
regions does not import the per-node kernels.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ptlite import ops

from . import _native as lib

F32 = np.dtype(np.float32)
INF = float("inf")

# Arithmetic by a number (TorchScript's `x * 0.5`): operator -> the library's operation (add and sub: alpha 1).
SCALAR_ARITHMETIC = {"aten::add.Scalar": lib.ADD, "aten::sub.Scalar": lib.SUB, "aten::mul.Scalar": lib.MUL,
                     "aten::div.Scalar": lib.DIV}

# Winograd's operators -> the positions of their transformed weight (positions, C, O), and the positions -> the
# library's layout: F(4x4, 3x3) and F(2x2, 3x3).
WINOGRAD_POSITIONS = {ops.CONV2D_WINOGRAD_V2: 36, ops.CONV2D_WINOGRAD_2X2: 16}
WINOGRAD_LAYOUTS = {36: lib.WINOGRAD, 16: lib.WINOGRAD_2X2}

# The fused activations of ptlite's prepacked operators -> (code, lo, hi).
_ACTIVATIONS = {"none": lib.ACT_NONE, "relu": lib.ACT_RELU, "clamp": lib.ACT_CLAMP, "hardswish": lib.ACT_HARDSWISH,
                "silu": lib.ACT_SILU, "gelu": lib.ACT_GELU, "gelu_tanh": lib.ACT_GELU_TANH}

def activation_epilogue(activation: Any, args: Any) -> tuple[int, float, float] | None:
    """A fused activation and its arguments as the library takes them (code, lo, hi); None for anything the
    reference's prepacked kernels would not take either (they then say what is wrong)."""
    code = _ACTIVATIONS.get(activation) if isinstance(activation, str) else None
    if code is None or not isinstance(args, (list, tuple)) or not all(isinstance(a, (int, float)) for a in args):
        return None
    if activation == "clamp":
        return (code, float(args[0]), float(args[1])) if len(args) == 2 else None
    return code, 0.0, INF


def conv_out_size(size: int, k: int, stride: int, before: int, after: int, dilation: int) -> int:
    """A convolution's output size along one dimension (padding `before` and `after`)."""
    return (size + before + after - dilation * (k - 1) - 1) // stride + 1



def pool_out_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """A pooling's output size along one dimension, as PyTorch computes it (ceil_mode included)."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + p:  # PyTorch: the last window must start inside the input or padding
        out -= 1
    return out


def pair(v: Any, default: Sequence[int] | None = None) -> tuple[int, int] | None:
    """An int or a list of one or two ints as a pair (an empty list: `default`); None for anything else."""
    if isinstance(v, int):
        return v, v
    v = list(v) if isinstance(v, (list, tuple)) else None
    if v is not None and not v and default is not None:
        return tuple(default)
    if v is None or len(v) not in (1, 2) or not all(isinstance(i, int) for i in v):
        return None
    return (v[0], v[-1])


POOLS = ("aten::max_pool2d", "aten::avg_pool2d")


def pool_args(op: str, args: Sequence[Any]) -> tuple | None:
    """(kernel, stride, padding, dilation, ceil_mode, the library's kind, divisor) from a 2-D pooling's arguments
    after its input (aten::max_pool2d's or aten::avg_pool2d's), or None where the library does not take them."""
    k = pair(args[0]) if args else None
    s = pair(args[1], k) if len(args) > 1 and k else k
    p = pair(args[2]) if len(args) > 2 else (0, 0)
    if op == "aten::max_pool2d":
        d = pair(args[3]) if len(args) > 3 else (1, 1)
        ceil = args[4] if len(args) > 4 else False
        kind, divisor = lib.POOL_MAX, 0.0
    else:
        d, ceil = (1, 1), args[3] if len(args) > 3 else False
        include = args[4] if len(args) > 4 else True
        override = args[5] if len(args) > 5 else None
        if type(include) is not bool or not (override is None or type(override) is int and override > 0):
            return None
        kind, divisor = (lib.POOL_AVG if include else lib.POOL_AVG_EXCLUDE_PAD), float(override or 0)
    if not (k and s and p and d) or type(ceil) is not bool or min(k + s + d) < 1 or min(p) < 0 \
            or 2 * p[0] > k[0] or 2 * p[1] > k[1]:
        return None
    return k, s, p, d, ceil, kind, divisor


def resize_table(h: int, w: int, ho: int, wo: int, align_corners: bool, scales: Sequence[float | None]) -> np.ndarray:
    """The library's bilinear table: per output row, then per output column, (i0, i1, w0, w1) as the reference
    computes them (PyTorch's source-index arithmetic)."""
    from ptlite.backends.numpy.upsample import linear_taps

    rows = np.stack(linear_taps(h, ho, align_corners, scales[0]), axis=1)
    cols = np.stack(linear_taps(w, wo, align_corners, scales[1]), axis=1)
    return np.ascontiguousarray(np.concatenate([rows, cols]), F32)


BILINEAR = ("aten::upsample_bilinear2d.vec", "aten::upsample_bilinear2d")


def bilinear_size(op: str, shape: Sequence[int], args: Sequence[Any]) -> tuple[tuple[int, int], tuple] | None:
    """(output H, W) and scales of a BILINEAR operator's arguments after its input (.vec: output_size,
    align_corners, scale_factors; the other: output_size, align_corners, scales_h, scales_w), or None where they
    are not plain values or give an empty output."""
    from ptlite.backends.numpy.upsample import _output_size

    if op == BILINEAR[0]:
        try:
            size = _output_size(tuple(shape[-2:]), args[0], args[2])
        except (TypeError, ValueError, IndexError):
            return None
    else:
        hw, scales = args[0], tuple(args[2:4]) + (None,) * (4 - len(args))
        if not isinstance(hw, (list, tuple)) or len(hw) != 2 or not all(type(i) is int for i in hw) \
                or not all(s is None or isinstance(s, float) for s in scales):
            return None
        size = (tuple(hw), scales)
    return size if min(size[0]) >= 1 else None


_GELU = {"none": lib.ACT_GELU, "tanh": lib.ACT_GELU_TANH}

# The elementwise activations: operator -> its epilogue (the library's code, lo, hi) from the operator's arguments
# after the input. The per-node kernels and the executor's steps both read it.
UNARY: dict[str, Callable[..., tuple[int, float, float]]] = {
    "aten::relu": lambda: (lib.ACT_RELU, 0.0, INF),
    "aten::relu6": lambda: (lib.ACT_CLAMP, 0.0, 6.0),
    "aten::hardtanh": lambda min_val=-1.0, max_val=1.0: (lib.ACT_CLAMP, float(min_val), float(max_val)),
    "aten::hardswish": lambda: (lib.ACT_HARDSWISH, 0.0, INF),
    "aten::silu": lambda: (lib.ACT_SILU, 0.0, INF),
    "aten::sigmoid": lambda: (lib.ACT_SIGMOID, 0.0, INF),
    "aten::tanh": lambda: (lib.ACT_TANH, 0.0, INF),
    "aten::hardsigmoid": lambda: (lib.ACT_HARDSIGMOID, 0.0, INF),
    "aten::gelu": lambda approximate="none": (_GELU[approximate], 0.0, INF),
    "aten::erf": lambda: (lib.ACT_ERF, 0.0, INF),
}


def unary_epilogue(key: str, args: Sequence[Any],
                   kwargs: dict[str, Any] | None = None) -> tuple[int, float, float] | None:
    """An elementwise activation's (code, lo, hi) from its arguments after the input (keyword ones under the
    schema's names); None where they are not what the library takes (the reference then says what is wrong)."""
    kwargs = kwargs or {}
    if any(isinstance(a, bool) or not isinstance(a, (int, float, str)) for a in (*args, *kwargs.values())):
        return None
    try:
        return UNARY[key](*args, **kwargs)
    except (TypeError, KeyError, ValueError):
        return None


def pad_dims(shape: Sequence[int], pad: Any, value: Any) -> tuple[list[int], list[int]] | None:
    """aten::constant_pad_nd's output shape and each dimension's leading padding (negative: cropped), from its
    `pad` ([before, after] of the last dimension, then of the one before, ...); None for what the library does not
    take (a non-numeric value, more pairs than dimensions, an output or input with an empty dimension)."""
    if not isinstance(pad, (list, tuple)) or len(pad) % 2 or len(pad) > 2 * len(shape) \
            or not all(type(p) is int for p in pad) or isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not 1 <= len(shape) <= lib.COPY_MAX_DIMS or 0 in shape:
        return None
    out, before = list(shape), [0] * len(shape)
    for i in range(len(pad) // 2):
        d = len(shape) - 1 - i
        before[d] = pad[2 * i]
        out[d] += pad[2 * i] + pad[2 * i + 1]
    return (out, before) if min(out) >= 1 else None


