"""What a backend is: the protocol every backend implements, and the kernel and delegate it hands the interpreter.

A backend is a small object found by name (`ptlite.backends`). When a method is compiled, each operator node asks
the backends in order for a kernel (`kernel(op, node)`); the first that accepts it runs it, and the NumPy reference,
last, accepts every declared operator. A backend declines a node by returning None (a dtype, a layout or an
argument it does not handle). A backend may also take a whole straight-line run of a method's nodes as one step (a
delegate: `delegates`), which then runs with its own buffers. Lowering (`lower`, `specialize`) rewrites a program
for the backend's kernels: weight layouts, fusions, the memory plan; a file records which backend lowered it.
Every method has a default, so a backend overrides only what it does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from ptlite.ir.graph import Graph, Node, Program, Value
from ptlite.ops import OpDef

# The classes here are plain ones, not dataclasses: they are made at `import ptlite`, where a dataclass costs ~0.5 ms.

Step = Callable[[list], None]
Instrument = Callable[[Step, Node], Step]  # wraps the step of one operator node (profiling, observing)
# Compiles a method to run on a backend's kernels, each operator step wrapped by the instrument if one is given, and
# returns it ready to run (ptlite.runtime.interpreter.CompiledGraph: its steps, nodes and registers): what lowering
# uses to run a method on zeros. The runtime hands it in; backends do not import the runtime.
Runner = Callable[[Graph, Program, Instrument | None], Any]


class Kernel:
    """A backend's implementation of one node: `fn` takes the node's inputs positionally and returns its result
    (a tuple for several); with `accepts_out`, also a keyword `out=` array to write the result into (the memory
    plan's buffer for that value), used when it has the result's shape and dtype. Like the reference's, a result
    may share memory with an argument only where the operator's schema (or its `aliases` trait) says it may: the
    passes decide what may be written in place by that."""

    __slots__ = ("fn", "backend", "accepts_out")

    def __init__(self, fn: Callable[..., Any], backend: str, accepts_out: bool = False) -> None:
        self.fn = fn
        self.backend = backend
        self.accepts_out = accepts_out

    def __repr__(self) -> str:
        return f"Kernel({getattr(self.fn, '__qualname__', self.fn)!s}, backend={self.backend!r}, " \
               f"accepts_out={self.accepts_out})"


class NodeTimer(Protocol):
    """Times the nodes inside a delegate for the profiler: `start` zeroes the times and keeps timing every later
    run (until `stop`); `seconds` gives each node's total since `start`, in the order of the delegate's nodes."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def seconds(self) -> list[float]: ...


class Delegate:
    """A backend running consecutive straight-line nodes of a method as one step: `run` takes the values of
    `inputs` (in order) and returns those of `outputs`, the values the rest of the method reads
    (ptlite.ir.liveness.region_values gives both). Values made and used only inside stay in the delegate's own
    memory. `name` is what profiles and reports call it (default "<backend>::delegate"). `node_timer`, where the
    backend can time the nodes inside, is what the profiler asks for their times (NodeTimer)."""

    __slots__ = ("backend", "nodes", "inputs", "outputs", "run", "name", "node_timer")

    def __init__(self, backend: str, nodes: list[Node], inputs: list[Value], outputs: list[Value],
                 run: Callable[..., Sequence[Any]], name: str = "", node_timer: NodeTimer | None = None) -> None:
        self.backend = backend
        self.nodes = nodes
        self.inputs = inputs
        self.outputs = outputs
        self.run = run
        self.name = name
        self.node_timer = node_timer

    @property
    def label(self) -> str:
        return self.name or f"{self.backend}::delegate"

    def __repr__(self) -> str:
        return f"<Delegate {self.label}: {len(self.nodes)} nodes>"


class LoweringContext:
    """What lowering is given: the optimizations the user blocked (by blocklist name), a runner, and (for
    `specialize`) whether this backend lowered the program, so that shape-dependent lowering may run too (else it
    only plans memory)."""

    __slots__ = ("blocklist", "run", "lowered")

    def __init__(self, blocklist: frozenset[str] = frozenset(), run: Runner | None = None,
                 lowered: bool = True) -> None:
        self.blocklist = blocklist
        self.run = run
        self.lowered = lowered


class Backend:
    """The protocol (every method has a default: override what the backend does). `name` is how users select it
    (`ptlite.load(path, backends=("numpy",))`) and how a file records that a backend lowered it."""

    name: str = ""
    # True when kernel() answers by the operator alone, never by the node: dispatch then asks once per operator.
    per_operator: bool = False

    def kernel(self, op: OpDef, node: Node | None) -> Kernel | None:
        """This backend's kernel for a node of operator `op`, or None to decline it (the next backend is asked).
        The node's input values say what is known of its arguments (dtypes, shapes, constants); `node` is None
        when the operator is asked for without a graph (the kernel tests)."""
        return None

    def delegates(self, graph: Graph, program: Program, kernels: dict[int, Kernel]) -> list[Delegate]:
        """Runs of consecutive top-level nodes of `graph` (no prim::If / prim::Loop among them) this backend
        runs as one step each; `kernels` is what per-node dispatch chose (by id of the node). Default: none."""
        return []

    # ------------------------------------------------------------------------------------------------ lowering

    # The module holding the lowering (imported when first needed, not at load): `PASSES` (blocklist name -> Pass
    # class), `lower(program, context)` and `specialize(program, method, context)`; "" for none. The defaults
    # below read it; a backend may override them instead.
    lowering_module: str = ""

    def lowering_passes(self) -> dict[str, str]:
        """The lowering passes, by the blocklist name that skips each -> what it does (for the blocklist's help)."""
        if not self.lowering_module:
            return {}
        return {name: f"the {p.name} pass" for name, p in self._lowering().PASSES.items()}

    def lower(self, program: Program, context: LoweringContext) -> list[str]:
        """Rewrite an optimized program in place for this backend's kernels; returns the names of the passes that
        changed it. Default: the lowering module's, or nothing to lower."""
        return self._lowering().lower(program, context) if self.lowering_module else []

    def specialize(self, program: Program, method: str, context: LoweringContext) -> bool:
        """At a method's first call, once its input specs hold that call's shapes and dtypes: lower what needed
        those shapes, and plan memory. Returns whether the program changed. Default: the lowering module's, or
        nothing."""
        return self._lowering().specialize(program, method, context) if self.lowering_module else False

    def _lowering(self) -> Any:
        import importlib

        return importlib.import_module(self.lowering_module)

    # ------------------------------------------------------------------------------------------------ memory

    def allocate(self, nbytes: int) -> Any:
        """A buffer of `nbytes` bytes: the arena the values of a memory plan this backend made live in (the runtime
        uses the plan only when this backend runs every node of the method)."""
        from ptlite.ir.memory_plan import aligned_empty

        return aligned_empty(nbytes, np.uint8)

    def describe(self) -> str:
        """One line on what runs here (versions, instruction sets, devices)."""
        return ""

    def __repr__(self) -> str:
        return f"<ptlite backend {self.name}>"
