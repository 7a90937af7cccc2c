"""Runs a graph: compiled once into a list of steps over a flat register file, then executed per call.

Each value of the graph gets a register (an index into a list). Constants are written into a template register
file once; a call copies the template, stores the arguments and runs the steps. A step is a closure that calls
one kernel, or runs a nested block for prim::If / prim::Loop with TorchScript's semantics.

A method with a memory plan (ptlite.ir.memory_plan) also gets planned steps: one arena allocated with the compiled
graph, and the planned nodes' kernels called with `out=` their view of it. A call whose inputs are what the plan
was made for runs those; any other call (another batch size, ...) runs the plain steps.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ptlite.errors import ExecutionError, FormatError, PtliteError, UnsupportedOperatorError
from ptlite.ir import memory_plan, registry
from ptlite.ir.graph import Block, Graph, Node, Program, Value

MODULE_STATE = "ptlite::module_state"  # see ptlite.backends.numpy.kernels.state

Step = Callable[[list], None]
# Wraps the step of one operator node (for profiling): instrument(step, node) -> step.
Instrument = Callable[[Step, Node], Step]


class _Compiler:
    def __init__(self, program: Program, instrument: Instrument | None = None,
                 state: dict[str, Any] | None = None) -> None:
        self.program = program
        self.instrument = instrument
        self.state = {} if state is None else state  # what ptlite::module_state nodes stand for (kernels/state.py)
        self.slots: dict[int, int] = {}
        self.constants: dict[int, Any] = {}

    def slot(self, value: Value) -> int:
        if value.id not in self.slots:
            self.slots[value.id] = len(self.slots)
        return self.slots[value.id]

    def block(self, block: Block) -> list[Step]:
        return [step for step, _ in self.block_steps(block)]

    def block_steps(self, block: Block) -> list[tuple[Step, Node]]:
        """The steps of a block, each with the node it runs (constants have none: they are in the template)."""
        for v in block.inputs:
            self.slot(v)
        steps = []
        for node in block.nodes:
            step = self.node(node)
            if step is not None:
                steps.append((step, node))
        return steps

    def node(self, node: Node) -> Step | None:
        if node.op == "prim::Constant":
            out = self.slot(node.output)
            if "weight" in node.attrs:
                self.constants[out] = _read_only(self.program.weights[node.attrs["weight"]])
            else:
                self.constants[out] = node.attrs.get("value")
            return None
        if node.op == MODULE_STATE:  # the module's attributes that change while running: one dict for every call
            self.constants[self.slot(node.output)] = self.state
            return None
        if node.op == "prim::If":
            return self.if_step(node)
        if node.op == "prim::Loop":
            return self.loop_step(node)
        return self.call_step(node)

    def call_step(self, node: Node, out: np.ndarray | None = None) -> Step:
        """The step of an operator node; with `out` (a planned buffer; the operator must have an out variant and
        the node one output), its kernel is called with out=."""
        op = registry.get(node.op)
        impl = op.impl
        ins = [self.slot(v) for v in node.inputs]
        outs = [self.slot(v) for v in node.outputs]
        if out is not None:
            (o,) = outs

            def step(env: list, impl=impl, ins=ins, o=o, out=out) -> None:
                env[o] = impl(*[env[i] for i in ins], out=out)
        elif len(outs) == 1 and node.op not in _UNPACKING_OPS:
            (o,) = outs

            def step(env: list, impl=impl, ins=ins, o=o) -> None:
                env[o] = impl(*[env[i] for i in ins])
        elif not outs:
            def step(env: list, impl=impl, ins=ins) -> None:
                impl(*[env[i] for i in ins])
        else:
            def step(env: list, impl=impl, ins=ins, outs=outs) -> None:
                results = impl(*[env[i] for i in ins])
                if len(results) != len(outs):
                    raise ValueError(f"returned {len(results)} values, the graph expects {len(outs)}")
                for o, r in zip(outs, results):
                    env[o] = r
        step = _located(step, node)
        return step if self.instrument is None else self.instrument(step, node)

    def if_step(self, node: Node) -> Step:
        cond = self.slot(node.inputs[0])
        then_steps, else_steps = self.block(node.blocks[0]), self.block(node.blocks[1])
        then_outs = [self.slot(v) for v in node.blocks[0].outputs]
        else_outs = [self.slot(v) for v in node.blocks[1].outputs]
        outs = [self.slot(v) for v in node.outputs]

        def step(env: list) -> None:
            if _condition(env[cond], node):
                steps, results = then_steps, then_outs
            else:
                steps, results = else_steps, else_outs
            for s in steps:
                s(env)
            for o, r in zip(outs, results):
                env[o] = env[r]
        return step

    def loop_step(self, node: Node) -> Step:
        trip, cond = self.slot(node.inputs[0]), self.slot(node.inputs[1])
        carried_in = [self.slot(v) for v in node.inputs[2:]]
        body = node.blocks[0]
        body_steps = self.block(body)
        iter_slot = self.slot(body.inputs[0])
        body_params = [self.slot(v) for v in body.inputs[1:]]
        body_cond = self.slot(body.outputs[0])
        body_results = [self.slot(v) for v in body.outputs[1:]]
        outs = [self.slot(v) for v in node.outputs]

        def step(env: list) -> None:
            max_trip, keep_going = _trip_count(env[trip], node), _condition(env[cond], node)
            values = [env[i] for i in carried_in]
            i = 0
            while keep_going and i < max_trip:
                env[iter_slot] = i
                for p, v in zip(body_params, values):
                    env[p] = v
                for s in body_steps:
                    s(env)
                keep_going = _condition(env[body_cond], node)
                values = [env[r] for r in body_results]
                i += 1
            for o, v in zip(outs, values):
                env[o] = v
        return step


def _condition(value: Any, node: Node) -> bool:
    """A prim::If / prim::Loop condition: TorchScript's are bools (a tensor goes through aten::Bool first); anything
    else comes from a malformed program (a corrupt or hostile file), refused by name rather than tested for truth."""
    if value is True or value is False:
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise ExecutionError(f"{_where(node)}: its condition is {_describe(value)}, not a bool: the program is "
                         "malformed (a corrupt file?)")


def _trip_count(value: Any, node: Node) -> int:
    """A prim::Loop's trip count: an int (TorchScript's while loops give the largest int64)."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    raise ExecutionError(f"{_where(node)}: its trip count is {_describe(value)}, not an int: the program is "
                         "malformed (a corrupt file?)")


