"""Run a squeeze-and-excitation block as one operator (FUSE_SQUEEZE_EXCITE; backends/numpy/squeeze_excite.py):

    p = aten::adaptive_avg_pool2d(x, [1, 1])
    h = ptlite::conv2d_prepacked(p, W1, b1, [1, 1], [1, 1], [0, 0, 0, 0], dilation, 1, act1, args1)
    g = ptlite::conv2d_prepacked(h, W2, b2, [1, 1], [1, 1], [0, 0, 0, 0], dilation, 1, act2, args2)
    s = aten::sigmoid(g)   (or aten::hardsigmoid)
    y = aten::mul.Tensor(x, s)   (or mul(s, x))
 -> y = ptlite::squeeze_excite(x, W1, b1, act1, args1, W2, b2, act2, args2, "sigmoid")

as torchvision's SqueezeExcitation becomes once its convolutions are prepacked with their activations (so this runs
after FUSE_ACTIVATIONS). Each intermediate must have its one use in the chain, all five nodes must be in the same
block, and nothing between the pooling and the multiplication may write to x (or memory it shares): the fused
node reads x once, where the multiplication stood.
"""

from __future__ import annotations

from ptlite.ir.graph import Graph, Node, Program
from ptlite.ops import SQUEEZE_EXCITE
from ptlite.passes.base import ConstantPool, Pass, blocks, constant_value, uses, weight_of
from ptlite.passes.mutation import Mutations

from .prepack import is_prepacked_pointwise

FUSED = SQUEEZE_EXCITE
GATES = {"aten::sigmoid": "sigmoid", "aten::hardsigmoid": "hardsigmoid"}


class FuseSqueezeExcite(Pass):
    name = "fuse_squeeze_excite"

    def run(self, graph: Graph, program: Program) -> bool:
        users = uses(graph)
        mutations: Mutations | None = None  # made when first needed
        changed = False
        for block in list(blocks(graph)):
            position = {id(n): i for i, n in enumerate(block.nodes)}
            fused_away: set[int] = set()
            replaced: dict[int, Node] = {}
            pool_of_constants = ConstantPool(block)
            for mul in block.nodes:
                chain = _chain(mul, users, position, program)
                if chain is None:
                    continue
                pool, conv1, conv2, gate, x = chain
                mutations = Mutations(graph) if mutations is None else mutations
                if mutations.written_by(x, block.nodes[position[id(pool)] + 1:position[id(mul)]]):
                    continue
                a, b = conv1.inputs, conv2.inputs
                source = "; ".join(dict.fromkeys(n.source for n in (pool, conv1, conv2, gate, mul) if n.source))
                replaced[id(mul)] = Node(FUSED, [x, a[1], a[2], a[8], a[9], b[1], b[2], b[8], b[9],
                                                 pool_of_constants.get(GATES[gate.op], "str")],
                                         mul.outputs, source=source)
                fused_away.update(id(n) for n in (pool, conv1, conv2, gate))
                changed = True
            if replaced:
                block.nodes = [replaced.get(id(n), n) for n in block.nodes if id(n) not in fused_away]
                pool_of_constants.flush()
        return changed


def _chain(mul: Node, users: dict, position: dict[int, int], program: Program) -> tuple | None:
    """(pool, conv1, conv2, gate, x) when `mul` ends a squeeze-and-excitation chain in its block, else None."""
    if mul.op != "aten::mul.Tensor" or len(mul.inputs) != 2:
        return None
    for k in (0, 1):
        x, s = mul.inputs[k], mul.inputs[1 - k]
        gate = s.node
        if gate is None or gate.op not in GATES or users.get(s.id) != [mul]:
            continue
        conv2 = gate.inputs[0].node
        if conv2 is None or not is_prepacked_pointwise(conv2, program) or users.get(gate.inputs[0].id) != [gate]:
            continue
        conv1 = conv2.inputs[0].node
        if conv1 is None or not is_prepacked_pointwise(conv1, program) or users.get(conv2.inputs[0].id) != [conv2]:
            continue
        pool = conv1.inputs[0].node
        if pool is None or pool.op != "aten::adaptive_avg_pool2d" or users.get(conv1.inputs[0].id) != [conv1] \
                or pool.inputs[0] is not x or constant_value(pool.inputs[1]) not in ([1, 1], [1], 1):
            continue
        if not all(id(n) in position for n in (pool, conv1, conv2, gate)):
            continue  # not all in mul's block
        w1, w2 = weight_of(program, conv1.inputs[1]), weight_of(program, conv2.inputs[1])
        if w2.shape[0] != w1.shape[1] or w2.shape[1] != w1.shape[0]:
            continue  # a gate with other than x's channels (one channel broadcast, say): the plain graph's business
        return pool, conv1, conv2, gate, x
    return None
