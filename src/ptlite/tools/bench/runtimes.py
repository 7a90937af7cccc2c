"""Comparing runtimes: ptlite, eager PyTorch and ONNX Runtime, each in a fresh process of its own, one at a time."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

import numpy as np

import ptlite
from ptlite.errors import PtliteError

from .blas import INSTALL, SLOW_BLAS_VARIABLES, THREAD_VARIABLES
from .inputs import load_inputs, load_outputs, save_inputs
from .measure import Settings, _one_line, _save_or_note, measure
from .memory import peak_rss_bytes
from .report import RUNTIME_TITLES
from .timing import latency_stats, time_calls

log = logging.getLogger(__name__)


def installed(package: str) -> bool:
    """Whether `package` can be imported (without importing it)."""
    return importlib.util.find_spec(package) is not None


def compare(path: str, inputs: Sequence[Any], entry: str, settings: Settings) -> dict[str, Any]:
    """Measure ptlite on `path`, eager PyTorch on the model `entry` ('module:function') builds, and ONNX Runtime
    on that model exported with torch.onnx.export, all on the same inputs, each in a fresh process, one at a time.

    Returns ptlite's measurement (as `measure` does) with "compare": the other runtimes' figures, each with the
    ratio ptlite / other and "outputs_check" (whether ptlite's outputs match that runtime's, by ptlite.tools.compare's
    criterion: "match", "summary", "largest_relative"), or with "error" (and "install" when a package is missing).
    """
    with tempfile.TemporaryDirectory(prefix="ptlite-bench-") as folder:
        common = {**asdict(settings), "inputs": save_inputs(inputs, folder)}
        result = _run_child("ptlite", {**common, "model": os.path.abspath(path)}, folder)
        if "error" in result:
            raise PtliteError(f"measuring {path} failed: {result['error']}")
        result["model"] = str(path)
        onnx_path = os.path.join(folder, "model.onnx")
        want_onnx = installed("onnxruntime")
        if installed("torch"):
            pytorch = _run_child("pytorch", {**common, "entry": entry, "onnx": onnx_path if want_onnx else None},
                                 folder)
        else:
            pytorch = _missing("torch")
        if not want_onnx:
            onnxruntime = _missing("onnxruntime")
        elif "install" in pytorch:
            onnxruntime = {"error": "needs torch to export the model to ONNX, and torch is not installed",
                           "install": pytorch["install"]}
        elif "error" in pytorch:
            onnxruntime = {"error": "needs the model exported by PyTorch, which failed"}
        elif pytorch.get("onnx_error"):
            onnxruntime = {"error": f"torch.onnx.export failed: {pytorch['onnx_error']}"}
        else:
            onnxruntime = _run_child("onnxruntime", {**common, "onnx": onnx_path}, folder)
        others = {"pytorch": pytorch, "onnxruntime": onnxruntime}
        for other in others.values():
            if "latency_ms" in other:
                other["ratio"] = {s: result["latency_ms"][s] / other["latency_ms"][s] for s in ("min", "median", "p90")}
            if "outputs" in other and "outputs" in result:
                other["outputs_check"] = _check_outputs(folder, result, other)
    result["compare"] = {"entry": entry, "runtimes": others, "isolated": True,
                         "unset_variables": list(SLOW_BLAS_VARIABLES)}
    return result


def _check_outputs(folder: str, ptlite_result: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """ptlite's outputs against another runtime's (PyTorch's by name; ONNX Runtime's, a flat list, by position), by
    ptlite.tools.compare's criterion."""
    from ptlite.tools.compare import compare_outputs, summary

    ours = load_outputs(os.path.join(folder, "ptlite.outputs.npz"), ptlite_result["outputs"])
    names = other["outputs"]
    if other["runtime"] == "onnxruntime":  # positions: name them as ptlite's outputs at the same places
        mine = list(ours)
        names = [mine[i] if i < len(mine) else f"extra {i}" for i in range(len(names))]
    theirs = load_outputs(os.path.join(folder, f"{other['runtime']}.outputs.npz"), names)
    differences = compare_outputs(ours, theirs)
    return {"match": all(d.ok for d in differences), "summary": summary(differences),
            "largest_relative": max((d.relative for d in differences), default=0.0)}


def differing_outputs(result: dict[str, Any]) -> list[str]:
    """'runtime: what differs' for each compared runtime whose outputs ptlite's do not match."""
    runtimes = (result.get("compare") or {}).get("runtimes", {})
    return [f"{RUNTIME_TITLES[name]}: {r['outputs_check']['summary']}" for name, r in runtimes.items()
            if "outputs_check" in r and not r["outputs_check"]["match"]]


def failures(result: dict[str, Any]) -> list[str]:
    """'runtime: error' for each compared runtime that failed for another reason than a missing package."""
    runtimes = (result.get("compare") or {}).get("runtimes", {})
    return [f"{RUNTIME_TITLES[name]}: {r['error']}" for name, r in runtimes.items()
            if "error" in r and "install" not in r]


def _missing(package: str) -> dict[str, Any]:
    return {"error": f"{package} is not installed", "install": INSTALL[package]}


