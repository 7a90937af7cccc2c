"""The whole-graph executor: runs of consecutive nodes the native backend takes completely become one delegate step
each, run by one call into C (plan.c) over an arena laid out by the method's memory plan, with the GIL released.

A region is built when a method is compiled, from what the program states: the memory plan's input shapes and
buffer entries (offsets, shapes), the operators' constant arguments and weights. Each node becomes one step over
numbered buffers (0: the arena, then the region's inputs, weights, and outputs the plan does not place) and the
library checks the whole plan before it is used: a file whose plan or arguments do not add up gets a FormatError at
load, never an out-of-bounds access. A call whose inputs are not what the plan was made for (another batch size,
dtype or layout) runs the region's nodes one by one on their kernels instead.

Images are channels-last inside a region, as the native kernels make them; values leaving a region are
channels-last (N, C, H, W) views, as the per-node kernels return them. Each thread calling a module gets its own
arena, so that concurrent calls never share one.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from ptlite import ops
from ptlite.backends.base import Delegate, Kernel
from ptlite.errors import FormatError
from ptlite.ir.graph import Graph, Node, Program, Value
from ptlite.ir.liveness import last_reads, region_values
from ptlite.ir.memory_plan import OUT_ATTR, method_plan

from . import _native as lib
from .kernels import BILINEAR, UNARY, _epilogue, _out_size, _pair, _pool_out, bilinear_size, resize_table

MIN_NODES = 2  # a region of one node gains nothing over its kernel
F32 = np.dtype(np.float32)
_NOT_CONSTANT = object()

_CONVS = {ops.CONV2D_PACKED: True, ops.CONV2D_PREPACKED: False}  # op -> weight in panels
_LINEARS = {ops.LINEAR_PACKED: True, ops.LINEAR_PREPACKED: False}
_ADDS = {"aten::add.Tensor": (False, False), "aten::_add_relu.Tensor": (True, False),
         "aten::add_.Tensor": (False, True), "aten::_add_relu_.Tensor": (True, True)}  # op -> (relu, in place)


def _constant(v: Value, program: Program) -> Any:
    """A constant argument's value (a weight's array), or _NOT_CONSTANT."""
    node = v.node
    if node is None or node.op != "prim::Constant":
        return _NOT_CONSTANT
    if "weight" in node.attrs:
        return program.weights.get(node.attrs["weight"], _NOT_CONSTANT)
    return node.attrs.get("value")


class _Step:
    """One node as a step: its kind and parameters (ints, floats) with operands named by value (or weight)."""

    __slots__ = ("kind", "ints", "floats", "operands", "out", "in_place")

    def __init__(self, kind: int, ints: list[int], floats: Sequence[float], operands: list[Any], out: Value,
                 in_place: bool = False) -> None:
        self.kind, self.ints, self.floats = kind, ints, list(floats)
        self.operands = operands  # Value (an image or tensor), np.ndarray (a weight) or None (no bias)
        self.out = out
        self.in_place = in_place  # the output is operands[0]'s memory


class _Shapes:
    """Static shapes of a method's values: the plan's input shapes, its buffer entries, and what the steps derive."""

    def __init__(self, graph: Graph, plan: dict) -> None:
        self.shape: dict[int, tuple[int, ...]] = {}
        self.alias: dict[int, Value] = {}  # value id -> the value whose memory it is (flatten, in-place results)
        for v, shape, dtype in zip(graph.inputs, plan.get("input_shapes", []), plan.get("input_dtypes", [])):
            if dtype == "float32" and isinstance(shape, list):
                self.shape[v.id] = tuple(shape)

    def of(self, v: Any) -> tuple[int, ...] | None:
        return self.shape.get(v.id) if isinstance(v, Value) else None


def _step(node: Node, program: Program, shapes: _Shapes) -> _Step | None:
    """The step for a node the executor can run with these shapes, or None; records its output's shape."""
    args = [_constant(v, program) for v in node.inputs]
    if node.op in _CONVS:
        step = _conv_step(node, args, shapes, _CONVS[node.op])
    elif node.op == ops.CONV2D_WINOGRAD_V2:
        step = _winograd_step(node, args, shapes)
    elif node.op in _LINEARS:
        step = _linear_step(node, args, shapes, _LINEARS[node.op])
    elif node.op in _ADDS:
        step = _add_step(node, args, shapes, *_ADDS[node.op])
    elif node.op == "aten::mul.Tensor":
        step = _mul_step(node, args, shapes)
    elif node.op in UNARY:
        step = _unary_step(node, args, shapes)
    elif node.op == "aten::max_pool2d":
        step = _pool_step(node, args, shapes)
    elif node.op in BILINEAR:
        step = _resize_step(node, args, shapes)
    elif node.op == "aten::adaptive_avg_pool2d":
        step = _mean_step(node, args, shapes)
    elif node.op == "aten::flatten.using_ints":
        return _flatten(node, args, shapes)
    else:
        return None
    if step is not None:
        planned = node.attrs.get(OUT_ATTR)
        if isinstance(planned, dict) and tuple(planned.get("shape", ())) != shapes.shape[node.outputs[0].id]:
            raise FormatError(f"{node.op} ({node.source}): its planned buffer has shape {planned.get('shape')}, the "
                              f"operator makes {list(shapes.shape[node.outputs[0].id])}")
    return step


