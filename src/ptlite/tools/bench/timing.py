"""Timing calls: one alone, two side by side in alternating calls, and the statistics reported."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


def time_calls(fn: Callable[[], Any], warmup: int, runs: int) -> list[float]:
    """Milliseconds of each of `runs` calls of fn, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    clock = time.perf_counter
    for _ in range(runs):
        start = clock()
        fn()
        times.append((clock() - start) * 1e3)
    return times


def time_pair(a: Callable[[], Any], b: Callable[[], Any], warmup: int,
              runs: int) -> tuple[list[float], list[float]]:
    """Milliseconds of `runs` calls each of a and b, alternating (and alternating which goes first), after
    `warmup` untimed calls of each: side by side in one process, so that a drifting machine slows both alike."""
    for _ in range(warmup):
        a()
        b()
    times: tuple[list[float], list[float]] = ([], [])
    clock = time.perf_counter
    for run in range(runs):
        for i in ((0, 1) if run % 2 == 0 else (1, 0)):
            fn = a if i == 0 else b
            start = clock()
            fn()
            times[i].append((clock() - start) * 1e3)
    return times


@dataclass
class PairTiming:
    """Two callables on the same inputs, side by side (`side_by_side`)."""

    a_ms: float  # median latency of a
    b_ms: float  # median latency of b
    ratio: float  # median of the per-pair ratios b / a (above 1: a is faster)
    max_diff: float  # largest absolute difference between their (array) results


def side_by_side(a: Callable[..., Any], b: Callable[..., Any], inputs: Sequence[Any], warmup: int,
                 runs: int) -> PairTiming:
    """Run a(*inputs) and b(*inputs) in alternating calls (time_pair) and compare their results (arrays, or the
    same structure of tuples, lists and dicts of arrays, as a segmentation model returns)."""
    diff = _max_difference(a(*inputs), b(*inputs))
    ta, tb = time_pair(lambda: a(*inputs), lambda: b(*inputs), warmup, runs)
    return PairTiming(float(np.median(ta)), float(np.median(tb)), float(np.median(np.array(tb) / np.array(ta))),
                      diff)


def _max_difference(x: Any, y: Any, where: str = "result") -> float:
    """The largest absolute difference between two results of the same structure (arrays, numbers, and tuples,
    lists and dicts of them); inf where only one side is NaN. Raises ValueError naming where they differ in
    structure."""
    if isinstance(x, dict) or isinstance(y, dict):
        if not (isinstance(x, dict) and isinstance(y, dict)) or x.keys() != y.keys():
            raise ValueError(f"the two results differ in structure at {where}: "
                             f"{sorted(x) if isinstance(x, dict) else type(x).__name__} vs "
                             f"{sorted(y) if isinstance(y, dict) else type(y).__name__}")
        return max((_max_difference(x[k], y[k], f"{where}[{k!r}]") for k in x), default=0.0)
    if isinstance(x, (tuple, list)) or isinstance(y, (tuple, list)):
        if not (isinstance(x, (tuple, list)) and isinstance(y, (tuple, list))) or len(x) != len(y):
            raise ValueError(f"the two results differ in structure at {where}: {type(x).__name__} of "
                             f"{len(x) if isinstance(x, (tuple, list)) else '-'} vs {type(y).__name__} of "
                             f"{len(y) if isinstance(y, (tuple, list)) else '-'}")
        return max((_max_difference(u, v, f"{where}[{i}]") for i, (u, v) in enumerate(zip(x, y))), default=0.0)
    if x is None or y is None:
        if x is not y:
            raise ValueError(f"the two results differ at {where}: {x!r} vs {y!r}")
        return 0.0
    u, v = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if u.shape != v.shape:
        raise ValueError(f"the two results differ in shape at {where}: {u.shape} vs {v.shape}")
    if u.size == 0:
        return 0.0
    d = np.abs(u - v)
    d[np.isnan(u) != np.isnan(v)] = np.inf  # NaN on one side only
    d[np.isnan(u) & np.isnan(v)] = 0.0
    return float(np.max(d))


def latency_stats(times_ms: Sequence[float]) -> dict[str, float]:
    """min, median, p90 and mean of a list of timings."""
    t = np.asarray(times_ms, dtype=np.float64)
    return {"min": float(t.min()), "median": float(np.median(t)), "p90": float(np.percentile(t, 90)),
            "mean": float(t.mean())}
