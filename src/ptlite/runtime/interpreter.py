"""Runs a graph: compiled once into a list of steps over a flat register file, then executed per call.

Each value of the graph gets a register (an index into a list). Constants are written into a template register
file once; a call copies the template, stores the arguments and runs the steps. A step is a closure that calls
one kernel (the one dispatch chose for the node: dispatch.py), runs a delegate (several nodes a backend runs as
one), or runs a nested block for prim::If / prim::Loop with TorchScript's semantics.

A method with a memory plan (ptlite.ir.memory_plan) also gets planned steps (arena.py). A call whose inputs are
what the plan was made for runs those; any other call (another batch size, ...) runs the plain steps.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any

import numpy as np

from ptlite import ops
from ptlite.backends import REFERENCE
from ptlite.backends.base import Backend, Delegate
from ptlite.errors import ExecutionError, InputError, KernelArgumentError, PtliteError, UnsupportedOperatorError
from ptlite.ir.graph import Block, Graph, Node, Program
from ptlite.ir.liveness import all_values, last_reads
from ptlite.ops import MODULE_STATE

from .arena import Arena
from .dispatch import Dispatcher, Placement, is_template, where
from .limits import current

Step = Callable[[list], None]
# Wraps the step of one operator node (for profiling): instrument(step, node) -> step.
Instrument = Callable[[Step, Node], Step]


class _Compiler:
    def __init__(self, program: Program, dispatcher: Dispatcher, instrument: Instrument | None = None,
                 state: dict[str, Any] | None = None) -> None:
        self.program = program
        self.dispatcher = dispatcher
        self.instrument = instrument
        self.state = {} if state is None else state  # what ptlite::module_state nodes stand for (ops/state.py)
        self.slots: dict[int, int] = {}
        self.constants: dict[int, Any] = {}
        self.kernels: dict[int, Any] = {}  # id(node) -> the Kernel dispatch chose (planned steps reuse it)
        self.placed: list[tuple[Node, str, str | None]] = []  # (node, backend, delegate): Placement's fields
        self.method_inputs: dict[int, str] = {}  # value id -> name of the method's inputs (for errors)

    def slot(self, value: Any) -> int:
        if value.id not in self.slots:
            self.slots[value.id] = len(self.slots)
        return self.slots[value.id]

    def block(self, block: Block) -> list[Step]:
        return [step for step, _ in self.block_steps(block)]

    def block_steps(self, block: Block, delegates: list[Delegate] = ()) -> list[tuple[Step, Node]]:
        """The steps of a block, each with the node it runs (constants have none: they are in the template); the
        nodes of a delegate become one step, whose node stands for the delegate (its op is the delegate's label)."""
        for v in block.inputs:
            self.slot(v)
        if not delegates:
            return [(step, node) for node in block.nodes if (step := self.node(node)) is not None]
        starts = {id(d.nodes[0]): d for d in delegates}
        skip = {id(n) for d in delegates for n in d.nodes[1:]}
        steps = []
        for node in block.nodes:
            if id(node) in skip:
                continue
            delegate = starts.get(id(node))
            step, stands_for = (self.delegate_step(delegate) if delegate is not None else (self.node(node), node))
            if step is not None:
                steps.append((step, stands_for))
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

    def kernel(self, node: Node, op: Any = None) -> Any:
        bound = self.kernels.get(id(node))
        if bound is None:
            bound = self.kernels[id(node)] = self.dispatcher.kernel(node, op)
            self.placed.append((node, bound.backend, None))
        return bound

    def kernel_or_none(self, node: Node) -> Any:
        """The node's kernel, or None when no backend has one (a delegate may still take the node)."""
        try:
            return self.kernel(node)
        except UnsupportedOperatorError:
            return None

    def call_step(self, node: Node, out: np.ndarray | None = None) -> Step:
        """The step of an operator node; with `out` (a planned buffer; the kernel must take out= and the node
        have one output), its kernel is called with out=."""
        op = ops.lookup(node.op)
        impl = self.kernel(node, op).fn
        ins = [self.slot(v) for v in node.inputs]
        outs = [self.slot(v) for v in node.outputs]
        if out is not None:
            (o,) = outs

            def step(env: list, impl=impl, ins=ins, o=o, out=out) -> None:
                env[o] = impl(*[env[i] for i in ins], out=out)
        elif len(outs) == 1 and not op.unpacks:
            (o,) = outs

            def step(env: list, impl=impl, ins=ins, o=o) -> None:
                env[o] = impl(*[env[i] for i in ins])
        elif not outs:
            def step(env: list, impl=impl, ins=ins) -> None:
                impl(*[env[i] for i in ins])
        else:
            step = _unpacking(impl, ins, outs)
        step = _located(step, node, self.method_inputs)
        return step if self.instrument is None else self.instrument(step, node)

    def delegate_step(self, delegate: Delegate) -> tuple[Step, DelegateStep]:
        """One step running a delegate's nodes, and what stands for them where a node would (DelegateStep)."""
        for node in delegate.nodes:
            self.kernels[id(node)] = None
            self.placed.append((node, delegate.backend, delegate.label))
        ins = [self.slot(v) for v in delegate.inputs]
        outs = [self.slot(v) for v in delegate.outputs]
        stands_for = DelegateStep(delegate)

        step = _located(_unpacking(delegate.run, ins, outs), stands_for)
        return (step if self.instrument is None else self.instrument(step, stands_for)), stands_for

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
            guard = current()  # the call's limits: iterations and time
            i = 0
            while keep_going and i < max_trip:
                if guard is not None:
                    guard.iteration(node)
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


class DelegateStep:
    """What stands for a delegate's nodes in a compiled method's list of top-level steps, where the liveness, the
    profiler and error messages read a node: the delegate's inputs and outputs, its label as the operator. Not a
    Node, so that making one leaves the values' producers (`Value.node`) alone."""

    __slots__ = ("op", "inputs", "outputs", "attrs", "blocks", "source", "delegate")

    def __init__(self, delegate: Delegate) -> None:
        self.delegate = delegate
        self.op = delegate.label
        self.inputs = list(delegate.inputs)
        self.outputs = list(delegate.outputs)
        self.attrs = {"nodes": len(delegate.nodes), "backend": delegate.backend}
        self.blocks: list[Block] = []
        self.source = delegate.nodes[0].source or delegate.nodes[-1].source


def _condition(value: Any, node: Node) -> bool:
    """A prim::If / prim::Loop condition: TorchScript's are bools (a tensor goes through aten::Bool first); anything
    else comes from a malformed program (a corrupt or hostile file), refused by name rather than tested for truth."""
    if value is True or value is False:
        return value
    if isinstance(value, np.bool_):
        return bool(value)
    raise ExecutionError(f"{where(node)}: its condition is {_describe(value)}, not a bool: the program is "
                         "malformed (a corrupt file?)")


def _trip_count(value: Any, node: Node) -> int:
    """A prim::Loop's trip count: an int (TorchScript's while loops give the largest int64)."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    raise ExecutionError(f"{where(node)}: its trip count is {_describe(value)}, not an int: the program is "
                         "malformed (a corrupt file?)")


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


def _unpacking(fn: Callable[..., Any], ins: list[int], outs: list[int]) -> Step:
    """The step calling `fn` on the slots `ins` and storing the sequence it returns in the slots `outs`."""

    def step(env: list, fn=fn, ins=ins, outs=outs) -> None:
        results = fn(*[env[i] for i in ins])
        if len(results) != len(outs):
            raise ValueError(f"returned {len(results)} values, the graph expects {len(outs)}")
        for o, r in zip(outs, results):
            env[o] = r
    return step


def _located(step: Step, node: Node, method_inputs: dict[int, str] | None = None) -> Step:
    """Wrap a step so that a kernel failure names the node (or delegate) and where it came from in the model. A
    KernelArgumentError (an argument a kernel checked and cannot take) on a node reading one of the method's inputs
    itself is an InputError naming that input: the caller's array is what does not fit."""
    given = [name for v in node.inputs if (name := (method_inputs or {}).get(v.id)) is not None]

    def located(env: list) -> None:
        try:
            step(env)
        except PtliteError:  # includes ScriptError: an exception the model raised itself
            raise
        except KernelArgumentError as exc:
            if given:
                raise InputError(f"input '{given[0]}' cannot be used by {where(node)}: {exc}") from exc
            raise ExecutionError(f"{where(node)} failed: {exc}") from exc
        except Exception as exc:
            if isinstance(exc, MemoryError) and (guard := current()) is not None \
                    and (limit := guard.refused(node)) is not None:
                raise limit from None  # an allocation the call's memory limit refused
            raise ExecutionError(f"{where(node)} failed: {type(exc).__name__}: {exc}") from exc
    return located


def runner(backend: Backend) -> Callable[..., CompiledGraph]:
    """A Runner (ptlite.backends.base) compiling methods on one backend, with the reference for the nodes it
    declines: what the backend's own lowering is handed to run a method on zeros (its plans and choices hold for
    its kernels, and for the reference's where it declines, as a module lowered for it runs by default)."""
    from ptlite.backends import reference

    dispatcher = Dispatcher([backend] if backend.name == REFERENCE else [backend, reference()])

    def run(graph: Graph, program: Program, instrument: Instrument | None = None) -> CompiledGraph:
        return CompiledGraph(graph, program, instrument, dispatcher=dispatcher)
    return run


def reference_dispatcher() -> Dispatcher:
    """Dispatch to the NumPy reference alone."""
    from ptlite.backends import reference

    return Dispatcher([reference()])


class CompiledGraph:
    """A graph ready to run: call it with the method's arguments (already checked) to get its outputs.

    Every operator must be declared (Module checks the whole program first, with one error for all); `dispatcher`
    picks each node's backend (default: the NumPy reference alone). `state` is the dict that the graph's
    ptlite::module_state nodes stand for (Module passes its own, shared by its methods; by default a new one)."""

    def __init__(self, graph: Graph, program: Program, instrument: Instrument | None = None,
                 state: dict[str, Any] | None = None, dispatcher: Dispatcher | None = None) -> None:
        dispatcher = dispatcher or reference_dispatcher()
        compiler = _Compiler(program, dispatcher, instrument, state)
        compiler.method_inputs = {v.id: v.name or f"#{i}" for i, v in enumerate(graph.inputs)}
        self.input_slots = [compiler.slot(v) for v in graph.inputs]
        delegates: list[Delegate] = []
        if any(type(b).delegates is not Backend.delegates for b in dispatcher.backends):
            kernels = {id(n): compiler.kernel_or_none(n) for n in graph.nodes if not n.blocks and not is_template(n)}
            delegates = dispatcher.delegates(graph, program, kernels)
            claimed = {id(n) for d in delegates for n in d.nodes}
            compiler.placed = [p for p in compiler.placed if id(p[0]) not in claimed]
        steps = compiler.block_steps(graph, delegates)  # a node neither a kernel nor a delegate takes raises here
        self.steps = [step for step, _ in steps]
        self.nodes = [node for _, node in steps]  # the top-level node each step runs (or a delegate's stand-in)
        self.slots = compiler.slots  # value id -> register
        self.output_slots = [compiler.slot(v) for v in graph.outputs]
        self.releases = _releases(self.nodes, compiler.slots, set(self.output_slots) | set(compiler.constants))
        self.template: list[Any] = [None] * len(compiler.slots)
        for slot, value in compiler.constants.items():
            self.template[slot] = value
        self._graph, self._placed = graph, compiler.placed
        self.arena = _arena(graph, program, compiler, steps, dispatcher, delegates)  # None: plain steps only

    @property
    def runs_on(self) -> str | None:
        """The backend running every node of the method, or None when several do (or a delegate does)."""
        names = {placed[1] for placed in self._placed}
        if len(names) > 1 or any(placed[2] for placed in self._placed):
            return None
        return next(iter(names), REFERENCE)

    def runs_on_maker_of_plans(self, planner: str) -> bool:
        """Whether a memory plan `planner` makes holds for this method as compiled: every node runs on that backend
        or on the reference (for what it declines), none in a delegate."""
        return not any(placed[2] for placed in self._placed) \
            and all(placed[1] in (planner, REFERENCE) for placed in self._placed)

    @property
    def placements(self) -> list[Placement]:
        """Where each operator node runs, in the method's order (made when asked: a load need not make an object
        per node)."""
        placed = {id(p[0]): p for p in self._placed}
        return [Placement(*placed[id(node)]) for node in self._graph.walk() if id(node) in placed]

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
        guard = current()
        if guard is None or guard.limits.max_seconds is None:
            for step, dead in zip(steps, self.releases):
                step(env)
                for slot in dead:
                    env[slot] = None
            return
        deadline = guard.deadline  # the call's time limit, checked after each top-level step
        for step, dead, node in zip(steps, self.releases, self.nodes):
            step(env)
            for slot in dead:
                env[slot] = None
            if perf_counter() > deadline:
                guard.check_time(node)

    def intermediates(self, *args: Any) -> dict[str, Any]:
        """Every named value after a run, by name (values inside loops hold their last iteration)."""
        _, env = self.run(args, keep=True)
        slots = self.slots
        return {v.name: env[slots[v.id]] for v in all_values(self._graph) if v.name and v.id in slots}


def _arena(graph: Graph, program: Program, compiler: _Compiler, steps: list[tuple[Step, Node]],
           dispatcher: Dispatcher, delegates: list[Delegate]) -> Arena | None:
    """The method's memory plan at run time, allocated by the backend that made the plan (the one the program was
    lowered for, or the reference), or None: no plan, or a node running elsewhere. A plan reuses a value's memory
    once its last reader has run, by the aliasing of the kernels it was made with (which results are views of which
    arguments): its maker's, and the reference's for the nodes its maker declined (`runner`). Another backend's
    kernel, or a delegate, may alias otherwise, so the plan holds only when every node runs on those two."""
    planner = program.lowered_for or REFERENCE
    backend = next((b for b in dispatcher.backends if b.name == planner), None)
    if backend is None or delegates or any(placed[1] not in (planner, REFERENCE) for placed in compiler.placed):
        return None
    return Arena.build(graph, program, compiler, steps, backend.allocate)


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
