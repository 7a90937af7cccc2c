"""The int8_dynamic scheme: linear layers with int8 weights (symmetric per output channel, int8.py) whose float
inputs are quantized at every call, each row (token) over its own range (ptlite::linear_dynamic_int8): no
calibration data, suited to transformers, whose activations' ranges vary from input to input and token to token.
Every aten::linear with a constant weight becomes one, inside control flow too; the program's metadata lists what
stays float and why (`report`).
Quantize a program as captured, before optimize_for_mobile.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ptlite.ir.copy import copy_program
from ptlite.ir.graph import Node, Program
from ptlite.ir.verifier import verify
from ptlite.ir.weights import QUANTIZATION_KEY
from ptlite.ops import LINEAR_DYNAMIC_INT8
from ptlite.passes import DeadCode
from ptlite.passes.base import ConstantPool, constant_value, rewrite_nodes, weight_constant, weight_of

from .int8 import quantize_weight

SCHEME = "int8_dynamic"
KEY = QUANTIZATION_KEY  # program.metadata[KEY]: {"scheme", "int8": {op: n}, "float": [{"op", "count", "why"}]}

# Operators whose weights the scheme would quantize, and why they stay float for now.
NOT_YET = {"aten::lstm.input": "no dynamic int8 LSTM kernel yet: its weights stay float32",
           "aten::gru.input": "no dynamic int8 GRU kernel yet: its weights stay float32"}


def quantize(program: Program) -> Program:
    """The int8_dynamic copy of a captured program (see the module docstring); `program` is unchanged."""
    done = program.metadata.get(KEY)
    if isinstance(done, dict):
        raise ValueError(f"the program is quantized already ({done.get('scheme')}); quantize the float program")
    if program.lowered_for is not None:
        raise ValueError(f"{SCHEME}: the program was optimized (lowered for {program.lowered_for}) already; "
                         "quantize the program as captured, then optimize_for_mobile the result")
    result = copy_program(program)
    DeadCode()(result)  # layers whose results nobody reads (a pooler the model does not return) are not counted
    int8: Counter[str] = Counter()
    left: Counter[tuple[str, str]] = Counter()

    def rewrite(node: Node, memo: dict, pool: ConstantPool) -> list[Node] | None:
        if node.op in NOT_YET:
            left[(node.op, NOT_YET[node.op])] += 1
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


def _float_vector(bias: np.ndarray | None) -> bool:
    return bias is not None and bias.ndim == 1 and bias.dtype == np.float32


def describe(info: dict[str, Any]) -> str:
    int8 = sum(info.get("int8", {}).values())
    floats = sum(item["count"] for item in info.get("float", []))
    return f"{SCHEME}: {int8} linear layer(s) with int8 weights, inputs quantized per call and row" + \
        (f"; {floats} weighted operator(s) left in float" if floats else "")
