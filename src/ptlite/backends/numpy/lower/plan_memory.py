"""MEMORY_PLAN: decide ahead of time where each intermediate lives, so that a run allocates nothing for them.

For each method whose inputs are all tensors of fixed shape and dtype, the method runs once on zeros. Every
top-level value gets a lifetime: from the step that defines it to the last step reading it or anything that shares
its memory (a view, a list holding it, an in-place result; reads inside prim::If / prim::Loop count at the
enclosing step: the interpreter's liveness). Planned are the outputs of top-level nodes whose kernel has an out
variant, that are new arrays (C order or channels-last), and that the caller does not keep (not a graph output
nor sharing memory with one), plus the tensor inputs (see Module.input_buffer). Largest first, each goes at the
lowest ALIGN-aligned offset of one arena where it overlaps no placed value with an overlapping lifetime.

The plan (ptlite.ir.memory_plan) annotates the program without changing what it computes, so the pass reports
`modified=False` (nothing needs to run again because of it, and metadata["passes"] does not list it;
metadata["memory_plan"] records what it did). It must be the last pass: it recomputes the plan from scratch each
time it runs, and `optimize` drops any earlier plan first. A method whose zero run raises is left unplanned, and so is
a method that keeps values in its Module's state (ptlite::module_state), which outlive the call.
"""

from __future__ import annotations

import warnings
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from ptlite import ops
from ptlite.backends.base import Runner
from ptlite.backends.numpy._layout import is_channels_last
from ptlite.ir.dtypes import SUPPORTED_NUMPY
from ptlite.ir.graph import Graph, Node, Program, ValueSpec
from ptlite.ir.liveness import last_reads, reads
from ptlite.ir.memory_plan import METADATA_KEY, OUT_ATTR, align, drop_memory_plan, entry
from ptlite.ops import MODULE_STATE
from ptlite.passes.base import Pass, PassResult


class PlanMemory(Pass):
    """`run` compiles a method for the run on zeros that sees what each node returns."""

    name = "memory_plan"

    def __init__(self, run: Runner) -> None:
        self.run_method = run

    def __call__(self, program: Program) -> PassResult:
        drop_memory_plan(program)  # plans of methods that are gone or can no longer be planned go too
        for graph in program.methods.values():
            self.run(graph, program)
        return PassResult(program, False)

    def run(self, graph: Graph, program: Program) -> bool:
        """Plan one method (replacing its plan); always False: a plan does not change what the method computes."""
        drop_memory_plan(program, graph.name)
        plan = plan_method(graph, program, self.run_method)
        if plan is not None:
            program.metadata.setdefault(METADATA_KEY, {})[graph.name] = plan
        return False


# ------------------------------------------------------------------------------------------------ recording

@dataclass
class Buffer:
    """A value to place: its lifetime in top-level steps (both ends included), size and layout, where its entry
    goes (the node defining it, or the method input it is), and, once placed, its offset in the arena."""

    start: int
    end: int
    nbytes: int
    shape: tuple[int, ...]
    dtype: str
    channels_last: bool = False
    node: Node | None = None
    input_index: int | None = None
    offset: int = 0


def _root(a: np.ndarray) -> np.ndarray:
    """The array that owns a's memory (the last array along its chain of bases)."""
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _arrays(obj: Any, depth: int = 0) -> list[np.ndarray]:
    """The arrays a value holds: itself, or those inside its lists, tuples and dicts."""
    if isinstance(obj, np.ndarray):
        return [obj]
    if depth > 8:
        return []
    if isinstance(obj, (list, tuple)):
        return [a for item in obj for a in _arrays(item, depth + 1)]
    if isinstance(obj, dict):
        return [a for item in obj.values() for a in _arrays(item, depth + 1)]
    return []


