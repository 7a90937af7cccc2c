"""Run a pointwise (1x1) convolution and the depthwise convolution it feeds as one operator, in bands of rows
that keep the expanded tensor between them in cache (FUSE_POINTWISE_DEPTHWISE; backends/numpy/conv_block.py):

    e = ptlite::conv2d_prepacked(x, W1, b1, [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 1, act1, args1)
    y = ptlite::conv2d_prepacked(e, Wd, bd, kernel, stride, padding, dilation, E, act2, args2)   (depthwise)
 -> y = ptlite::conv2d_pointwise_depthwise(x, W1, b1, act1, args1, Wd, bd, kernel, stride, padding, dilation,
                                          act2, args2)

when the depthwise convolution is the pointwise one's only user (the expanded tensor is then needed nowhere
else), both are in the same block, and no node between them (nor one inside such a node's blocks) writes in place
to x or to memory it may share: the fused node reads x where the depthwise convolution stood. A write before the
pair or after it changes nothing (EfficientNet's residual `+=` writes the next block's input before it is read).
Runs after FUSE_ACTIVATIONS, so that both activations are already part of the convolutions.
"""

from __future__ import annotations

from ptlite.ir.graph import Graph, Node, Program
from ptlite.ops import CONV2D_POINTWISE_DEPTHWISE, CONV2D_PREPACKED
from ptlite.passes.base import Pass, blocks, constant_value, uses, weight_of
from ptlite.passes.mutation import Mutations

from .prepack import is_prepacked_pointwise

CONV = CONV2D_PREPACKED
FUSED = CONV2D_POINTWISE_DEPTHWISE


class FusePointwiseDepthwise(Pass):
    name = "fuse_pointwise_depthwise"

    def run(self, graph: Graph, program: Program) -> bool:
        users = uses(graph)
        mutations: Mutations | None = None  # made when first needed
        changed = False
        for block in list(blocks(graph)):
            rewritten: list[Node] = []
            fused_away: set[int] = set()
            position = {id(n): i for i, n in enumerate(block.nodes)}
            for node in block.nodes:
                producer = node.inputs[0].node if node.op == CONV and node.inputs else None
                if producer is None or producer.op != CONV or id(producer) not in position \
                        or not _depthwise(node, program) or not is_prepacked_pointwise(producer, program) \
                        or users.get(producer.outputs[0].id) != [node] \
                        or _channels(producer, program) != _channels(node, program):
                    rewritten.append(node)
                    continue
                # the fused node reads the pointwise input where the depthwise stood: nothing may write it (or
                # memory it shares) in between
                mutations = Mutations(graph) if mutations is None else mutations
                if mutations.written_by(producer.inputs[0], block.nodes[position[id(producer)] + 1:position[id(node)]]):
                    rewritten.append(node)
                    continue
                pw, dw = producer.inputs, node.inputs
                source = "; ".join(s for s in (producer.source, node.source) if s)
                rewritten.append(Node(FUSED, [pw[0], pw[1], pw[2], pw[8], pw[9], dw[1], dw[2], *dw[3:7], dw[8], dw[9]],
                                      node.outputs, source=source))
                fused_away.add(id(producer))
                changed = True
            block.nodes = [n for n in rewritten if id(n) not in fused_away]
        return changed


def _channels(node: Node, program: Program) -> int:
    """Output channels of a prepacked pointwise or depthwise convolution (its weight's last dimension)."""
    return weight_of(program, node.inputs[1]).shape[1]


def _depthwise(node: Node, program: Program) -> bool:
    """A prepacked depthwise convolution (weight (kh*kw, C), one group per channel)."""
    weight = weight_of(program, node.inputs[1])
    kernel, groups = constant_value(node.inputs[3]), constant_value(node.inputs[7])
    return weight is not None and weight.ndim == 2 and isinstance(groups, int) and groups > 1 \
        and isinstance(kernel, list) and weight.shape == (kernel[0] * kernel[1], groups)