def _ints(value: Any, n: int) -> list[int] | None:
    if not isinstance(value, list) or len(value) != n or not all(type(i) is int for i in value):
        return None
    return value


def _conv_step(node: Node, args: list, shapes: _Shapes, panels: bool) -> _Step | None:
    x, (weight, bias) = node.inputs[0], args[1:3]
    shape = shapes.of(x)
    kernel, stride, pads, dilation = (_ints(args[i], n) for i, n in ((3, 2), (4, 2), (5, 4), (6, 2)))
    epilogue = _epilogue(args[-2], args[-1])
    if shape is None or len(shape) != 4 or not isinstance(weight, np.ndarray) or weight.dtype != F32 \
            or not (bias is None or isinstance(bias, np.ndarray) and bias.dtype == F32 and bias.ndim == 1) \
            or None in (kernel, stride, pads, dilation) or epilogue is None:
        return None
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
    ho = _out_size(h, kernel[0], stride[0], pads[0], pads[1], dilation[0])
    wo = _out_size(w, kernel[1], stride[1], pads[2], pads[3], dilation[1])
    shapes.shape[node.outputs[0].id] = (n, o, ho, wo)
    ints = [n, h, w, c, o, *kernel, *stride, *pads, *dilation, ho, wo, groups, layout, epilogue[0]]
    return _Step(lib.STEP_CONV, ints, (epilogue[1], epilogue[2], 0.0), [x, weight, bias], node.outputs[0])


def _winograd_step(node: Node, args: list, shapes: _Shapes) -> _Step | None:
    """A Winograd convolution (ops.CONV2D_WINOGRAD_V2): 3x3, stride 1, by the transformed weight (36, C, O)."""
    x, (weight, bias) = node.inputs[0], args[1:3]
    shape = shapes.of(x)
    pads = _ints(args[3], 4)
    epilogue = _epilogue(args[4], args[5])
    if shape is None or len(shape) != 4 or not isinstance(weight, np.ndarray) or weight.dtype != F32 \
            or weight.ndim != 3 or weight.shape[:2] != (36, shape[1]) \
            or not (bias is None or isinstance(bias, np.ndarray) and bias.dtype == F32 and bias.ndim == 1) \
            or pads is None or epilogue is None:
        return None
    n, c, h, w = shape
    o = weight.shape[2]
    ho, wo = _out_size(h, 3, 1, pads[0], pads[1], 1), _out_size(w, 3, 1, pads[2], pads[3], 1)
    shapes.shape[node.outputs[0].id] = (n, o, ho, wo)
    ints = [n, h, w, c, o, 3, 3, 1, 1, *pads, 1, 1, ho, wo, 1, lib.WINOGRAD, epilogue[0]]
    return _Step(lib.STEP_CONV, ints, (epilogue[1], epilogue[2], 0.0), [x, weight, bias], node.outputs[0])


