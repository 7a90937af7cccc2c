"""What is known before running about a method's tensors: dtype and shape, from the values' annotations (capture
records them where it knows them) and the method's input specs (which `Module` checks on every call)."""

from __future__ import annotations

import math

from ptlite.ir.graph import Graph, Shape, Value, ValueSpec


class TensorFacts:
    """Static dtype and shape of a method's tensor values, where known."""

    def __init__(self, graph: Graph) -> None:
        self._specs: dict[int, ValueSpec] = {v.id: spec for v, spec in zip(graph.inputs, graph.input_specs)
                                             if spec.type == "Tensor"}

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
        shape = self.shape(v)
        return None if shape is None else len(shape)

    def static_shape(self, v: Value) -> tuple[int, ...] | None:
        """The shape if every dimension is known, else None."""
        shape = self.shape(v)
        return None if shape is None or any(d is None for d in shape) else tuple(shape)

    def numel(self, v: Value) -> int | None:
        shape = self.static_shape(v)
        return None if shape is None else math.prod(shape)