def child_env(threads: int) -> dict[str, str]:
    """The environment of a measuring process: no BLAS kernel overrides, `threads` threads, this ptlite first."""
    env = dict(os.environ)
    for var in SLOW_BLAS_VARIABLES:
        env.pop(var, None)
    env.update(dict.fromkeys(THREAD_VARIABLES, str(threads)))
    src = os.path.dirname(os.path.dirname(os.path.abspath(ptlite.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    return env


_CHILD = "import sys; from ptlite.tools.bench import child_main; sys.exit(child_main(sys.argv[1:]))"


def _run_child(kind: str, config: dict[str, Any], folder: str) -> dict[str, Any]:
    step = list(RUNTIME_TITLES).index(kind) + 1 if kind in RUNTIME_TITLES else 0
    log.info(f"measuring {RUNTIME_TITLES.get(kind, kind)} in a process of its own"
             + (f" ({step}/{len(RUNTIME_TITLES)})" if step else ""))
    start = time.perf_counter()
    try:
        return _child_result(kind, config, folder)
    finally:
        log.debug(f"{kind}: {time.perf_counter() - start:.1f} s")


def _child_result(kind: str, config: dict[str, Any], folder: str) -> dict[str, Any]:
    config_path = os.path.join(folder, f"{kind}.json")
    config = {**config, "result": os.path.join(folder, f"{kind}.result.json")}
    with open(config_path, "w") as f:
        json.dump(config, f)
    proc = subprocess.run([sys.executable, "-c", _CHILD, kind, config_path], env=child_env(config["threads"]),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if os.path.exists(config["result"]):
        with open(config["result"]) as f:
            return json.load(f)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    return {"error": lines[-1].strip() if lines else f"the measuring process exited with status {proc.returncode}"}


def child_main(argv: Sequence[str]) -> int:
    """Entry point of a measuring process: `kind config.json`; writes the figures (or "error") to config["result"]."""
    kind, config_path = argv
    with open(config_path) as f:
        config = json.load(f)
    try:
        result = _CHILDREN[kind](config)
    except Exception as exc:  # reported by the parent, as one line
        result = {"error": _one_line(exc)}
    with open(config["result"], "w") as f:
        json.dump(result, f)
    return 0


def _settings(config: dict[str, Any]) -> Settings:
    return Settings(**{k: config[k] for k in ("warmup", "runs", "threads", "profile", "top", "backends")})


def _outputs_path(config: dict[str, Any], kind: str) -> str:
    return os.path.join(os.path.dirname(config["result"]), f"{kind}.outputs.npz")


def _child_ptlite(config: dict[str, Any]) -> dict[str, Any]:
    return measure(config["model"], lambda specs: load_inputs(config["inputs"]), _settings(config),
                   outputs_path=_outputs_path(config, "ptlite"))


def _child_pytorch(config: dict[str, Any]) -> dict[str, Any]:
    rss_before = peak_rss_bytes()
    import torch

    from ptlite.tools.compare import result_to_numpy
    from ptlite.tools.models import make_model

    settings = _settings(config)
    torch.set_num_threads(settings.threads)
    model, _ = make_model(config["entry"], torch)
    model.eval()
    inputs = [torch.from_numpy(v) if isinstance(v, np.ndarray) else v for v in load_inputs(config["inputs"])]
    with torch.inference_mode():
        times = time_calls(lambda: model(*inputs), settings.warmup, settings.runs)
        rss_peak = peak_rss_bytes()
        result = {"runtime": "pytorch", "version": torch.__version__, "load_ms": None,
                  "latency_ms": latency_stats(times), "times_ms": times,
                  "rss_bytes": {"before_load": rss_before, "peak": rss_peak}}
        _save_or_note(result, lambda: result_to_numpy(model(*inputs), torch), _outputs_path(config, "pytorch"))
    if config.get("onnx"):  # after measuring, so that exporting adds nothing to PyTorch's figures
        result["onnx_error"] = _export_onnx(torch, model, inputs, config["onnx"])
    return result


def _export_onnx(torch: Any, model: Any, inputs: list[Any], path: str) -> str | None:
    """Export with torch.onnx.export (the torch.export-based exporter, else the TorchScript one); None when it
    worked, else why not."""
    try:
        torch.onnx.export(model, tuple(inputs), path)
    except Exception as exc:
        try:
            torch.onnx.export(model, tuple(inputs), path, dynamo=False)
        except Exception:
            return _one_line(exc)
    return None


def _child_onnxruntime(config: dict[str, Any]) -> dict[str, Any]:
    rss_before = peak_rss_bytes()
    import onnxruntime as ort

    settings = _settings(config)
    options = ort.SessionOptions()
    options.intra_op_num_threads = settings.threads
    start = time.perf_counter()
    session = ort.InferenceSession(config["onnx"], options, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - start) * 1e3
    arrays = [v for v in load_inputs(config["inputs"]) if isinstance(v, np.ndarray)]
    names = [i.name for i in session.get_inputs()]
    if len(names) != len(arrays):
        raise ValueError(f"the exported ONNX model takes {len(names)} input(s) ({', '.join(names)}), "
                         f"ptlite's forward {len(arrays)} tensor(s)")
    feed = dict(zip(names, arrays))
    times = time_calls(lambda: session.run(None, feed), settings.warmup, settings.runs)
    result = {"runtime": "onnxruntime", "version": ort.__version__, "load_ms": load_ms,
              "latency_ms": latency_stats(times), "times_ms": times,
              "rss_bytes": {"before_load": rss_before, "peak": peak_rss_bytes()}}
    _save_or_note(result, lambda: list(session.run(None, feed)), _outputs_path(config, "onnxruntime"))
    return result


_CHILDREN: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "ptlite": _child_ptlite, "pytorch": _child_pytorch, "onnxruntime": _child_onnxruntime}