def _linear_step(node: Node, args: list, shapes: _Shapes, panels: bool) -> _Step | None:
    x, (weight, bias) = node.inputs[0], args[1:3]
    shape = shapes.of(x)
    epilogue = _epilogue(args[-2], args[-1])
    if shape is None or len(shape) < 1 or not isinstance(weight, np.ndarray) or weight.dtype != F32 \
            or not (bias is None or isinstance(bias, np.ndarray) and bias.dtype == F32) or epilogue is None:
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
    shapes.shape[node.outputs[0].id] = (*shape[:-1], o)
    ints = [rows, 1, 1, k, o, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1, layout, epilogue[0]]
    return _Step(lib.STEP_CONV, ints, (epilogue[1], epilogue[2], 0.0), [x, weight, bias], node.outputs[0])


def _add_step(node: Node, args: list, shapes: _Shapes, relu: bool, in_place: bool) -> _Step | None:
    a, b = node.inputs[0], node.inputs[1]
    alpha = args[2] if len(args) > 2 else 1
    if shapes.of(a) is None or shapes.of(a) != shapes.of(b) or alpha != 1:
        return None
    shapes.shape[node.outputs[0].id] = shapes.of(a)
    act = lib.ACT_RELU if relu else lib.ACT_NONE
    return _Step(lib.STEP_BINARY, [lib.ADD, act, 1], (0.0, math.inf, 0.0), [a, b], node.outputs[0], in_place)


def _mul_step(node: Node, args: list, shapes: _Shapes) -> _Step | None:
    """aten::mul.Tensor of equal shapes, or of an image by per-image channel factors (N, C, 1, 1) in either order
    (squeeze-and-excitation): images are channels-last, so the factors are a row repeated over each image."""
    a, b = node.inputs[0], node.inputs[1]
    sa, sb = shapes.of(a), shapes.of(b)
    if sa is None or sb is None:
        return None
    if sa == sb:
        images = 1
    else:
        if len(sa) == 4 and sa[2:] == (1, 1) and sb[2:] != (1, 1):
            a, b, sa, sb = b, a, sb, sa
        if len(sa) != 4 or len(sb) != 4 or sb != (sa[0], sa[1], 1, 1):
            return None
        images = sa[0]
    shapes.shape[node.outputs[0].id] = sa
    return _Step(lib.STEP_BINARY, [lib.MUL, lib.ACT_NONE, images], (0.0, 0.0, 0.0), [a, b], node.outputs[0])


def _resize_step(node: Node, args: list, shapes: _Shapes) -> _Step | None:
    """Bilinear upsampling by the library's table of source rows, columns and weights (a weight of the step)."""
    x = node.inputs[0]
    shape = shapes.of(x)
    size = bilinear_size(node.op, shape, args[1:]) if shape is not None and len(shape) == 4 \
        and isinstance(args[2], bool) else None
    if size is None:
        return None
    n, c, h, w = shape
    (ho, wo), scales = size
    shapes.shape[node.outputs[0].id] = (n, c, ho, wo)
    table = resize_table(h, w, ho, wo, args[2], scales)
    return _Step(lib.STEP_RESIZE, [n, h, w, c, ho, wo], (0.0, 0.0, 0.0), [x, table], node.outputs[0])


def _unary_step(node: Node, args: list, shapes: _Shapes) -> _Step | None:
    x = node.inputs[0]
    if shapes.of(x) is None or any(a is _NOT_CONSTANT or not isinstance(a, (int, float)) for a in args[1:]):
        return None
    code, bounds = UNARY[node.op]
    if bounds is None and args[1:]:
        return None
    try:
        lo, hi = bounds(*args[1:]) if bounds else (0.0, math.inf)
    except TypeError:
        return None
    shapes.shape[node.outputs[0].id] = shapes.of(x)
    return _Step(lib.STEP_UNARY, [code], (lo, hi, 0.0), [x], node.outputs[0])


def _pool_step(node: Node, args: list, shapes: _Shapes) -> _Step | None:
    x, shape = node.inputs[0], shapes.of(node.inputs[0])
    k = _pair(args[1]) if len(args) > 1 else None
    s = _pair(args[2], k) if len(args) > 2 and k else k
    p = _pair(args[3]) if len(args) > 3 else (0, 0)
    d = _pair(args[4]) if len(args) > 4 else (1, 1)
    ceil = args[5] if len(args) > 5 else False
    if shape is None or len(shape) != 4 or not (k and s and p and d) or type(ceil) is not bool \
            or min(k + s + d) < 1 or min(p) < 0 or 2 * p[0] > k[0] or 2 * p[1] > k[1]:
        return None
    n, c, h, w = shape
    ho, wo = _pool_out(h, k[0], s[0], p[0], d[0], ceil), _pool_out(w, k[1], s[1], p[1], d[1], ceil)
    shapes.shape[node.outputs[0].id] = (n, c, ho, wo)
    ints = [n, h, w, c, k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], ho, wo, lib.POOL_MAX]
    return _Step(lib.STEP_POOL, ints, (0.0, 0.0, 0.0), [x], node.outputs[0])


