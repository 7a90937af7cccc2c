"""Folding quantize/dequantize pairs into int8 operators: what a model quantized by PyTorch 2 export quantization
(prepare_pt2e / convert_pt2e) holds once captured (ptlite.frontend.pt2e). optimize_for_mobile runs it first, before
the float passes, on a program that has such pairs:

    a = dequantize_per_tensor(qa, sa, za);  w = dequantize_per_channel(wq, ws, 0)
    y = conv2d(a, w, bias, ...);  [z = relu(y)];  q = quantize_per_tensor(z, s, zp)
 -> q = conv2d_int8(qa, sa, za, pack(wq), ws, bias, ..., s, zp, clamp)

and likewise aten::linear, and aten::add (or add_, into a tensor nothing else reads) of two dequantized tensors
(alpha 1). The float operator and its
activation must have no other reader; the dequantize nodes stay while something else reads them (dead code drops
them after). What does not match stays as captured: float operators between a dequantize and a quantize, exactly
PyTorch's reference representation.
"""

from __future__ import annotations

import numpy as np

from ptlite.ir.copy import copy_program
from ptlite.ir.graph import Graph, Node, Program, Value
from ptlite.ir.verifier import verify
from ptlite.ir.weights import QUANTIZATION_KEY
from ptlite.ops import (
    ADD_INT8,
    CONV2D_INT8,
    DEQUANTIZE_PER_CHANNEL,
    DEQUANTIZE_PER_TENSOR,
    LINEAR_INT8,
    QUANTIZE_PER_TENSOR,
)
from ptlite.passes import DeadCode
from ptlite.passes.base import ConstantPool, blocks, constant_value, uses, weight_constant, weight_of

from .int8 import activation_bounds, output_range

ADDS = ("aten::add.Tensor", "aten::add_.Tensor")  # the in-place one when nothing else reads what it writes


def applies(program: Program) -> bool:
    """Whether the program has quantize/dequantize pairs to fold."""
    return any(node.op == DEQUANTIZE_PER_TENSOR for graph in program.methods.values() for node in graph.walk())


def fold(program: Program) -> Program:
    """A copy of `program` with every matching dequantize -> operator -> quantize folded (the module docstring);
    metadata["quantization"]["int8"] counts the int8 operators it holds after."""
    result = copy_program(program)
    for graph in result.methods.values():
        _fold_graph(graph, result)
    DeadCode()(result)
    verify(result)
    info = result.metadata.get(QUANTIZATION_KEY)
    if isinstance(info, dict):
        counts: dict[str, int] = {}
        for graph in result.methods.values():
            for node in graph.walk():
                if node.op in (CONV2D_INT8, LINEAR_INT8, ADD_INT8):
                    counts[node.op] = counts.get(node.op, 0) + 1
        result.metadata[QUANTIZATION_KEY] = {**info, "int8": counts}
    return result


def _fold_graph(graph: Graph, program: Program) -> None:
    from ptlite.backends.numpy.lower.prepack import CONVOLUTIONS, conv_geometry
    from ptlite.ops.layouts import pack_conv2d_weight

    users = uses(graph)
    packed: dict[tuple[str, int], tuple[Value, Value]] = {}
    for block in list(blocks(graph)):
        pool = ConstantPool(block)
        replaced: dict[int, list[Node]] = {}  # id(quantize node) -> the nodes in its place
        removed: set[int] = set()
        for q in block.nodes:
            if q.op != QUANTIZE_PER_TENSOR:
                continue
            scale, zero_point = constant_value(q.inputs[1]), constant_value(q.inputs[2])
            z = q.inputs[0]
            act = z.node if z.node is not None and users.get(z.id) == [q] else None
            bounds = activation_bounds(act) if act is not None else None
            y = act.inputs[0] if bounds is not None else z
            anchor = y.node
            if anchor is None or users.get(y.id) != [act if bounds is not None else q]:
                continue
            tail = [pool.get(float(scale), "float"), pool.get(int(zero_point), "int"),
                    *(pool.get(v, "int") for v in output_range(bounds, float(scale), int(zero_point)))]
            new: list[Node] = []
            if anchor.op in CONVOLUTIONS or anchor.op == "aten::linear":
                dq, wdq = _dequantized(anchor.inputs[0]), anchor.inputs[1].node
                if dq is None or wdq is None or wdq.op != DEQUANTIZE_PER_CHANNEL or constant_value(wdq.inputs[2]):
                    continue
                wq, ws = weight_of(program, wdq.inputs[0]), weight_of(program, wdq.inputs[1])
                if wq is None or ws is None:
                    continue
                name = wdq.inputs[0].node.attrs["weight"]
                if anchor.op == "aten::linear":
                    bias = anchor.inputs[2] if len(anchor.inputs) > 2 else pool.get(None, "NoneType")
                    if wq.ndim != 2 or not _bias_ok(program, bias):
                        continue
                    groups, geometry, op = -1, [], LINEAR_INT8
                else:
                    g = conv_geometry(anchor, program, weight=wq)
                    if g is None:
                        continue
                    bias, groups = anchor.inputs[2], g.groups
                    geometry = [pool.get(list(g.kernel), "List[int]"), pool.get(g.stride, "List[int]"),
                                pool.get(g.pads, "List[int]"), pool.get(g.dilation, "List[int]"),
                                pool.get(g.groups, "int")]
                    op = CONV2D_INT8
                key = (name, groups)
                if key not in packed:
                    array = np.ascontiguousarray(wq.T) if op == LINEAR_INT8 else pack_conv2d_weight(wq, groups)
                    constants = [weight_constant(program, f"{name}.packed", array, anchor.source),
                                 weight_constant(program, f"{name}.scale32", np.asarray(ws, np.float32),
                                                 anchor.source)]
                    new += constants
                    packed[key] = (constants[0].outputs[0], constants[1].outputs[0])
                w, s = packed[key]
                qa, sa, za = dq
                new.append(Node(op, [qa, sa, za, w, s, bias, *geometry, *tail], list(q.outputs),
                                source=anchor.source))
            elif anchor.op in ADDS and constant_value(anchor.inputs[2]) == 1:
                a, b = _dequantized(anchor.inputs[0]), _dequantized(anchor.inputs[1])
                if a is None or b is None or (anchor.op != ADDS[0] and users.get(anchor.inputs[0].id) != [anchor]):
                    continue  # an in-place addition into a tensor read elsewhere
                new.append(Node(ADD_INT8, [*a, *b, *tail], list(q.outputs), source=anchor.source))
            else:
                continue
            replaced[id(q)] = new
            removed.update({id(anchor), id(act)} if bounds is not None else {id(anchor)})
        if replaced:
            block.nodes = [n for node in block.nodes if id(node) not in removed
                           for n in replaced.get(id(node), [node])]
        pool.flush()


def _dequantized(v: Value) -> tuple[Value, Value, Value] | None:
    """(q, scale, zero point) of a value made by dequantize_per_tensor, else None."""
    node = v.node
    if node is None or node.op != DEQUANTIZE_PER_TENSOR:
        return None
    return node.inputs[0], node.inputs[1], node.inputs[2]


def _bias_ok(program: Program, bias: Value) -> bool:
    if constant_value(bias) is None:
        return True
    array = weight_of(program, bias)
    return array is not None and array.ndim == 1 and array.dtype == np.float32
