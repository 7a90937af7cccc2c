"""The whole-graph executor: runs of consecutive nodes the native backend takes completely become one delegate step
each, run by one call into C (plan.c) over an arena laid out by the method's memory plan, with the GIL released.

A region is built when a method is compiled, from what the program states: the memory plan's input shapes and
buffer entries (offsets, shapes), the operators' constant arguments and weights. Each node becomes one step over
numbered buffers (0: the arena, then the region's inputs, weights, and outputs the plan does not place) and the
library checks the whole plan before it is used: a file whose plan or arguments do not add up gets a FormatError at
load, never an out-of-bounds access. A call whose inputs are not what the plan was made for (another batch size,
dtype or layout) runs the region's nodes one by one on their kernels instead.

Inside a region images are channels-last and other tensors row-major (steps.py says which step takes what); values
are float32, or uint8 (int8 operators' steps, steps_quantized.py: their bytes in the buffers' floats, 4 a float);
values leaving a region are as the per-node kernels return them (images as channels-last (N, C, H, W) views). Each
thread calling a module gets its own arena, so that concurrent calls never share one.
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
from ptlite.ir.memory_plan import OUT_ATTR, aligned_empty, method_plan

from . import _native as lib
from .arguments import WINOGRAD_LAYOUTS
from .steps import F32, ITEMSIZE, NOT_CONSTANT, Shapes, Step, constant, step_for, tensor_list

MIN_NODES = 2  # a region of one node gains nothing over its kernel


# ------------------------------------------------------------------------------------------------ regions

def delegates(backend: str, graph: Graph, program: Program, kernels: dict[int, Kernel | None]) -> list[Delegate]:
    """The regions of a method the executor runs, as delegates: maximal runs of consecutive top-level nodes the
    native backend's kernels took and the executor has steps for (constants and the module's state aside)."""
    plan = method_plan(program, graph.name)
    if plan is None or not isinstance(plan.get("arena_bytes"), int):
        return []
    shapes = Shapes(graph, plan)
    arenas = _Arenas(plan["arena_bytes"])
    last = last_reads(graph.nodes)
    found: list[Delegate] = []
    current: list[tuple[Node, Step]] = []

    def close() -> None:
        if sum(1 for _, s in current if s.kind) >= MIN_NODES:
            found.append(_region(backend, graph, program, list(current), shapes, arenas, kernels, last))
        current.clear()

    for node in graph.nodes:
        if node.op in ("prim::Constant", ops.MODULE_STATE):
            continue
        if node.op == "prim::ListConstruct" and (constant(node.outputs[0], program) is not NOT_CONSTANT
                                                 or tensor_list(node.outputs[0], shapes) is not None):
            # a list of constants (a recurrent layer's weights and states, which its step holds) or of tensors (a
            # concatenation's inputs): nothing to run, the list is its elements; part of the region even before its
            # first step (a recurrent model's lists come first: as nodes of their own, the zoo LSTM's two cost ~1.3 us a
            # call)
            current.append((node, Step(0, [], (), [], node.outputs[0])))
            continue
        kernel = kernels.get(id(node))
        step = step_for(node, program, shapes) if kernel is not None and kernel.backend == backend else None
        if step is None or (step.in_place and not any(n.outputs[0] is step.operands[0] for n, _ in current)):
            close()  # (an in-place write into a value from outside a region stays with its kernel)
            planned = node.attrs.get(OUT_ATTR)
            if isinstance(planned, dict) and node.outputs and planned.get("dtype") in ITEMSIZE \
                    and node.outputs[0].id not in shapes.shape:  # (what steps read: float32 and uint8)
                # (its layout, as the kernel returns it: the first step reading it says)
                shapes.set(node.outputs[0], tuple(planned.get("shape", ())), nhwc=None, dtype=planned["dtype"])
            continue
        current.append((node, step))
    close()
    return found


def _planned_over(node: Node, shapes: Shapes, x: tuple[int, int, int] | None) -> bool:
    """Whether the memory plan put the node's output in the arena over x (buffer, offset, floats)."""
    planned = _planned_entry(node.outputs[0], shapes)
    if x is None or x[0] != 0 or planned is None:
        return False
    start, count = planned["offset"] // 4, shapes.floats(node.outputs[0])
    return start < x[1] + x[2] and x[1] < start + count


