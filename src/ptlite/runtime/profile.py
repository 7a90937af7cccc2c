"""Per-operator profile of a loaded program: time per node, per operator type, and the slowest nodes.

Nodes a backend runs together as one delegate (the native executor's regions) are timed inside it where the backend
can (a delegate's NodeTimer): each node gets its own time, and what the delegate spent outside them (taking its
inputs, handing out its outputs) is one more entry, "<delegate> entry and exit".

    prof = profile(module, (x,), runs=20)
    print(prof.format(top=10))
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ptlite.ir.graph import Node

from .interpreter import DelegateStep, Step
from .limits import CallGuard
from .module import Module


@dataclass
class NodeTime:
    """Time spent in one operator node, summed over the profiled runs."""

    op: str
    output: str
    source: str
    backend: str = ""  # the backend whose kernel (or delegate) ran it
    calls: int = 0
    seconds: float = 0.0


@dataclass
class OpTime:
    """Time spent in every node of one operator type."""

    op: str
    nodes: int
    seconds: float
    share: float


@dataclass
class BackendTime:
    """Time spent in the nodes one backend ran."""

    backend: str
    nodes: int
    seconds: float
    share: float


@dataclass
class Profile:
    """Result of `profile`: per-node times over `runs` runs (seconds are totals over all runs)."""

    runs: int
    total_seconds: float  # wall time of the profiled runs, interpreter overhead included
    nodes: list[NodeTime] = field(default_factory=list)

    @property
    def node_seconds(self) -> float:
        return sum(n.seconds for n in self.nodes)

    def by_op(self) -> list[OpTime]:
        """Operator types, most time first; share is of the time inside operators."""
        return [OpTime(*row) for row in self._totals("op")]

    def by_backend(self) -> list[BackendTime]:
        """Backends, most time first; share is of the time inside operators."""
        return [BackendTime(*row) for row in self._totals("backend")]

    def _totals(self, field_name: str) -> list[tuple[str, int, float, float]]:
        """(value, nodes, seconds, share) per distinct value of a NodeTime field, most time first."""
        totals: dict[str, list[float]] = {}
        for n in self.nodes:
            entry = totals.setdefault(getattr(n, field_name), [0, 0.0])
            entry[0] += 1
            entry[1] += n.seconds
        inside = self.node_seconds or 1.0
        rows = [(key, int(count), seconds, seconds / inside) for key, (count, seconds) in totals.items()]
        return sorted(rows, key=lambda row: -row[2])

    def slowest(self, top: int = 10) -> list[NodeTime]:
        return sorted(self.nodes, key=lambda n: -n.seconds)[:top]

    def format(self, top: int = 10) -> str:
        """A text report: per operator type, then the `top` slowest nodes (times per run, in ms)."""
        per_run = 1e3 / max(self.runs, 1)
        lines = [f"per-operator profile over {self.runs} run(s): {self.total_seconds * per_run:.3f} ms per run, "
                 f"{self.node_seconds * per_run:.3f} ms inside operators",
                 f"  {'backend':<40} {'nodes':>5} {'ms/run':>9} {'share':>7}"]
        for b in self.by_backend():
            lines.append(f"  {b.backend:<40} {b.nodes:>5} {b.seconds * per_run:>9.3f} {100 * b.share:>6.1f}%")
        lines.append(f"  {'operator':<40} {'nodes':>5} {'ms/run':>9} {'share':>7}")
        for o in self.by_op():
            lines.append(f"  {o.op:<40} {o.nodes:>5} {o.seconds * per_run:>9.3f} {100 * o.share:>6.1f}%")
        lines.append(f"slowest {top} nodes:")
        lines.append(f"  {'operator':<40} {'ms/run':>9}  {'backend':<8} {'output':<12} source")
        for n in self.slowest(top):
            lines.append(f"  {n.op:<40} {n.seconds * per_run:>9.3f}  {n.backend:<8} {n.output:<12} {n.source}")
        return "\n".join(lines)


def profile(module: Module, args: Sequence[Any], runs: int = 10, warmup: int = 1,
            method: str = "forward") -> Profile:
    """Run `method` of `module` warmup + runs times with a timer around every operator node."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1, got {runs}")
    if method not in module.program.methods:
        raise ValueError(f"the program has no method '{method}'")
    target = module._method(method)
    checked = target.check_args(tuple(args), {})
    with CallGuard(target.limits):  # the module's limits hold here as in a call
        target.prepare(checked)  # the memory plan a first call would make, so that the planned steps are timed
    records: list[NodeTime] = []
    timed_nodes: list[Node] = []

    def instrument(step: Step, node: Node) -> Step:
        record = NodeTime(node.op, node.outputs[0].name if node.outputs else "", node.source or "")
        records.append(record)
        timed_nodes.append(node)
        clock = time.perf_counter

        def timed(env: list) -> None:
            t0 = clock()
            step(env)
            record.seconds += clock() - t0
            record.calls += 1
        return timed

    compiled = target.compile(instrument)
    backend_of = {id(p.node): p.backend for p in compiled.placements}
    backend_of.update((id(node), node.attrs["backend"]) for node in compiled.nodes if "backend" in node.attrs)
    for record, node in zip(records, timed_nodes):
        record.backend = backend_of.get(id(node), "")
    for _ in range(warmup):
        with CallGuard(target.limits):
            compiled(*checked)
    for r in records:
        r.seconds, r.calls = 0.0, 0
    timers = [(r, n.delegate) for r, n in zip(records, timed_nodes)
              if isinstance(n, DelegateStep) and n.delegate.node_timer is not None]
    for _, delegate in timers:
        delegate.node_timer.start()
    try:
        t0 = time.perf_counter()
        for _ in range(runs):
            with CallGuard(target.limits):
                compiled(*checked)
        total = time.perf_counter() - t0
        inside = {id(r): _inside(r, d) for r, d in timers if r.calls}
    finally:
        for _, delegate in timers:
            delegate.node_timer.stop()
    # a method can be compiled twice (with and without its memory plan): keep the steps that ran
    return Profile(runs, total, [n for r in records if r.calls for n in inside.get(id(r), [r])])


def _inside(record: NodeTime, delegate: Any) -> list[NodeTime]:
    """A delegate's record as its nodes' records (their times from its NodeTimer) and one for the rest of its time."""
    seconds = delegate.node_timer.seconds()
    nodes = [NodeTime(n.op, n.outputs[0].name if n.outputs else "", n.source or "", record.backend, record.calls, t)
             for n, t in zip(delegate.nodes, seconds)]
    rest = max(record.seconds - sum(seconds), 0.0)
    nodes.append(NodeTime(f"{delegate.label} entry and exit", record.output, record.source, record.backend,
                          record.calls, rest))
    return nodes
