"""Prepack convolution and linear weights (PyTorch's INSERT_FOLD_PREPACK_OPS): replace aten::conv2d (every capture
spelling of a non-transposed 2-D convolution) and aten::linear with constant weights by ptlite::conv2d_prepacked and
ptlite::linear_prepacked, whose weights are stored in the file already in the layout the kernel consumes (see
backends/numpy/prepacked.py), so that loading is a memory map and running does no re-layout. The packed kernels
run images channels-last.

    y = aten::conv2d(x, W, b, stride, padding, dilation, groups)
 -> y = ptlite::conv2d_prepacked(x, pack(W), b, kernel_size, stride, [top, bottom, left, right], dilation, groups,
                                 "none", [])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ptlite.ir.graph import Graph, Node, Program, Value
from ptlite.ops import CONV2D_PREPACKED, LINEAR_PREPACKED
from ptlite.ops.layouts import pack_conv2d_weight
from ptlite.passes.base import (
    NOT_CONSTANT,
    ConstantPool,
    Pass,
    constant_value,
    rewrite_nodes,
    weight_constant,
    weight_of,
)


@dataclass(frozen=True)
class ConvArgs:
    """Positions of a convolution operator's arguments (input and weight are always 0 and 1, bias 2)."""

    stride: int
    padding: int
    dilation: int
    groups: int
    transposed: int | None = None


CONVOLUTIONS: dict[str, ConvArgs] = {
    "aten::conv2d": ConvArgs(3, 4, 5, 6),
    "aten::conv2d.padding": ConvArgs(3, 4, 5, 6),
    "aten::_convolution_mode": ConvArgs(3, 4, 5, 6),
    "aten::convolution": ConvArgs(3, 4, 5, 8, transposed=6),
    "aten::_convolution": ConvArgs(3, 4, 5, 8, transposed=6),
    "aten::_convolution.deprecated": ConvArgs(3, 4, 5, 8, transposed=6),
}


def is_prepacked_pointwise(node: Node, program: Program) -> bool:
    """A ptlite::conv2d_prepacked that is a 1x1, stride-1, unpadded, undilated dense convolution (its packed weight
    (C, O)): what the fusion passes build on."""
    if node.op != CONV2D_PREPACKED or len(node.inputs) < 8:
        return False
    weight = weight_of(program, node.inputs[1])
    kernel, stride, padding, dilation, groups = (constant_value(v) for v in node.inputs[3:8])
    return weight is not None and weight.ndim == 2 and kernel == [1, 1] and stride == [1, 1] \
        and padding == [0, 0, 0, 0] and dilation == [1, 1] and groups == 1


def int_list(v: Value, n: int) -> list[int] | None:
    """A constant int or list of ints (a constant, or a prim::ListConstruct of constants) expanded to n values."""
    value = constant_value(v)
    if value is NOT_CONSTANT and v.node is not None and v.node.op == "prim::ListConstruct":
        value = [constant_value(item) for item in v.node.inputs]
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        return None
    if len(value) == 1:
        value = value * n
    return value if len(value) == n else None


