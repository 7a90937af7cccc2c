"""Shapes seen in one run of a method on zeros: hints for choices that only affect speed.

A method whose inputs are all tensors of static shape and dtype (a capture with fixed example shapes, a .ptl file
converted with --input-shape) is run once on zero inputs, and the shape of every tensor a node returns is noted
(inside loops, only where every iteration agrees). These are the shapes of that run: a shape may depend on the
data (`x[x > 0]`), so a pass may use them to pick the faster of two kernels that are both correct for every
shape (Winograd or im2col), never to change what is computed (that needs TensorFacts).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ptlite.backends.base import Runner, Step
from ptlite.ir.graph import Graph, Node, Program

from .plan_memory import plannable_specs

_CONFLICT = object()


def observed_shapes(graph: Graph, program: Program, run: Runner) -> dict[int, tuple[int, ...]]:
    """Value id -> shape of the array it held in a run (compiled by `run`) on zeros of the input specs; {} when the
    inputs are not all static tensors or the run fails (a method that checks its data, for example)."""
    specs = plannable_specs(graph)
    if specs is None:
        return {}
    seen: dict[int, Any] = {}
    slots: dict[int, int] = {}

    def instrument(step: Step, node: Node) -> Step:
        def observed(env: list) -> None:
            step(env)
            for v in node.outputs:
                value = env[slots[v.id]] if v.id in slots else None
                if isinstance(value, np.ndarray):
                    shape = tuple(value.shape)
                    seen[v.id] = shape if seen.get(v.id, shape) == shape else _CONFLICT
        return observed

    try:
        compiled = run(graph, program, instrument)
        slots.update(compiled.slots)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compiled(*(np.zeros(spec.shape, dtype=spec.dtype) for spec in specs))
    except Exception:
        return {}
    return {vid: shape for vid, shape in seen.items() if shape is not _CONFLICT}
