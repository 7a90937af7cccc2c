"""Nodes as the steps of a native plan (executor.py runs runs of them): for each operator the executor takes, the
library's step kind and parameters, read from the node's constant arguments and the static shapes of its operands,
and the shape and layout of its result.

Images are channels-last, other tensors row-major: each 4-D value gets one layout, from the step that makes it
(or, for a region's input, the first step that reads it), and a step that needs the other layout is refused (the
region ends there). View operators (views.py) are aliases of their input's memory where the view is contiguous
(kind 0: no step to run), and a strided copy where it is not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ptlite import ops
from ptlite.errors import FormatError
from ptlite.ir.graph import Graph, Node, Program, Value
from ptlite.ir.memory_plan import OUT_ATTR

from . import _native as lib
from .arguments import (
    BILINEAR,
    F32,
    POOLS,
    SCALAR_ARITHMETIC,
    UNARY,
    WINOGRAD_LAYOUTS,
    WINOGRAD_POSITIONS,
    activation_epilogue,
    bilinear_size,
    conv_out_size,
    pad_dims,
    pair,
    pool_args,
    pool_out_size,
    resize_table,
    unary_epilogue,
)
from .views import OPS as VIEWS
from .views import broadcast_shape, broadcast_strides, is_contiguous, merge_dims, reduced, row_major, strided_view

NOT_CONSTANT = object()
ITEMSIZE = {"float32": 4, "uint8": 1}  # the dtypes of the values steps read and write

_CONVS = {ops.CONV2D_PACKED: True, ops.CONV2D_PREPACKED: False}  # op -> weight in panels
_LINEARS = {ops.LINEAR_PACKED: True, ops.LINEAR_PREPACKED: False}
_ARITHMETIC = {"aten::sub.Tensor": lib.SUB, "aten::div.Tensor": lib.DIV}  # (sub's alpha must be 1)
_REDUCTIONS = {"aten::sum.dim_IntList": False, "aten::mean.dim": True}  # op -> a mean
# operators whose steps are in steps_quantized.py and steps_sequence.py (imported when a program first has one)
_QUANTIZED = frozenset({ops.CONV2D_INT8, ops.LINEAR_INT8, ops.ADD_INT8, ops.QUANTIZE_PER_TENSOR,
                        ops.DEQUANTIZE_PER_TENSOR})
_SEQUENCE = frozenset({"aten::layer_norm", "aten::softmax.int", "aten::_softmax", "aten::scaled_dot_product_attention",
                       "aten::matmul", "aten::mm", "aten::lstm.input", "aten::gru.input", "aten::rnn_tanh.input",
                       "aten::rnn_relu.input"})
_ADDS = {"aten::add.Tensor": (False, False), "aten::_add_relu.Tensor": (True, False),
         "aten::add_.Tensor": (False, True), "aten::_add_relu_.Tensor": (True, True)}  # op -> (relu, in place)


def constant(v: Value, program: Program) -> Any:
    """A constant argument's value (a weight's array; a list built of constants, as a list), or NOT_CONSTANT."""
    node = v.node
    if node is not None and node.op == "prim::ListConstruct":
        items = [constant(i, program) for i in node.inputs]
        return NOT_CONSTANT if any(i is NOT_CONSTANT for i in items) else items
    if node is None or node.op != "prim::Constant":
        return NOT_CONSTANT
    if "weight" in node.attrs:
        return program.weights.get(node.attrs["weight"], NOT_CONSTANT)
    return node.attrs.get("value")


class Step:
    """One node as a step: its kind and parameters (ints, floats) with operands named by value (or weight). Kind 0
    runs nothing: its output is operands[0]'s memory from `offset` floats on (a contiguous view)."""

    __slots__ = ("kind", "ints", "floats", "operands", "out", "in_place", "offset", "extra", "parts", "scale")

    def __init__(self, kind: int, ints: list[int], floats: Sequence[float], operands: list[Any], out: Value,
                 in_place: bool = False, offset: int = 0, extra: Value | np.ndarray | None = None,
                 parts: Sequence[Step] = (), scale: Value | None = None) -> None:
        self.kind, self.ints, self.floats = kind, ints, list(floats)
        self.operands = operands  # Value (an image or tensor), np.ndarray (a weight) or None (no bias)
        self.out = out
        self.in_place = in_place  # the output is operands[0]'s memory
        self.offset = offset      # floats into operands[0] where the step reads it (a view's start)
        self.extra = extra        # attention's mask, an LSTM's c0: its reference (or none) follows the ints
        self.parts = list(parts)  # more plan steps of the node, writing the same output (a concatenation's inputs)
        self.scale = scale        # a convolution's per-image input-channel factors (the executor's fusion)


