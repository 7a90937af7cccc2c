"""What is known before running about a method's tensors: dtype and shape, from the values' annotations (capture
records them where it knows them) and the method's input specs (which `Module` checks on every call); and ranks
the operator table's `@rank` rules carry from those through the nodes (a scripted capture records no shapes, but
its input's rank, and a convolution's result has its input's)."""

from __future__ import annotations

import math

from ptlite.ir.graph import Graph, Shape, Value, ValueSpec


class TensorFacts:
    """Static dtype and shape of a method's tensor values, where known."""

    def __init__(self, graph: Graph) -> None:
        self._specs: dict[int, ValueSpec] = {v.id: spec for v, spec in zip(graph.inputs, graph.input_specs)
                                             if spec.type == "Tensor"}
        self._ranks: dict[int, int | None] = {}  # value id -> rank (None: unknown), as rank() found them

    def dtype(self, v: Value) -> str | None:
        """The dtype name ("float32", ...), or None if unknown."""
        if not v.is_tensor:
            return None
        spec = self._specs.get(v.id)
        return v.dtype or (spec.dtype if spec is not None else None)

    def shape(self, v: Value) -> Shape | None:
        """The shape, with None for dimensions of any size; None if even the rank is unknown."""
        if not v.is_tensor:
            return None
        spec = self._specs.get(v.id)
        return v.shape if v.shape is not None else (spec.shape if spec is not None else None)

    def rank(self, v: Value) -> int | None:
        """The number of dimensions: from the shape, else by the `@rank` rule of the operator making v (its first
        result), from its arguments' ranks; None if unknown."""
        if v.id in self._ranks:
            return self._ranks[v.id]
        pending, waiting = [v], set()  # the values whose ranks v's depends on, found iteratively (chains are long)
        while pending:
            x = pending.pop()
            if x.id in self._ranks:
                continue
            shape = self.shape(x)
            needs = [] if shape is not None else _rank_arguments(x)
            missing = [a for a in needs if a.id not in self._ranks]
            if missing and x.id not in waiting:  # its arguments first, then x again
                waiting.add(x.id)
                pending.append(x)
                pending.extend(missing)
                continue
            self._ranks[x.id] = len(shape) if shape is not None else _ranked(x, [self._ranks.get(a.id) for a in needs])
        return self._ranks[v.id]

    def static_shape(self, v: Value) -> tuple[int, ...] | None:
        """The shape if every dimension is known, else None."""
        shape = self.shape(v)
        return None if shape is None or any(d is None for d in shape) else tuple(shape)

    def numel(self, v: Value) -> int | None:
        shape = self.static_shape(v)
        return None if shape is None else math.prod(shape)


def _rank_rule(v: Value) -> str | None:
    node = v.node
    if node is None or not node.outputs or node.outputs[0] is not v or not v.is_tensor:
        return None
    from ptlite import ops  # here: facts of recorded shapes need no operator table

    op = ops.lookup(node.op)
    return op.rank if op is not None else None


def _rank_arguments(v: Value) -> list[Value]:
    """The arguments whose ranks give v's by its operator's `@rank` rule ([] where it has none)."""
    rule = _rank_rule(v)
    if rule == "input":
        return list(v.node.inputs[:1])
    if rule == "broadcast":
        return [a for a in v.node.inputs if a.is_tensor]
    return []


def _ranked(v: Value, ranks: list[int | None]) -> int | None:
    """v's rank from its arguments' (those _rank_arguments named): None unless the rule has them all."""
    if not ranks or None in ranks or _rank_rule(v) is None:
        return None
    return max(ranks)  # (one argument for "input")
