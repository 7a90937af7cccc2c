"""The int8_dynamic scheme: linear layers (and LSTM and GRU layers) with int8 weights, symmetric per output channel
(int8.py), whose float inputs are quantized at every call, each row (token) over its own range
(ptlite::linear_dynamic_int8): no calibration data, suited to transformers and recurrent networks, whose
activations' ranges vary from input to input and token to token. Every aten::linear with a constant weight becomes
one, inside control flow too; every aten::lstm / aten::gru with constant weights its dynamic int8 form (the same
products, per step); every aten::embedding's table becomes int8 with a scale per row. The program's metadata lists
what stays float and why (`report`). Quantize a program as captured, before optimize_for_mobile.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ptlite.ir.copy import copy_program
from ptlite.ir.graph import Node, Program, Value
from ptlite.ir.verifier import verify
from ptlite.ir.weights import QUANTIZATION_KEY
from ptlite.ops import EMBEDDING_INT8, GRU_DYNAMIC_INT8, LINEAR_DYNAMIC_INT8, LSTM_DYNAMIC_INT8
from ptlite.passes import DeadCode
from ptlite.passes.base import NOT_CONSTANT, ConstantPool, constant_value, rewrite_nodes, weight_constant, weight_of

from .int8 import quantize_weight, require_captured

SCHEME = "int8_dynamic"
KEY = QUANTIZATION_KEY  # program.metadata[KEY]: {"scheme", "int8": {op: n}, "float": [{"op", "count", "why"}]}

RECURRENT = {"aten::lstm.input": LSTM_DYNAMIC_INT8, "aten::gru.input": GRU_DYNAMIC_INT8}


def quantize(program: Program) -> Program:
    """The int8_dynamic copy of a captured program (see the module docstring); `program` is unchanged."""
    require_captured(program, SCHEME)
    result = copy_program(program)
    DeadCode()(result)  # layers whose results nobody reads (a pooler the model does not return) are not counted
    int8: Counter[str] = Counter()
    left: Counter[tuple[str, str]] = Counter()

    def rewrite(node: Node, memo: dict, pool: ConstantPool) -> list[Node] | None:
        if node.op in RECURRENT:
            nodes, why = _recurrent(node, result)
            if nodes is None:
                left[(node.op, why)] += 1
            else:
                int8[RECURRENT[node.op]] += 1
            return nodes
        if node.op == "aten::embedding":
            table = weight_of(result, node.inputs[0])
            if table is None or table.ndim != 2 or table.dtype != np.float32:
                left[(node.op, "its table is not a constant float32 matrix")] += 1
                return None
            q, scales = quantize_weight(table)  # a scale per row
            name = node.inputs[0].node.attrs["weight"]
            constants = [weight_constant(result, f"{name}.{what}", array, node.source)
                         for what, array in (("int8", q), ("scale", scales))]
            int8[EMBEDDING_INT8] += 1
            return [*constants, Node(EMBEDDING_INT8, [constants[0].outputs[0], constants[1].outputs[0],
                                                      node.inputs[1]], node.outputs, source=node.source)]
        if node.op != "aten::linear":
            return None
        weight = weight_of(result, node.inputs[1])
        bias = node.inputs[2] if len(node.inputs) > 2 else None
        bias_ok = bias is None or constant_value(bias) is None or _float_vector(weight_of(result, bias))
        if weight is None or weight.ndim != 2 or weight.dtype != np.float32 or not bias_ok:
            left[(node.op, "its weight or bias is not a constant float32 array")] += 1
            return None
        name = node.inputs[1].node.attrs["weight"]
        new: list[Node] = []
        if name not in memo:  # a weight several layers of the block share is quantized once
            q, scales = quantize_weight(weight)
            hint = name.removesuffix(".weight")
            memo[name] = (weight_constant(result, f"{hint}.int8", np.ascontiguousarray(q.T), node.source),
                          weight_constant(result, f"{hint}.scale", scales, node.source))
            new += memo[name]
        w, s = memo[name]
        int8[LINEAR_DYNAMIC_INT8] += 1
        inputs = [node.inputs[0], w.outputs[0], s.outputs[0], bias if bias is not None else pool.get(None, "NoneType")]
        return [*new, Node(LINEAR_DYNAMIC_INT8, inputs, node.outputs, source=node.source)]

    for graph in result.methods.values():
        rewrite_nodes(graph, rewrite)
    DeadCode()(result)
    verify(result)
    result.metadata[KEY] = {"scheme": SCHEME, "int8": dict(int8),
                            "float": [{"op": op, "count": n, "why": why} for (op, why), n in left.items()]}
    return result


def _recurrent(node: Node, program: Program) -> tuple[list[Node] | None, str]:
    """An aten::lstm / aten::gru with constant float32 weights as its dynamic int8 operator (ops/quantized.py), or
    (None, why it stays float)."""
    x, hx, params, has_biases, num_layers, _dropout, train, bidirectional, batch_first = node.inputs
    flags = [constant_value(v) for v in (has_biases, num_layers, train, bidirectional)]
    listed = params.node
    if listed is None or listed.op != "prim::ListConstruct" or any(f is NOT_CONSTANT for f in flags):
        return None, "its weights or flags are not constants"
    weights = [weight_of(program, v) for v in listed.inputs]
    if any(w is None or w.dtype != np.float32 for w in weights):
        return None, "its weights are not constant float32 arrays"
    has_bias, layers, training, both = flags
    per = 4 if has_bias else 2
    if training or len(weights) != per * layers * (2 if both else 1):
        return None, "a projection (proj_size), or training mode: no int8 kernel for it"
    nodes: list[Node] = []
    items: list[Value] = []
    for start in range(0, len(weights), per):
        for k in (0, 1):  # w_ih, w_hh -> int8 (in, gates x hidden) and their scales
            q, scales = quantize_weight(weights[start + k])
            name = listed.inputs[start + k].node.attrs["weight"]
            for array, suffix in ((np.ascontiguousarray(q.T), "int8"), (scales, "scale")):
                const = weight_constant(program, f"{name}.{suffix}", array, node.source)
                nodes.append(const)
                items.append(const.outputs[0])
        items += listed.inputs[start + 2:start + per]  # the float biases
    new_list = Value(type="List[Tensor]")
    nodes.append(Node("prim::ListConstruct", items, [new_list]))
    inputs = [x, hx, new_list, has_biases, num_layers, bidirectional, batch_first]
    nodes.append(Node(RECURRENT[node.op], inputs, node.outputs, source=node.source))
    return nodes, ""


def _float_vector(bias: np.ndarray | None) -> bool:
    return bias is not None and bias.ndim == 1 and bias.dtype == np.float32


def describe(info: dict[str, Any]) -> str:
    int8 = sum(info.get("int8", {}).values())
    floats = sum(item["count"] for item in info.get("float", []))
    return f"{SCHEME}: {int8} layer(s) with int8 weights, inputs quantized per call and row" + \
        (f"; {floats} weighted operator(s) left in float" if floats else "")