class Shapes:
    """Static shapes, dtypes and layouts of a method's values: the plan's input shapes, its buffer entries, the
    graph's recorded shapes (when the plan is for the shapes the graph was captured with), and what the steps derive.
    A value is float32 or uint8 (an int8 step's); `of` answers for one dtype, so that a float32 step never reads
    uint8 memory."""

    def __init__(self, graph: Graph, plan: dict) -> None:
        self.shape: dict[int, tuple[int, ...]] = {}
        self.nhwc: dict[int, bool] = {}  # 4-D value id -> stored channels-last (an image) or row-major
        self.dtypes: dict[int, str] = {}  # value id -> its dtype where it is not float32
        shapes, dtypes = plan.get("input_shapes", []), plan.get("input_dtypes", [])
        for v, shape, dtype in zip(graph.inputs, shapes, dtypes):
            if dtype in ITEMSIZE and isinstance(shape, list):
                self.set(v, tuple(shape), nhwc=None, dtype=dtype)  # (its layout: the first step that reads it)
        self.typed = len(shapes) == len(graph.inputs) and all(
            isinstance(shape, list) and v.shape == tuple(shape) for v, shape in zip(graph.inputs, shapes))
        self.read = {v.id for node in graph.walk() for v in node.inputs} | {v.id for v in graph.outputs}

    def _known(self, v: Any) -> tuple[int, ...] | None:
        if not isinstance(v, Value) or not v.is_tensor:
            return None
        shape = self.shape.get(v.id)
        if shape is None and self.typed and v.dtype in ITEMSIZE and v.shape is not None and v.node is not None \
                and v.node.op != "prim::Constant" and all(type(d) is int and d >= 0 for d in v.shape):
            shape = self.shape[v.id] = tuple(v.shape)  # a value the plan does not place, as captured
            if v.dtype != "float32":
                self.dtypes[v.id] = v.dtype
        return shape

    def of(self, v: Any, dtype: str = "float32") -> tuple[int, ...] | None:
        """v's shape where it is known and v is of this dtype; else None."""
        shape = self._known(v)
        return shape if shape is not None and self.dtype(v) == dtype else None

    def dtype(self, v: Value) -> str:
        return self.dtypes.get(v.id, "float32")

    def floats(self, v: Value) -> int:
        """The floats (4 bytes each) v's values take in a plan's buffers."""
        return -(-math.prod(self.shape[v.id]) * ITEMSIZE[self.dtype(v)] // 4)

    def can_read(self, v: Any, nhwc: bool) -> bool:
        """Whether v can be read in this layout (channels-last or row-major), without giving it the layout: a 4-D
        value has it, or none yet, or two layouts that are the same memory (C or H * W is 1)."""
        shape = self._known(v)
        if shape is None:
            return False
        if len(shape) != 4:
            return not nhwc
        return self.nhwc.get(v.id, nhwc) == nhwc or shape[1] == 1 or shape[2] * shape[3] == 1

    def layout(self, v: Any, nhwc: bool) -> bool:
        """can_read, and a 4-D value without a layout yet (a region's input) takes this one."""
        if not self.can_read(v, nhwc):
            return False
        if len(self.shape[v.id]) == 4:
            self.nhwc.setdefault(v.id, nhwc)
        return True

    def set(self, v: Value, shape: tuple[int, ...], nhwc: bool | None = False, dtype: str = "float32") -> None:
        """Record v's shape, dtype and (4-D) layout; nhwc None: no layout yet (the first step reading it says)."""
        self.shape[v.id] = shape
        if dtype == "float32":
            self.dtypes.pop(v.id, None)
        else:
            self.dtypes[v.id] = dtype
        if len(shape) == 4 and nhwc is not None:
            self.nhwc[v.id] = nhwc
        else:
            self.nhwc.pop(v.id, None)


def step_for(node: Node, program: Program, shapes: Shapes) -> Step | None:
    """The step for a node the executor can run with these shapes, or None; records its output's shape."""
    args = [constant(v, program) for v in node.inputs]
    try:
        step = _build(node, args, program, shapes)
    except (TypeError, ValueError, IndexError, ArithmeticError) as exc:  # an argument the operator cannot take
        raise FormatError(f"{node.op} ({node.source}): an argument is not of the kind the operator takes "
                          f"({type(exc).__name__}: {exc}); the file's graph is inconsistent") from exc
    if step is not None and node.op not in VIEWS:
        planned = node.attrs.get(OUT_ATTR)
        if isinstance(planned, dict) and tuple(planned.get("shape", ())) != shapes.shape[node.outputs[0].id]:
            raise FormatError(f"{node.op} ({node.source}): its planned buffer has shape {planned.get('shape')}, the "
                              f"operator makes {list(shapes.shape[node.outputs[0].id])}")
    return step


def _build(node: Node, args: list, program: Program, shapes: Shapes) -> Step | None:
    if node.op in _CONVS:
        step = _conv_step(node, args, shapes, _CONVS[node.op])
    elif node.op == ops.CONV2D_PACKED_GATED:
        step = _gated_conv_step(node, args, shapes)
    elif node.op in WINOGRAD_POSITIONS:
        step = _winograd_step(node, args, shapes)
    elif node.op in _LINEARS:
        step = _linear_step(node, args, shapes, _LINEARS[node.op])
    elif node.op in _ADDS:
        step = _add_step(node, args, shapes, *_ADDS[node.op])
    elif node.op == "aten::mul.Tensor":
        step = _mul_step(node, args, shapes)
    elif node.op in _ARITHMETIC and (len(args) < 3 or _is_one(args[2])):
        step = _arithmetic_step(node, shapes, _ARITHMETIC[node.op], scalar=args[1])
    elif node.op in SCALAR_ARITHMETIC and (len(args) < 3 or _is_one(args[2])):
        step = _arithmetic_step(node, shapes, SCALAR_ARITHMETIC[node.op], scalar=args[1])
    elif node.op in _REDUCTIONS:
        step = _reduce_step(node, args, shapes, _REDUCTIONS[node.op])
    elif node.op in UNARY:
        step = _unary_step(node, args, shapes)
    elif node.op in POOLS:
        step = _pool_step(node, args, shapes)
    elif node.op in BILINEAR:
        step = _resize_step(node, args, shapes)
    elif node.op == "aten::adaptive_avg_pool2d":
        step = _mean_step(node, args, shapes)
    elif node.op in ("aten::constant_pad_nd", "aten::pad"):
        step = _pad_step(node, args, shapes)
    elif node.op in _QUANTIZED:
        from .steps_quantized import quantized_step

        step = quantized_step(node, args, shapes)
    elif node.op in _SEQUENCE:
        from .steps_sequence import sequence_step

        step = sequence_step(node, args, shapes, program)
    elif node.op == "aten::cat":
        step = _cat_step(node, args, shapes)
    elif node.op in VIEWS:
        step = _view_step(node, args, shapes)
    else:
        step = None
    return step


def _is_one(value: Any) -> bool:
    """Whether an argument is the number 1 (an alpha that changes nothing), not a tensor or another kind."""
    return type(value) in (int, float) and value == 1


def _ints(value: Any, n: int) -> list[int] | None:
    if not isinstance(value, list) or len(value) != n or not all(type(i) is int for i in value):
        return None
    return value


def _conv_step(node: Node, args: list, shapes: Shapes, panels: bool) -> Step | None:
    x, (weight, bias) = node.inputs[0], args[1:3]
    shape = shapes.of(x)
    kernel, stride, pads, dilation = (_ints(args[i], n) for i, n in ((3, 2), (4, 2), (5, 4), (6, 2)))
    epilogue = activation_epilogue(args[-2], args[-1])
    if shape is None or len(shape) != 4 or not isinstance(weight, np.ndarray) or weight.dtype != F32 \
            or not (bias is None or isinstance(bias, np.ndarray) and bias.dtype == F32 and bias.ndim == 1) \
            or None in (kernel, stride, pads, dilation) or epilogue is None or not shapes.layout(x, True) \
            or min(*kernel, *stride, *dilation) <= 0:
        return None  # (a size of 0 or less: the kernel's own check names it)
    n, c, h, w = shape
    if panels:
        o, groups, layout = args[7], 1, lib.PANELS
        if type(o) is not int or weight.ndim != 3:
            return None
    else:
        groups, layout = args[7], lib.ROWS
        if type(groups) is not int or weight.ndim != 2 or groups not in (1, c):
            return None
        o = weight.shape[1] if groups == 1 else c
    ho = conv_out_size(h, kernel[0], stride[0], pads[0], pads[1], dilation[0])
    wo = conv_out_size(w, kernel[1], stride[1], pads[2], pads[3], dilation[1])
    shapes.set(node.outputs[0], (n, o, ho, wo), nhwc=True)
    ints = [n, h, w, c, o, *kernel, *stride, *pads, *dilation, ho, wo, groups, layout, epilogue[0]]
    return Step(lib.STEP_CONV, ints, (epilogue[1], epilogue[2], 0.0), [x, weight, bias], node.outputs[0])


def _gated_conv_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    """ops.CONV2D_PACKED_GATED: the convolution's step with the gate as its input's per-image channel factors
    (pl_conv_run_scaled scales a copy of the weight per image: a 1x1, stride-1, unpadded convolution by panels);
    None for another (its kernel makes the product, then convolves)."""
    x, gate = node.inputs[0], node.inputs[1]
    shape = shapes.of(x)
    if shape is None or len(shape) != 4 or shapes.of(gate) != (shape[0], shape[1], 1, 1) \
            or (_ints(args[4], 2), _ints(args[5], 2), _ints(args[6], 4)) != ([1, 1], [1, 1], [0, 0, 0, 0]) \
            or not shapes.layout(gate, True):
        return None
    step = _conv_step(node, [args[0], *args[2:]], shapes, True)
    if step is None:
        return None
    return Step(step.kind, step.ints, step.floats, step.operands, step.out, extra=step.extra, scale=gate)


def _winograd_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    """A Winograd convolution: 3x3, stride 1, by the transformed weight, (36, C, O) for F(4x4, 3x3)
    (ops.CONV2D_WINOGRAD_V2), (16, C, O) for F(2x2, 3x3) (ops.CONV2D_WINOGRAD_2X2)."""
    x, (weight, bias) = node.inputs[0], args[1:3]
    shape = shapes.of(x)
    pads = _ints(args[3], 4)
    epilogue = activation_epilogue(args[4], args[5])
    if shape is None or len(shape) != 4 or not isinstance(weight, np.ndarray) or weight.dtype != F32 \
            or weight.ndim != 3 or weight.shape[:2] != (WINOGRAD_POSITIONS[node.op], shape[1]) \
            or not (bias is None or isinstance(bias, np.ndarray) and bias.dtype == F32 and bias.ndim == 1) \
            or pads is None or epilogue is None or not shapes.layout(x, True):
        return None
    n, c, h, w = shape
    o = weight.shape[2]
    ho, wo = conv_out_size(h, 3, 1, pads[0], pads[1], 1), conv_out_size(w, 3, 1, pads[2], pads[3], 1)
    shapes.set(node.outputs[0], (n, o, ho, wo), nhwc=True)
    ints = [n, h, w, c, o, 3, 3, 1, 1, *pads, 1, 1, ho, wo, 1, WINOGRAD_LAYOUTS[weight.shape[0]], epilogue[0]]
    return Step(lib.STEP_CONV, ints, (epilogue[1], epilogue[2], 0.0), [x, weight, bias], node.outputs[0])


def _linear_step(node: Node, args: list, shapes: Shapes, panels: bool) -> Step | None:
    x, (weight, bias) = node.inputs[0], args[1:3]
    shape = shapes.of(x)
    epilogue = activation_epilogue(args[-2], args[-1])
    if shape is None or len(shape) < 1 or not isinstance(weight, np.ndarray) or weight.dtype != F32 \
            or not (bias is None or isinstance(bias, np.ndarray) and bias.dtype == F32) or epilogue is None \
            or not shapes.layout(x, False):
        return None
    k = shape[-1]
    rows = math.prod(shape[:-1])
    if panels:
        o = args[3]
        if type(o) is not int or weight.ndim != 3:
            return None
        layout = lib.PANELS
    else:
        if weight.ndim != 2:
            return None
        o, layout = weight.shape[1], lib.ROWS
    shapes.set(node.outputs[0], (*shape[:-1], o))
    ints = [rows, 1, 1, k, o, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, layout, epilogue[0]]
    return Step(lib.STEP_CONV, ints, (epilogue[1], epilogue[2], 0.0), [x, weight, bias], node.outputs[0])


def _add_step(node: Node, args: list, shapes: Shapes, relu: bool, in_place: bool) -> Step | None:
    if len(args) > 2 and not _is_one(args[2]):
        return None
    return _arithmetic_step(node, shapes, lib.ADD, relu, in_place, scalar=args[1])


def _arithmetic_step(node: Node, shapes: Shapes, op: int, relu: bool = False, in_place: bool = False,
                     scalar: Any = None) -> Step | None:
    """a op b (then relu): of one shape, elementwise in their shared layout (in place where the operator writes
    a); b a number (`scalar`: the constant second argument, or a 0-d constant), in a's layout; of shapes that
    broadcast, row-major, by strides."""
    a, b = node.inputs[0], node.inputs[1]
    sa, sb = shapes.of(a), shapes.of(b)
    if isinstance(scalar, np.ndarray) and scalar.ndim == 0 and scalar.dtype.kind in "iuf":
        scalar = scalar.item()  # a 0-d constant tensor (torch.export's `x * 0.5`): a number, as in TorchScript
    if isinstance(scalar, (int, float)) and not isinstance(scalar, bool):
        b, sb = np.full(1, scalar, F32), ()  # a number: a one-value weight, broadcast
    if sa is None or sb is None:
        return None
    act = lib.ACT_RELU if relu else lib.ACT_NONE
    if sb == () and sa and math.prod(sa) > 0 and isinstance(b, np.ndarray):  # by a number: in a's layout
        nhwc = len(sa) == 4 and shapes.nhwc.get(a.id, False)
        if not shapes.layout(a, nhwc):
            return None
        shapes.set(node.outputs[0], sa, nhwc)
        return Step(lib.STEP_BINARY, [op, act, 1], (0.0, math.inf, 0.0), [a, b], node.outputs[0], in_place)
    if sa == sb:
        nhwc = _common_layout(shapes, a, b)
        if nhwc is None:
            return None
        shapes.set(node.outputs[0], sa, nhwc)
        return Step(lib.STEP_BINARY, [op, act, 1], (0.0, math.inf, 0.0), [a, b], node.outputs[0], in_place)
    shape = broadcast_shape(sa, sb)
    if in_place or shape is None or not shape or math.prod(shape) == 0 or not shapes.layout(a, False) \
            or not (isinstance(b, np.ndarray) or shapes.layout(b, False)):
        return None
    merged = merge_dims(shape, [broadcast_strides(sa, shape), broadcast_strides(sb, shape)], lib.COPY_MAX_DIMS)
    if merged is None:
        return None
    dims, (strides_a, strides_b) = merged
    pad = lib.COPY_MAX_DIMS - len(dims)
    shapes.set(node.outputs[0], shape)
    ints = [op, act, len(dims), *dims, *[1] * pad, *strides_a, *[0] * pad, *strides_b, *[0] * pad]
    return Step(lib.STEP_BROADCAST, ints, (0.0, math.inf, 0.0), [a, b], node.outputs[0])


def _mul_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    """aten::mul.Tensor: an image by per-image channel factors (N, C, 1, 1) in either order (squeeze-and-excitation:
    images are channels-last, so the factors are a row repeated over each image); else as _arithmetic_step."""
    a, b = node.inputs[0], node.inputs[1]
    sa, sb = shapes.of(a), shapes.of(b)
    if sa is None or sb is None:
        return _arithmetic_step(node, shapes, lib.MUL, scalar=args[1])
    if sa != sb and len(sa) == 4 and sa[2:] == (1, 1) and sb[2:] != (1, 1):
        a, b, sa, sb = b, a, sb, sa
    if sa != sb and len(sa) == 4 and sb == (sa[0], sa[1], 1, 1) and shapes.nhwc.get(a.id, True):
        if not shapes.layout(a, True) or not shapes.layout(b, True):
            return None
        shapes.set(node.outputs[0], sa, True)
        return Step(lib.STEP_BINARY, [lib.MUL, lib.ACT_NONE, sa[0]], (0.0, 0.0, 0.0), [a, b], node.outputs[0])
    return _arithmetic_step(node, shapes, lib.MUL, scalar=args[1])


def _reduce_step(node: Node, args: list, shapes: Shapes, mean: bool) -> Step | None:
    """aten::sum.dim_IntList / aten::mean.dim over one run of neighbouring dimensions of a row-major tensor, or over
    the spatial dimensions of an image (its channels-last memory is (N, H * W, C)); no dtype."""
    x, shape = node.inputs[0], shapes.of(node.inputs[0])
    dims, keepdim, dtype = (args + [None, False, None][max(0, len(args) - 1):])[1:4]
    if shape is None or not shape or math.prod(shape) == 0 or dtype is not None or type(keepdim) is not bool:
        return None
    if len(shape) == 4 and shapes.nhwc.get(x.id, True) and isinstance(dims, list) and len(dims) == 2 \
            and all(type(d) is int for d in dims) and sorted(d % 4 for d in dims) == [2, 3]:
        if not shapes.layout(x, True):
            return None
        n, c, h, w = shape
        form = (n, h * w, c)
        shapes.set(node.outputs[0], (n, c, 1, 1) if keepdim else (n, c), True)
    else:
        found = reduced(shape, dims, keepdim)
        if found is None or not shapes.layout(x, False):
            return None
        form, out = found
        shapes.set(node.outputs[0], out)
    return Step(lib.STEP_REDUCE, list(form), (1.0 / form[1] if mean else 1.0, 0.0, 0.0), [x], node.outputs[0])


def _resize_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    """Bilinear upsampling by the library's table of source rows, columns and weights (a weight of the step)."""
    x = node.inputs[0]
    shape = shapes.of(x)
    size = bilinear_size(node.op, shape, args[1:]) if shape is not None and len(shape) == 4 \
        and isinstance(args[2], bool) else None
    if size is None or not shapes.layout(x, True):
        return None
    n, c, h, w = shape
    (ho, wo), scales = size
    shapes.set(node.outputs[0], (n, c, ho, wo), nhwc=True)
    table = resize_table(h, w, ho, wo, args[2], scales)
    return Step(lib.STEP_RESIZE, [n, h, w, c, ho, wo], (0.0, 0.0, 0.0), [x, table], node.outputs[0])


def _unary_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    x = node.inputs[0]
    epilogue = unary_epilogue(node.op, args[1:])
    if shapes.of(x) is None or epilogue is None:
        return None
    nhwc = _common_layout(shapes, x)
    if nhwc is None:
        return None
    shapes.set(node.outputs[0], shapes.of(x), nhwc)
    return Step(lib.STEP_UNARY, [epilogue[0]], (epilogue[1], epilogue[2], 0.0), [x], node.outputs[0])


def _pool_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    """Max or average pooling of an image (kernels.pool_args: PyTorch's arguments, padding at most half the
    window); max pooling of a uint8 image too."""
    x = node.inputs[0]
    shape, dtype = shapes.of(x), "float32"
    parsed = pool_args(node.op, args[1:])
    if shape is None and parsed is not None and parsed[5] == lib.POOL_MAX:
        shape, dtype = shapes.of(x, "uint8"), "uint8"
    if shape is None or len(shape) != 4 or parsed is None or not shapes.layout(x, True) or 0 in shape:
        return None
    k, s, p, d, ceil, kind, divisor = parsed
    n, c, h, w = shape
    ho, wo = pool_out_size(h, k[0], s[0], p[0], d[0], ceil), pool_out_size(w, k[1], s[1], p[1], d[1], ceil)
    if ho < 1 or wo < 1:
        return None
    shapes.set(node.outputs[0], (n, c, ho, wo), nhwc=True, dtype=dtype)
    ints = [n, h, w, c, k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], ho, wo, kind]
    return Step(lib.STEP_POOL if dtype == "float32" else lib.STEP_QMAXPOOL, ints, (0.0, 0.0, divisor), [x],
                node.outputs[0])


