"""The int8 operators as steps of a native plan (steps.py builds the others): conv2d_int8 and linear_int8 on the int8
GEMM or the depthwise kernel, add_int8, quantize_per_tensor and dequantize_per_tensor on the elementwise kernels.
Each step takes the packed weight and the requantization its kernel in quantized.py makes (the same arrays,
derived once per weight), so a region's results are its nodes' results bit for bit. uint8 images are channels-last,
as float32 ones are; a quantized image the model is given as NCHW float32 becomes channels-last as it is quantized.

A step's weight and requantization table are float32 views of their bytes (a plan's buffers are counted in
floats): the GEMM's packed int8 weight or the depthwise kernel's int32 taps, and the int32 offsets followed by the
float32 multipliers (plan.h).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ptlite import ops
from ptlite.backends.numpy._derived import derived
from ptlite.ir.graph import Node

from . import _native as lib
from . import quantized
from .steps import NOT_CONSTANT, Shapes, Step

U8 = "uint8"
_NO_PATCHES = (0,) * 15  # a GEMM step's convolution fields when its rows are the input's


def quantized_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    """The step of an int8 operator node where the library takes its arguments and shapes; else None (its kernel
    runs it, and says what is wrong where something is)."""
    build = _BUILDERS.get(node.op)
    tensors = (0, 3) if node.op == ops.ADD_INT8 else (0,)  # the operands; the rest must be constants
    if build is None or any(a is NOT_CONSTANT for i, a in enumerate(args) if i not in tensors):
        return None
    try:
        return build(node, args, shapes)
    except (TypeError, ValueError, OverflowError):  # an argument of another kind: the kernel's own error
        return None


def _with_range(args: list, given: int) -> list:
    """The arguments with the output range's defaults (0, 255) where the node leaves them out (`given`: the count
    before them)."""
    return [*args, *(0, 255)[len(args) - given:]] if given <= len(args) <= given + 2 else []


def _bytes_as_floats(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array).reshape(-1).view(np.float32)


def _table(offsets: np.ndarray, multipliers: np.ndarray) -> np.ndarray:
    """The requantization table: int32 offsets then float32 multipliers, as float32 bits."""
    return np.concatenate([np.ascontiguousarray(offsets, np.int32).view(np.float32),
                           np.ascontiguousarray(multipliers, np.float32)])


def _conv(node: Node, args: list, shapes: Shapes) -> Step | None:
    x = node.inputs[0]
    shape = shapes.of(x, U8)
    full = _with_range(args, 13)
    if shape is None or len(shape) != 4 or not full or not all(isinstance(a, np.ndarray) for a in full[3:5]) \
            or not (full[5] is None or isinstance(full[5], np.ndarray)) or not shapes.can_read(x, True):
        return None
    scale, zero, weight, weight_scale, bias, kernel, stride, padding, dilation, groups, out_scale, out_zero, lo, hi = \
        full[1:]
    call = quantized._prepare_conv(shape, float(scale), int(zero), weight, weight_scale, bias, tuple(kernel),
                                   tuple(stride), tuple(padding), tuple(dilation), int(groups), float(out_scale),
                                   int(out_zero), int(lo), int(hi))
    if call is None or not shapes.layout(x, True):  # (the layout taken last: a node refused takes none)
        return None
    n, ho, wo, o = call.shape
    shapes.set(node.outputs[0], (n, o, ho, wo), nhwc=True, dtype=U8)
    table = _table(call.offsets, call.multipliers)
    if call.depthwise:
        return Step(lib.STEP_QDEPTHWISE, list(call.sizes), (0.0, 0.0, 0.0),
                    [x, _bytes_as_floats(call.weight), table], node.outputs[0])
    ints = [*call.sizes, int(call.patches is not None), *(call.patches or _NO_PATCHES)]
    return Step(lib.STEP_QGEMM, ints, (0.0, 0.0, 0.0), [x, _bytes_as_floats(call.weight), table], node.outputs[0])


def _linear(node: Node, args: list, shapes: Shapes) -> Step | None:
    x = node.inputs[0]
    shape = shapes.of(x, U8)
    full = _with_range(args, 8)
    if shape is None or not shape or not full or not all(isinstance(a, np.ndarray) for a in full[3:5]) \
            or not (full[5] is None or isinstance(full[5], np.ndarray)) or not shapes.can_read(x, False):
        return None
    scale, zero, weight, weight_scale, bias, out_scale, out_zero, lo, hi = full[1:]
    k, rows = shape[-1], int(np.prod(shape[:-1], dtype=np.int64))
    if weight.dtype != np.int8 or weight.ndim != 2 or weight.shape[0] != k or not weight.shape[1] or rows * k == 0 \
            or k > quantized.MAX_K or weight_scale.dtype != np.float32 or weight_scale.shape != (weight.shape[1],) \
            or (bias is not None and bias.shape != weight_scale.shape) or not quantized._qparams(scale, zero) \
            or not quantized._qparams(out_scale, out_zero) or not 0 <= int(lo) <= int(hi) <= 255:
        return None
    made = quantized._requantization(weight, weight_scale, bias, float(scale), int(zero), float(out_scale))
    if made is None or not shapes.layout(x, False):
        return None
    packed, _ = derived((weight,), ("qgemm pack",), lambda: quantized.pack(weight))
    n = weight.shape[1]
    shapes.set(node.outputs[0], (*shape[:-1], n), dtype=U8)
    ints = [rows, k, n, k, int(out_zero), int(lo), int(hi), 0, *_NO_PATCHES]
    return Step(lib.STEP_QGEMM, ints, (0.0, 0.0, 0.0), [x, _bytes_as_floats(packed), _table(*made)], node.outputs[0])


def _add(node: Node, args: list, shapes: Shapes) -> Step | None:
    a, b = node.inputs[0], node.inputs[3]
    sa = shapes.of(a, U8)
    full = _with_range(args, 8)
    if sa is None or shapes.of(b, U8) != sa or not full or not sa or int(np.prod(sa, dtype=np.int64)) == 0:
        return None
    _, sa_scale, za, _, sb_scale, zb, out_scale, zy, lo, hi = full
    if not (quantized._qparams(sa_scale, za) and quantized._qparams(sb_scale, zb)
            and quantized._qparams(out_scale, zy) and 0 <= int(lo) <= int(hi) <= 255):
        return None
    nhwc = _shared_layout(shapes, a, b)
    if nhwc is None:
        return None
    shapes.set(node.outputs[0], sa, nhwc, dtype=U8)
    count = int(np.prod(sa, dtype=np.int64))
    ints = [quantized.ADD, count, 1, 1, int(za), int(zb), int(zy), int(lo), int(hi)]
    floats = (float(np.float32(sa_scale)), float(np.float32(sb_scale)), float(np.float32(1 / out_scale)))
    return Step(lib.STEP_QELEMENTWISE, ints, floats, [a, b], node.outputs[0])


def _shared_layout(shapes: Shapes, a: Any, b: Any) -> bool | None:
    """The layout two same-shaped operands share and the result takes (True: channels-last); None where they
    cannot share one. An image without one yet takes the other's, or channels-last."""
    known = [shapes.nhwc[v.id] for v in (a, b) if v.id in shapes.nhwc]
    nhwc = len(shapes.shape[a.id]) == 4 and (known[0] if known else True)
    if not (shapes.can_read(a, nhwc) and shapes.can_read(b, nhwc)):  # (neither takes a layout then)
        return None
    shapes.layout(a, nhwc)
    shapes.layout(b, nhwc)
    return nhwc