def _planned_entry(v: Value, shapes: Shapes) -> dict | None:
    """The memory plan's entry for a value a step makes, where it is of the dtype the step makes (else the value is
    placed as the plan did not)."""
    planned = v.node.attrs.get(OUT_ATTR) if v.node is not None and v.node.outputs[0] is v else None
    return planned if isinstance(planned, dict) and planned.get("dtype") == shapes.dtype(v) else None


def _arena_place(v: Any, where: dict[int, tuple[int, int, int]], inputs: set[int], arena_floats: int,
                 shapes: Shapes) -> tuple[int, int, int] | None:
    """Where in the arena a value a step reads lies (buffer 0, float offset, floats), or None if it is not there: its
    place among this region's buffers, or, for a region input (its buffer in `inputs`), where the plan put it: a
    region hands its outputs on as views of the arena the regions share (a region input the plan did not place, or
    a view, may be anywhere in it: views are not planned)."""
    place = where.get(v.id) if isinstance(v, Value) else None
    if place is None or place[0] not in inputs:  # the arena, scratch, a new output array, or not a value
        return place if place is not None and place[0] == 0 else None
    planned = _planned_entry(v, shapes)
    if planned is not None:
        return 0, planned["offset"] // 4, place[2]
    return (0, 0, arena_floats) if v.node is not None else None  # (a method input is the caller's array)


def _placed(where: dict[int, tuple[int, int, int]], v: Any, node: Node) -> tuple[int, int, int]:
    """Where a value a step reads lies; a FormatError where no step before it makes it (a file whose graph reads a
    list, or a value made later, as a tensor)."""
    place = where.get(v.id) if isinstance(v, Value) else None
    if place is None:
        raise FormatError(f"{node.op} ({node.source}) reads {v!r} as a tensor, which no step before it makes: the "
                          f"file's graph is inconsistent")
    return place


def _with_residual(conv: Step, add: Step, out: Value) -> Step:
    """The convolution writing `out`, the addition's other operand (`extra`) added before the addition's
    activation."""
    other = add.operands[1] if add.operands[0] is conv.out else add.operands[0]
    return Step(conv.kind, [*conv.ints[:19], add.ints[1]], conv.floats, conv.operands, out, extra=other,
                scale=conv.scale)


def _reads(members: list[tuple[Node, Step]]) -> dict[int, int]:
    """Value id -> how many times the region's steps read it (operands, a fourth operand, an input scale, a part's
    operands)."""
    uses: dict[int, int] = {}
    for _, step in members:
        for operand in [*step.operands, step.extra, step.scale, *(o for part in step.parts for o in part.operands)]:
            if isinstance(operand, Value):
                uses[operand.id] = uses.get(operand.id, 0) + 1
    return uses


