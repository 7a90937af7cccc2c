"""PyTorch's quantized operators as ptlite's int8 ones (ops/quantized.py), without torch: shared by the reader of
quantized .ptl files (format/ptl/quantized.py) and the capture of models quantized in PyTorch
(frontend/torch_quantized.py).

A quantized PyTorch tensor carries its scale and zero point; ptlite's uint8 values do not, so they are followed
through the graph as it is translated: set by aten::quantize_per_tensor and by each quantized operator's output
arguments, kept by the operators that only move or pick values (max pooling, flattening, reshaping), and kept by
those PyTorch computes at the input's parameters (relu, hardtanh, average pooling), which run in float between a
dequantize and a quantize. Packed weights (Conv2dPackedParamsBase, LinearPackedParamsBase) become int8 weights
(symmetric: PyTorch's weight observers are) with a scale per output channel, in the prepacked layouts, and float
biases.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ptlite.errors import CaptureError
from ptlite.ir.graph import Node, Value
from ptlite.ir.weights import PYTORCH_SCHEME
from ptlite.ops import (
    ADD_INT8,
    CONV2D_INT8,
    DEQUANTIZE_PER_TENSOR,
    LINEAR_DYNAMIC_INT8,
    LINEAR_INT8,
    QUANTIZE_PER_TENSOR,
)

QUINT8 = 13  # c10::ScalarType::QUInt8
# Operators that only move or pick values: on a quantized tensor, their result has its scale and zero point.
MOVES = frozenset({"aten::max_pool2d", "aten::flatten.using_ints", "aten::reshape", "aten::view", "aten::contiguous",
                   "aten::dropout", "aten::squeeze.dim", "aten::squeeze", "aten::unsqueeze", "aten::clone",
                   "aten::permute", "aten::transpose.int"})
# Operators PyTorch computes on a quantized tensor at the input's parameters, exactly or rounded as float would be.
AT_INPUT_PARAMETERS = frozenset({"aten::relu", "aten::relu_", "aten::hardtanh", "aten::hardtanh_", "aten::relu6",
                                 "aten::adaptive_avg_pool2d", "aten::avg_pool2d", "aten::mean.dim"})
# Operators that read only a tensor's shape.
SHAPE_ONLY = frozenset({"aten::size", "aten::size.int", "aten::dim", "aten::len.Tensor", "aten::numel"})
NOT_CONSTANT = object()  # what _constant returns for a value no prim::Constant defines
# Operators reading a tensor to a Python scalar (a Quantize module's scale and zero point, stored as tensors).
_SCALAR_OF = {"aten::Float.Tensor": float, "aten::Int.Tensor": int}


@dataclass
class Packed:
    """A packed weight object, unpacked."""

    kind: str  # "conv" or "linear"
    weight: np.ndarray  # int8, in the prepacked layout
    scales: np.ndarray  # float32, a scale per output channel
    bias: np.ndarray | None
    geometry: tuple = ()  # a convolution's kernel, stride, pads, dilation, groups
    name: str = ""  # the layer's name, for its weights' names ("" to name them after the node's source)


def weight_scales(q: np.ndarray, scales: np.ndarray, zero_points: np.ndarray, axis: int, where: str,
                  error: type[Exception] = CaptureError) -> np.ndarray:
    """A quantized weight's float32 scale per output channel, from its per-tensor (one scale, axis ignored) or
    per-channel (along axis 0) parameters; refused unless symmetric."""
    scales = np.asarray(scales, np.float64).reshape(-1)
    zero_points = np.asarray(zero_points).reshape(-1)
    if q.ndim < 1 or q.size == 0:
        raise error(f"{where}: an empty or 0-d quantized weight of shape {list(q.shape)}")
    if q.dtype != np.int8:
        raise error(f"{where}: weights of dtype {q.dtype}; ptlite's int8 kernels take qint8 weights")
    if scales.size == 1 and zero_points.size == 1:
        out = np.full(q.shape[0], scales[0], np.float32)
    elif axis == 0 and scales.size == zero_points.size == q.shape[0]:
        out = scales.astype(np.float32)
    else:
        raise error(f"{where}: weights quantized along axis {axis} with {scales.size} scales for {q.shape[0]} "
                    "output channels; ptlite takes per-tensor or per-output-channel weights")
    if np.any(zero_points != 0):
        raise error(f"{where}: weights with a nonzero zero point (an affine weight observer); ptlite's int8 "
                    "weights are symmetric: use a symmetric weight observer (PyTorch's defaults are)")
    if not np.all(np.isfinite(out)) or np.any(out <= 0):
        raise error(f"{where}: weight scales that are not finite positive numbers")
    return out


def conv_packed(q: np.ndarray, scales: np.ndarray, bias: np.ndarray | None, stride: list[int],
                padding: list[int], dilation: list[int], groups: int, where: str,
                error: type[Exception] = CaptureError) -> Packed:
    """A 2-D convolution's packed weights: q (O, C/groups, kh, kw) int8 with its scale per output channel."""
    from ptlite.ops.layouts import pack_conv2d_weight

    if q.ndim != 4:
        raise error(f"{where}: a quantized {q.ndim - 2}-D convolution; ptlite's int8 convolutions are 2-D")
    if not (isinstance(groups, int) and groups >= 1 and q.shape[0] % groups == 0):
        raise error(f"{where}: {groups} groups for a convolution with {q.shape[0]} output channels")
    geometry_ok = all(len(v) == 2 and all(isinstance(i, int) for i in v) for v in (stride, padding, dilation))
    if not geometry_ok or min(stride) < 1 or min(dilation) < 1 or min(padding) < 0:
        raise error(f"{where}: convolution stride {stride}, padding {padding}, dilation {dilation} are not "
                    "two positive (padding: non-negative) ints each")
    _check_bias(bias, q.shape[0], where, error)
    pad = [int(p) for p in padding]
    geometry = ([int(k) for k in q.shape[2:]], [int(s) for s in stride], [pad[0], pad[0], pad[1], pad[1]],
                [int(d) for d in dilation], int(groups))
    return Packed("conv", pack_conv2d_weight(q, groups), scales, bias, geometry)