class Aliases:
    """Union-find over value ids (negative ids for constants): values that share memory end up in one set."""

    def __init__(self) -> None:
        self.parent: dict[int, int] = {}
        self.owners: dict[int, tuple[weakref.ref, int]] = {}  # id(owning array) -> (it, first value holding it)

    def find(self, key: int) -> int:
        self.parent.setdefault(key, key)
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def union(self, a: int, b: int) -> None:
        self.parent[self.find(a)] = self.find(b)

    def hold(self, key: int, obj: Any) -> bool:
        """Note that value `key` holds the arrays in obj; returns whether all their memory is new (held by no value
        before). Arrays are told apart by their owning array; a weak reference tells an id that a new array reuses
        from the old array (values are released during the run, as in a real one)."""
        fresh = True
        self.find(key)
        for a in _arrays(obj):
            root = _root(a)
            known = self.owners.get(id(root))
            if known is not None and known[0]() is root:
                self.union(key, known[1])
                fresh = False
            else:
                self.owners[id(root)] = (weakref.ref(root), key)
        return fresh


@dataclass
class Recording:
    """What a run on zero inputs showed: which values share memory, and the new arrays that top-level nodes
    returned (value id -> a Buffer with the step defining it, shape, dtype, layout and size)."""

    nodes: list[Node]
    aliases: Aliases
    fresh: dict[int, Buffer]


def record(graph: Graph, program: Program, specs: list[ValueSpec], run: Runner) -> Recording:
    """Run the method once on zeros of the input specs, as the interpreter runs it (each value released after
    its last use), noting which values share memory and which node outputs are new arrays."""
    compiled = run(graph, program, None)
    env = compiled.template.copy()
    aliases = Aliases()
    for slot, value in enumerate(env):
        aliases.hold(-1 - slot, value)  # constants: a set each
    for v, slot, spec in zip(graph.inputs, compiled.input_slots, specs):
        env[slot] = np.zeros(spec.shape, dtype=spec.dtype)
        aliases.hold(v.id, env[slot])
    containers: list[tuple[int, int]] = []  # (value id, register) of lists, tuples and dicts: they may change
    fresh: dict[int, Buffer] = {}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, (step, node, dead) in enumerate(zip(compiled.steps, compiled.nodes, compiled.releases)):
            step(env)
            for v in node.outputs:
                slot = compiled.slots[v.id]
                value = env[slot]
                if aliases.hold(v.id, value) and isinstance(value, np.ndarray):
                    channels_last = not value.flags.c_contiguous and is_channels_last(value)
                    fresh[v.id] = Buffer(i, i, value.nbytes, value.shape, value.dtype.name, channels_last, node)
                if isinstance(value, (list, tuple, dict)):
                    containers.append((v.id, slot))
            for vid, slot in containers:  # e.g. aten::append into a list made earlier
                if env[slot] is not None:
                    aliases.hold(vid, env[slot])
            for slot in dead:
                env[slot] = None
    return Recording(compiled.nodes, aliases, fresh)


# ------------------------------------------------------------------------------------------------ planning

def plannable_specs(graph: Graph) -> list[ValueSpec] | None:
    """The input specs, when every input is a tensor of known dtype and fully static shape; else None."""
    specs = graph.input_specs
    if len(specs) != len(graph.inputs):
        return None
    for spec in specs:
        if spec.type != "Tensor" or spec.dtype not in SUPPORTED_NUMPY or spec.shape is None \
                or any(d is None for d in spec.shape):
            return None
    return list(specs)


def lifetimes(graph: Graph, rec: Recording) -> tuple[dict[int, int], set[int]]:
    """For each alias set (by its union-find key): the last top-level step reading any of its values, and the sets
    that hold a graph output (the caller keeps those). A prim::If / prim::Loop output may be any value the node
    reads (which branch runs, how many trips, depends on the data): it joins the sets of all of them."""
    aliases, nodes = rec.aliases, rec.nodes
    defined = {v.id: 0 for v in graph.inputs}
    for i, node in enumerate(nodes):
        defined.update((v.id, i) for v in node.outputs)
    last = last_reads(nodes)
    for node in nodes:
        if node.blocks:
            inside = {v.id for v in reads(node)} & defined.keys()
            for out in node.outputs:
                for vid in inside:
                    aliases.union(out.id, vid)
    ends: dict[int, int] = {}
    for vid, start in defined.items():
        key = aliases.find(vid)
        ends[key] = max(ends.get(key, 0), last.get(vid, start))
    escaping = {aliases.find(v.id) for v in graph.outputs}
    return ends, escaping