def _mean_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    x, shape = node.inputs[0], shapes.of(node.inputs[0])
    if shape is None or len(shape) != 4 or pair(args[1]) != (1, 1) or not shapes.layout(x, True):
        return None
    n, c, h, w = shape
    shapes.set(node.outputs[0], (n, c, 1, 1), nhwc=True)
    return Step(lib.STEP_MEAN, [n, h * w, c], (0.0, 0.0, 0.0), [x], node.outputs[0])


def _common_layout(shapes: Shapes, *values: Value) -> bool | None:
    """The layout an elementwise step's operands share and its output takes (True: channels-last), or None where
    they cannot share one. Operands without one yet take the others' (images, channels-last, if none has one)."""
    known = [shapes.nhwc[v.id] for v in values if v.id in shapes.nhwc]
    nhwc = known[0] if known else True
    if len(shapes.of(values[0])) != 4:
        return False
    return nhwc if all(shapes.layout(v, nhwc) for v in values) else None


def _pad_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    """aten::constant_pad_nd, or aten::pad in constant mode (elementwise.pad_dims), of a row-major tensor or of a
    channels-last image (padded in its memory order, (N, H, W, C))."""
    x, shape = node.inputs[0], shapes.of(node.inputs[0])
    if node.op == "aten::pad":  # (self, pad, mode, value): constant mode only, a value of None is 0
        if (args + ["constant"])[2] != "constant":
            return None
        args = [args[0], args[1], 0.0 if len(args) < 4 or args[3] is None else args[3]]
    planned = pad_dims(shape, *(args + [0])[1:3]) if shape is not None and len(args) in (2, 3) else None
    if planned is None:
        return None
    out, before = planned
    image = len(shape) == 4 and shapes.nhwc.get(x.id, True)  # a 4-D value without a layout yet: an image
    if not shapes.layout(x, image):
        return None
    shapes.set(node.outputs[0], tuple(out), nhwc=image)
    order = [0, 2, 3, 1] if image else list(range(len(shape)))
    pad = [1] * (lib.COPY_MAX_DIMS - len(shape))
    dims = [[shape[d] for d in order], [out[d] for d in order], [before[d] for d in order]]
    ints = [len(shape), *dims[0], *pad, *dims[1], *pad, *dims[2], *[0] * len(pad)]
    return Step(lib.STEP_PAD, ints, (float((args + [0])[2]), 0.0, 0.0), [x], node.outputs[0])


