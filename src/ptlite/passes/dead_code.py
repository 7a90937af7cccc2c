"""Dead code elimination: drop nodes whose results nobody reads and whose running nobody could notice, then the
weights that no constant names any more.

A node must stay, even when its outputs are unused, if running it has an effect: its operator has the `effects`
trait (it raises or warns), ptlite does not know the operator, it mutates (per its schema's `(a!)` annotation) a
value that something else can see, or it is a prim::If / prim::Loop whose blocks hold such a node. A mutation is
invisible only when the mutated value is used by this node alone and was freshly made by an operator whose result
aliases nothing.
"""

from __future__ import annotations

from collections import Counter

from ptlite import ops
from ptlite.ir.graph import Block, Graph, Node, Program, Value

from .base import Pass, PassResult, blocks

# Constructors of new containers: mutating (appending to) one nobody else reads is invisible.
_FRESH_CONTAINERS = frozenset({"prim::ListConstruct", "prim::DictConstruct"})


class DeadCode(Pass):
    name = "dead_code"

    def __call__(self, program: Program) -> PassResult:
        modified = super().__call__(program).modified
        referenced = {node.attrs["weight"] for graph in program.methods.values() for node in graph.walk()
                      if node.op == "prim::Constant" and "weight" in node.attrs}
        unused = [name for name in program.weights if name not in referenced]
        for name in unused:
            del program.weights[name]
        return PassResult(program, modified or bool(unused))

    def run(self, graph: Graph, program: Program) -> bool:
        counts = Counter(v.id for block in blocks(graph) for v in _reads(block))
        return _sweep(graph, counts)


def _reads(block: Block) -> list[Value]:
    """The values a block reads directly: its nodes' inputs and its outputs."""
    return [v for node in block.nodes for v in node.inputs] + list(block.outputs)


def _sweep(block: Block, counts: Counter) -> bool:
    """Remove dead nodes of the block, last first, so that removing a user can make its producers dead."""
    kept: list[Node] = []
    changed = False
    for node in reversed(block.nodes):
        if all(counts[v.id] == 0 for v in node.outputs) and not has_effects(node, counts):
            for v in node.inputs:
                counts[v.id] -= 1
            for inner in node.blocks:
                for nested in blocks(inner):
                    for v in _reads(nested):
                        counts[v.id] -= 1
            changed = True
            continue
        for inner in node.blocks:
            changed = _sweep(inner, counts) or changed
        kept.append(node)
    block.nodes = kept[::-1]
    return changed


def has_effects(node: Node, counts: Counter) -> bool:
    """Whether running the node could be noticed other than through its outputs."""
    if node.op in ("prim::If", "prim::Loop"):
        return any(has_effects(n, counts) for block in node.blocks for n in block.walk())
    op = ops.lookup(node.op)
    if op is None or op.effects:
        return True
    mutated = [node.inputs[i] for i in op.writes if i < len(node.inputs)]
    if not node.outputs and not mutated:
        return True  # it exists for an effect we cannot see
    return not all(_is_private(v, counts) for v in mutated)


def _is_private(v: Value, counts: Counter) -> bool:
    """Used only by the one node mutating it, and made fresh (aliasing nothing) by its producer."""
    producer = v.node
    if counts[v.id] != 1 or producer is None:
        return False
    if producer.op in _FRESH_CONTAINERS:
        return True
    op = None if producer.op.startswith("prim::") else ops.lookup(producer.op)
    return op is not None and not op.result_aliases
