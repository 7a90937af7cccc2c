"""Pack dense convolution and linear weights into panels of 16 output channels (PACK_PANELS): the native GEMM
micro-kernel reads each panel (K x 16, contiguous) from start to end, so the packing is done once, here, and stored
in the file. Runs after the prepacking and activation fusion it builds on.

    y = ptlite::conv2d_prepacked(x, W (K, O), b, kernel, stride, pads, dilation, 1, act, args)
 -> y = ptlite::conv2d_packed(x, panels(W) (ceil(O/16), K, 16), b, kernel, stride, pads, dilation, O, act, args)

and ptlite::linear_prepacked likewise (ptlite::linear_packed). float32 weights only; depthwise and grouped
convolutions keep their prepacked layouts, and so do layers with fewer than 16 outputs (a panel would be mostly
padding; the kernels read the prepacked layout too).
"""

from __future__ import annotations

import numpy as np

from ptlite.backends.numpy.packed import PANEL, pack_panels
from ptlite.ir.graph import Graph, Node, Program, Value
from ptlite.ops import CONV2D_PACKED, CONV2D_PREPACKED, LINEAR_PACKED, LINEAR_PREPACKED
from ptlite.passes.base import ConstantPool, Pass, constant_value, rewrite_nodes, weight_constant, weight_of


class PackPanels(Pass):
    name = "pack_panels"

    def run(self, graph: Graph, program: Program) -> bool:
        # packed (the memo): prepacked weight name -> its panels in this block
        return rewrite_nodes(graph, lambda node, packed, pool: self._rewrite(node, program, packed, pool))

    def _rewrite(self, node: Node, program: Program, packed: dict[str, Value], pool: ConstantPool) -> list[Node] | None:
        if node.op == CONV2D_PREPACKED and len(node.inputs) == 10 and constant_value(node.inputs[7]) == 1:
            rest_at, op = 8, CONV2D_PACKED
        elif node.op == LINEAR_PREPACKED and len(node.inputs) == 5:
            rest_at, op = 3, LINEAR_PACKED
        else:
            return None
        weight = weight_of(program, node.inputs[1])
        bias = None if constant_value(node.inputs[2]) is None else weight_of(program, node.inputs[2])
        if weight is None or weight.ndim != 2 or weight.dtype != np.float32 or weight.shape[1] < PANEL \
                or (bias is None and constant_value(node.inputs[2]) is not None) \
                or (bias is not None and bias.dtype != np.float32):
            return None
        name = node.inputs[1].node.attrs.get("weight") if node.inputs[1].node is not None else None
        if name is None:
            return None
        nodes = []
        if name not in packed:
            const = weight_constant(program, f"{name.removesuffix('.packed')}.panels", pack_panels(weight),
                                    node.source)
            packed[name] = const.outputs[0]
            nodes.append(const)
        head = [node.inputs[0], packed[name], node.inputs[2]]
        if op == CONV2D_PACKED:
            head += node.inputs[3:7]
        out_channels = pool.get(int(weight.shape[1]), "int")
        return [*nodes, Node(op, [*head, out_channels, *node.inputs[rest_at:]], node.outputs, source=node.source)]