def _mean_step(node: Node, args: list, shapes: _Shapes) -> _Step | None:
    x, shape = node.inputs[0], shapes.of(node.inputs[0])
    if shape is None or len(shape) != 4 or _pair(args[1]) != (1, 1):
        return None
    n, c, h, w = shape
    shapes.shape[node.outputs[0].id] = (n, c, 1, 1)
    return _Step(lib.STEP_MEAN, [n, h * w, c], (0.0, 0.0, 0.0), [x], node.outputs[0])


def _flatten(node: Node, args: list, shapes: _Shapes) -> _Step | None:
    """flatten(1) of an (N, C, 1, 1) image: the same memory channels-last or not, so no step: an alias."""
    x, shape = node.inputs[0], shapes.of(node.inputs[0])
    if shape is None or len(shape) != 4 or shape[2:] != (1, 1) or args[1:] != [1, -1]:
        return None
    shapes.shape[node.outputs[0].id] = shape[:2]
    shapes.alias[node.outputs[0].id] = shapes.alias.get(x.id, x)
    return _Step(0, [], (), [x], node.outputs[0])  # kind 0: nothing to run


# ------------------------------------------------------------------------------------------------ regions

def delegates(backend: str, graph: Graph, program: Program, kernels: dict[int, Kernel | None]) -> list[Delegate]:
    """The regions of a method the executor runs, as delegates: maximal runs of consecutive top-level nodes the
    native backend's kernels took and the executor has steps for (constants and the module's state aside)."""
    plan = method_plan(program, graph.name)
    if plan is None or not isinstance(plan.get("arena_bytes"), int):
        return []
    shapes = _Shapes(graph, plan)
    arenas = _Arenas(plan["arena_bytes"])
    last = last_reads(graph.nodes)
    found: list[Delegate] = []
    current: list[tuple[Node, _Step]] = []

    def close() -> None:
        if sum(1 for _, s in current if s.kind) >= MIN_NODES:
            found.append(_region(backend, graph, program, list(current), shapes, arenas, kernels, last))
        current.clear()

    for node in graph.nodes:
        if node.op in ("prim::Constant", ops.MODULE_STATE):
            continue
        kernel = kernels.get(id(node))
        step = _step(node, program, shapes) if kernel is not None and kernel.backend == backend else None
        if step is None or (step.in_place and not any(n.outputs[0] is step.operands[0] for n, _ in current)):
            close()  # (an in-place write into a value from outside a region stays with its kernel)
            planned = node.attrs.get(OUT_ATTR)
            if isinstance(planned, dict) and node.outputs:
                shapes.shape.setdefault(node.outputs[0].id, tuple(planned.get("shape", ())))
            continue
        current.append((node, step))
    close()
    return found


def _copies_rows(ints: list[int]) -> bool:
    """Whether a convolution step's library kernel copies its rows whole (native.h: pl_conv_copies_rows)."""
    c, kh, kw, groups, layout = ints[3], ints[5], ints[6], ints[17], ints[18]
    return groups == 1 and layout != lib.WINOGRAD and 1 <= c < lib.COPY_ROWS_BELOW_CHANNELS and kh * kw > 1 \
        and kh * kw * c <= lib.COPY_ROWS_MAX_K


def _planar_inputs(members: list[tuple[Node, _Step]], data: list[Value], outputs: list[Value],
                   shapes: _Shapes) -> set[int]:
    """The region's image inputs that only convolutions copying their rows read (an RGB stem): those read the
    caller's NCHW array as it is, where converting it to channels-last cost ~0.5 ms for a 224x224 image."""
    uses: dict[int, list[tuple[_Step, int]]] = {}
    for _, step in members:
        for k, operand in enumerate(step.operands):
            if isinstance(operand, Value):
                uses.setdefault(operand.id, []).append((step, k))
    leaving = {v.id for v in outputs}
    return {v.id for v in data if len(shapes.shape.get(v.id, ())) == 4 and v.id not in leaving and uses.get(v.id)
            and all(k == 0 and s.kind == lib.STEP_CONV and _copies_rows(s.ints) for s, k in uses[v.id])}


