"""Winograd within an error budget: a lowering whose Winograd layers take the program's outputs too far from exact
arithmetic is done again with the earliest of them left on im2col, as few as bring it back within the budget.

Winograd's transforms round more than im2col's sums (docs/decisions.md, "Winograd"), and a deep network carries
every layer's rounding to its outputs: the squared errors of the layers add up, and the earliest layers (fewest
channels, most layers after them) weigh most. So after lowering, each method whose inputs are static floating-point
tensors is run on one random N(0, 1) input three ways: the unlowered program in float64 (its weights widened: the
exact answer), the unlowered program in float32 (what PyTorch's own float32 result is as far from) and the lowered
one. The distance is the root mean square of the difference over all floating-point outputs, relative to the
exact answer's. If the lowered program is more than RATIO times farther than the unlowered one, the Winograd
layers are kept to what the budget holds: the error Winograd may add, RATIO^2 - 1 times the unlowered program's
squared distance, on top of what the lowering without Winograd has; the smallest k for which leaving the first k
Winograd layers (in execution order) on im2col meets it is found by bisection. The layers left out are named in
metadata[EXACT_KEY], which the Winograd passes read (a first call's shape-dependent lowering honours it too).

Not measured, so the thresholds alone decide: methods without static floating-point inputs (their shapes are
known only at the first call), and programs whose float64 run does not stay in float64 (a cast in the graph).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import numpy as np

from ptlite.backends.base import Runner
from ptlite.ir.copy import copy_program
from ptlite.ir.graph import Program
from ptlite.ops import CONV2D_WINOGRAD, CONV2D_WINOGRAD_2X2, CONV2D_WINOGRAD_V2
from ptlite.passes.base import blocks

from .plan_memory import plannable_specs

RATIO = 1.2  # the lowered program may be this many times farther from float64 than the unlowered one
FLOOR = 1e-6  # ...or this far (relative root mean square, ~8 float32 epsilons), whichever is larger
EXACT_KEY = "exact_convolutions"  # metadata: the weights of the 3x3 convolutions kept off Winograd
WINOGRAD_OPS = (CONV2D_WINOGRAD, CONV2D_WINOGRAD_V2, CONV2D_WINOGRAD_2X2)
_FLOATS = ("float16", "float32", "float64")

T = TypeVar("T")


def within_budget(program: Program, run: Runner | None, blocklist: frozenset[str],
                  apply: Callable[[Program], T]) -> T:
    """Apply `apply` (a lowering that may choose Winograd, honouring metadata[EXACT_KEY]) to `program` in place,
    then keep its Winograd layers within the budget (module docstring): if they take the outputs too far, `program`
    becomes the result of `apply` on the program as it was, with the fewest earliest layers named in EXACT_KEY that
    bring it back. What `apply` returned for the program kept."""
    if "WINOGRAD" in blocklist or run is None:
        return apply(program)
    before = copy_program(program)
    result = apply(program)
    # the layers this lowering made Winograd (a first call's: not those an earlier lowering chose and measured)
    earlier = set(winograd_layers(before)) | exact_convolutions(before)
    layers = [name for name in winograd_layers(program) if name not in earlier]
    if not layers:
        return result
    probe = _Probe.make(before, run)
    if probe is None:
        return result
    error = probe.distance(program)
    if error is None or error <= max(RATIO * probe.baseline, FLOOR):
        return result

    def without_first(k: int) -> tuple[Program, T]:
        trial = copy_program(before)
        trial.metadata[EXACT_KEY] = sorted(exact_convolutions(before) | set(layers[:k]))
        return trial, apply(trial)

    trials = {len(layers): without_first(len(layers))}
    without = probe.distance(trials[len(layers)][0])
    if without is None:
        return result
    allowed = max(without ** 2 + (RATIO ** 2 - 1) * probe.baseline ** 2, FLOOR ** 2)
    lo, hi = 1, len(layers)  # the answer lies in [lo, hi]; hi always meets the budget
    while lo < hi:
        mid = (lo + hi) // 2
        trials[mid] = without_first(mid)
        error = probe.distance(trials[mid][0])
        if error is not None and error ** 2 <= allowed:
            hi = mid
        else:
            lo = mid + 1
    chosen, result = trials[lo]
    _adopt(program, chosen)
    return result


def _adopt(program: Program, chosen: Program) -> None:
    """Make `program` hold `chosen`'s methods, weights and metadata, keeping its dictionaries (a Module that is
    specializing a method holds them)."""
    program.methods.update(chosen.methods)
    program.weights.clear()
    program.weights.update(chosen.weights)
    program.metadata.clear()
    program.metadata.update(chosen.metadata)


def exact_convolutions(program: Program) -> frozenset[str]:
    """The weights (their names before prepacking) of the convolutions the budget keeps off Winograd."""
    names = program.metadata.get(EXACT_KEY)
    return frozenset(n for n in names if isinstance(n, str)) if isinstance(names, list) else frozenset()


def winograd_layers(program: Program) -> list[str]:
    """The weights of the program's Winograd convolutions, by their names before prepacking, in execution order
    (methods in order, each walked outer block first)."""
    seen: dict[str, None] = {}
    for graph in program.methods.values():
        for block in blocks(graph):
            for node in block.nodes:
                if node.op in WINOGRAD_OPS and node.inputs[1].node is not None:
                    name = node.inputs[1].node.attrs.get("weight", "")
                    seen.setdefault(base_weight_name(name), None)
    return list(seen)


def base_weight_name(name: str) -> str:
    """A convolution weight's name with the suffix of the layout a lowering gave it removed."""
    for suffix in (".winograd_2x2", ".winograd", ".panels", ".packed"):
        name = name.removesuffix(suffix)
    return name