def _conv_pads(padding: Any, kernel: tuple[int, int], stride: list[int], dilation: list[int]) -> list[int] | None:
    """[top, bottom, left, right] for int padding or 'valid' / 'same' (None where it cannot be decided here)."""
    if padding == "valid":
        return [0, 0, 0, 0]
    if padding == "same":
        if any(s != 1 for s in stride):
            return None
        pads = []
        for k, d in zip(kernel, dilation):
            total = d * (k - 1)
            pads += [total // 2, total - total // 2]
        return pads
    return None


class Prepack(Pass):
    name = "prepack"

    def run(self, graph: Graph, program: Program) -> bool:
        def rewrite(node: Node, packed: dict, pool: ConstantPool) -> list[Node] | None:
            # packed: (weight name, groups) -> the packed constant in this block
            if node.op in CONVOLUTIONS:
                return self._conv(node, program, packed, pool)
            if node.op == "aten::linear":
                return self._linear(node, program, packed, pool)
            return None

        return rewrite_nodes(graph, rewrite)

    def _conv(self, node: Node, program: Program, packed: dict, pool: ConstantPool) -> list[Node] | None:
        conv = conv_geometry(node, program)
        if conv is None:
            return None
        nodes, packed_value = self._packed_weight(node, program, packed, conv.groups,
                                                  lambda: pack_conv2d_weight(conv.weight, conv.groups))
        args = [pool.get(value, kind) for value, kind in (
            (list(conv.kernel), "List[int]"), (conv.stride, "List[int]"), (conv.pads, "List[int]"),
            (conv.dilation, "List[int]"), (conv.groups, "int"), ("none", "str"), ([], "List[float]"))]
        inputs = [node.inputs[0], packed_value, node.inputs[2], *args]
        return [*nodes, Node(CONV2D_PREPACKED, inputs, node.outputs, source=node.source)]

    def _linear(self, node: Node, program: Program, packed: dict, pool: ConstantPool) -> list[Node] | None:
        weight = weight_of(program, node.inputs[1])
        if weight is None or weight.ndim != 2 or weight.dtype.kind != "f" or not _bias_ok(program, node.inputs[2]):
            return None
        nodes, packed_value = self._packed_weight(node, program, packed, 0,
                                                  lambda: np.ascontiguousarray(weight.T))
        inputs = [node.inputs[0], packed_value, node.inputs[2], pool.get("none", "str"), pool.get([], "List[float]")]
        return [*nodes, Node(LINEAR_PREPACKED, inputs, node.outputs, source=node.source)]

    @staticmethod
    def _packed_weight(node: Node, program: Program, packed: dict, groups: int, pack) -> tuple[list[Node], Value]:
        name = node.inputs[1].node.attrs["weight"]
        key = (name, groups)
        if key in packed:
            return [], packed[key]
        const = weight_constant(program, f"{name.removesuffix('.weight')}.packed", pack(), node.source)
        packed[key] = const.outputs[0]
        return [const], const.outputs[0]


@dataclass(frozen=True)
class ConvGeometry:
    """A 2-D convolution node's constant weight and arguments, as the prepacked operators take them."""

    weight: np.ndarray  # (O, C/groups, kh, kw), float
    kernel: tuple[int, int]
    stride: list[int]
    pads: list[int]  # top, bottom, left, right
    dilation: list[int]
    groups: int


def conv_geometry(node: Node, program: Program, weight: np.ndarray | None = None) -> ConvGeometry | None:
    """The geometry of a non-transposed convolution (any CONVOLUTIONS spelling) with a constant float 4-D weight (or
    the `weight` given: what the node's weight input is known to hold), a constant bias (or None) and constant
    arguments; None for anything else."""
    args = CONVOLUTIONS.get(node.op)
    if args is None:
        return None
    if weight is None:
        weight = weight_of(program, node.inputs[1])
        if weight is not None and weight.dtype.kind != "f":
            return None
    if weight is None or weight.ndim != 4 or not _bias_ok(program, node.inputs[2]):
        return None
    if args.transposed is not None and constant_value(node.inputs[args.transposed]) is not False:
        return None
    groups = constant_value(node.inputs[args.groups])
    stride = int_list(node.inputs[args.stride], 2)
    dilation = int_list(node.inputs[args.dilation], 2)
    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1 or stride is None or dilation is None:
        return None
    o, cg, kh, kw = weight.shape
    if o % groups:
        return None
    padding = int_list(node.inputs[args.padding], 2)
    if padding is not None:
        pads = [padding[0], padding[0], padding[1], padding[1]]
    else:
        pads = _conv_pads(constant_value(node.inputs[args.padding]), (kh, kw), stride, dilation)
    if pads is None:
        return None
    return ConvGeometry(weight, (kh, kw), stride, pads, dilation, groups)


def _bias_ok(program: Program, v: Value) -> bool:
    """The bias is a constant None or a constant 1-D weight (a computed bias stays with the aten operator)."""
    if constant_value(v) is None:
        return True
    bias = weight_of(program, v)
    return bias is not None and bias.ndim == 1
