"""The int8_static scheme: convolutions, linear layers and additions computed on 8-bit integers, with activation
ranges learned from calibration data.

1. Prepare, as PyTorch's `fuse_modules` does: dropout removed, constants folded, batch norms folded into the
   convolutions before them (the float program's own passes).
2. Choose the int8 operators of the method's top level: a 2-D convolution or linear layer with constant weights, or
   an addition of tensors one of which comes from an int8 operator, each with the relu / relu6 / hardtanh after it
   when nothing else reads its output (the activation becomes the int8 output's clamp).
3. Calibrate: run the prepared float program on the calibration data with an observer (observers.py) on every
   input and output of those operators, and derive each value's uint8 scale and zero point.
4. Rewrite: each chosen operator becomes its ptlite int8 operator (ops/quantized.py) with int8 weights, symmetric
   per output channel (int8.py); a quantize_per_tensor goes where a float value enters int8 operators and a
   dequantize_per_tensor where an int8 value leaves them, so that int8 values pass directly between int8 operators
   and through max pooling and flattening, which are exact on them. Every other operator stays in float: the
   program's metadata lists them, with why (`report`).

Only the method `forward` is quantized (it is what the calibration data is for); nodes inside control flow stay in
float. Quantize a program as captured, before optimize_for_mobile (which then prepacks what stayed float).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ptlite.ir.copy import copy_program
from ptlite.ir.graph import Graph, Node, Program, Value
from ptlite.ir.verifier import verify
from ptlite.ir.weights import QUANTIZATION_KEY
from ptlite.ops import ADD_INT8, CONV2D_INT8, DEQUANTIZE_PER_TENSOR, LINEAR_INT8, QUANTIZE_PER_TENSOR
from ptlite.passes import DeadCode, FoldConstants, FoldConvBatchNorm, RemoveDropout, RemoveNoops, run_to_fixpoint
from ptlite.passes.base import (
    NOT_CONSTANT,
    ConstantPool,
    blocks,
    constant_value,
    uses,
    weight_constant,
    weight_of,
)
from ptlite.passes.mutation import Mutations, written_positions

from .calibration import Progress, calibrate, samples_of
from .int8 import activation_bounds, output_range, quantize_weight, require_captured
from .observers import OBSERVERS

SCHEME = "int8_static"
KEY = QUANTIZATION_KEY  # program.metadata[KEY]: {"scheme", "observer", "samples", "int8": {op: n}, "float": [...]}

_ADDS = frozenset({"aten::add.Tensor", "aten::add_.Tensor"})
# Operators exact on uint8 values: their output keeps the input's scale and zero point.
TRANSPARENT = frozenset({"aten::max_pool2d", "aten::flatten.using_ints", "aten::reshape", "aten::view"})

# Operators reading only a tensor's shape: they read an int8 value as well as its float one.
SHAPE_ONLY = frozenset({"aten::size", "aten::size.int", "aten::dim", "aten::numel", "aten::len.Tensor"})

WHY_NO_KERNEL = "ptlite has no int8 kernel for it"
WHY_FLOAT_INPUT = "its input is float here (it passes int8 values through when it is given them)"
WHY_NESTED = "inside control flow (prim::If / prim::Loop): only the method's top level is quantized"


@dataclass
class Unit:
    """One int8 operator to be: a convolution, linear layer or addition, and the activation it absorbs."""

    kind: str  # "conv", "linear" or "add"
    anchor: Node
    inputs: list[Value]  # the float tensors it reads, to be quantized
    activation: Node | None = None
    bounds: tuple[float, float] = (-math.inf, math.inf)  # the absorbed activation's real output range
    extra: Any = None  # a convolution's geometry

    @property
    def output(self) -> Value:
        return (self.activation or self.anchor).outputs[0]


@dataclass
class Rewrite:
    """The rewrite's state for one graph: the new node list and what each float value became."""

    graph: Graph
    program: Program
    qparams: dict[int, tuple[float, int]]
    pool: ConstantPool
    clean: set[int]  # values no float operator writes in place: what may pass through transparent operators
    nodes: list[Node] = field(default_factory=list)
    quantized: dict[int, tuple[Value, float, int]] = field(default_factory=dict)  # float id -> (uint8, s, z)
    dropped: set[int] = field(default_factory=set)  # float values no longer computed (their int8 one is)
    floats: dict[int, Value] = field(default_factory=dict)  # dropped id -> its dequantized value
    weights: dict[tuple[str, int], tuple[Value, Value]] = field(default_factory=dict)  # (name, groups) -> w, scale

    def const(self, value: Any, kind: str) -> Value:
        return self.pool.get(value, kind)

    def int8_of(self, v: Value) -> tuple[Value, float, int]:
        """v as uint8 with its parameters: the int8 value computed for it, or a new quantize of it."""
        if v.id not in self.quantized:
            scale, zero_point = self.qparams[v.id]
            out = Value(name=_q_name(v), type="Tensor", dtype="uint8", shape=v.shape)
            self.nodes.append(Node(QUANTIZE_PER_TENSOR, [v, self.const(scale, "float"),
                                                         self.const(zero_point, "int")], [out]))
            self.quantized[v.id] = (out, scale, zero_point)
        return self.quantized[v.id]

    def float_of(self, v: Value) -> Value:
        """v as float: itself, or (once) the dequantize of the int8 value that replaced it."""
        if v.id not in self.dropped:
            return v
        if v.id not in self.floats:
            q, scale, zero_point = self.quantized[v.id]
            out = Value(name=v.name, type="Tensor", dtype=v.dtype, shape=v.shape)
            self.nodes.append(Node(DEQUANTIZE_PER_TENSOR, [q, self.const(scale, "float"),
                                                           self.const(zero_point, "int")], [out]))
            self.floats[v.id] = out
        return self.floats[v.id]

    def produce(self, v: Value, out: Value, scale: float, zero_point: int) -> None:
        self.quantized[v.id] = (out, scale, zero_point)
        self.dropped.add(v.id)