def _scaled_inputs(members: list[tuple[Node, Step]], outputs: list[Value], shapes: Shapes) -> dict[int, int]:
    """Squeeze-and-excitation multiplies a 1x1 convolution can do (pl_conv_run_scaled: it scales a copy of its
    weight by each image's channel factors): member index of the convolution -> the multiply's, where the multiply
    of an image by (N, C, 1, 1) factors comes right before the convolution, which alone reads its output, and the
    image is at least twice the weight's size (the copy is made on one thread, the multiply on all: a 14x14 image
    before 112 outputs is not taken, nor a late 7x7 block's), and the convolution has no factors of its own yet (a
    gated one's: folding a second multiply in would replace them)."""
    uses = _reads(members)
    leaving = {v.id for v in outputs}
    found: dict[int, int] = {}
    for index in range(1, len(members)):
        mul, conv = members[index - 1][1], members[index][1]
        if mul.kind != lib.STEP_BINARY or mul.ints[0] != lib.MUL or mul.ints[1] != lib.ACT_NONE or mul.in_place \
                or conv.kind != lib.STEP_CONV or not conv.operands or conv.operands[0] is not mul.out \
                or conv.scale is not None \
                or uses.get(mul.out.id) != 1 or mul.out.id in leaving or not isinstance(mul.operands[1], Value):
            continue
        n, c, h, w = shapes.shape[mul.out.id] if len(shapes.shape[mul.out.id]) == 4 else (0, 0, 0, 0)
        ints = conv.ints
        if shapes.shape.get(mul.operands[1].id) != (n, c, 1, 1) or not shapes.nhwc.get(mul.out.id) \
                or ints[:4] != [n, h, w, c] or ints[5:13] != [1, 1, 1, 1, 0, 0, 0, 0] or ints[17] != 1 \
                or ints[18] != lib.PANELS \
                or h * w < 2 * -(-ints[4] // lib.PANEL) * lib.PANEL:  # (GATE_CONVOLUTIONS' rule)
            continue
        found[index] = index - 1
    return found


def _with_scale(conv: Step, mul: Step) -> Step:
    """The convolution reading the multiply's image, its factors (`scale`) applied to its weight."""
    return Step(conv.kind, conv.ints, conv.floats, [mul.operands[0], *conv.operands[1:]], conv.out, extra=conv.extra,
                scale=mul.operands[1])


def _copies_rows(ints: list[int]) -> bool:
    """Whether a convolution step's library kernel copies its rows whole (native.h: pl_conv_copies_rows)."""
    c, kh, kw, groups, layout = ints[3], ints[5], ints[6], ints[17], ints[18]
    return groups == 1 and layout not in WINOGRAD_LAYOUTS.values() and 1 <= c < lib.COPY_ROWS_BELOW_CHANNELS \
        and kh * kw > 1 and kh * kw * c <= lib.COPY_ROWS_MAX_K


def _planar_inputs(members: list[tuple[Node, Step]], data: list[Value], outputs: list[Value],
                   shapes: Shapes) -> set[int]:
    """The region's image inputs that only convolutions copying their rows read (an RGB stem): those read the
    caller's NCHW array as it is, where converting it to channels-last cost ~0.5 ms for a 224x224 image."""
    uses: dict[int, list[tuple[Step, int]]] = {}
    for _, step in members:
        for k, operand in enumerate(step.operands):
            if isinstance(operand, Value):
                uses.setdefault(operand.id, []).append((step, k))
    leaving = {v.id for v in outputs}
    return {v.id for v in data if len(shapes.shape.get(v.id, ())) == 4 and v.id not in leaving and uses.get(v.id)
            and all(k == 0 and s.kind == lib.STEP_CONV and _copies_rows(s.ints) for s, k in uses[v.id])}


def _residual_adds(members: list[tuple[Node, Step]], data: list[Value], outputs: list[Value]) -> dict[int, int]:
    """Convolutions whose output only an addition of a same-shaped value reads (then maybe relu): a residual
    connection, which the convolution's epilogue can add (pl_conv_run_residual: a dense convolution with its weight
    in panels or Winograd's, no activation of its own). Member index of each such convolution -> its addition's;
    the other operand must exist before the convolution runs and nothing in between may write it; an addition in
    place must write into the convolution's output (`out += identity`), another must follow the convolution with
    no step in between (the plan may give its place to values made and read between them)."""
    uses = _reads(members)
    made: dict[int, int] = {v.id: -1 for v in data}
    for index, (_, step) in enumerate(members):
        if step.operands:
            made.setdefault(step.out.id, index)
    leaving = {v.id for v in outputs}
    adds = {id(step.operands[k]): (index, k) for index, (_, step) in enumerate(members)
            if step.kind == lib.STEP_BINARY and step.ints[0] == lib.ADD and step.ints[2] == 1
            and step.ints[1] in (lib.ACT_NONE, lib.ACT_RELU) for k in (0, 1) if isinstance(step.operands[k], Value)}
    found: dict[int, int] = {}
    for index, (_, step) in enumerate(members):
        if step.kind != lib.STEP_CONV or step.ints[17] != 1 \
                or step.ints[18] not in (lib.PANELS, *WINOGRAD_LAYOUTS.values()) or step.ints[19] != lib.ACT_NONE \
                or uses.get(step.out.id) != 1 or step.out.id in leaving \
                or id(step.out) not in adds:
            continue
        at, k = adds[id(step.out)]
        add = members[at][1]
        other = add.operands[1 - k]
        if not isinstance(other, Value) or other is step.out or made.get(other.id, at) >= index \
                or (add.in_place and k == 1):  # in place into the other operand: not taken
            continue
        if any(s.in_place and s.operands[0] is other for _, s in members[index + 1:at]):
            continue
        if not add.in_place and any(s.kind for _, s in members[index + 1:at]):
            continue  # the sum is written at the addition's place, which the plan gives the steps in between
        found[index] = at
    return found


class _Arenas:
    """Each calling thread's arena for the method's regions (shared by its regions, as the plan lays them out)."""

    def __init__(self, nbytes: int) -> None:
        self.floats = -(-nbytes // 4)
        self.local = threading.local()

    def get(self) -> np.ndarray:
        arena = getattr(self.local, "arena", None)
        if arena is None:
            arena = self.local.arena = aligned_empty(max(self.floats, 1), F32)
        return arena


def _region(backend: str, graph: Graph, program: Program, members: list[tuple[Node, Step]], shapes: Shapes,
            arenas: _Arenas, kernels: dict[int, Kernel | None], last: dict[int, int]) -> Delegate:
    nodes = [n for n, _ in members]
    inputs, outputs = region_values(graph, nodes, last)
    region = _Region(members, inputs, outputs, shapes, arenas, program, kernels)
    return Delegate(backend, nodes, inputs, outputs, region.run, name=f"{backend}::region({len(nodes)} nodes)",
                    node_timer=region)


class _Region:
    """A region's validated plan, and how a call maps its values onto the plan's buffers."""

    def __init__(self, members: list[tuple[Node, Step]], inputs: list[Value], outputs: list[Value],
                 shapes: Shapes, arenas: _Arenas, program: Program, kernels: dict[int, Kernel | None]) -> None:
        self.members, self.arenas, self.shapes = members, arenas, shapes
        self.inputs, self.outputs = inputs, outputs
        self.program, self.kernels = program, kernels
        # the region's inputs that are data (not constants, whose values the steps hold): position -> value
        self.data = [(i, v) for i, v in enumerate(inputs) if v.node is None or v.node.op != "prim::Constant"
                     and constant(v, program) is NOT_CONSTANT]
        # buffers: 0 the arena, 1 this region's scratch (values the plan does not place that stay inside), then the
        # data inputs, the weights (held by the plan) and the values leaving the region that the plan does not place
        # (new arrays each call)
        lengths: list[int] = [arenas.floats, 0]
        writable: list[int] = [1, 1]
        root: dict[int, int] = {}  # value id -> the value whose memory it is
        for _, step in members:
            if step.operands and (step.kind == 0 or step.in_place) and isinstance(step.operands[0], Value):
                root[step.out.id] = root.get(step.operands[0].id, step.operands[0].id)
        leaving = {root.get(v.id, v.id) for v in outputs}
        self.input_buffers = []
        for _, v in self.data:
            self.input_buffers.append(len(lengths))
            lengths.append(shapes.floats(v))
            writable.append(0)
        # the buffers after the inputs, in their numbering: a weight (its array) or a value allocated per call
        self.slots: list[np.ndarray | Value] = []
        weight_buffer: dict[int, int] = {}
        where: dict[int, tuple[int, int, int]] = {}  # value id -> (buffer, float offset, floats)
        for (_, v), buf in zip(self.data, self.input_buffers):
            where[v.id] = (buf, 0, lengths[buf])
        self.planar = _planar_inputs(members, [v for _, v in self.data], outputs, shapes)
        residual = _residual_adds(members, [v for _, v in self.data], outputs)
        scaled = _scaled_inputs(members, outputs, shapes)
        fused: set[int] = set()  # additions done by the convolution before them
        region_inputs = set(self.input_buffers)
        ints, floats = [], []
        self.planned: list[int] = []  # the member each plan step runs
        for index, (node, step) in enumerate(members):
            if not step.operands or index in fused:
                continue  # a list of constants, or an addition a convolution did
            if scaled.get(index + 1) == index:  # a multiply the next convolution does, unless the plan put that
                image = _arena_place(step.operands[0], where, region_inputs, arenas.floats, shapes)
                if not _planned_over(members[index + 1][0], shapes, image):
                    continue  # convolution's output over the image it would then read
                del scaled[index + 1]
            if index in scaled:
                step = _with_scale(step, members[scaled[index]][1])
            alias = None  # an in-place addition's output: the convolution's memory
            if index in residual:  # write the addition's output, unless the plan put it over the input
                add_node, add = members[residual[index]]
                if add.in_place:
                    fused.add(residual[index])
                    step, alias = _with_residual(step, add, step.out), add.out
                elif not _planned_over(add_node, shapes, _arena_place(step.operands[0], where, region_inputs,
                                                                      arenas.floats, shapes)):
                    fused.add(residual[index])
                    node, step = add_node, _with_residual(step, add, add.out)
            out = step.out
            count = shapes.floats(out)
            if step.kind == 0 or step.in_place:  # an alias of its first operand's memory
                buf, off, _ = _placed(where, step.operands[0], node)
                where[out.id] = (buf, off + step.offset, count)
                if step.kind == 0:
                    continue
            else:
                planned = _planned_entry(out, shapes)
                if planned is not None:
                    where[out.id] = (0, planned["offset"] // 4, count)
                elif out.id not in leaving:
                    where[out.id] = (1, lengths[1], count)
                    lengths[1] += -(-count // 16) * 16  # 64-byte aligned
                else:
                    self.slots.append(out)
                    where[out.id] = (len(lengths), 0, count)
                    lengths.append(count)
                    writable.append(1)
            if alias is not None:
                where[alias.id] = where[out.id]
            def ref(operand: Any, node: Node = node) -> tuple[int, int, int]:
                if operand is None:
                    return -1, 0, 0
                if isinstance(operand, np.ndarray):
                    if id(operand) not in weight_buffer:
                        weight_buffer[id(operand)] = len(lengths)
                        self.slots.append(np.ascontiguousarray(operand))
                        lengths.append(operand.size)
                        writable.append(0)
                    return weight_buffer[id(operand)], 0, operand.size
                return _placed(where, operand, node)
            refs = [ref(operand) for operand in step.operands]
            if step.offset:  # it reads its first operand from a view's start
                buf, off, length = refs[0]
                refs[0] = (buf, off + step.offset, length - step.offset)
            refs += [(-1, 0, 0)] * (3 - len(refs))
            if step.in_place:
                buf = where[out.id][0]
                writable[buf] = 1
            params = step.ints
            if step.kind in (lib.STEP_ATTENTION, lib.STEP_RNN):  # a fourth operand, or none: (-1, 0, 0)
                params = [*params, *ref(step.extra)]
            if step.kind == lib.STEP_CONV:  # whether it reads the NCHW input as it is; its residual and input scale
                planar = isinstance(step.operands[0], Value) and step.operands[0].id in self.planar
                params = [*params, int(planar), *ref(step.extra), *ref(step.scale)]
            row = [step.kind, *refs[0], *refs[1], *refs[2], *where[out.id], *params]
            if len(row) > lib.STEP_INTS:
                raise RuntimeError(f"a {node.op} plan step has {len(row)} values; a row holds {lib.STEP_INTS}")
            ints.append(row + [0] * (lib.STEP_INTS - len(row)))
            floats.append(step.floats)
            self.planned.append(index)
            for part in step.parts:  # more steps writing the same output: operands and parameters of their own
                row = [part.kind, *ref(part.operands[0]), -1, 0, 0, -1, 0, 0, *where[out.id], *part.ints]
                ints.append(row + [0] * (lib.STEP_INTS - len(row)))
                floats.append(part.floats)
                self.planned.append(index)
        self.where = where
        self.fused_adds = len(fused)  # additions a convolution's epilogue does (tests and inspection)
        # multiplies by channel factors a convolution's weight does: found here, or made one node (GATE_CONVOLUTIONS)
        self.fused_scales = len(scaled) + sum(step.scale is not None for _, step in members)
        self.times: np.ndarray | None = None  # per plan step, while profiling (start / stop / seconds)
        try:
            self.plan = lib.make_plan(np.array(ints, np.int64).tobytes(), np.array(floats, np.float64).tobytes(),
                                      np.array(lengths, np.int64).tobytes(), np.array(writable, np.uint8).tobytes())
        except ValueError as exc:
            first = members[0][0]
            raise FormatError(f"the native plan of the region from {first.op} ({first.source}) is invalid: {exc}") \
                from None
        self.scratch = _Arenas(4 * lengths[1])
        first_slot = 2 + len(self.data)
        self.template: list[Any] = [None] * len(lengths)  # a call's buffers: None where the plan holds the weight
        self.fresh: list[tuple[int, int]] = []  # (buffer, floats) of each value leaving that is a new array a call
        for k, slot in enumerate(self.slots):
            if isinstance(slot, np.ndarray):
                lib.hold_buffer(self.plan, first_slot + k, slot)
            else:
                self.fresh.append((first_slot + k, lengths[first_slot + k]))

    def _expected(self, v: Value, x: Any) -> np.ndarray | None:
        """x in the layout the plan reads (C-contiguous; channels-last for images, NCHW for those only an RGB stem
        reads) as float32 memory, or None if it is not the array of the planned shape and dtype (float32, or uint8:
        its bytes, copied where they do not fill whole aligned floats)."""
        dtype = self.shapes.dtype(v)
        if not isinstance(x, np.ndarray) or x.dtype != dtype or x.shape != self.shapes.shape[v.id]:
            return None
        if x.ndim == 4 and self.shapes.nhwc.get(v.id, True) and v.id not in self.planar:
            view = x.transpose(0, 2, 3, 1)
            x = view if view.flags.c_contiguous else np.ascontiguousarray(view)
        elif not x.flags.c_contiguous:
            x = np.ascontiguousarray(x)
        if dtype == "float32":
            return x
        if x.nbytes % 4 == 0 and x.ctypes.data % 4 == 0:
            return x.reshape(-1).view(F32)
        floats = aligned_empty(self.shapes.floats(v), F32)
        floats.view(np.uint8)[:x.size] = x.reshape(-1)
        return floats

    def run(self, *values: Any) -> list[Any]:
        prepared = [self._expected(v, values[i]) for i, v in self.data]
        if any(p is None for p in prepared):
            return self._one_by_one(values)  # not what the plan was made for
        buffers = self.template.copy()
        buffers[0], buffers[1] = self.arenas.get(), self.scratch.get()
        buffers[2:2 + len(prepared)] = prepared
        for index, count in self.fresh:
            buffers[index] = aligned_empty(count, F32)
        lib.run_plan(self.plan, buffers, self.times)
        return [self._value(v, buffers) for v in self.outputs]

    def _value(self, v: Value, buffers: list[np.ndarray]) -> Any:
        """An output of the region as the per-node kernels would give it: images channels-last (N, C, H, W) views,
        other tensors C-contiguous."""
        if v.id not in self.where:  # a list: of constants, or of tensors
            items = constant(v, self.program)
            if items is NOT_CONSTANT:
                items = [self._value(t, buffers) for t in v.node.inputs]
            return items
        shape = self.shapes.shape[v.id]
        buf, off, count = self.where[v.id]
        data = buffers[buf].reshape(-1)[off:off + count]
        if self.shapes.dtype(v) != "float32":  # uint8: the first of the floats' bytes
            data = data.view(np.uint8)[:math.prod(shape)]
        if len(shape) == 4 and self.shapes.nhwc.get(v.id, True):
            n, c, h, w = shape
            return data.reshape(n, h, w, c).transpose(0, 3, 1, 2)
        return data.reshape(shape)

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
                per_node[member] += t
        return per_node

    def _one_by_one(self, values: Sequence[Any]) -> list[Any]:
        """The region's nodes on their own kernels, as the interpreter would run them (a call the plan is not
        for)."""
        env = {v.id: x for v, x in zip(self.inputs, values)}
        for node, _ in self.members:
            args = [env[v.id] if v.id in env else constant(v, self.program) for v in node.inputs]
            kernel = self.kernels[id(node)]
            result = kernel.fn(*args)
            if len(node.outputs) == 1:
                env[node.outputs[0].id] = result
            else:
                env.update((v.id, r) for v, r in zip(node.outputs, result))
        return [env[v.id] for v in self.outputs]


__all__ = ["delegates"]
