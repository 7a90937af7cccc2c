"""The memory plan as a program stores it: where each planned value of a method lives in one preallocated arena.

The MEMORY_PLAN pass (`ptlite.backends.numpy.lower.plan_memory`) writes it and the runtime reads it
(`ptlite.runtime.arena`). Two parts:

- `node.attrs["out"]` on a top-level node whose operator has an out variant: the buffer its result goes to,
  {"offset": bytes into the arena, "shape": [...], "dtype": "float32", "channels_last": bool}
  (channels_last: the (N, C, H, W) value is stored N, H, W, C, as the kernel would have returned it);
- `program.metadata["memory_plan"][method]`: {"arena_bytes", "intermediate_bytes" (every fresh intermediate of
  a run added up: what no reuse would need), "planned_bytes" (the planned values added up), "input_shapes",
  "input_dtypes" (the calls the plan is for), "inputs" (per input, a buffer entry as above or None)}.

A plan read from a file is untrusted: `plan_problems` checks every entry against its arena (the verifier, and so
the reader, runs it). Offsets are multiples of ALIGN.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .dtypes import SUPPORTED_NUMPY
from .graph import Graph, Node, Program

OUT_ATTR = "out"
METADATA_KEY = "memory_plan"
ALIGN = 64
MAX_RANK = 64
_ITEMSIZE = {name: np.dtype(name).itemsize for name in SUPPORTED_NUMPY}


def aligned_empty(count: int, dtype: Any) -> np.ndarray:
    """A new 1-D array of `count` elements whose data starts on an ALIGN-byte boundary. NumPy's own start 16 bytes
    past one, so that every vector load of 64 bytes from an aligned offset would straddle two cache lines (the
    native depthwise convolutions ran 1.3x slower with AVX-512 for it)."""
    dtype = np.dtype(dtype)
    nbytes = max(count, 1) * dtype.itemsize
    raw = np.empty(nbytes + ALIGN, dtype=np.uint8)
    start = -raw.__array_interface__["data"][0] % ALIGN  # (raw.ctypes: 20 us more a call where caches are cold)
    return raw[start:start + nbytes].view(dtype)[:count]


def align(nbytes: int) -> int:
    """nbytes rounded up to a multiple of ALIGN."""
    return -(-nbytes // ALIGN) * ALIGN


def entry(offset: int, shape: tuple[int, ...], dtype: str, channels_last: bool = False) -> dict[str, Any]:
    """A buffer entry as stored (node attrs and the plan's inputs)."""
    return {"offset": offset, "shape": list(shape), "dtype": dtype, "channels_last": channels_last}


def entry_nbytes(buffer: dict[str, Any]) -> int:
    """Size in bytes of a (checked) buffer entry."""
    return math.prod(buffer["shape"]) * _ITEMSIZE[buffer["dtype"]]


def _check_entry(buffer: Any, arena_bytes: int) -> tuple[str | None, int]:
    """(what is wrong with a buffer entry from a file or None, the entry's end in the arena). A sound entry has a
    non-negative aligned int offset, a shape of non-negative ints, a known dtype, a bool channels_last (4-D only),
    and offset + size inside the arena. Messages are made only for problems (loading stays cheap)."""
    if type(buffer) is not dict:
        return "must be an object", 0
    offset, shape, dtype = buffer.get("offset"), buffer.get("shape"), buffer.get("dtype")
    if type(offset) is not int or offset < 0 or offset % ALIGN:
        return f"has an invalid offset {str(offset)[:40]} (a non-negative multiple of {ALIGN} is needed)", 0
    if type(shape) is not list or len(shape) > MAX_RANK:
        return f"has an invalid shape {str(shape)[:60]}", 0
    count = 1
    for d in shape:
        if type(d) is not int or d < 0:
            return f"has an invalid shape {str(shape)[:60]}", 0
        count *= d
    itemsize = _ITEMSIZE.get(dtype) if type(dtype) is str else None
    if itemsize is None:
        return f"has an unknown dtype {str(dtype)[:40]}", 0
    channels_last = buffer.get("channels_last", False)
    if channels_last is not False and (channels_last is not True or len(shape) != 4):
        return f"has an invalid channels_last {str(channels_last)[:20]} (a bool, true only for 4-D shapes)", 0
    end = offset + count * itemsize
    if end > arena_bytes:
        return f"(offset {offset}, {count * itemsize} bytes) lies outside the {arena_bytes}-byte arena", 0
    return None, end


def method_plan(program: Program, method: str) -> dict[str, Any] | None:
    """The stored plan of one method (unchecked), or None."""
    plans = program.metadata.get(METADATA_KEY)
    plan = plans.get(method) if isinstance(plans, dict) else None
    return plan if isinstance(plan, dict) else None


def planned_nodes(graph: Graph) -> list[Node]:
    """The top-level nodes that carry a planned buffer (the runtime ignores the attribute on nested nodes)."""
    return [node for node in graph.nodes if OUT_ATTR in node.attrs]


def _where(node: Node) -> str:
    outputs = ", ".join(repr(v) for v in node.outputs)
    return f"{node.op}{f' ({node.source})' if node.source else ''} -> {outputs}"


def plan_problems(graph: Graph, program: Program) -> list[str]:
    """Problems with a method's memory plan (empty if it has none, or a sound one)."""
    plans = program.metadata.get(METADATA_KEY)
    if plans is not None and not isinstance(plans, dict):
        return [f"metadata '{METADATA_KEY}' must be an object"]
    nodes = planned_nodes(graph)
    plan = method_plan(program, graph.name)
    if plan is None:
        if isinstance(plans, dict) and graph.name in plans:
            return [f"memory plan of {graph.name} must be an object"]
        return [f"{_where(n)}: has a planned buffer but the method has no memory plan" for n in nodes]
    arena = plan.get("arena_bytes")
    if type(arena) is not int or arena < 0:
        return [f"memory plan: invalid arena_bytes {str(arena)[:40]}"]
    problems = _plan_fields(plan, len(graph.inputs))
    inputs = plan.get("inputs") if type(plan.get("inputs")) is list else []
    owners: list[int | Node] = [i for i, b in enumerate(inputs) if b is not None] + nodes
    buffers = [b for b in inputs if b is not None] + [node.attrs[OUT_ATTR] for node in nodes]
    last_end = 0
    for owner, buffer in zip(owners, buffers):
        problem, end = _check_entry(buffer, arena)
        if problem:
            where = f"memory plan: input {owner}" if isinstance(owner, int) else _where(owner)
            problems.append(f"{where}: planned buffer {problem}")
        last_end = max(last_end, end)
    if not problems and arena > align(last_end):
        problems.append(f"memory plan: arena_bytes {arena} is more than its buffers need")
    return problems


def _plan_fields(plan: dict[str, Any], inputs: int) -> list[str]:
    problems = []
    for key in ("intermediate_bytes", "planned_bytes"):
        if type(plan.get(key)) is not int or plan[key] < 0:
            problems.append(f"memory plan: invalid {key} {str(plan.get(key))[:40]}")
    shapes, dtypes, buffers = plan.get("input_shapes"), plan.get("input_dtypes"), plan.get("inputs")
    if not all(type(x) is list and len(x) == inputs for x in (shapes, dtypes, buffers)):
        return [*problems, f"memory plan: input_shapes, input_dtypes and inputs must be lists of {inputs} entries"]
    for shape in shapes:
        if type(shape) is not list or len(shape) > MAX_RANK or not all(type(d) is int and d >= 0 for d in shape):
            problems.append(f"memory plan: invalid input shape {str(shape)[:60]}")
    for dtype in dtypes:
        if type(dtype) is not str or dtype not in SUPPORTED_NUMPY:
            problems.append(f"memory plan: unknown input dtype {str(dtype)[:40]}")
    return problems


def drop_memory_plan(program: Program, method: str | None = None) -> None:
    """Remove the plan of one method (default: of every method): node attributes and metadata."""
    for name, graph in program.methods.items():
        if method is None or name == method:
            for node in graph.walk():
                node.attrs.pop(OUT_ATTR, None)
    plans = program.metadata.get(METADATA_KEY)
    if isinstance(plans, dict) and method is not None:
        plans.pop(method, None)
    if method is None or not plans:
        program.metadata.pop(METADATA_KEY, None)


@dataclass(frozen=True)
class MemoryPlanSummary:
    """What a method's memory plan does: `planned_values` values (intermediates with an out-variant kernel, and the
    inputs) share one arena of `arena_bytes` instead of `planned_bytes`; `intermediate_bytes` is what every fresh
    intermediate of a run adds up to (without any reuse)."""

    arena_bytes: int
    planned_bytes: int
    intermediate_bytes: int
    planned_values: int

    @property
    def arena_ratio(self) -> float:
        """arena_bytes / intermediate_bytes (0 when there are no intermediates)."""
        return self.arena_bytes / self.intermediate_bytes if self.intermediate_bytes else 0.0

    def describe(self) -> str:
        mib = 1 << 20
        return (f"arena {self.arena_bytes / mib:.2f} MiB for {self.planned_values} values "
                f"({self.planned_bytes / mib:.2f} MiB planned); intermediates {self.intermediate_bytes / mib:.2f} "
                f"MiB without reuse (arena = {100 * self.arena_ratio:.0f}%)")


def summary(program: Program, method: str = "forward") -> MemoryPlanSummary | None:
    """The summary of a method's memory plan, or None when it has none (or a malformed one)."""
    graph = program.methods.get(method)
    plan = method_plan(program, method)
    if graph is None or plan is None or plan_problems(graph, program):
        return None
    values = len(planned_nodes(graph)) + sum(b is not None for b in plan["inputs"])
    return MemoryPlanSummary(plan["arena_bytes"], plan["planned_bytes"], plan["intermediate_bytes"], values)
