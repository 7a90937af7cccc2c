"""The pass contract (a named callable returning `PassResult(program, modified)`) and the graph-editing helpers
that passes share: walking nested blocks, finding the users of values, replacing uses, removing nodes, reading
constants and adding weights.

A pass rewrites the program it is given in place; `ptlite.passes.optimize` hands the pipeline a copy.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ptlite.ir.copy import copy_program as copy_program  # re-exported: passes copy programs
from ptlite.ir.graph import Block, Graph, Node, Program, Value


@dataclass
class PassResult:
    program: Program
    modified: bool


class Pass:
    """A rewrite applied to every method of a program; subclasses set `name` and implement `run` for one method."""

    name: str = ""

    def __call__(self, program: Program) -> PassResult:
        modified = False
        for graph in program.methods.values():
            modified = self.run(graph, program) or modified
        return PassResult(program, modified)

    def run(self, graph: Graph, program: Program) -> bool:
        """Rewrite one method in place; return whether anything changed."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<pass {self.name}>"


# ------------------------------------------------------------------------------------------------ walking

def blocks(block: Block) -> Iterator[Block]:
    """The block and every block nested in it (the bodies of prim::If and prim::Loop nodes), outer first."""
    yield block
    for node in block.walk():
        yield from node.blocks


def owners(graph: Graph) -> dict[int, Block]:
    """For each node (by `id(node)`), the block whose node list holds it."""
    return {id(node): block for block in blocks(graph) for node in block.nodes}


Use = Node | Block  # a node reading a value as an input, or a block returning it as an output


def uses(graph: Graph) -> dict[int, list[Use]]:
    """For each value id, its uses: the nodes reading it (once per input position) and the blocks returning it
    (the graph's own outputs included). Values without uses are absent."""
    found: dict[int, list[Use]] = {}
    for block in blocks(graph):
        for node in block.nodes:
            for v in node.inputs:
                found.setdefault(v.id, []).append(node)
        for v in block.outputs:
            found.setdefault(v.id, []).append(block)
    return found


# ------------------------------------------------------------------------------------------------ editing

def replace_all_uses(graph: Graph, old: Value, new: Value, users: dict[int, list[Use]] | None = None) -> int:
    """Make every use of `old` (node inputs and block outputs, nested blocks included) use `new`; returns how many
    uses were changed. `new` must be defined where `old` is used (in the same or an enclosing scope, earlier).

    With `users` (a `uses` map of the graph, kept current by the caller's edits), only old's listed uses are
    visited instead of the whole graph, and the uses moved are added to new's list (old's list is left as it
    was: a pass replacing many values would otherwise walk the graph once per value)."""
    if users is None:
        sites: Iterable[Use] = (u for block in blocks(graph) for u in (*block.nodes, block))
    else:
        sites = {id(u): u for u in users.get(old.id, ())}.values()
    count = 0
    moved: list[Use] = []
    for use in sites:
        values = use.inputs if isinstance(use, Node) else use.outputs
        for i, v in enumerate(values):
            if v is old:
                values[i] = new
                count += 1
                moved.append(use)
    if users is not None and moved:
        users.setdefault(new.id, []).extend(moved)
    return count


def remove_nodes(graph: Graph, nodes: Iterable[Node]) -> None:
    """Remove the given nodes from whichever blocks of the graph hold them (their uses must be gone already)."""
    doomed = {id(n) for n in nodes}
    for block in blocks(graph):
        block.nodes = [n for n in block.nodes if id(n) not in doomed]


# ------------------------------------------------------------------------------------------------ constants

NOT_CONSTANT: Any = object()  # what `constant_value` returns for a value that is not a plain constant


def constant_value(v: Value) -> Any:
    """The Python value of a prim::Constant without a weight (None, a bool, a list...), else NOT_CONSTANT."""
    node = v.node
    if node is None or node.op != "prim::Constant" or "weight" in node.attrs:
        return NOT_CONSTANT
    return node.attrs.get("value")


def weight_of(program: Program, v: Value) -> np.ndarray | None:
    """The array of a prim::Constant naming a weight of the program, else None."""
    node = v.node
    if node is None or node.op != "prim::Constant" or "weight" not in node.attrs:
        return None
    return program.weights.get(node.attrs["weight"])


def add_weight(program: Program, hint: str, array: np.ndarray) -> str:
    """Store `array` as a new weight named `hint` (or `hint_2`, `hint_3`, ... if taken); returns the name."""
    name, i = hint, 1
    while name in program.weights:
        i += 1
        name = f"{hint}_{i}"
    program.weights[name] = array if array.flags.c_contiguous else np.ascontiguousarray(array)  # keeps 0-d
    return name


def weight_constant(program: Program, hint: str, array: np.ndarray, source: str = "") -> Node:
    """A new prim::Constant node (not yet in any block) for a new weight holding `array`."""
    name = add_weight(program, hint, array)
    out = Value(name=name, type="Tensor", dtype=str(array.dtype), shape=tuple(array.shape))
    return Node("prim::Constant", [], [out], {"weight": name}, source=source)


class ConstantPool:
    """Value constants for new nodes of one block, one prim::Constant per distinct value, placed at the start of
    the block (a constant has no inputs, so it may come first): rewrites that add arguments don't multiply nodes."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self.values: dict[tuple[str, str], Value] = {}
        self.nodes: list[Node] = []

    def get(self, value: Any, kind: str) -> Value:
        key = (kind, repr(value))
        if key not in self.values:
            node = Node("prim::Constant", [], [Value(type=kind)], {"value": value})
            self.nodes.append(node)
            self.values[key] = node.outputs[0]
        return self.values[key]

    def flush(self) -> None:
        """Put the constants created since the last flush at the start of the block."""
        self.block.nodes[0:0] = self.nodes
        self.nodes = []


def rewrite_nodes(graph: Graph, rewrite: Callable[[Node, dict, ConstantPool], list[Node] | None]) -> bool:
    """Replace nodes block by block: rewrite(node, memo, pool) returns the nodes to put in its place, or None to keep
    it; `memo` is a dict shared within a block (e.g. weights already packed there) and `pool` that block's
    ConstantPool (flushed after). Whether any node was replaced."""
    changed = False
    for block in list(blocks(graph)):
        memo: dict = {}
        pool = ConstantPool(block)
        rewritten: list[Node] = []
        for node in block.nodes:
            new = rewrite(node, memo, pool)
            if new is None:
                rewritten.append(node)
            else:
                rewritten.extend(new)
                changed = True
        block.nodes = rewritten
        pool.flush()
    return changed
