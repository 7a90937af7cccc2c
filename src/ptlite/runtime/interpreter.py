"""Runs a graph: compiled once into a list of steps over a flat register file, then executed per call.

Each value of the graph gets a register (an index into a list). Constants are written into a template register
file once; a call copies the template, stores the arguments and runs the steps. A step is a closure that calls
one kernel, or runs a nested block for prim::If / prim::Loop with TorchScript's semantics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ptlite.errors import ExecutionError, PtliteError, UnsupportedOperatorError
from ptlite.ir import registry
from ptlite.ir.graph import Block, Graph, Node, Program, Value

Step = Callable[[list], None]
# Wraps the step of one operator node (for profiling): instrument(step, node) -> step.
Instrument = Callable[[Step, Node], Step]


class _Compiler:
    def __init__(self, program: Program, instrument: Instrument | None = None) -> None:
        self.program = program
        self.instrument = instrument
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
        if node.op == "prim::If":
            return self.if_step(node)
        if node.op == "prim::Loop":
            return self.loop_step(node)
        return self.call_step(node)

    def call_step(self, node: Node) -> Step:
        op = registry.get(node.op)
        impl = op.impl
        ins = [self.slot(v) for v in node.inputs]
        outs = [self.slot(v) for v in node.outputs]
        if len(outs) == 1 and node.op not in _UNPACKING_OPS:
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
            if env[cond]:
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
            max_trip, keep_going = env[trip], env[cond]
            values = [env[i] for i in carried_in]
            i = 0
            while keep_going and i < max_trip:
                env[iter_slot] = i
                for p, v in zip(body_params, values):
                    env[p] = v
                for s in body_steps:
                    s(env)
                keep_going = env[body_cond]
                values = [env[r] for r in body_results]
                i += 1
            for o, v in zip(outs, values):
                env[o] = v
        return step


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
            where = f" (from {node.source})" if node.source else ""
            raise ExecutionError(f"{node.op}{where} failed: {type(exc).__name__}: {exc}") from exc
    return located


class CompiledGraph:
    """A graph ready to run: call it with the method's arguments (already checked) to get its outputs.

    Every operator must be in the table (Module checks the whole program first, with one error for all)."""

    def __init__(self, graph: Graph, program: Program, instrument: Instrument | None = None) -> None:
        compiler = _Compiler(program, instrument)
        self.input_slots = [compiler.slot(v) for v in graph.inputs]
        steps = compiler.block_steps(graph)
        self.steps = [step for step, _ in steps]
        self.output_slots = [compiler.slot(v) for v in graph.outputs]
        self.releases = _releases([node for _, node in steps], compiler.slots,
                                  set(self.output_slots) | set(compiler.constants))
        self.value_names = {slot: v.name for v in _all_values(graph) if v.name
                            for slot in [compiler.slots.get(v.id)] if slot is not None}
        self.template: list[Any] = [None] * len(compiler.slots)
        for slot, value in compiler.constants.items():
            self.template[slot] = value

    def __call__(self, *args: Any) -> list[Any]:
        return self.run(args)[0]

    def run(self, args: tuple[Any, ...], keep: bool = False) -> tuple[list[Any], list[Any]]:
        """Outputs and the register file. Each value is dropped after its last use, so that its memory can be
        reused by later steps (peak memory is what is live at once, not every intermediate); keep=True keeps
        every value (for debugging: see `intermediates`)."""
        env = self.template.copy()
        for slot, value in zip(self.input_slots, args):
            env[slot] = value
        if keep:
            for step in self.steps:
                step(env)
        else:
            for step, dead in zip(self.steps, self.releases):
                step(env)
                for slot in dead:
                    env[slot] = None
        return [env[o] for o in self.output_slots], env

    def intermediates(self, *args: Any) -> dict[str, Any]:
        """Every named value after a run, by name (values inside loops hold their last iteration)."""
        _, env = self.run(args, keep=True)
        return {name: env[slot] for slot, name in self.value_names.items()}


def _releases(nodes: list[Node], slots: dict[int, int], keep: set[int]) -> list[tuple[int, ...]]:
    """For each top-level step, the registers to clear after it: values (inputs and intermediates, not outputs or
    constants) whose last reader it is, reads inside its nested blocks included, and values nothing reads."""
    last: dict[int, int] = {}
    for i, node in enumerate(nodes):
        for v in _reads(node):
            last[slots[v.id]] = i
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


def _reads(node: Node):
    """Values a node reads: its inputs and, inside its blocks, every node input and block output."""
    yield from node.inputs
    for block in node.blocks:
        for inner in block.nodes:
            yield from _reads(inner)
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
            if registry.lookup(node.op) is None:
                missing.setdefault(node.op, []).append(node.source or f"method {graph.name}")
    return missing


def check_operators(program: Program, graphs: list[Graph] | None = None) -> None:
    """Raise one UnsupportedOperatorError listing every operator the table lacks (default: in every method)."""
    missing = missing_operators(program, graphs)
    if missing:
        raise UnsupportedOperatorError(_missing_message(missing))


def _missing_message(missing: dict[str, list[str]]) -> str:
    lines = [f"  {op}  (used at {', '.join(sorted(set(where))[:5])})" for op, where in sorted(missing.items())]
    return (f"the program uses {len(missing)} operator(s) that this ptlite cannot run:\n" + "\n".join(lines)
            + "\nUpgrade ptlite, or change the model to avoid these operators.")