def quantize(program: Program, calibration_data: Any, observer: str = "histogram",
             progress: Progress | None = None) -> Program:
    """The int8_static copy of a captured program (see the module docstring); `program` is unchanged."""
    if observer not in OBSERVERS:
        raise ValueError(f"unknown observer {observer!r}: ptlite has {', '.join(OBSERVERS)}")
    if "forward" not in program.methods:
        raise ValueError(f"{SCHEME} quantizes the method forward, which this program lacks (it has "
                         f"{', '.join(program.methods)})")
    require_captured(program, SCHEME)
    prepared = copy_program(program)
    run_to_fixpoint(prepared, [RemoveDropout(), RemoveNoops(), FoldConstants(_evaluate()), FoldConvBatchNorm(),
                               DeadCode()])
    graph = prepared.forward
    samples = samples_of(calibration_data, graph)
    units, reasons, clean = _units(graph, prepared)
    observers = {v.id: OBSERVERS[observer]() for u in units for v in (*u.inputs, u.output)}
    calibrate(prepared, graph, observers, samples, progress)
    unseen = [u for u in units if not all(observers[v.id].seen for v in (*u.inputs, u.output))]
    for u in unseen:
        reasons[id(u.anchor)] = "never ran on the calibration data"
    units = [u for u in units if u not in unseen]
    qparams = {vid: o.qparams() for vid, o in observers.items() if o.seen}
    _rewrite(Rewrite(graph, prepared, qparams, ConstantPool(graph), clean), units)
    DeadCode()(prepared)
    verify(prepared)
    prepared.metadata[KEY] = {"scheme": SCHEME, "observer": observer, "samples": len(samples),
                              **_summary(graph, reasons)}
    return prepared


def _evaluate() -> Callable:
    from ptlite.backends import reference

    return reference().evaluate


# ------------------------------------------------------------------------------------------------ choosing

def _units(graph: Graph, program: Program) -> tuple[list[Unit], dict[int, str], set[int]]:
    """The int8 operators to be, in graph order; why candidates that are not stay float (by node id); the values
    no float operator writes in place (by id)."""
    from ptlite.backends.numpy.lower.prepack import CONVOLUTIONS, conv_geometry

    users = uses(graph)
    top = {id(n) for n in graph.nodes}
    units: list[Unit] = []
    reasons: dict[int, str] = {}
    int8_values: set[int] = set()  # float values that will be computed in int8
    for node in graph.nodes:
        unit = None
        if node.op in CONVOLUTIONS:
            geometry = conv_geometry(node, program)
            if geometry is None:
                reasons[id(node)] = "not a 2-D convolution with a constant weight and constant arguments " \
                                    "(transposed, or a computed weight)"
            elif not np.isfinite(geometry.weight).all():
                reasons[id(node)] = "its weight holds inf or NaN"
            elif _float_tensor(node.inputs[0]):
                unit = Unit("conv", node, [node.inputs[0]], extra=geometry)
        elif node.op == "aten::linear":
            weight = weight_of(program, node.inputs[1])
            if weight is None or weight.ndim != 2 or weight.dtype.kind != "f" or not _bias_ok(program, node):
                reasons[id(node)] = "its weight or bias is not a constant"
            elif not np.isfinite(weight).all():
                reasons[id(node)] = "its weight holds inf or NaN"
            elif _float_tensor(node.inputs[0]):
                unit = Unit("linear", node, [node.inputs[0]])
        elif node.op in _ADDS:
            unit, why = _add_unit(node, users, int8_values)
            if why:
                reasons[id(node)] = why
        elif node.op in TRANSPARENT and node.inputs and node.inputs[0].id in int8_values:
            int8_values.add(node.outputs[0].id)
        if unit is None:
            continue
        after = users.get(unit.anchor.outputs[0].id, [])
        if len(after) == 1 and id(after[0]) in top and after[0].inputs[0] is unit.anchor.outputs[0]:
            unit.bounds = activation_bounds(after[0]) or unit.bounds
            unit.activation = after[0] if activation_bounds(after[0]) else None
        units.append(unit)
        int8_values.add(unit.output.id)
    units, clean = _unwritten(units, graph, reasons)
    return units, reasons, clean