def _where(node: Node) -> str:
    return node.op + (f" (from {node.source})" if node.source else "")


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {tuple(value.shape)}"
    return f"a {type(value).__name__} ({str(value)[:40]})"


def _read_only(array: Any) -> Any:
    """A read-only view, so that an in-place kernel can never change a weight for later calls."""
    if isinstance(array, np.ndarray) and array.flags.writeable:
        array = array.view()
        array.flags.writeable = False
    return array


# Operators whose kernel returns a tuple of the node's outputs even when there is only one.
_UNPACKING_OPS = frozenset({"prim::ListUnpack", "prim::TupleUnpack"})


def _located(step: Step, node: Node) -> Step:
    """Wrap a step so that a kernel failure names the node and where it came from in the model."""

    def located(env: list) -> None:
        try:
            step(env)
        except PtliteError:  # includes ScriptError: an exception the model raised itself
            raise
        except Exception as exc:
            raise ExecutionError(f"{_where(node)} failed: {type(exc).__name__}: {exc}") from exc
    return located


class CompiledGraph:
    """A graph ready to run: call it with the method's arguments (already checked) to get its outputs.

    Every operator must be in the table (Module checks the whole program first, with one error for all).
    `state` is the dict that the graph's ptlite::module_state nodes stand for (Module passes its own, shared by its
    methods; by default a new one)."""

    def __init__(self, graph: Graph, program: Program, instrument: Instrument | None = None,
                 state: dict[str, Any] | None = None) -> None:
        compiler = _Compiler(program, instrument, state)
        self.input_slots = [compiler.slot(v) for v in graph.inputs]
        steps = compiler.block_steps(graph)
        self.steps = [step for step, _ in steps]
        self.nodes = [node for _, node in steps]  # the top-level node each step runs
        self.slots = compiler.slots  # value id -> register
        self.output_slots = [compiler.slot(v) for v in graph.outputs]
        self.releases = _releases(self.nodes, compiler.slots, set(self.output_slots) | set(compiler.constants))
        self.value_names = {slot: v.name for v in _all_values(graph) if v.name
                            for slot in [compiler.slots.get(v.id)] if slot is not None}
        self.template: list[Any] = [None] * len(compiler.slots)
        for slot, value in compiler.constants.items():
            self.template[slot] = value
        self.arena = _Arena.build(graph, program, compiler, steps)  # None without a memory plan

    def __call__(self, *args: Any) -> list[Any]:
        return self.run(args)[0]

    def run(self, args: tuple[Any, ...], keep: bool = False) -> tuple[list[Any], list[Any]]:
        """Outputs and the register file. Each value is dropped after its last use, so that its memory can be
        reused by later steps (peak memory is what is live at once, not every intermediate); keep=True keeps
        every value (for debugging: see `intermediates`), and so runs without the memory plan.

        With a memory plan, a call whose inputs match it runs the planned steps, unless another thread is running
        them (one arena per compiled graph): then, like any other call, the plain ones."""
        env = self.template.copy()
        for slot, value in zip(self.input_slots, args):
            env[slot] = value
        arena = self.arena
        if keep:
            for step in self.steps:
                step(env)
        elif arena is not None and arena.matches(args) and arena.lock.acquire(blocking=False):
            try:
                self._run(arena.steps, env)
            finally:
                arena.lock.release()
        else:
            self._run(self.steps, env)
        return [env[o] for o in self.output_slots], env

    def _run(self, steps: list[Step], env: list[Any]) -> None:
        for step, dead in zip(steps, self.releases):
            step(env)
            for slot in dead:
                env[slot] = None

    def intermediates(self, *args: Any) -> dict[str, Any]:
        """Every named value after a run, by name (values inside loops hold their last iteration)."""
        _, env = self.run(args, keep=True)
        return {name: env[slot] for slot, name in self.value_names.items()}