def _plannable(buf: Buffer) -> bool:
    """A new array from a kernel with an out variant, in a layout the arena can give it."""
    op = ops.lookup(buf.node.op) if buf.node is not None else None
    return (op is not None and op.out and len(buf.node.outputs) == 1 and not buf.node.blocks
            and buf.nbytes > 0 and buf.dtype in SUPPORTED_NUMPY)


def buffers_to_place(graph: Graph, specs: list[ValueSpec], rec: Recording) -> tuple[list[Buffer], int]:
    """The values to plan, with their lifetimes, and the bytes of every fresh intermediate (planned or not)."""
    ends, escaping = lifetimes(graph, rec)
    buffers = []
    for i, (v, spec) in enumerate(zip(graph.inputs, specs)):
        key = rec.aliases.find(v.id)
        nbytes = int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize
        if key not in escaping and nbytes > 0:
            buffers.append(Buffer(0, ends[key], nbytes, tuple(spec.shape), spec.dtype, input_index=i))
    intermediate_bytes = 0
    for vid, buf in rec.fresh.items():
        key = rec.aliases.find(vid)
        if key in escaping:
            continue
        intermediate_bytes += buf.nbytes
        if _plannable(buf):
            buf.end = max(buf.start, ends[key])
            buffers.append(buf)
    return buffers, intermediate_bytes


def place(buffers: list[Buffer]) -> int:
    """Give each buffer an offset (largest first: the lowest ALIGN-aligned offset where it overlaps no placed
    buffer whose lifetime overlaps its own); returns the arena's size."""
    placed: list[Buffer] = []
    for buf in sorted(buffers, key=lambda b: (-b.nbytes, b.start, b.end)):
        offset = 0
        for other in sorted((p for p in placed if p.start <= buf.end and buf.start <= p.end),
                            key=lambda p: p.offset):
            if offset + buf.nbytes <= other.offset:
                break
            offset = max(offset, align(other.offset + other.nbytes))
        buf.offset = offset
        placed.append(buf)
    return align(max((b.offset + b.nbytes for b in placed), default=0))


def _keeps_state(graph: Graph) -> bool:
    """Whether the method stores values in its Module's state (ptlite::module_state): a tensor kept there, or in a
    list or tuple kept there, outlives the call, which liveness within one call cannot see; such methods (a .ptl
    file's attributes set while running) stay unplanned."""
    return any(node.op == MODULE_STATE for node in graph.walk())


def plan_method(graph: Graph, program: Program, run: Runner) -> dict[str, Any] | None:
    """Plan one method (run on zeros as `run` compiles it): place its buffers and store their entries on the nodes;
    returns the method's plan for the metadata, or None (nothing stored) when the method cannot be planned or has
    nothing to plan."""
    specs = plannable_specs(graph)
    if specs is None or _keeps_state(graph):
        return None
    try:
        rec = record(graph, program, specs, run)
    except Exception:  # a method that fails on zeros (data-dependent checks) runs unplanned rather than not at all
        return None
    buffers, intermediate_bytes = buffers_to_place(graph, specs, rec)
    if not buffers:
        return None
    arena_bytes = place(buffers)
    inputs: list[dict[str, Any] | None] = [None] * len(specs)
    for buf in buffers:
        stored = entry(buf.offset, buf.shape, buf.dtype, buf.channels_last)
        if buf.node is None:
            inputs[buf.input_index] = stored
        else:
            buf.node.attrs[OUT_ATTR] = stored
    return {"arena_bytes": arena_bytes, "intermediate_bytes": intermediate_bytes,
            "planned_bytes": sum(b.nbytes for b in buffers), "input_shapes": [list(s.shape) for s in specs],
            "input_dtypes": [s.dtype for s in specs], "inputs": inputs}
