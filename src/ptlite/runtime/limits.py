"""Run-time limits of a loaded module: how much NumPy memory one call may hold, how many loop iterations it may
run, how long it may take. A file decides sizes and trip counts, so a hostile or broken one could otherwise make a
call allocate until the device kills the process, or never return.

- Memory: while a call runs, its NumPy allocations are charged to a budget (ptlite.runtime._budget, built at install)
  that refuses an allocation taking the call's live bytes past `max_bytes` before it happens; the memory plan's
  arena, which lives across calls, is checked against the same cap at load. Without the compiled budget (no C
  compiler at install) memory is not capped: `describe` says so.
- Iterations: every prim::Loop iteration of a call is counted, all loops together.
- Time: checked between top-level nodes and between loop iterations (a single kernel is not interrupted).

Exceeding one raises LimitError naming the node, the limit and the `Limits` field that raises it.
"""

from __future__ import annotations

import math
import numbers
import threading
import time
from dataclasses import dataclass
from typing import Any

from ptlite.errors import LimitError
from ptlite.ir.graph import Node

from .dispatch import where

try:
    from ._budget import Budget
except ImportError:  # not built (no compiler at install): memory is not capped
    Budget = None  # type: ignore[assignment,misc]

GIB = 1 << 30
MAX_INT = 1 << 62


@dataclass(frozen=True)
class Limits:
    """Bounds on one call of a loaded module (`ptlite.load(path, limits=Limits(...))`); None lifts one.

    max_bytes: NumPy memory one call may hold at once (bytes; its intermediates and outputs), checked before each
        allocation; the memory plan's arena is checked against it at load.
    max_iterations: loop iterations one call may run, all loops together.
    max_seconds: wall time of one call, checked between nodes and loop iterations.

    The defaults are far above what a real model needs (the zoo's largest call holds under 0.5 GiB and runs no loop
    past a few thousand iterations) and below what would end a phone's process."""

    max_bytes: int | None = 4 * GIB
    max_iterations: int | None = 10_000_000
    max_seconds: float | None = 600.0

    def __post_init__(self) -> None:
        for name in ("max_bytes", "max_iterations"):
            value = getattr(self, name)
            if value is not None:
                if not isinstance(value, numbers.Integral) or isinstance(value, bool) or not 0 < value <= MAX_INT:
                    raise ValueError(f"Limits.{name} must be a positive int (at most 2**62) or None, got {value!r}")
                object.__setattr__(self, name, int(value))
        s = self.max_seconds
        if s is not None:
            if not isinstance(s, numbers.Real) or isinstance(s, bool) or not 0 < s < math.inf:
                raise ValueError(f"Limits.max_seconds must be a positive, finite number or None, got {s!r}")
            object.__setattr__(self, "max_seconds", float(s))

    @classmethod
    def none(cls) -> Limits:
        """No limit at all (trusted files only)."""
        return cls(None, None, None)

    @property
    def memory_enforced(self) -> bool:
        """Whether max_bytes is checked here (the compiled budget is built)."""
        return self.max_bytes is not None and Budget is not None

    def describe(self) -> list[tuple[str, str]]:
        """(limit, value) rows, as `ptlite inspect` prints them."""
        memory = "none" if self.max_bytes is None else format_bytes(self.max_bytes) + (
            "" if Budget is not None else " (not enforced: ptlite.runtime._budget was not built)")
        return [("memory per call", memory),
                ("loop iterations per call", "none" if self.max_iterations is None else f"{self.max_iterations:,}"),
                ("time per call", "none" if self.max_seconds is None else f"{self.max_seconds:g} s")]


DEFAULT = Limits()


def format_bytes(n: int) -> str:
    for unit, size in (("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


_local = threading.local()

_HOW = ("load with ptlite.load(path, limits=ptlite.Limits({field}=...)) to allow more, if the file is trusted "
        "(ptlite run: --no-limits)")


class CallGuard:
    """One call's enforcement of a module's Limits: `with CallGuard(limits):` around the call. While entered it is
    this thread's `current()`, which loops and the interpreter's error handling consult."""

    __slots__ = ("limits", "deadline", "iterations", "budget", "outer")

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.iterations = 0
        self.deadline = math.inf
        self.budget = Budget(limits.max_bytes) if limits.max_bytes is not None and Budget is not None else None
        self.outer: CallGuard | None = None

    def __enter__(self) -> CallGuard:
        if self.limits.max_seconds is not None:
            self.deadline = time.perf_counter() + self.limits.max_seconds
        if self.budget is not None:
            self.budget.__enter__()
        self.outer = getattr(_local, "guard", None)
        _local.guard = self
        return self

    def __exit__(self, *exc: Any) -> None:
        _local.guard = self.outer
        if self.budget is not None:
            self.budget.__exit__(None, None, None)

    def check_time(self, node: Node) -> None:
        """Raise LimitError if the call is past its deadline (`node`: the one that just ran)."""
        if time.perf_counter() > self.deadline:
            raise LimitError(f"{where(node)}: the call has run past its time limit of {self.limits.max_seconds:g} s "
                             f"(Limits.max_seconds); " + _HOW.format(field="max_seconds"))

    def iteration(self, node: Node) -> None:
        """Count one iteration of the loop `node`, and check the time."""
        self.iterations += 1
        if self.limits.max_iterations is not None and self.iterations > self.limits.max_iterations:
            raise LimitError(f"{where(node)}: the call has run {self.limits.max_iterations:,} loop iterations, its "
                             f"limit (Limits.max_iterations); " + _HOW.format(field="max_iterations"))
        if time.perf_counter() > self.deadline:
            self.check_time(node)

    def refused(self, node: Node) -> LimitError | None:
        """The LimitError for a MemoryError the budget caused (it refused an allocation in this call), else None."""
        budget = self.budget
        if budget is None or not budget.refusals:
            return None
        return LimitError(f"{where(node)} needed {format_bytes(budget.refused)} more while the call held "
                          f"{format_bytes(budget.held)}: past its memory limit of {format_bytes(budget.cap)} "
                          f"(Limits.max_bytes); " + _HOW.format(field="max_bytes"))


def current() -> CallGuard | None:
    """The guard of the call running in this thread, if any."""
    return getattr(_local, "guard", None)


def check_arena(nbytes: int, limits: Limits, where: str) -> None:
    """Refuse a memory plan whose arena alone is past the memory limit (at load, before allocating it)."""
    if limits.max_bytes is not None and nbytes > limits.max_bytes:
        raise LimitError(f"{where}: its memory plan's arena of {format_bytes(nbytes)} is past the memory limit of "
                         f"{format_bytes(limits.max_bytes)} (Limits.max_bytes); " + _HOW.format(field="max_bytes"))
