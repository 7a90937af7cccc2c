"""Running a method on calibration data with observers on some of its values (the NumPy reference runs it: the
float program as captured, so what is observed is what the model computes)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

from ptlite.errors import InputError
from ptlite.ir.graph import Graph, Program
from ptlite.runtime.inputs import check_args
from ptlite.runtime.interpreter import CompiledGraph

from .observers import MinMax

Progress = Callable[[int, int], None]  # (runs done, runs in all)


def samples_of(calibration_data: Any, graph: Graph) -> list[tuple[Any, ...]]:
    """The calibration data as a list of argument tuples: an iterable whose items are each one call's arguments, as
    a tuple (or a list, for a method of several inputs), or for a method of one input that input itself. ValueError
    if it is none of these."""
    if calibration_data is None:
        raise ValueError("int8 static quantization needs calibration data: a list of inputs the model sees in use "
                         "(a few dozen images, say), each one call's arguments")
    if isinstance(calibration_data, np.ndarray) or not isinstance(calibration_data, Iterable) \
            or isinstance(calibration_data, (str, bytes, Mapping)):
        raise ValueError(f"calibration_data must be a list (or other iterable) of inputs, one call's arguments each; "
                         f"got a {type(calibration_data).__name__} (a batch as one array: wrap it in a list, "
                         "[batch])")
    one = len(graph.inputs) == 1
    samples = [tuple(item) if isinstance(item, tuple) or (isinstance(item, list) and not one) else (item,)
               for item in calibration_data]
    if not samples:
        raise ValueError("calibration_data is empty: give at least one input (a few dozen varied ones calibrate "
                         "well)")
    return samples


def calibrate(program: Program, graph: Graph, observers: Mapping[int, MinMax], samples: list[tuple[Any, ...]],
              progress: Progress | None = None) -> None:
    """Run `graph` on every sample, as many times as the observers need passes, feeding each observed value (by
    id: a method input or a node output) to its observer."""
    passes = max((o.passes for o in observers.values()), default=1)
    step = [0]
    sample = [0]
    slots: dict[int, int] = {}

    def instrument(run, node):
        outputs = [v.id for v in node.outputs if v.id in observers]
        if not outputs:
            return run

        def observed(env: list) -> None:
            run(env)
            for vid in outputs:  # the slots are known once the graph is compiled, before it runs
                value = env[slots[vid]]
                if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                    _check_finite(value, f"{node.op}'s result", sample[0], node.source)
                    observers[vid].observe(value, step[0])
        return observed

    compiled = CompiledGraph(graph, program, instrument)
    slots.update(compiled.slots)
    inputs = [(i, observers[v.id]) for i, v in enumerate(graph.inputs) if v.id in observers]
    checked = []
    for n, args in enumerate(samples):
        try:
            checked.append(check_args(graph.input_specs, args, {}, graph.name, lambda: graph.name))
        except InputError as exc:
            raise InputError(f"calibration sample {n}: {exc}") from None
    total = passes * len(checked)
    for step[0] in range(passes):
        for n, args in enumerate(checked):
            sample[0] = n
            for i, observer in inputs:
                if isinstance(args[i], np.ndarray) and args[i].dtype.kind == "f":
                    _check_finite(args[i], f"input '{graph.input_specs[i].name}'", n, "")
                    observer.observe(args[i], step[0])
            compiled(*args)
            if progress is not None:
                progress(step[0] * len(checked) + n + 1, total)


def _check_finite(x: np.ndarray, what: str, sample: int, source: str) -> None:
    if not np.isfinite(x).all():
        where = f" ({source})" if source else ""
        raise ValueError(f"calibration sample {sample}: {what}{where} holds inf or NaN, which 8-bit quantization "
                         "cannot represent; check that sample (or the model's arithmetic on it)")