class _Arenas:
    """Each calling thread's arena for the method's regions (shared by its regions, as the plan lays them out)."""

    def __init__(self, nbytes: int) -> None:
        self.floats = -(-nbytes // 4)
        self.local = threading.local()

    def get(self) -> np.ndarray:
        arena = getattr(self.local, "arena", None)
        if arena is None:
            arena = self.local.arena = np.empty(max(self.floats, 1), F32)
        return arena


def _region(backend: str, graph: Graph, program: Program, members: list[tuple[Node, _Step]], shapes: _Shapes,
            arenas: _Arenas, kernels: dict[int, Kernel | None], last: dict[int, int]) -> Delegate:
    nodes = [n for n, _ in members]
    inputs, outputs = region_values(graph, nodes, last)
    region = _Region(members, inputs, outputs, shapes, arenas, program, kernels)
    return Delegate(backend, nodes, inputs, outputs, region.run, name=f"{backend}::region({len(nodes)} nodes)",
                    node_timer=region)


class _Region:
    """A region's validated plan, and how a call maps its values onto the plan's buffers."""

    def __init__(self, members: list[tuple[Node, _Step]], inputs: list[Value], outputs: list[Value],
                 shapes: _Shapes, arenas: _Arenas, program: Program, kernels: dict[int, Kernel | None]) -> None:
        self.members, self.arenas, self.shapes = members, arenas, shapes
        self.inputs, self.outputs = inputs, outputs
        self.program, self.kernels = program, kernels
        # the region's inputs that are data (not constants, whose values the steps hold): position -> value
        self.data = [(i, v) for i, v in enumerate(inputs) if v.node is None or v.node.op != "prim::Constant"]
        # buffers: 0 the arena, then the data inputs, the weights, the values the plan does not place
        lengths: list[int] = [arenas.floats]
        writable: list[int] = [1]
        self.input_buffers = []
        for _, v in self.data:
            self.input_buffers.append(len(lengths))
            lengths.append(math.prod(shapes.shape[v.id]))
            writable.append(0)
        # the buffers after the inputs, in their numbering: a weight (its array) or a value allocated per call
        self.slots: list[np.ndarray | Value] = []
        weight_buffer: dict[int, int] = {}
        self.fresh: list[Value] = []
        where: dict[int, tuple[int, int, int]] = {}  # value id -> (buffer, float offset, floats)
        for (_, v), buf in zip(self.data, self.input_buffers):
            where[v.id] = (buf, 0, lengths[buf])
        self.planar = _planar_inputs(members, [v for _, v in self.data], outputs, shapes)
        ints, floats = [], []
        self.planned: list[int] = []  # the member each plan step runs
        for index, (node, step) in enumerate(members):
            out = step.out
            count = math.prod(shapes.shape[out.id])
            if step.kind == 0 or step.in_place:  # an alias of its first operand's memory
                where[out.id] = where[step.operands[0].id]
                if step.kind == 0:
                    continue
            else:
                planned = node.attrs.get(OUT_ATTR)
                if isinstance(planned, dict) and planned.get("dtype") == "float32":
                    where[out.id] = (0, planned["offset"] // 4, count)
                else:
                    self.fresh.append(out)
                    self.slots.append(out)
                    where[out.id] = (len(lengths), 0, count)
                    lengths.append(count)
                    writable.append(1)
            refs = []
            for operand in step.operands:
                if operand is None:
                    refs.append((-1, 0, 0))
                elif isinstance(operand, np.ndarray):
                    if id(operand) not in weight_buffer:
                        weight_buffer[id(operand)] = len(lengths)
                        self.slots.append(np.ascontiguousarray(operand))
                        lengths.append(operand.size)
                        writable.append(0)
                    refs.append((weight_buffer[id(operand)], 0, operand.size))
                else:
                    refs.append(where[operand.id])
            refs += [(-1, 0, 0)] * (3 - len(refs))
            if step.in_place:
                buf = where[out.id][0]
                writable[buf] = 1
            params = step.ints
            if step.kind == lib.STEP_CONV and isinstance(step.operands[0], Value) \
                    and step.operands[0].id in self.planar:
                params = [*params, 1]  # it reads the NCHW input as it is
            row = [step.kind, *refs[0], *refs[1], *refs[2], *where[out.id], *params]
            ints.append(row + [0] * (lib.STEP_INTS - len(row)))
            floats.append(step.floats)
            self.planned.append(index)
        self.where = where
        self.times: np.ndarray | None = None  # per plan step, while profiling (start / stop / seconds)
        try:
            self.plan = lib.make_plan(np.array(ints, np.int64).tobytes(), np.array(floats, np.float64).tobytes(),
                                      np.array(lengths, np.int64).tobytes(), np.array(writable, np.uint8).tobytes())
        except ValueError as exc:
            first = members[0][0]
            raise FormatError(f"the native plan of the region from {first.op} ({first.source}) is invalid: {exc}") \
                from None

    def _expected(self, v: Value, x: Any) -> np.ndarray | None:
        """x in the layout the plan reads (C-contiguous; channels-last for images, NCHW for those only an RGB stem
        reads), or None if it is not the float32 array of the planned shape."""
        if not isinstance(x, np.ndarray) or x.dtype != F32 or x.shape != self.shapes.shape[v.id]:
            return None
        if x.ndim == 4 and v.id not in self.planar:
            view = x.transpose(0, 2, 3, 1)
            return view if view.flags.c_contiguous else np.ascontiguousarray(view)
        return x if x.flags.c_contiguous else np.ascontiguousarray(x)

    def run(self, *values: Any) -> list[Any]:
        prepared = [self._expected(v, values[i]) for i, v in self.data]
        if any(p is None for p in prepared):
            return self._one_by_one(values)  # not what the plan was made for
        arena = self.arenas.get()
        fresh = {}
        for v in self.fresh:
            shape = self.shapes.shape[v.id]
            fresh[v.id] = np.empty((shape[0], shape[2], shape[3], shape[1]) if len(shape) == 4 else shape, F32)
        buffers = [arena, *prepared, *(fresh[s.id] if isinstance(s, Value) else s for s in self.slots)]
        lib.run_plan(self.plan, buffers, self.times)
        return [self._value(v, arena, fresh, values) for v in self.outputs]

    def _value(self, v: Value, arena: np.ndarray, fresh: dict, values: Sequence[Any]) -> Any:
        """An output of the region as the per-node kernels would give it: images channels-last (N, C, H, W)."""
        root = self.shapes.alias.get(v.id, v)
        shape = self.shapes.shape[v.id]
        buf, off, count = self.where[v.id]
        if root.id in fresh:
            data = fresh[root.id].reshape(-1)
        elif buf == 0:
            data = arena[off:off + count]
        else:  # a view of a data input (flatten)
            return np.asarray(values[self.inputs.index(root)]).reshape(shape)
        if len(shape) == 4:
            n, c, h, w = shape
            return data[:count].reshape(n, h, w, c).transpose(0, 3, 1, 2)
        return data[:count].reshape(shape)

    def start(self) -> None:
        """Time every step of later runs (the profiler's NodeTimer), from zero."""
        self.times = np.zeros(len(self.planned), np.float64)

    def stop(self) -> None:
        self.times = None

    def seconds(self) -> list[float]:
        """Each node's seconds since start (views such as flatten take none)."""
        per_node = [0.0] * len(self.members)
        if self.times is not None:
            for member, t in zip(self.planned, self.times.tolist()):
                per_node[member] = t
        return per_node

    def _one_by_one(self, values: Sequence[Any]) -> list[Any]:
        """The region's nodes on their own kernels, as the interpreter would run them (a call the plan is not
        for)."""
        env = {v.id: x for v, x in zip(self.inputs, values)}
        for node, _ in self.members:
            args = [env[v.id] if v.id in env else _constant(v, self.program) for v in node.inputs]
            kernel = self.kernels[id(node)]
            result = kernel.fn(*args)
            env[node.outputs[0].id] = result
        return [env[v.id] for v in self.outputs]


__all__ = ["delegates"]
