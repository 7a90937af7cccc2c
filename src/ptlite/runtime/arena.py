"""A method's memory plan at run time: the arena, the views the plan puts values in, and the steps whose kernels
write into them. Made from an untrusted plan: every entry is checked before a view is made."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from ptlite import ops
from ptlite.errors import FormatError
from ptlite.ir import memory_plan
from ptlite.ir.graph import Graph, Node, Program

if TYPE_CHECKING:
    from .interpreter import _Compiler

Step = Callable[[list], None]


class Arena:
    """The arena of a compiled method with a memory plan: its buffer, the planned steps and the inputs' views."""

    def __init__(self, plan: dict[str, Any], buffer: np.ndarray, steps: list[Step]) -> None:
        self.buffer = buffer
        self.steps = steps  # one per top-level step, as CompiledGraph.steps
        self.input_shapes = [tuple(shape) for shape in plan["input_shapes"]]
        self.input_dtypes = [np.dtype(dtype) for dtype in plan["input_dtypes"]]
        self.inputs = [None if b is None else view(buffer, b) for b in plan["inputs"]]  # see Module.input_buffer
        self.lock = threading.Lock()  # held while a call runs `steps`

    @classmethod
    def build(cls, graph: Graph, program: Program, compiler: _Compiler,
              steps: list[tuple[Step, Node]], allocate: Callable[[int], Any] | None = None) -> Arena | None:
        """The arena of the method's plan (None without one), its planned steps made by the interpreter's compiler;
        `allocate` (the planning backend's) makes the buffer (default: NumPy's)."""
        plan = memory_plan.method_plan(program, graph.name)
        if plan is None:
            return None
        problems = memory_plan.plan_problems(graph, program)
        if problems:
            raise FormatError(f"method {graph.name}: invalid memory plan:\n  " + "\n  ".join(problems[:20]))
        try:
            buffer = (allocate or _allocate)(plan["arena_bytes"])
        except MemoryError:  # a plan is checked against its own entries only: their sizes come from the file
            raise FormatError(f"method {graph.name}: its memory plan asks for a {plan['arena_bytes']:,}-byte arena, "
                              "more than this machine can allocate; if the file is genuine, convert the model again "
                              "with --blocklist MEMORY_PLAN") from None
        planned_steps = []
        for step, node in steps:
            entry = node.attrs.get(memory_plan.OUT_ATTR)
            op = ops.lookup(node.op) if entry is not None and len(node.outputs) == 1 and not node.blocks else None
            # An entry on a node whose operator or kernel has no out variant (a newer producer's plan, a hostile
            # file's) is left unused: the node allocates its result as usual.
            bound = compiler.kernel(node) if op is not None and op.out else None
            if bound is not None and bound.accepts_out:
                step = compiler.call_step(node, out=view(buffer, entry))
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


def view(buffer: np.ndarray, entry: dict[str, Any]) -> np.ndarray:
    """The array a (checked) plan entry describes inside the arena: C order, or (N, C, H, W) stored as NHWC."""
    shape, dtype, offset = tuple(entry["shape"]), np.dtype(entry["dtype"]), entry["offset"]
    if entry.get("channels_last", False):
        n, c, h, w = shape
        return np.ndarray((n, h, w, c), dtype=dtype, buffer=buffer, offset=offset).transpose(0, 3, 1, 2)
    return np.ndarray(shape, dtype=dtype, buffer=buffer, offset=offset)


def _allocate(nbytes: int) -> np.ndarray:
    return memory_plan.aligned_empty(nbytes, np.uint8)