class _Probe:
    """One random input per measurable method, the exact (float64) outputs, and the unlowered program's distance."""

    def __init__(self, run: Runner, inputs: dict[str, list[np.ndarray]], exact: dict[str, list[np.ndarray]],
                 baseline: float) -> None:
        self.run, self.inputs, self.exact, self.baseline = run, inputs, exact, baseline

    @classmethod
    def make(cls, unlowered: Program, run: Runner) -> _Probe | None:
        rng = np.random.default_rng(0)
        inputs: dict[str, list[np.ndarray]] = {}
        for name, graph in unlowered.methods.items():
            specs = plannable_specs(graph)
            if specs and all(spec.dtype in _FLOATS for spec in specs):
                inputs[name] = [rng.standard_normal(spec.shape).astype(spec.dtype) for spec in specs]
        if not inputs:
            return None
        wide = _widened(unlowered)
        exact = {}
        for name, args in inputs.items():
            outputs = _outputs(run, wide, name, [a.astype(np.float64) for a in args])
            if outputs is None or not outputs or any(o.dtype != np.float64 for o in outputs):
                return None  # not runnable, or a cast in the graph narrowed it: no exact answer to measure by
            exact[name] = outputs
        probe = cls(run, inputs, exact, 0.0)
        baseline = probe.distance(unlowered)
        if baseline is None or baseline == 0.0:
            return None
        probe.baseline = baseline
        return probe

    def distance(self, program: Program) -> float | None:
        """The root mean square of `program`'s difference from the exact outputs, relative to theirs; None when a
        run fails or its outputs do not match the exact ones in number and shape."""
        error = scale = 0.0
        for name, args in self.inputs.items():
            outputs = _outputs(self.run, program, name, args)
            exact = self.exact[name]
            if outputs is None or len(outputs) != len(exact) or any(o.shape != e.shape for o, e in zip(outputs, exact)):
                return None
            for o, e in zip(outputs, exact):
                error += float(np.sum((o.astype(np.float64) - e) ** 2))
                scale += float(np.sum(e ** 2))
        if not (np.isfinite(error) and np.isfinite(scale)) or scale == 0.0:
            return None
        return (error / scale) ** 0.5


def _widened(program: Program) -> Program:
    """A copy of `program` with its float32 weights in float64."""
    wide = copy_program(program)
    wide.weights = {name: w.astype(np.float64) if w.dtype == np.float32 else w for name, w in wide.weights.items()}
    return wide


def _outputs(run: Runner, program: Program, method: str, args: list[np.ndarray]) -> list[np.ndarray] | None:
    """The floating-point arrays among a method's outputs (nested in lists, tuples and dicts), or None if it fails."""
    try:
        compiled = run(program.methods[method], program)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = compiled(*args)
    except Exception:
        return None
    return [a for a in _leaves(result) if a.dtype.kind == "f"]


def _leaves(value: Any) -> Iterator[np.ndarray]:
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