def _view_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    """A view operator: an alias of its input's memory where the view is contiguous (kind 0), else a strided copy
    into a new buffer (float32 only: a uint8 value's view must be contiguous and start where the value does, as a
    flatten of pooled pixels does). An image's channels-last memory is its (N, C, H, W) view at strides (HWC, 1, WC,
    C), so a flatten or a permutation of an image is a copy too."""
    x, shape, dtype = node.inputs[0], shapes.of(node.inputs[0]), "float32"
    if shape is None:  # a uint8 value: its bytes are no whole floats (see below)
        shape, dtype = shapes.of(x, "uint8"), "uint8"
    if shape is None or math.prod(shape) == 0:
        return None
    image = len(shape) == 4 and shapes.nhwc.get(x.id, False) and shape[1] != 1 and shape[2] * shape[3] != 1
    if not image and not shapes.layout(x, False):
        return None
    n, c, h, w = shape if image else (0, 0, 0, 0)
    base = (h * w * c, 1, w * c, c) if image else row_major(shape)
    view = strided_view(node.op, shape, args[1:], base)
    if view is None or math.prod(view[0]) == 0:
        return None
    out_shape, strides, offset = view
    alias = strides is not None and is_contiguous(out_shape, strides)
    if dtype != "float32" and not (alias and offset == 0):
        return None
    shapes.set(node.outputs[0], out_shape, dtype=dtype)
    if alias:
        return Step(0, [], (), [x], node.outputs[0], offset=offset)
    copy_shape, copy_strides = (out_shape, strides) if strides is not None else (shape, base)  # (a reshape: all)
    plan = merge_dims(copy_shape, [copy_strides], lib.COPY_MAX_DIMS)
    if plan is None:
        return None
    dims, (steps,) = plan
    pad = lib.COPY_MAX_DIMS - len(dims)
    ints = [len(dims), *dims, *[1] * pad, *steps, *[0] * pad]
    return Step(lib.STEP_COPY, ints, (0.0, 0.0, 0.0), [x], node.outputs[0], offset=offset)