class _Arena:
    """A method's memory plan at run time: the arena, the views the plan puts values in, and the steps whose
    kernels write into them. Made from an untrusted plan: every entry is checked before a view is made."""

    def __init__(self, plan: dict[str, Any], buffer: np.ndarray, steps: list[Step]) -> None:
        self.buffer = buffer
        self.steps = steps  # one per top-level step, as CompiledGraph.steps
        self.input_shapes = [tuple(shape) for shape in plan["input_shapes"]]
        self.input_dtypes = [np.dtype(dtype) for dtype in plan["input_dtypes"]]
        self.inputs = [None if b is None else _view(buffer, b) for b in plan["inputs"]]  # see Module.input_buffer
        self.lock = threading.Lock()  # held while a call runs `steps`

    @classmethod
    def build(cls, graph: Graph, program: Program, compiler: _Compiler,
              steps: list[tuple[Step, Node]]) -> _Arena | None:
        plan = memory_plan.method_plan(program, graph.name)
        if plan is None:
            return None
        problems = memory_plan.plan_problems(graph, program)
        if problems:
            raise FormatError(f"method {graph.name}: invalid memory plan:\n  " + "\n  ".join(problems[:20]))
        try:
            buffer = np.empty(plan["arena_bytes"], dtype=np.uint8)
        except MemoryError:  # a plan is checked against its own entries only: their sizes come from the file
            raise FormatError(f"method {graph.name}: its memory plan asks for a {plan['arena_bytes']:,}-byte arena, "
                              "more than this machine can allocate; if the file is genuine, convert the model again "
                              "with --blocklist MEMORY_PLAN") from None
        planned_steps = []
        for step, node in steps:
            buffer_entry = node.attrs.get(memory_plan.OUT_ATTR)
            op = registry.lookup(node.op) if buffer_entry is not None else None
            # An entry on an operator without an out variant here (a newer producer's plan) is left unused.
            if op is not None and op.accepts_out and len(node.outputs) == 1 and node.op not in _UNPACKING_OPS:
                step = compiler.call_step(node, out=_view(buffer, buffer_entry))
            planned_steps.append(step)
        return cls(plan, buffer, planned_steps)

    def matches(self, args: tuple[Any, ...]) -> bool:
        """Whether a call's arguments are what the plan was made for: C-contiguous arrays of its shapes and dtypes."""
        if len(args) != len(self.input_shapes):
            return False
        for a, shape, dtype in zip(args, self.input_shapes, self.input_dtypes):
            if not isinstance(a, np.ndarray) or a.shape != shape or a.dtype != dtype or not a.flags.c_contiguous:
                return False
        return True


