"""Which values of a method may share memory with which (alias classes), and whether any of them is written in place:
what a pass checks before it makes two values one (removing a copy) or turns a value into a shared constant.

The analysis is conservative. A value may share memory with another when an operator's result may alias an
argument (its schema says so, it is a prim:: operator, it is unknown, or it returns a container such as a list of
tensors from one), or when control flow passes one on as the other (a branch's result and the prim::If's; a loop's
carried values, its body's parameters and results, and the loop's results). A value is written when an operator's
schema says it writes that argument (`(a!)`), or the operator is unknown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ptlite import ops
from ptlite.ir.graph import Block, Graph, Node, Value

from .base import blocks, uses

# Type words of values nothing can change in place (tuples and optionals of them included).
_IMMUTABLE_WORDS = frozenset({"Optional", "Tuple", "int", "float", "bool", "str", "NoneType", "Device", "number",
                              "Scalar", "complex", "Layout", "ScalarType", "MemoryFormat", "SymInt", "SymFloat",
                              "SymBool"})
_CONTAINERS = frozenset({"List", "Dict", "Tuple"})


def is_immutable_type(type_: str) -> bool:
    """Whether values of this IR type (such as "int", "Tuple[int, int]", "Optional[str]") cannot be mutated."""
    words = re.findall(r"\w+", type_)
    return bool(words) and "[]" not in type_ and all(w in _IMMUTABLE_WORDS for w in words)


def holds_mutable_elements(type_: str) -> bool:
    """Whether a container of this type (a list, dict or tuple; "Any") may hold values that can be mutated, such
    as tensors or lists: an operator reading it may return one of them."""
    if type_.endswith("[]"):
        return not is_immutable_type(type_[:-2])
    words = re.findall(r"\w+", type_)
    if words[:1] == ["Optional"]:
        words = words[1:]
    if not words or words[0] not in _CONTAINERS:
        return type_ in ("Any", "t")
    return any(w not in _IMMUTABLE_WORDS for w in words[1:])


@dataclass
class AliasClass:
    """Values that may share memory, and what the method does with them."""

    values: list[Value]
    mutated: bool  # some member is written in place
    returned: bool  # some member is an output of the method


class Mutations:
    """Alias classes of one method's values, from a snapshot of the method (make a new one after editing it)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.users = uses(graph)
        self.written = {node.inputs[i].id for block in blocks(graph) for node in block.nodes
                        for i in written_positions(node)}
        self.owner: dict[int, Node] = {}  # id(block) -> the prim::If / prim::Loop node holding it
        self.parameter: dict[int, tuple[Node, int]] = {}  # loop body parameter id -> (loop, position)
        for block in blocks(graph):
            for node in block.nodes:
                for inner in node.blocks:
                    self.owner[id(inner)] = node
                    self.parameter.update((v.id, (node, j)) for j, v in enumerate(inner.inputs))

    def alias_class(self, values: Iterable[Value], ignore: Node | None = None) -> AliasClass:
        """The values that may share memory with the given ones (immutable values take no part); `ignore` is a node
        treated as if it did not alias (a node about to be replaced by a constant).

        From a value the walk goes down to what may be (part of) it, and up to what it may be (part of), and from
        there down again (other views of the same tensor); it does not go up from a value reached by going down:
        a list holding x also holds y, but y does not share memory with x."""
        found: dict[int, Value] = {}
        went_up: set[int] = set()
        returned = False
        stack = [(v, True) for v in values]
        while stack:
            v, up = stack.pop()
            if is_immutable_type(v.type) or (v.id in found and (not up or v.id in went_up)):
                continue
            if up:
                went_up.add(v.id)
                stack.extend((w, True) for w in self._defined_from(v, ignore))
            if v.id in found:
                continue
            found[v.id] = v
            for user in self.users.get(v.id, []):
                if isinstance(user, Node):
                    if user is not ignore:
                        stack.extend((w, False) for w in _flows_to(user, v))
                elif user is self.graph:
                    returned = True
                else:
                    stack.extend((w, False) for w in self._returned_to(user, v))
        members = list(found.values())
        return AliasClass(members, any(v.id in self.written for v in members), returned)

    def written_by(self, value: Value, nodes: Iterable[Node]) -> bool:
        """Whether one of `nodes` (or a node in their blocks) may write in place to `value` or to memory it shares:
        what a fusion that moves a read of `value` past those nodes must rule out."""
        aliases = self.alias_class([value])
        return aliases.mutated and _writes_any(nodes, aliases.values)

    def _defined_from(self, v: Value, ignore: Node | None) -> list[Value]:
        """Values that `v` may be (part of): aliased arguments of its producer, what control flow passes in."""
        node = v.node
        if node is None:
            if v.id not in self.parameter:
                return []  # a method input
            loop, j = self.parameter[v.id]  # a loop body's parameter j >= 1 is carried value j - 1
            return [loop.inputs[j + 1], loop.blocks[0].outputs[j]] if loop.op == "prim::Loop" and j else []
        k = node.outputs.index(v)
        if node.op == "prim::If":
            return [b.outputs[k] for b in node.blocks]
        if node.op == "prim::Loop":
            return [node.inputs[k + 2], node.blocks[0].outputs[k + 1]]
        return [] if node is ignore else [node.inputs[i] for i in _aliased_positions(node)]

    def _returned_to(self, block: Block, v: Value) -> list[Value]:
        """What a nested block's output `v` becomes: the prim::If's result, or the loop's result and parameter."""
        node = self.owner[id(block)]
        out: list[Value] = []
        for k, w in enumerate(block.outputs):
            if w is not v:
                continue
            if node.op == "prim::If":
                out.append(node.outputs[k])
            elif k:  # loop body output k >= 1 is carried value k - 1
                out += [node.outputs[k - 1], block.inputs[k]]
        return out


