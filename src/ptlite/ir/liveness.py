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
        for v in (reads(node) if node.blocks else node.inputs):
            last[v.id] = i
    return last


def all_values(block: Block) -> Iterator[Value]:
    """Every value a block defines: its inputs and its nodes' outputs, nested blocks included."""
    yield from block.inputs
    for node in block.nodes:
        yield from node.outputs
        for b in node.blocks:
            yield from all_values(b)


def region_values(graph: Graph, nodes: Sequence[Node],
                  last: dict[int, int] | None = None) -> tuple[list[Value], list[Value]]:
    """The values a run of top-level nodes reads from before it (in order of first read) and the values it defines
    that the rest of the method reads (or returns), in order of definition. `last`: `last_reads(graph.nodes)`, for a
    caller asking about several runs of one graph (else computed here)."""
    defined: dict[int, Value] = {}
    inputs: dict[int, Value] = {}
    for node in nodes:
        for v in node.inputs:
            if v.id not in defined and v.id not in inputs:
                inputs[v.id] = v
        for v in node.outputs:
            defined[v.id] = v
    if not nodes:
        return [], []
    if last is None:
        last = last_reads(graph.nodes)
    end = next(i for i, n in enumerate(graph.nodes) if n is nodes[-1])  # values are read after they are defined
    returned = {v.id for v in graph.outputs}
    return list(inputs.values()), [v for vid, v in defined.items() if vid in returned or last.get(vid, -1) > end]