def tensor_list(v: Value, shapes: Shapes) -> list[Value] | None:
    """The float32 tensors of a prim::ListConstruct (each with a static shape), or None."""
    node = v.node
    if node is None or node.op != "prim::ListConstruct" or not node.inputs \
            or any(shapes.of(t) is None for t in node.inputs):
        return None
    return list(node.inputs)


def _cat_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    """aten::cat of tensors of one layout: each input copied into its slice of every output row (one plan step
    each). Row-major along any dimension; images along channels (their channels-last rows) or batch."""
    tensors = tensor_list(node.inputs[0], shapes)
    dim = args[1] if len(args) > 1 else 0
    if tensors is None or type(dim) is not int:
        return None
    first = shapes.of(tensors[0])
    ndim = len(first)
    if not -ndim <= dim < ndim or ndim == 0:
        return None
    dim %= ndim
    tensor_shapes = [shapes.of(t) for t in tensors]
    if any(len(s) != ndim or s[:dim] + s[dim + 1:] != first[:dim] + first[dim + 1:] or 0 in s
           for s in tensor_shapes):
        return None
    nhwc = ndim == 4 and shapes.nhwc.get(tensors[0].id, True) and dim in (0, 1)
    if not all(shapes.layout(t, nhwc) for t in tensors):
        return None
    out_shape = first[:dim] + (sum(s[dim] for s in tensor_shapes),) + first[dim + 1:]
    shapes.set(node.outputs[0], out_shape, nhwc)
    if nhwc and dim == 1:  # channels-last: every pixel's channels are a row
        n, _, h, w = first
        outer, inners = n * h * w, [s[1] for s in tensor_shapes]
    else:
        outer, inners = math.prod(first[:dim]), [math.prod(s[dim:]) for s in tensor_shapes]
    total, steps, offset = sum(inners), [], 0
    for t, inner in zip(tensors, inners):
        steps.append(Step(lib.STEP_SLICE, [outer, inner, total, offset], (0.0, 0.0, 0.0), [t], node.outputs[0]))
        offset += inner
    steps[0].parts = steps[1:]
    return steps[0]
