"""Models quantized by PyTorch 2 export quantization (prepare_pt2e / convert_pt2e, from torchao, with a quantizer
such as ExecuTorch's XNNPACKQuantizer), captured by torch.export: their graphs are float operators between
quantize/dequantize pairs (`quantized_decomposed::*`, PyTorch's reference representation). The pairs become ptlite's
quantize_per_tensor / dequantize_per_tensor (int8 activations shifted by 128 to ptlite's uint8: the same real
numbers) and the weights' dequantize_per_channel; the captured program so computes exactly what the reference
representation says, in float, and optimize_for_mobile folds each dequantize -> convolution / linear / addition ->
quantize into one int8 operator (ptlite.quantization.qdq).
"""

from __future__ import annotations

import numpy as np

from ptlite.errors import CaptureError
from ptlite.ir.graph import Node, Program, Value
from ptlite.ir.weights import PYTORCH_SCHEME, QUANTIZATION_KEY
from ptlite.ops import DEQUANTIZE_PER_CHANNEL, DEQUANTIZE_PER_TENSOR, QUANTIZE_PER_TENSOR
from ptlite.passes.base import NOT_CONSTANT, add_weight, blocks, constant_value, weight_of

NAMESPACE = "quantized_decomposed::"
INT8, UINT8 = 1, 0  # ScalarType codes
RANGES = {INT8: (-128, 127), UINT8: (0, 255)}


def lower_decomposed(program: Program) -> None:
    """Rewrite the program's quantized_decomposed nodes into ptlite's operators, in place (see the module
    docstring); CaptureError for what ptlite cannot take (dynamic parameters, other dtypes, affine weights)."""
    found = False
    for graph in program.methods.values():
        for block in blocks(graph):
            rewritten: list[Node] = []
            for node in block.nodes:
                if node.op.startswith(NAMESPACE):
                    found = True
                    rewritten += _lower(node, program)
                else:
                    rewritten.append(node)
            block.nodes = rewritten
    if found:
        program.metadata[QUANTIZATION_KEY] = {"scheme": PYTORCH_SCHEME, "int8": {}, "float": [],
                                              "pt2e": "quantize/dequantize pairs; optimize_for_mobile folds them"}


def _lower(node: Node, program: Program) -> list[Node]:
    name = node.op[len(NAMESPACE):]
    where = node.source or node.op
    if name in ("quantize_per_tensor", "dequantize_per_tensor"):
        x, scale, zero_point, qmin, qmax, dtype = (node.inputs[0], *(constant_value(v) for v in node.inputs[1:6]))
        if any(v is NOT_CONSTANT for v in (scale, zero_point, qmin, qmax, dtype)):
            raise CaptureError(f"{where}: {node.op} with parameters computed at run time (dynamic quantization); "
                               "ptlite takes PT2E's static quantization")
        if name == "dequantize_per_tensor" and weight_of(program, x) is not None:
            return _weight(node, program, x, np.full(1, scale), np.full(1, zero_point), None, where)
        if dtype not in RANGES or (qmin, qmax) != RANGES[dtype]:
            raise CaptureError(f"{where}: {node.op} to ScalarType {dtype} over [{qmin}, {qmax}]; ptlite takes 8-bit "
                               "activations over their whole range (int8 -128..127 or uint8 0..255)")
        shifted = int(zero_point) + (128 if dtype == INT8 else 0)
        consts = [Node("prim::Constant", [], [Value(type=t)], {"value": v})
                  for v, t in ((float(scale), "float"), (shifted, "int"))]
        out = node.outputs[0]
        out.dtype = "uint8" if name == "quantize_per_tensor" else "float32"
        op = QUANTIZE_PER_TENSOR if name == "quantize_per_tensor" else DEQUANTIZE_PER_TENSOR
        return [*consts, Node(op, [x, *(c.outputs[0] for c in consts)], [out], source=node.source)]
    if name == "dequantize_per_channel":
        scales, zero_points = weight_of(program, node.inputs[1]), weight_of(program, node.inputs[2])
        axis = constant_value(node.inputs[3])
        if weight_of(program, node.inputs[0]) is None or scales is None or zero_points is None:
            raise CaptureError(f"{where}: {node.op} of a tensor computed at run time; ptlite takes per-channel "
                               "quantization of constant weights")
        return _weight(node, program, node.inputs[0], scales, zero_points, axis, where)
    raise CaptureError(f"{where}: {node.op}, which ptlite cannot run (it takes PT2E's static per-tensor activations "
                       "and per-tensor or per-channel weights)")


def _weight(node: Node, program: Program, w: Value, scales: np.ndarray, zero_points: np.ndarray, axis: int | None,
            where: str) -> list[Node]:
    """A constant int8 weight's dequantize as ptlite::dequantize_per_channel (symmetric only)."""
    q = weight_of(program, w)
    if q is None or q.dtype != np.int8:
        raise CaptureError(f"{where}: {node.op} of a {None if q is None else q.dtype} weight; ptlite takes int8 "
                           "weights")
    if np.any(np.asarray(zero_points) != 0):
        raise CaptureError(f"{where}: weights with nonzero zero points (an affine weight observer); ptlite's int8 "
                           "weights are symmetric: use a symmetric quantization config")
    if axis is None:  # per tensor: one scale for every output channel
        axis, scales = 0, np.full(q.shape[0], float(np.asarray(scales).reshape(-1)[0]))
    name = node.outputs[0].name or "weight"
    scale_name = add_weight(program, f"{name}.scale", np.asarray(scales, np.float32))
    scale_value = Value(name=scale_name, type="Tensor", dtype="float32", shape=(len(scales),))
    axis_value = Value(type="int")
    out = node.outputs[0]
    out.dtype = "float32"
    return [Node("prim::Constant", [], [scale_value], {"weight": scale_name}),
            Node("prim::Constant", [], [axis_value], {"value": int(axis)}),
            Node(DEQUANTIZE_PER_CHANNEL, [w, scale_value, axis_value], [out], source=node.source)]