def _quantize(node: Node, args: list, shapes: Shapes) -> Step | None:
    x = node.inputs[0]
    shape = shapes.of(x)
    if shape is None or len(args) != 3 or not shape or int(np.prod(shape, dtype=np.int64)) == 0 \
            or not quantized._qparams(args[1], args[2]):
        return None
    count = int(np.prod(shape, dtype=np.int64))
    channels = pixels = 1
    if len(shape) == 4:  # an image comes out channels-last: from an NCHW input (the model's) on the way
        if shape[1] > 1 and shape[2] * shape[3] > 1 and shapes.layout(x, False):
            op, channels, pixels = quantized.QUANTIZE_NHWC, shape[1], shape[2] * shape[3]
        elif shapes.layout(x, True):
            op = quantized.QUANTIZE
        else:
            return None
        nhwc = True
    elif shapes.layout(x, False):
        op, nhwc = quantized.QUANTIZE, False
    else:
        return None
    shapes.set(node.outputs[0], shape, nhwc, dtype=U8)
    ints = [op, count, channels, pixels, 0, 0, int(args[2]), 0, 255]
    return Step(lib.STEP_QELEMENTWISE, ints, (1.0, 1.0, float(np.float32(1 / args[1]))), [x], node.outputs[0])


def _dequantize(node: Node, args: list, shapes: Shapes) -> Step | None:
    x = node.inputs[0]
    shape = shapes.of(x, U8)
    if shape is None or len(args) != 3 or not shape or int(np.prod(shape, dtype=np.int64)) == 0 \
            or not quantized._qparams(args[1], args[2]):
        return None
    nhwc = len(shape) == 4 and shapes.nhwc.get(x.id, True)
    if not shapes.layout(x, nhwc):
        return None
    shapes.set(node.outputs[0], shape, nhwc)
    ints = [quantized.DEQUANTIZE, int(np.prod(shape, dtype=np.int64)), 1, 1, int(args[2]), 0, 0, 0, 255]
    return Step(lib.STEP_QELEMENTWISE, ints, (float(np.float32(args[1])), 1.0, 1.0), [x], node.outputs[0])


_BUILDERS = {ops.CONV2D_INT8: _conv, ops.LINEAR_INT8: _linear, ops.ADD_INT8: _add,
             ops.QUANTIZE_PER_TENSOR: _quantize, ops.DEQUANTIZE_PER_TENSOR: _dequantize}
QUANTIZED = frozenset(_BUILDERS)
