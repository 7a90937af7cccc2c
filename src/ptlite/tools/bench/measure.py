"""Measuring a .ptlite file in this process: load times, latency, peak memory, the per-operator profile."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

import ptlite
from ptlite.errors import PtliteError
from ptlite.ir.graph import ValueSpec
from ptlite.tools.errors import ToolError

from .blas import _slow_blas_settings, _threadpoolctl, blas_libraries
from .inputs import describe_inputs, save_outputs
from .memory import peak_rss_bytes, rss_source
from .timing import latency_stats, time_calls

LOAD_REPEATS = 5  # loads after the first one, whose median is reported
InputMaker = Callable[[list[ValueSpec]], list[Any]]


@dataclass
class Settings:
    """What to measure: warm-up and timed runs of forward, threads, and whether to profile each operator."""

    warmup: int = 5
    runs: int = 50
    threads: int = field(default_factory=ptlite.get_num_threads)  # the CPUs this process may use
    profile: bool = False
    top: int = 10
    backends: list[str] | None = None  # the backends to load with (None: every one available)


def measure(path: str, make_inputs: InputMaker, settings: Settings, outputs_path: str | None = None) -> dict[str, Any]:
    """Measure a .ptlite file in this process: first and repeated load times, latency of forward, peak RSS
    before and after loading and after the runs, and (settings.profile) a per-operator profile.

    make_inputs(input_specs) gives forward's arguments; it is called after the first load, which is timed first.
    outputs_path: also save the outputs of one more call there (`save_outputs`), for `compare` to check.
    """
    _threadpoolctl()  # imported before measuring memory: it is the harness's, not the model's
    rss_before = peak_rss_bytes()
    start = time.perf_counter()
    module = ptlite.load(path, backends=settings.backends)  # the first load in a process also imports the kernels
    first_load_ms = (time.perf_counter() - start) * 1e3
    rss_loaded = peak_rss_bytes()
    inputs = make_inputs(module.input_specs)
    ptlite.set_num_threads(settings.threads)
    times = time_calls(lambda: module(*inputs), settings.warmup, settings.runs)
    rss_peak = peak_rss_bytes()
    reloads = [_load_ms(path, settings.backends) for _ in range(LOAD_REPEATS)]
    blas, blas_note = blas_libraries()
    result: dict[str, Any] = {
        "runtime": "ptlite", "version": ptlite.__version__, "model": str(path), "file_bytes": os.path.getsize(path),
        "inputs": describe_inputs(module.input_specs, inputs),
        "threads": settings.threads, "warmup": settings.warmup, "runs": settings.runs,
        "backends": module.backend_counts(),
        "blas": blas, "blas_note": blas_note, "slow_blas_variables": _slow_blas_settings(),
        "load_ms": {"first": first_load_ms, "median": float(np.median(reloads)), "repeats": LOAD_REPEATS},
        "latency_ms": latency_stats(times), "times_ms": times,
        "rss_bytes": {"before_load": rss_before, "after_load": rss_loaded, "peak": rss_peak},
        "rss_source": rss_source() if rss_peak is not None else None,
        "memory_plan": asdict(plan) if (plan := module.memory_plan()) is not None else None,
        "profile": _profile(module, inputs, settings) if settings.profile else None,
    }
    if outputs_path:
        _save_or_note(result, lambda: module(*inputs), outputs_path)
    return result


def _save_or_note(result: dict[str, Any], call: Callable[[], Any], path: str) -> None:
    """result["outputs"]: the names `save_outputs` wrote for one more call, or result["outputs_error"]: why not (the
    timings stand either way)."""
    try:
        result["outputs"] = save_outputs(call(), path)
    except Exception as exc:
        result["outputs_error"] = _one_line(exc)


def _load_ms(path: str, backends: list[str] | None) -> float:
    start = time.perf_counter()
    ptlite.load(path, backends=backends)
    return (time.perf_counter() - start) * 1e3


def _profile(module: ptlite.Module, inputs: list[Any], settings: Settings) -> dict[str, Any]:
    from ptlite.runtime.profile import profile

    prof = profile(module, inputs, runs=settings.runs, warmup=1)
    per_run = 1e3 / prof.runs
    return {
        "runs": prof.runs, "ms_per_run": prof.total_seconds * per_run, "ms_in_operators": prof.node_seconds * per_run,
        "by_backend": [{"backend": b.backend, "nodes": b.nodes, "ms_per_run": b.seconds * per_run, "share": b.share}
                       for b in prof.by_backend()],
        "by_op": [{"op": o.op, "nodes": o.nodes, "ms_per_run": o.seconds * per_run, "share": o.share}
                  for o in prof.by_op()],
        "slowest": [{"op": n.op, "backend": n.backend, "output": n.output, "source": n.source,
                     "ms_per_run": n.seconds * per_run}
                    for n in prof.slowest(settings.top)],
        "text": prof.format(settings.top),
    }


def _one_line(exc: BaseException) -> str:
    text = (str(exc).strip() or type(exc).__name__).splitlines()[0]
    return text if isinstance(exc, (ToolError, PtliteError)) else f"{type(exc).__name__}: {text}"