def _unwritten(units: list[Unit], graph: Graph, reasons: dict[int, str]) -> tuple[list[Unit], set[int]]:
    """The units that read and write no tensor (or memory it shares) that an operator staying float writes in
    place: the writes allowed are those that become int8 (functional) with the units, an absorbed activation's and
    an in-place addition's. Dropping a unit may drop others. Also the values that no float operator writes through
    any alias (what max pooling and flattening may pass through as uint8)."""
    mutations = Mutations(graph)
    writes = [(node, node.inputs[i].id) for node in graph.walk() for i in written_positions(node)]
    classes: dict[int, set[int]] = {}

    def members(v: Value) -> set[int]:
        if v.id not in classes:
            found = mutations.alias_class([v])
            classes[v.id] = {m.id for m in found.values} if found.mutated else set()
        return classes[v.id]

    while True:
        allowed = {id(u.anchor) for u in units if u.anchor.op == "aten::add_.Tensor"} | \
                  {id(u.activation) for u in units if u.activation is not None}
        written = {vid for node, vid in writes if id(node) not in allowed}
        kept = []
        for u in units:
            if any(members(v) & written for v in (*u.inputs, u.anchor.outputs[0], u.output)):
                reasons[id(u.anchor)] = "it reads or writes a tensor that an operator staying float writes in place"
            else:
                kept.append(u)
        if len(kept) == len(units):
            clean = {v.id for node in graph.nodes for v in (*node.inputs, *node.outputs)
                     if v.is_tensor and not members(v) & written}
            return kept, clean
        units = kept


def _add_unit(node: Node, users: dict, int8_values: set[int]) -> tuple[Unit | None, str]:
    a, b = node.inputs[0], node.inputs[1]
    alpha = constant_value(node.inputs[2]) if len(node.inputs) > 2 else 1
    if not (_float_tensor(a) and _float_tensor(b)) or alpha is NOT_CONSTANT or alpha != 1:
        return None, "an addition with a scalar operand or alpha other than 1"
    if a.id not in int8_values and b.id not in int8_values:
        return None, "neither operand comes from an int8 operator"
    if node.op == "aten::add_.Tensor" and users.get(a.id) != [node]:
        return None, "an in-place addition into a tensor that is read elsewhere"
    return Unit("add", node, [a, b]), ""


def _float_tensor(v: Value) -> bool:
    return v.is_tensor and v.dtype in (None, "float32")


def _bias_ok(program: Program, node: Node) -> bool:
    if len(node.inputs) < 3 or constant_value(node.inputs[2]) is None:
        return True
    bias = weight_of(program, node.inputs[2])
    return bias is not None and bias.ndim == 1 and bias.dtype == np.float32


# ------------------------------------------------------------------------------------------------ rewriting

def _rewrite(r: Rewrite, units: list[Unit]) -> None:
    by_anchor = {id(u.anchor): u for u in units}
    absorbed = {id(u.activation) for u in units if u.activation is not None}
    for node in r.graph.nodes:
        if id(node) in absorbed:
            continue
        unit = by_anchor.get(id(node))
        if unit is not None:
            _emit(r, unit)
        elif node.op in TRANSPARENT and node.inputs and node.inputs[0].id in r.dropped \
                and node.outputs[0].id in r.clean:
            q, scale, zero_point = r.quantized[node.inputs[0].id]
            out = Value(name=_q_name(node.outputs[0]), type="Tensor", dtype="uint8", shape=node.outputs[0].shape)
            r.nodes.append(Node(node.op, [q, *node.inputs[1:]], [out], source=node.source))
            r.produce(node.outputs[0], out, scale, zero_point)
        elif node.op in SHAPE_ONLY and node.inputs and node.inputs[0].id in r.dropped:
            node.inputs = [r.quantized[node.inputs[0].id][0], *(r.float_of(v) for v in node.inputs[1:])]
            r.nodes.append(node)
        else:
            node.inputs = [r.float_of(v) for v in node.inputs]
            for inner in (b for top in node.blocks for b in blocks(top)):
                inner.outputs = [r.float_of(v) for v in inner.outputs]
                for n in inner.nodes:
                    n.inputs = [r.float_of(v) for v in n.inputs]
            r.nodes.append(node)
    r.graph.outputs = [r.float_of(v) for v in r.graph.outputs]
    r.graph.nodes = r.nodes
    r.pool.flush()