def linear_packed(q: np.ndarray, scales: np.ndarray, bias: np.ndarray | None, where: str,
                  error: type[Exception] = CaptureError) -> Packed:
    """A linear layer's packed weights: q (out, in) int8 with its scale per output feature."""
    if q.ndim != 2:
        raise error(f"{where}: a quantized linear weight of {q.ndim} dimensions, not 2")
    _check_bias(bias, q.shape[0], where, error)
    return Packed("linear", np.ascontiguousarray(q.T), scales, bias)


def _check_bias(bias: np.ndarray | None, channels: int, where: str, error: type[Exception]) -> None:
    if bias is not None and (bias.shape != (channels,) or bias.dtype != np.float32):
        raise error(f"{where}: a bias of shape {list(bias.shape)} and dtype {bias.dtype} for {channels} output "
                    "channels; PyTorch's quantized layers take a float32 bias per output channel")


class QuantizedOps:
    """A translator's companion for quantized models: each quantized value's (scale, zero point), by ptlite value
    id, and the ptlite nodes for the operators that make or read quantized tensors.

    add_weight: (array, hint) -> the name of a new weight of the program.
    error: the exception raised for what ptlite cannot run (CaptureError when capturing, UnsupportedOperatorError
    when reading a file).
    weight_of: the array of a value that is a weight constant, else None (to read a Quantize module's scale and
    zero point, stored as tensors, through aten::Float.Tensor / aten::Int.Tensor).
    """

    def __init__(self, add_weight: Callable[[np.ndarray, str], str], error: type[Exception] = CaptureError,
                 weight_of: Callable[[Value], np.ndarray | None] | None = None) -> None:
        self.add_weight = add_weight
        self.error = error
        self.weight_of = weight_of
        self.qparams: dict[int, tuple[float, int]] = {}
        # Tuples and lists holding quantized tensors: the (scale, zero point) of each element, None for others.
        self.containers: dict[int, list[tuple[float, int] | None]] = {}
        self.found = False  # the model is quantized

    def node(self, kind: str, key: str, inputs: list[Value], outputs: list[Value], source: str,
             packed_of: Callable[[], Packed | None]) -> list[Node] | None:
        """The ptlite nodes for an operator (kind: its name, key: with its overload) that makes or reads quantized
        tensors; None for any other. packed_of: the packed weights passed as its second argument, if any."""
        if kind == "aten::quantize_per_tensor":
            scale, zero_point, dtype = (self._scalar(v) for v in inputs[1:4])
            if dtype != QUINT8:
                raise self.error(f"{source}: quantize_per_tensor to ScalarType {dtype}; ptlite's quantized "
                                 "activations are quint8")
            scale, zero_point = self._need_constants(source, kind, scale, zero_point)
            self.found = True
            return self._quantize(inputs[0], outputs[0], scale, zero_point, source)
        if kind == "aten::dequantize":
            q = inputs[0]
            if q.id not in self.qparams:
                if q.dtype in ("uint8", "quint8", "QUInt8"):
                    self._input(q, source, kind)  # raises, saying what could not be followed
                return None
            return self._dequantize(q, outputs[0], source)
        if kind.startswith("quantized::"):
            self.found = True
            return self._quantized_op(kind, inputs, outputs, source, packed_of)
        if self.follow(key, inputs, outputs, source):
            return [Node(key, inputs, outputs, source=source)]
        quantized = [v for v in inputs if v.id in self.qparams]
        if not quantized:
            return None
        params = self.qparams[inputs[0].id] if inputs and inputs[0].id in self.qparams else None
        if key in MOVES and params is not None and inputs[0] is quantized[0] and len(quantized) == 1:
            self._mark(outputs[0], *params)
            return [Node(key, inputs, outputs, source=source)]
        if key in AT_INPUT_PARAMETERS and params is not None and len(quantized) == 1:
            real = Value(type="Tensor", dtype="float32")
            result = Value(type="Tensor", dtype="float32")
            nodes = self._dequantize(inputs[0], real, source)
            nodes.append(Node(key, [real, *inputs[1:]], [result], source=source))
            return nodes + self._quantize(result, outputs[0], *params, source)
        raise self.error(f"{source or 'the model'}: {key} on a quantized tensor, which ptlite cannot run in int8; "
                         "keep that part of the model float (a DeQuantStub before it, a QuantStub after)")

    def follow(self, key: str, inputs: list[Value], outputs: list[Value], source: str) -> bool:
        """For a node that only builds, takes apart or measures values: follow the scale and zero point of the
        quantized tensors it reads (into the tuples and lists it builds, out of those it takes apart) and say True.
        False for a node reading no quantized tensor or container. Any other node given a container of quantized
        tensors is refused: ptlite has no quantized concatenation."""
        held = [v for v in inputs if v.id in self.containers]
        if not held and not any(v.id in self.qparams for v in inputs):
            return False
        if key in ("prim::ListConstruct", "prim::TupleConstruct"):
            self.containers[outputs[0].id] = [self.qparams.get(v.id) for v in inputs]
            return True
        if key in ("prim::TupleUnpack", "prim::ListUnpack") and held and inputs[0] is held[0] \
                and len(self.containers[held[0].id]) == len(outputs):
            for out, params in zip(outputs, self.containers[held[0].id]):
                if params is not None:
                    self._mark(out, *params)
            return True
        if key in ("prim::TupleIndex", "aten::__getitem__.t") and held and inputs[0] is held[0]:
            items = self.containers[held[0].id]
            index = _constant(inputs[1])
            if type(index) is int and -len(items) <= index < len(items):
                if items[index] is not None:
                    self._mark(outputs[0], *items[index])
                return True
        if key in SHAPE_ONLY and not held:
            return True
        if held:
            raise self.error(f"{source or 'the model'}: {key} on a list or tuple of quantized tensors (for cat or "
                             "stack, say): ptlite cannot run quantized concatenation (quantized::cat); keep that part "
                             "of the model float (a DeQuantStub before it, a QuantStub after)")
        return False

    # ------------------------------------------------------------------------------------------------ helpers

    def _scalar(self, v: Value) -> Any:
        """The known value of a scalar argument: a constant, or a weight read by Float.Tensor / Int.Tensor."""
        value = _constant(v)
        if value is NOT_CONSTANT and self.weight_of is not None and v.node is not None \
                and v.node.op in _SCALAR_OF and v.node.inputs:
            array = self.weight_of(v.node.inputs[0])
            if array is not None and array.size == 1:
                return _SCALAR_OF[v.node.op](array.reshape(-1)[0])
        return value

    def _mark(self, v: Value, scale: float, zero_point: int) -> None:
        v.type, v.dtype = "Tensor", "uint8"
        self.qparams[v.id] = (scale, zero_point)

    def _consts(self, *items: tuple[Any, str]) -> tuple[list[Node], list[Value]]:
        nodes = [Node("prim::Constant", [], [Value(type=kind)], {"value": value}) for value, kind in items]
        return nodes, [n.outputs[0] for n in nodes]

    def _weight_nodes(self, array: np.ndarray, hint: str) -> tuple[Node, Value]:
        name = self.add_weight(array, hint)
        v = Value(name=name, type="Tensor", dtype=str(array.dtype), shape=tuple(array.shape))
        return Node("prim::Constant", [], [v], {"weight": name}), v

    def _packed_values(self, packed: Packed, source: str) -> tuple[list[Node], tuple[Value, Value, Value]]:
        """Constants for a packed weight's int8 matrix, its scales and its bias (or None), and their values."""
        hint = packed.name or _hint(source)
        w_node, w = self._weight_nodes(packed.weight, f"{hint}.int8")
        s_node, s = self._weight_nodes(packed.scales, f"{hint}.scale")
        if packed.bias is None:
            bias_nodes, (bias,) = self._consts((None, "NoneType"))
        else:
            b_node, bias = self._weight_nodes(packed.bias, f"{hint}.bias")
            bias_nodes = [b_node]
        return [w_node, s_node, *bias_nodes], (w, s, bias)

    def _quantize(self, x: Value, out: Value, scale: float, zero_point: int, source: str) -> list[Node]:
        nodes, (s, z) = self._consts((scale, "float"), (zero_point, "int"))
        self._mark(out, scale, zero_point)
        return [*nodes, Node(QUANTIZE_PER_TENSOR, [x, s, z], [out], source=source)]

    def _dequantize(self, q: Value, out: Value, source: str) -> list[Node]:
        scale, zero_point = self.qparams[q.id]
        nodes, (s, z) = self._consts((scale, "float"), (zero_point, "int"))
        out.type, out.dtype = "Tensor", "float32"
        return [*nodes, Node(DEQUANTIZE_PER_TENSOR, [q, s, z], [out], source=source)]

    def _need_constants(self, source: str, kind: str, scale: Any, zero_point: Any) -> tuple[float, int]:
        """A quantized output's scale and zero point, known while translating: a finite positive real and an int
        in [0, 255]."""
        if any(v is NOT_CONSTANT or v is None for v in (scale, zero_point)):
            raise self.error(f"{source}: {kind} with a scale or zero point computed at run time; ptlite needs "
                             "them constant (as torch.ao.quantization's convert leaves them)")
        real = isinstance(scale, (int, float, np.integer, np.floating)) and not isinstance(scale, (bool, np.bool_))
        if not real or not math.isfinite(float(scale)) or float(scale) <= 0 or float(scale) > 3.4e38:
            raise self.error(f"{source}: {kind} with the scale {str(scale)[:40]}, not a finite positive number")
        whole = isinstance(zero_point, (int, np.integer)) and not isinstance(zero_point, (bool, np.bool_))
        if not whole or not 0 <= int(zero_point) <= 255:
            raise self.error(f"{source}: {kind} with the zero point {str(zero_point)[:40]}; ptlite's quantized "
                             "activations are quint8, whose zero point is an int in [0, 255]")
        return float(scale), int(zero_point)

    def _input(self, v: Value, source: str, kind: str) -> tuple[float, int]:
        if v.id not in self.qparams:
            raise self.error(f"{source}: {kind} reads a tensor whose scale and zero point ptlite could not follow "
                             "from a quantize_per_tensor or a quantized operator (for example a result of "
                             "control flow whose branches leave it with different ones)")
        return self.qparams[v.id]

    def control_flow(self, node: Node) -> None:
        """Give a prim::If's results (a prim::Loop's carried values) the scale and zero point that every branch
        (the value entering the loop and the body's result) agrees on; the others stay unknown."""
        if node.op == "prim::If":
            sources = [[block.outputs[k] for block in node.blocks] for k in range(len(node.outputs))]
        elif node.op == "prim::Loop":
            sources = [[node.inputs[k + 2], node.blocks[0].outputs[k + 1]] for k in range(len(node.outputs))]
        else:
            return
        for out, values in zip(node.outputs, sources):
            params = {self.qparams.get(v.id) for v in values}
            if len(params) == 1 and None not in params:
                self._mark(out, *params.pop())

    def outputs(self, values: list[Value]) -> tuple[list[Node], list[Value]]:
        """A method's results as float: its quantized ones dequantized (ptlite's values carry no scale), inside the
        tuples and lists it returns too."""
        nodes: list[Node] = []
        result = []
        for v in values:
            if v.id in self.qparams:
                real = Value(name=f"{v.name}_real" if v.name else "", type="Tensor", dtype="float32")
                nodes += self._dequantize(v, real, "the method's result")
                result.append(real)
            elif v.node is not None and v.node.op in ("prim::TupleConstruct", "prim::ListConstruct") \
                    and self._holds_quantized(v):
                inner, items = self.outputs(list(v.node.inputs))
                rebuilt = Value(name=v.name, type=v.type)
                nodes += [*inner, Node(v.node.op, items, [rebuilt], source=v.node.source)]
                result.append(rebuilt)
            else:
                result.append(v)
        return nodes, result

    def _holds_quantized(self, v: Value, depth: int = 0) -> bool:
        if v.id in self.qparams:
            return True
        node = v.node
        return depth < 64 and node is not None and node.op in ("prim::TupleConstruct", "prim::ListConstruct") \
            and any(self._holds_quantized(i, depth + 1) for i in node.inputs)

    def _quantized_op(self, kind: str, inputs: list[Value], outputs: list[Value], source: str,
                      packed_of: Callable[[], Packed | None]) -> list[Node]:
        name = kind.partition("::")[2]
        if name in ("conv2d", "conv2d_relu", "linear", "linear_relu"):
            packed = self._packed(packed_of, source, kind)
            if packed.kind != ("conv" if name.startswith("conv") else "linear"):
                raise self.error(f"{source}: {kind} given the packed weights of a {packed.kind} layer")
            scale, zero_point = self._need_constants(source, kind, *(self._scalar(v) for v in inputs[2:4]))
            sx, zx = self._input(inputs[0], source, kind)
            out_min = int(zero_point) if name.endswith("_relu") else 0
            nodes, consts = self._consts((sx, "float"), (zx, "int"))
            weight_nodes, (w, s, bias) = self._packed_values(packed, source)
            nodes += weight_nodes
            geometry: list[Value] = []
            if packed.kind == "conv":
                kernel, stride, pads, dilation, groups = packed.geometry
                more, geometry = self._consts((kernel, "List[int]"), (stride, "List[int]"), (pads, "List[int]"),
                                              (dilation, "List[int]"), (groups, "int"))
                nodes += more
            tail_nodes, tail = self._consts((float(scale), "float"), (int(zero_point), "int"), (out_min, "int"),
                                            (255, "int"))
            nodes += tail_nodes
            self._mark(outputs[0], float(scale), int(zero_point))
            op = CONV2D_INT8 if packed.kind == "conv" else LINEAR_INT8
            return [*nodes, Node(op, [inputs[0], *consts, w, s, bias, *geometry, *tail], outputs, source=source)]
        if name in ("add", "add_relu"):
            scale, zero_point = self._need_constants(source, kind, *(self._scalar(v) for v in inputs[2:4]))
            (sa, za), (sb, zb) = (self._input(v, source, kind) for v in inputs[:2])
            out_min = int(zero_point) if name == "add_relu" else 0
            nodes, c = self._consts((sa, "float"), (za, "int"), (sb, "float"), (zb, "int"), (float(scale), "float"),
                                    (int(zero_point), "int"), (out_min, "int"), (255, "int"))
            self._mark(outputs[0], float(scale), int(zero_point))
            return [*nodes, Node(ADD_INT8, [inputs[0], c[0], c[1], inputs[1], c[2], c[3], *c[4:]], outputs,
                                 source=source)]
        if name == "linear_dynamic":
            packed = self._packed(packed_of, source, kind)
            if packed.kind != "linear":
                raise self.error(f"{source}: {kind} given the packed weights of a {packed.kind} layer")
            weight_nodes, (w, s, bias) = self._packed_values(packed, source)
            outputs[0].type, outputs[0].dtype = "Tensor", "float32"
            return [*weight_nodes, Node(LINEAR_DYNAMIC_INT8, [inputs[0], w, s, bias], outputs, source=source)]
        raise self.error(f"{source}: {kind}, which ptlite has no int8 kernel for (it runs quantized conv2d, "
                         "linear, add and their relu forms, and dynamic linear); keep that part of the model float")

    def _packed(self, packed_of: Callable[[], Packed | None], source: str, kind: str) -> Packed:
        packed = packed_of()
        if packed is None:
            raise self.error(f"{source}: {kind}'s packed weights are not a constant of the model")
        return packed


def _constant(v: Value) -> Any:
    """The Python value of a prim::Constant without a weight, else NOT_CONSTANT."""
    node = v.node
    if node is None or node.op != "prim::Constant" or "weight" in node.attrs:
        return NOT_CONSTANT
    return node.attrs.get("value")


def _hint(source: str) -> str:
    """A weight name's stem from a node's source ('features.0 (ConvReLU2d) at file:line' -> 'features.0')."""
    return source.partition(" at ")[0].partition(" (")[0] or "quantized"


def summary(nodes: Any) -> dict[str, Any]:
    """metadata["quantization"] of a model quantized in PyTorch: the int8 operators it became, by kind."""
    counts: dict[str, int] = {}
    for node in nodes:
        if node.op in (CONV2D_INT8, LINEAR_INT8, ADD_INT8, LINEAR_DYNAMIC_INT8):
            counts[node.op] = counts.get(node.op, 0) + 1
    return {"scheme": PYTORCH_SCHEME, "int8": counts, "float": []}