def _flows_to(user: Node, v: Value) -> list[Value]:
    """The user's results (or loop results and body parameters) that may share memory with its argument `v`."""
    if user.op == "prim::Loop":
        body = user.blocks[0]
        return [w for k, u in enumerate(user.inputs[2:]) if u is v for w in (user.outputs[k], body.inputs[k + 1])]
    if user.op == "prim::If":
        return []  # reads only its condition
    return list(user.outputs) if any(user.inputs[i] is v for i in _aliased_positions(user)) else []


def _aliased_positions(node: Node) -> list[int]:
    """Positions of the arguments that a result of the node may share memory with: those its schema annotates
    when its results are annotated (`Tensor(a) self` ... `-> Tensor(a)`), every one of a prim:: or unknown
    operator, and containers that may hold tensors when a result is such a container too (aten::list.t copies a
    list, not its tensors)."""
    everything = list(range(len(node.inputs)))
    op = None if node.op.startswith("prim::") else ops.lookup(node.op)
    if op is None:
        return everything
    positions = []
    if any(not v.is_tensor and holds_mutable_elements(v.type) for v in node.outputs):
        positions = [i for i, v in enumerate(node.inputs) if not v.is_tensor and holds_mutable_elements(v.type)]
    if "aliases" in op.traits:  # PyTorch's unannotated aliases return (a view of) their first argument
        return sorted({0, *positions})
    if not op.result_aliases:
        return positions
    return sorted({*(op.annotated_arguments or everything), *positions})


def _writes_any(nodes: Iterable[Node], values: Iterable[Value]) -> bool:
    """Whether one of `nodes` (or a node in their blocks) writes in place to one of `values`."""
    ids = {v.id for v in values}
    stack = list(nodes)
    while stack:
        n = stack.pop()
        if any(n.inputs[i].id in ids for i in written_positions(n)):
            return True
        stack.extend(inner for b in n.blocks for inner in b.nodes)
    return False


def written_positions(node: Node) -> list[int]:
    """Positions of the arguments the node writes to in place (`(a!)`; every one of an unknown operator)."""
    if node.op in ("prim::Constant", "prim::If", "prim::Loop"):
        return []  # the nodes of a control-flow node's blocks are looked at one by one
    op = ops.lookup(node.op)
    if op is None:
        return list(range(len(node.inputs)))
    return [i for i in op.writes if i < len(node.inputs)]