def _view(buffer: np.ndarray, entry: dict[str, Any]) -> np.ndarray:
    """The array a (checked) plan entry describes inside the arena: C order, or (N, C, H, W) stored as NHWC."""
    shape, dtype, offset = tuple(entry["shape"]), np.dtype(entry["dtype"]), entry["offset"]
    if entry.get("channels_last", False):
        n, c, h, w = shape
        return np.ndarray((n, h, w, c), dtype=dtype, buffer=buffer, offset=offset).transpose(0, 3, 1, 2)
    return np.ndarray(shape, dtype=dtype, buffer=buffer, offset=offset)


def last_reads(nodes: list[Node]) -> dict[int, int]:
    """For each value id the top-level `nodes` read, the index of the last node reading it (reads inside a node's
    nested blocks count at that node): the liveness both the interpreter and the memory plan use."""
    last: dict[int, int] = {}
    for i, node in enumerate(nodes):
        for v in reads(node):
            last[v.id] = i
    return last


def _releases(nodes: list[Node], slots: dict[int, int], keep: set[int]) -> list[tuple[int, ...]]:
    """For each top-level step, the registers to clear after it: values (inputs and intermediates, not outputs or
    constants) whose last reader it is, reads inside its nested blocks included, and values nothing reads."""
    last = {slots[vid]: i for vid, i in last_reads(nodes).items()}
    dead: list[list[int]] = [[] for _ in nodes]
    for slot, i in last.items():
        if slot not in keep:
            dead[i].append(slot)
    for i, node in enumerate(nodes):
        for v in node.outputs:
            slot = slots[v.id]
            if slot not in last and slot not in keep:
                dead[i].append(slot)
    return [tuple(d) for d in dead]


def reads(node: Node):
    """Values a node reads: its inputs and, inside its blocks, every node input and block output."""
    yield from node.inputs
    for block in node.blocks:
        for inner in block.nodes:
            yield from reads(inner)
        yield from block.outputs


def _all_values(block: Block):
    yield from block.inputs
    for node in block.nodes:
        yield from node.outputs
        for b in node.blocks:
            yield from _all_values(b)


def missing_operators(program: Program, graphs: list[Graph] | None = None) -> dict[str, list[str]]:
    """Operators the program uses that the operator table lacks, each with where it is used."""
    missing: dict[str, list[str]] = {}
    for graph in graphs if graphs is not None else program.methods.values():
        for node in graph.walk():
            if node.op not in INTERPRETED_OPS and registry.lookup(node.op) is None:
                missing.setdefault(node.op, []).append(node.source or f"method {graph.name}")
    return missing


# Nodes the compiler runs itself, always available (their table rows are placeholders: no need to import them).
INTERPRETED_OPS = frozenset({"prim::Constant", "prim::If", "prim::Loop"})


def check_operators(program: Program, graphs: list[Graph] | None = None) -> None:
    """Raise one UnsupportedOperatorError listing every operator the table lacks (default: in every method)."""
    missing = missing_operators(program, graphs)
    if missing:
        raise UnsupportedOperatorError(_missing_message(missing))


def _missing_message(missing: dict[str, list[str]]) -> str:
    lines = [f"  {op}  (used at {', '.join(sorted(set(where))[:5])})" for op, where in sorted(missing.items())]
    return (f"the program uses {len(missing)} operator(s) that this ptlite cannot run:\n" + "\n".join(lines)
            + "\nUpgrade ptlite, or change the model to avoid these operators.")
