"""Which node reads a value last: the liveness that the interpreter (to drop values) and the memory plan (to reuse
their memory) share."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .graph import Block, Graph, Node, Value


def reads(node: Node) -> Iterator[Value]:
    """Values a node reads: its inputs and, inside its blocks, every node input and block output."""
    yield from node.inputs
    for block in node.blocks:
        for inner in block.nodes:
            yield from reads(inner)
        yield from block.outputs


def last_reads(nodes: list[Node]) -> dict[int, int]:
    """For each value id the top-level `nodes` read, the index of the last node reading it (reads inside a node's
    nested blocks count at that node)."""
    last: dict[int, int] = {}
    for i, node in enumerate(nodes):
        for v in reads(node):
            last[v.id] = i
    return last


def all_values(block: Block) -> Iterator[Value]:
    """Every value a block defines: its inputs and its nodes' outputs, nested blocks included."""
    yield from block.inputs
    for node in block.nodes:
        yield from node.outputs
        for b in node.blocks:
            yield from all_values(b)


def region_values(graph: Graph, nodes: Sequence[Node]) -> tuple[list[Value], list[Value]]:
    """The values a run of top-level nodes reads from before it (in order of first read) and the values it defines
    that the rest of the method reads (or returns), in order of definition."""
    inside = {id(n) for n in nodes}
    defined: dict[int, Value] = {}
    inputs: dict[int, Value] = {}
    for node in nodes:
        for v in node.inputs:
            if v.id not in defined and v.id not in inputs:
                inputs[v.id] = v
        for v in node.outputs:
            defined[v.id] = v
    read_after: set[int] = {v.id for v in graph.outputs}
    for node in graph.nodes:
        if id(node) not in inside:
            read_after.update(v.id for v in reads(node))
    return list(inputs.values()), [v for vid, v in defined.items() if vid in read_after]
