"""ptlite's intermediate representation: values, nodes, nested blocks, graphs and programs.

The IR mirrors TorchScript's graph model, which every capture front end can express:
- a `Value` is defined once, by a node output or a block input, and carries its type (a TorchScript type
  string such as "Tensor", "int", "List[int]", "Dict[str, Tensor]") and, for tensors, dtype and shape where known;
- a `Node` applies an operator from the operator table (`aten::conv2d`, `prim::ListConstruct`, ...) to input
  values, in the order of the operator's schema with every argument present;
- `prim::If` and `prim::Loop` nodes own nested `Block`s with TorchScript's semantics;
- constants are `prim::Constant` nodes: `attrs["value"]` for Python values, `attrs["weight"]` naming a tensor in
  `Program.weights`.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_ids = itertools.count()

Shape = tuple[int | None, ...]


class Value:
    """An SSA value: produced by exactly one node output or block input."""

    __slots__ = ("id", "name", "type", "dtype", "shape", "node")

    def __init__(self, name: str = "", type: str = "Tensor", dtype: str | None = None,
                 shape: Shape | None = None) -> None:
        self.id = next(_ids)
        self.name = name
        self.type = type
        self.dtype = dtype
        self.shape = tuple(shape) if shape is not None else None
        self.node: Node | None = None  # producing node, None for block inputs

    @property
    def is_tensor(self) -> bool:
        return self.type == "Tensor"

    def __repr__(self) -> str:
        return f"%{self.name or self.id}"


class Node:
    """An operator application; `blocks` is non-empty only for control flow (prim::If, prim::Loop)."""

    __slots__ = ("op", "inputs", "outputs", "attrs", "blocks", "source")

    def __init__(self, op: str, inputs: list[Value] | None = None, outputs: list[Value] | None = None,
                 attrs: dict[str, Any] | None = None, blocks: list[Block] | None = None,
                 source: str = "") -> None:
        self.op = op
        self.inputs = list(inputs or [])
        self.outputs = list(outputs or [])
        self.attrs = dict(attrs or {})
        self.blocks = list(blocks or [])
        self.source = source  # where in the user's model the node came from (module path, code line)
        for out in self.outputs:
            out.node = self

    @property
    def output(self) -> Value:
        if len(self.outputs) != 1:
            raise ValueError(f"{self.op} has {len(self.outputs)} outputs, not one")
        return self.outputs[0]

    def __repr__(self) -> str:
        return f"Node({self.op}, {self.inputs} -> {self.outputs})"


class Block:
    """A list of nodes with block inputs (parameters) and outputs (results)."""

    def __init__(self, inputs: list[Value] | None = None, nodes: list[Node] | None = None,
                 outputs: list[Value] | None = None) -> None:
        self.inputs = list(inputs or [])
        self.nodes = list(nodes or [])
        self.outputs = list(outputs or [])

    def walk(self) -> Iterator[Node]:
        """Every node of this block and its nested blocks, in program order."""
        for node in self.nodes:
            yield node
            for block in node.blocks:
                yield from block.walk()


@dataclass
class ValueSpec:
    """What a method expects or returns at one position: name, type and, for tensors, dtype and shape.

    A shape entry of None is a dimension of any size; `shape` None means the rank is unknown too.
    `default` is the value used when a caller leaves a trailing non-tensor argument out.
    """

    name: str
    type: str = "Tensor"
    dtype: str | None = None
    shape: Shape | None = None
    default: Any = None
    has_default: bool = False

    def describe(self) -> str:
        if self.type != "Tensor":
            return f"{self.name}: {self.type}"
        if self.dtype is None and self.shape is None:
            return f"{self.name}: Tensor"
        dims = "?" if self.shape is None else "[" + ", ".join("?" if d is None else str(d) for d in self.shape) + "]"
        return f"{self.name}: Tensor {self.dtype or '?'}{dims}"


class Graph(Block):
    """One method of a program: a block whose inputs are the method's arguments."""

    def __init__(self, name: str = "forward", inputs: list[Value] | None = None, nodes: list[Node] | None = None,
                 outputs: list[Value] | None = None) -> None:
        super().__init__(inputs, nodes, outputs)
        self.name = name
        self.input_specs: list[ValueSpec] = []
        self.output_specs: list[ValueSpec] = []


# Program.metadata key: the optimizations `optimize_for_mobile` was told to skip (their blocklist names), which
# the shape specialization at a method's first call (runtime/module.py) skips too.
BLOCKLIST_KEY = "optimization_blocklist"
# Program.metadata key: the backend whose lowering shaped the program (prepacked weights, fusions, memory plan).
BACKEND_KEY = "backend"


@dataclass
class BundledInput:
    """An example call stored with a program and PyTorch's answer to it, which `ptlite check` replays: the method's
    positional inputs (arrays or constants), its outputs' leaves in order (`ptlite.runtime.bundled.leaves`), and per
    output the tolerance, |ptlite - torch| <= atol + rtol * |torch| elementwise."""

    method: str
    inputs: list[Any]
    outputs: list[Any]
    atol: list[float]
    rtol: list[float]

    def problem(self, program: Program) -> str | None:
        """What makes this call unfit to store with `program` (a method it lacks, tolerances that are not one
        finite non-negative number per output), or None."""
        if self.method not in program.methods:
            return f"method {self.method!r} is not in the program, which has {', '.join(program.methods)}"
        for name, values in (("atol", self.atol), ("rtol", self.rtol)):
            if len(values) != len(self.outputs):
                return f"{name} has {len(values)} value(s) for {len(self.outputs)} output(s)"
            if not all(isinstance(t, (int, float)) and 0 <= t < float("inf") for t in values):
                return f"{name} values must be finite and non-negative, not {str(values)[:60]}"
        return None


@dataclass
class Program:
    """A captured model: named methods over shared weights, plus metadata; what a .ptlite file stores (with the
    example calls bundled to check it by)."""

    methods: dict[str, Graph] = field(default_factory=dict)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    bundled_inputs: list[BundledInput] = field(default_factory=list)

    @property
    def forward(self) -> Graph:
        return self.methods["forward"]

    def operator_names(self) -> list[str]:
        """Sorted operator keys that the program's methods use (control flow and constants included)."""
        names = {node.op for graph in self.methods.values() for node in graph.walk()}
        return sorted(names)

    @property
    def lowered_for(self) -> str | None:
        """The backend whose lowering shaped the program (its ops and weight layouts); None if none did. Files
        optimized before backends were recorded were lowered for NumPy, the only backend then."""
        backend = self.metadata.get(BACKEND_KEY)
        if isinstance(backend, str) and backend:
            return backend
        return "numpy" if "passes" in self.metadata else None

    def __str__(self) -> str:
        from .printer import format_program

        return format_program(self)
