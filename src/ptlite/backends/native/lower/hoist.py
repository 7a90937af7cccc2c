"""Move the work on integers and booleans up to where its inputs are made (HOIST_NON_FLOAT): a transformer builds
its padding mask and pooling weights from a bool input, and where those nodes sit between float32 layers they cut
the native executor's regions (which run float32 values, and uint8 ones of int8 operators) in two, each cut a call
into C and back.

The method's constants go first (so that a node's constant arguments do not hold it back). Then a top-level node
with a tensor input or result that is not float32 (by the values' recorded dtypes) moves up past the nodes before
it until it reaches one that makes one of its inputs, one that may write in place to what it reads, another such
node (so that they keep their order, and a second run changes nothing), or control flow. Nodes that write in place,
have blocks, or are not known operators stay where they are (a prim:: operator other than the list and tuple
constructors, which have no effects, counts as unknown). Only the order changes: every node computes what it did.
"""

from __future__ import annotations

from ptlite import ops
from ptlite.ir.graph import Graph, Node, Program
from ptlite.passes.base import Pass
from ptlite.passes.mutation import Mutations, written_positions

_PURE_PRIM = frozenset(("prim::ListConstruct", "prim::TupleConstruct", "prim::ListUnpack", "prim::TupleUnpack"))


def _non_float(node: Node) -> bool:
    return any(v.is_tensor and v.dtype is not None and v.dtype != "float32" for v in (*node.inputs, *node.outputs))


def _movable(node: Node) -> bool:
    known = node.op in _PURE_PRIM or (not node.op.startswith("prim::") and ops.lookup(node.op) is not None)
    return known and not node.blocks and not written_positions(node) and _non_float(node)


class HoistNonFloat(Pass):
    name = "hoist_non_float"

    def run(self, graph: Graph, program: Program) -> bool:
        movable = [n for n in graph.nodes if _movable(n)]
        if not movable:
            return False
        # constants first (they read nothing), so that a node's constant arguments do not hold it back
        order = [n for n in graph.nodes if n.op == "prim::Constant"] + \
                [n for n in graph.nodes if n.op != "prim::Constant"]
        mutations = Mutations(graph)
        for node in movable:
            at = order.index(node)
            reads = {v.id for v in node.inputs}
            mutated = mutations.alias_class(node.inputs).mutated
            to = at
            while to > 0:
                prev = order[to - 1]
                if prev.op == "prim::Constant" or prev.blocks or _movable(prev) \
                        or any(v.id in reads for v in prev.outputs) \
                        or (mutated and any(mutations.written_by(v, [prev]) for v in node.inputs)):
                    break
                to -= 1
            order.insert(to, order.pop(at))
        if order == graph.nodes:
            return False
        graph.nodes[:] = order
        return True
