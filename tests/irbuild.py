"""Build small IR programs by hand for pass tests: b.op("aten::relu", x) appends a node and returns its output;
plain Python arguments become prim::Constant nodes; `with b.block() as blk:` collects nodes into a nested block."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ptlite.ir.graph import Block, Graph, Node, Program, Value, ValueSpec

_CONSTANT_TYPES = {bool: "bool", int: "int", float: "float", str: "str", type(None): "NoneType", list: "List[int]"}


class GraphBuilder:
    def __init__(self, *inputs: str, shapes: dict[str, tuple] | None = None) -> None:
        shapes = shapes or {}
        self.program = Program()
        self.inputs = [Value(name, "Tensor", "float32") for name in inputs]
        self.graph = Graph("forward", self.inputs)
        self.graph.input_specs = [ValueSpec(name, "Tensor", "float32", shapes.get(name)) for name in inputs]
        self.program.methods["forward"] = self.graph
        self.nodes = self.graph.nodes  # where new nodes go

    def const(self, value: Any) -> Value:
        out = Value(type=_CONSTANT_TYPES.get(type(value), "Any"))
        self.nodes.append(Node("prim::Constant", [], [out], {"value": value}))
        return out

    def weight(self, name: str, array: np.ndarray) -> Value:
        array = np.ascontiguousarray(array)
        self.program.weights[name] = array
        out = Value(name, "Tensor", str(array.dtype), array.shape)
        self.nodes.append(Node("prim::Constant", [], [out], {"weight": name}))
        return out

    def op(self, op: str, *args: Any, outputs: int = 1, type: str = "Tensor", blocks: list[Block] | None = None,
           shape: tuple | None = None) -> Any:
        inputs = [a if isinstance(a, Value) else self.const(a) for a in args]
        outs = [Value(type=type, shape=shape) for _ in range(outputs)]
        self.nodes.append(Node(op, inputs, outs, blocks=blocks))
        return outs[0] if outputs == 1 else (tuple(outs) if outs else None)

    @contextmanager
    def block(self, *inputs: str) -> Iterator[Block]:
        saved = self.nodes
        blk = Block([Value(name) for name in inputs])
        self.nodes = blk.nodes
        try:
            yield blk
        finally:
            self.nodes = saved

    def ret(self, *values: Value) -> Program:
        self.graph.outputs = list(values)
        self.graph.output_specs = [ValueSpec(f"output{i}", v.type) for i, v in enumerate(values)]
        return self.program


def ops(program: Program) -> list[str]:
    """The operators of the forward method in program order, nested blocks included, constants left out."""
    return [n.op for n in program.forward.walk() if n.op != "prim::Constant"]


def structure(program: Program) -> str:
    """The program as text with values numbered by first appearance, so that copies print the same."""
    numbers: dict[int, int] = {}

    def name(v: Value) -> str:
        return f"%{numbers.setdefault(v.id, len(numbers))}:{v.name}:{v.type}:{v.dtype}:{v.shape}"

    def block(blk: Block, indent: str) -> list[str]:
        lines = [indent + "(" + ", ".join(map(name, blk.inputs)) + "):"]
        for node in blk.nodes:
            lines.append(f"{indent}  {[name(v) for v in node.outputs]} = {node.op}{node.attrs}"
                         f"({', '.join(map(name, node.inputs))})")
            for inner in node.blocks:
                lines.extend(block(inner, indent + "    "))
        return lines + [indent + "  -> " + ", ".join(map(name, blk.outputs))]

    parts = [f"{g.name} {g.input_specs} {g.output_specs}\n" + "\n".join(block(g, "")) for g in program.methods.values()]
    weights = [f"{k}: {w.dtype}{w.shape} {hash(w.tobytes())}" for k, w in program.weights.items()]
    return "\n".join(parts + weights + [repr(program.metadata)])