def _q_name(v: Value) -> str:
    return f"{v.name}_q" if v.name else ""


def _emit(r: Rewrite, unit: Unit) -> None:
    """The int8 node (and weight constants) of one unit, appended to the new node list."""
    node, program = unit.anchor, r.program
    scale, zero_point = r.qparams[unit.output.id]
    out_min, out_max = output_range(unit.bounds, scale, zero_point)
    tail = [r.const(scale, "float"), r.const(zero_point, "int"), r.const(out_min, "int"), r.const(out_max, "int")]
    out = Value(name=_q_name(unit.output), type="Tensor", dtype="uint8", shape=unit.output.shape)
    q_inputs = [r.int8_of(v) for v in unit.inputs]
    if unit.kind == "add":
        (qa, sa, za), (qb, sb, zb) = q_inputs
        inputs = [qa, r.const(sa, "float"), r.const(za, "int"), qb, r.const(sb, "float"), r.const(zb, "int"), *tail]
        r.nodes.append(Node(ADD_INT8, inputs, [out], source=node.source))
    else:
        from ptlite.ops.layouts import pack_conv2d_weight

        (qx, sx, zx), = q_inputs
        name = node.inputs[1].node.attrs["weight"]
        geometry = []
        if unit.kind == "conv":
            g = unit.extra
            geometry = [r.const(list(g.kernel), "List[int]"), r.const(g.stride, "List[int]"),
                        r.const(g.pads, "List[int]"), r.const(g.dilation, "List[int]"), r.const(g.groups, "int")]
        key = (name, unit.extra.groups if unit.kind == "conv" else 0)
        if key not in r.weights:  # a layer used twice keeps one copy of its weights
            if unit.kind == "conv":
                q, scales = quantize_weight(unit.extra.weight)
                packed = pack_conv2d_weight(q, unit.extra.groups)
            else:
                q, scales = quantize_weight(weight_of(program, node.inputs[1]))
                packed = np.ascontiguousarray(q.T)
            hint = name.removesuffix(".weight")
            constants = [weight_constant(program, f"{hint}.{what}", array, node.source)
                         for what, array in (("int8", packed), ("scale", scales))]
            r.nodes += constants
            r.weights[key] = (constants[0].outputs[0], constants[1].outputs[0])
        w_value, s_value = r.weights[key]
        bias = node.inputs[2] if len(node.inputs) > 2 else r.const(None, "NoneType")
        inputs = [qx, r.const(sx, "float"), r.const(zx, "int"), w_value, s_value, bias, *geometry, *tail]
        r.nodes.append(Node(CONV2D_INT8 if unit.kind == "conv" else LINEAR_INT8, inputs, [out], source=node.source))
    r.produce(unit.output, out, scale, zero_point)
    if unit.activation is not None:
        r.dropped.add(unit.anchor.outputs[0].id)  # read by the activation alone, which is gone too


# ------------------------------------------------------------------------------------------------ the report

def _summary(graph: Graph, reasons: dict[int, str]) -> dict[str, Any]:
    """{"int8": {operator: count}, "float": [{"op", "count", "why"}]} over the quantized graph: what computes on
    tensors in float, and why."""
    int8: Counter[str] = Counter()
    float_ops: Counter[tuple[str, str]] = Counter()
    quantized_ops = {CONV2D_INT8, LINEAR_INT8, ADD_INT8}
    for node in graph.nodes:
        if node.op in quantized_ops or (node.op in TRANSPARENT and node.outputs[0].dtype == "uint8"):
            int8[node.op] += 1
        elif _computes_float(node):
            why = reasons.get(id(node), WHY_FLOAT_INPUT if node.op in TRANSPARENT else WHY_NO_KERNEL)
            float_ops[(node.op, why)] += 1
        for inner in (n for block in node.blocks for n in block.walk()):
            if _computes_float(inner):
                float_ops[(inner.op, WHY_NESTED)] += 1
    return {"int8": dict(int8),
            "float": [{"op": op, "count": n, "why": why} for (op, why), n in float_ops.items()]}


def _computes_float(node: Node) -> bool:
    if node.op.startswith("prim::") or node.op in (QUANTIZE_PER_TENSOR, DEQUANTIZE_PER_TENSOR):
        return False
    return any(v.is_tensor and v.dtype in (None, "float32", "float16", "float64") for v in node.outputs)


def describe(info: dict[str, Any]) -> str:
    int8 = sum(info.get("int8", {}).values())
    floats = sum(item["count"] for item in info.get("float", []))
    return (f"{SCHEME}: {int8} operator(s) in int8, {floats} in float ({info.get('observer')} observer, "
            f"{info.get('samples')} calibration sample(s))")
