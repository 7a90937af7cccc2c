"""Latency, load time and peak memory of ptlite vs eager PyTorch, PyTorch's lite interpreter, ONNX Runtime and
ExecuTorch.

    python benchmarks/bench_models.py [--models resnet18,mobilenet_v2] [--runs 30] [--rounds 3] [--warmup 3]
                                      [--out docs/benchmarks.md]

For each model a preparation process builds it (ptlite.tools.zoo) and writes, next to its input: three .ptlite files (as
captured, and after ptlite.optimize_for_mobile for the NumPy and for the native backend, the latter what `ptlite
convert` writes by default), a .ptl file for PyTorch's lite interpreter (torch.jit.script, or torch.jit.trace where
scripting fails, then _save_for_lite_interpreter), an .onnx file (torch.onnx.export with dynamo=False, or dynamo=True
where that fails) and a .pte file (torch.export, then ExecuTorch's XNNPACK delegate). Then, one at a time, a fresh
process per runtime times batch 1 with 2 threads, warm-up runs first: eager PyTorch (inference_mode), the lite
interpreter, ptlite on that same .ptl file (read by ptlite.load), ONNX Runtime (default SessionOptions but
intra_op_num_threads=2, CPUExecutionProvider), ExecuTorch (its runtime's Python bindings, a threadpool of 2), ptlite on
the captured file and on each optimized file (ptlite's processes never import torch). Each process also reports its peak
RSS (VmHWM); ptlite's report the time of the `ptlite.load` call alone. This is repeated for --rounds rounds (a virtual
machine's speed drifts; interleaving keeps the comparison fair; every other round runs the runtimes in reverse order)
and the median over all timed runs is reported; ratios are the median over the rounds of the ratio within each round. A
runtime that cannot take a model gets a short reason in its cell and the script goes on. OPENBLAS_CORETYPE /
OPENBLAS_L2_SIZE are unset in the child processes (they select a slow kernel on some machines); the BLAS kernel
threadpoolctl reports is written with the table. Run it on an idle machine (the load average before and after is written
with the table too).

Writes the table to --out and a bar chart of each runtime's latency relative to eager PyTorch next to it (same name,
.png; needs matplotlib: `pip install -e .[bench]`, which also installs ONNX Runtime and ExecuTorch).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

# model -> (ptlite capture method, input shape or None; inputs come from ptlite.tools.zoo.example_inputs)
MODELS = {
    "mobilenet_v2": ("export", (1, 3, 224, 224)),
    "mobilenet_v3_small": ("export", (1, 3, 224, 224)),
    "mobilenet_v3_large": ("export", (1, 3, 224, 224)),
    "resnet18": ("export", (1, 3, 224, 224)),
    "resnet50": ("export", (1, 3, 224, 224)),
    "squeezenet1_1": ("export", (1, 3, 224, 224)),
    "shufflenet_v2_x1_0": ("export", (1, 3, 224, 224)),
    "efficientnet_b0": ("export", (1, 3, 224, 224)),
    "densenet121": ("export", (1, 3, 224, 224)),
    "googlenet": ("export", (1, 3, 224, 224)),
    "deeplabv3_mobilenet_v3_large": ("export", (1, 3, 224, 224)),
    "lraspp_mobilenet_v3_large": ("export", (1, 3, 224, 224)),
    "transformer_encoder": ("export", None),
    "lstm_classifier": ("export", None),
    "gru_classifier": ("export", None),
}
DEFAULT_MODELS = ("mobilenet_v2", "mobilenet_v3_large", "resnet18", "resnet50", "efficientnet_b0",
                  "deeplabv3_mobilenet_v3_large")

# runtime -> (label, file suffix it runs); timed in this order within each round
RUNTIMES = {
    "torch": ("eager PyTorch", ".npz"),
    "lite": ("lite interpreter", ".ptl"),
    "legacy": ("ptlite .ptl", ".ptl"),  # ptlite.load on the lite interpreter's file
    "ort": ("ONNX Runtime", ".onnx"),
    "executorch": ("ExecuTorch (XNNPACK)", ".pte"),  # torch.export lowered to the XNNPACK delegate
    "captured": ("ptlite captured", ".ptlite"),
    "numpy": ("ptlite NumPy", ".numpy.ptlite"),  # optimize_for_mobile(backend="numpy"), run on the NumPy backend
    "native": ("ptlite native", ".native.ptlite"),  # optimize_for_mobile(backend="native"): what convert writes
    "converted": ("ptlite .ptl converted", ".ptl.ptlite"),  # `ptlite convert` of the .ptl file, input shapes fixed
}
# how a file is usually made; a cell notes it only when it was made another way
USUAL_NOTE = {"lite": "script", "legacy": "script", "ort": "dynamo=False", "converted": "convert"}
# runtimes whose load time is reported, in table order
LOADS = ("native", "lite", "legacy")
THREADS = 2


# --- child processes: preparation ---------------------------------------------------------------------------------

def short_error(exc: BaseException) -> str:
    """One line saying why a step failed, for a table cell and the console."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"[:300]


def prepare_ptlite(model: Any, inputs: tuple, method: str, base: str) -> dict[str, dict[str, str]]:
    """Capture the model and save it as captured and optimized for each backend; say how each was made, or why
    not."""
    import ptlite

    program = ptlite.capture(model, inputs, method=method)
    ptlite.save(program, base + RUNTIMES["captured"][1])
    status = {"captured": {"note": method}}
    for backend in ("numpy", "native"):
        try:
            ptlite.save(ptlite.optimize_for_mobile(program, backend=backend), base + RUNTIMES[backend][1])
            status[backend] = {"note": method}
        except Exception as exc:
            status[backend] = {"error": short_error(exc)}
    return status


def count_flops(model: Any, inputs: tuple) -> float | None:
    """Floating-point operations of one forward (PyTorch's FlopCounterMode: a multiply-add counts 2)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    try:
        counter = FlopCounterMode(display=False)
        with counter, torch.inference_mode():
            model(*inputs)
        return float(counter.get_total_flops())
    except Exception:
        return None


def prepare_lite(model: Any, inputs: tuple, base: str) -> str:
    """Script the model (trace it where scripting fails) and save it for the lite interpreter; return which."""
    import torch

    try:
        module, how = torch.jit.script(model), "script"
    except Exception:
        module, how = torch.jit.trace(model, inputs, strict=False), "trace"
    module._save_for_lite_interpreter(base + RUNTIMES["lite"][1])
    return how


def prepare_converted(inputs: tuple, base: str) -> str:
    """`ptlite convert` the lite interpreter's .ptl file, with the example inputs' shapes and dtypes."""
    from ptlite.tools.cli import main

    args = ["convert", base + RUNTIMES["lite"][1], "-o", base + RUNTIMES["converted"][1]]
    for t in inputs:
        args += ["--input-shape", ",".join(map(str, t.shape)), "--input-dtype", str(t.dtype).removeprefix("torch.")]
    if main(args) != 0:
        raise RuntimeError("ptlite convert failed")
    return "convert"


def prepare_onnx(model: Any, inputs: tuple, base: str) -> str:
    """Export the model to ONNX with the TorchScript exporter (the dynamo one where that fails); return which."""
    import warnings

    import torch

    path = base + RUNTIMES["ort"][1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.onnx.export(model, inputs, path, dynamo=False)
            return "dynamo=False"
        except Exception:
            torch.onnx.export(model, inputs, path, dynamo=True)
            return "dynamo=True"


def prepare_executorch(model: Any, inputs: tuple, base: str) -> str:
    """torch.export, then ExecuTorch's edge dialect with everything XNNPACK takes delegated to it (float32, no
    quantization), saved as a .pte program."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    exported = torch.export.export(model, inputs)
    program = to_edge_transform_and_lower(exported, partitioner=[XnnpackPartitioner()]).to_executorch()
    Path(base + RUNTIMES["executorch"][1]).write_bytes(program.buffer)
    return "xnnpack"


def prepare(name: str, method: str, base: str) -> dict:
    """Write the input and every runtime's file for one model; say, per runtime, how it was made or why not."""
    import numpy as np
    import torch

    from ptlite.tools import zoo

    model = getattr(zoo, name)()
    inputs = zoo.example_inputs(name)
    np.savez(base + ".npz", *[t.numpy() for t in inputs])
    status: dict[str, dict[str, str]] = {"torch": {"note": ""}}
    try:
        status.update(prepare_ptlite(model, inputs, method, base))
    except Exception as exc:
        status["captured"] = status["numpy"] = status["native"] = {"error": short_error(exc)}
    steps: dict[str, Callable[[], str]] = {"lite": lambda: prepare_lite(model, inputs, base),
                                           "ort": lambda: prepare_onnx(model, inputs, base),
                                           "executorch": lambda: prepare_executorch(model, inputs, base)}
    for runtime, step in steps.items():
        try:
            status[runtime] = {"note": step()}
        except Exception as exc:
            status[runtime] = {"error": short_error(exc)}
    status["legacy"] = status["lite"]  # the same .ptl file
    if "error" in status["lite"]:
        status["converted"] = status["lite"]
    else:
        try:
            status["converted"] = {"note": prepare_converted(inputs, base)}
        except Exception as exc:
            status["converted"] = {"error": short_error(exc)}
    return {"status": status, "torch": torch.__version__, "flops": count_flops(model, inputs)}


# --- child processes: timing --------------------------------------------------------------------------------------

def load_inputs(base: str) -> list:
    """The model's inputs as NumPy arrays, in order."""
    import numpy as np

    with np.load(base + ".npz") as data:
        return [data[k] for k in sorted(data.files, key=lambda k: int(k.split("_")[1]))]


def timeit(fn: Callable[[], Any], warmup: int, runs: int) -> list[float]:
    """Milliseconds of each of `runs` calls of fn, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return times


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB (10^6 bytes): VmHWM on Linux (ru_maxrss there also
    counts the parent's peak at exec), ru_maxrss elsewhere. Read here rather than through ptlite.tools.bench so that the
    other runtimes' processes don't import ptlite."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6
    except OSError:
        pass
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e6 if sys.platform == "darwin" else peak * 1024 / 1e6  # bytes on macOS, KiB elsewhere


def time_torch(name: str, base: str, warmup: int, runs: int) -> dict:
    """Time the eager zoo model under inference_mode."""
    import torch

    from ptlite.tools import zoo

    torch.set_num_threads(THREADS)
    model = getattr(zoo, name)()
    inputs = [torch.from_numpy(a) for a in load_inputs(base)]
    with torch.inference_mode():
        times = timeit(lambda: model(*inputs), warmup, runs)
    return {"times": times, "rss_mb": peak_rss_mb(), "torch": torch.__version__}


def time_lite(name: str, base: str, warmup: int, runs: int) -> dict:
    """Time the .ptl file on PyTorch's lite interpreter under inference_mode."""
    import torch
    from torch.jit.mobile import _load_for_lite_interpreter

    torch.set_num_threads(THREADS)
    start = time.perf_counter()
    module = _load_for_lite_interpreter(base + RUNTIMES["lite"][1])
    load_ms = (time.perf_counter() - start) * 1e3
    inputs = [torch.from_numpy(a) for a in load_inputs(base)]
    with torch.inference_mode():
        times = timeit(lambda: module(*inputs), warmup, runs)
    return {"times": times, "rss_mb": peak_rss_mb(), "load_ms": load_ms}


def time_ort(name: str, base: str, warmup: int, runs: int) -> dict:
    """Time the .onnx file on ONNX Runtime (default SessionOptions but intra_op_num_threads, CPU provider)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = THREADS
    session = ort.InferenceSession(base + RUNTIMES["ort"][1], options, providers=["CPUExecutionProvider"])
    arrays = load_inputs(base)
    names = [i.name for i in session.get_inputs()]
    if len(names) != len(arrays):
        raise ValueError(f"the ONNX graph takes {len(names)} inputs, the model {len(arrays)}")
    feed = dict(zip(names, arrays))
    times = timeit(lambda: session.run(None, feed), warmup, runs)
    return {"times": times, "rss_mb": peak_rss_mb(), "onnxruntime": ort.__version__}


def time_executorch(name: str, base: str, warmup: int, runs: int) -> dict:
    """Time the .pte file on ExecuTorch's runtime (its Python bindings, which import torch for the tensors; XNNPACK's
    threadpool set to 2 threads)."""
    import torch
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime

    portable_lib._unsafe_reset_threadpool(THREADS)
    method = Runtime.get().load_program(base + RUNTIMES["executorch"][1]).load_method("forward")
    inputs = [torch.from_numpy(a) for a in load_inputs(base)]
    times = timeit(lambda: method.execute(inputs), warmup, runs)
    from importlib.metadata import version
    return {"times": times, "rss_mb": peak_rss_mb(), "executorch": version("executorch")}


def time_ptlite(name: str, base: str, warmup: int, runs: int, suffix: str) -> dict:
    """Time a .ptlite file, and its `ptlite.load` call alone; this process must never import torch."""
    import numpy as np

    import ptlite

    start = time.perf_counter()
    module = ptlite.load(base + suffix)
    load_ms = (time.perf_counter() - start) * 1e3
    inputs = load_inputs(base)
    times = timeit(lambda: module(*inputs), warmup, runs)
    rss_mb = peak_rss_mb()
    from threadpoolctl import threadpool_info

    blas = [f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')} x{i.get('num_threads')}"
            for i in threadpool_info() if i.get("user_api") == "blas"]
    assert "torch" not in sys.modules, "ptlite's runtime process imported torch"
    return {"times": times, "rss_mb": rss_mb, "load_ms": load_ms, "blas": blas, "numpy": np.__version__,
            "ptlite": ptlite.__version__}


def measure_peak() -> dict:
    """The machine's single-precision GEMM throughput on 2 threads: NumPy's BLAS on 2048 x 2048 matrices, and the
    native backend's GEMM as a 1x1 convolution of 3136 pixels x 512 channels into 512 (resnet's largest shape)."""
    import numpy as np

    import ptlite

    ptlite.set_num_threads(THREADS)
    a = np.random.default_rng(0).standard_normal((2048, 2048)).astype(np.float32)
    blas = 2 * 2048**3 / statistics.median(timeit(lambda: a @ a, 3, 20)) / 1e6  # ms -> GFLOP/s
    result = {"peak": f"BLAS {blas:.0f} GFLOP/s"}
    if any(b.name == "native" and b.available for b in ptlite.backends()):
        from ptlite.backends.native.kernels import linear_packed
        from ptlite.backends.numpy.packed import pack_panels

        x = np.random.default_rng(1).standard_normal((3136, 512)).astype(np.float32)
        w = pack_panels(np.random.default_rng(2).standard_normal((512, 512)).astype(np.float32))
        native = 2 * 3136 * 512 * 512 / statistics.median(timeit(lambda: linear_packed(x, w, None, 512), 3, 20)) / 1e6
        result["peak"] += f", ptlite native {native:.0f} GFLOP/s"
    return result


CHILDREN: dict[str, Callable[..., dict]] = {
    "torch": time_torch,
    "lite": time_lite,
    "legacy": lambda *a: time_ptlite(*a, RUNTIMES["legacy"][1]),
    "ort": time_ort,
    "executorch": time_executorch,
    "captured": lambda *a: time_ptlite(*a, RUNTIMES["captured"][1]),
    "numpy": lambda *a: time_ptlite(*a, RUNTIMES["numpy"][1]),
    "native": lambda *a: time_ptlite(*a, RUNTIMES["native"][1]),
    "converted": lambda *a: time_ptlite(*a, RUNTIMES["converted"][1]),
}


def child_main(argv: list[str]) -> None:
    """Entry point of a child process: `--child prepare NAME METHOD BASE` or `--child RUNTIME NAME BASE WARMUP RUNS`;
    prints its result as JSON on the last line of stdout."""
    kind, *args = argv
    if kind == "peak":
        print(json.dumps(measure_peak()))
        return
    if kind == "prepare":
        result = prepare(*args)
    else:
        name, base, warmup, runs = args
        result = CHILDREN[kind](name, base, int(warmup), int(runs))
    print(json.dumps(result))


# --- parent process -----------------------------------------------------------------------------------------------

def child_env() -> dict[str, str]:
    """Environment of the child processes: 2 BLAS/OpenMP threads, no OpenBLAS kernel overrides, src/ first."""
    env = dict(os.environ)
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(var, None)
    env.update(OMP_NUM_THREADS=str(THREADS), OPENBLAS_NUM_THREADS=str(THREADS), MKL_NUM_THREADS=str(THREADS))
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_child(*args: str) -> dict:
    """Run this script as a fresh child process; its JSON result, or {"error": last line of its stderr}."""
    result = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", *args],
                            capture_output=True, text=True, env=child_env())
    if result.returncode != 0:
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()] or [f"exit {result.returncode}"]
        return {"error": lines[-1].strip()[:300]}
    return json.loads(result.stdout.strip().splitlines()[-1])


def cpu_name() -> str:
    """The CPU model, for the text above the table."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def bench_model(name: str, args: argparse.Namespace, tmp: str, info: dict) -> dict:
    """Prepare one model, time every runtime that can take it in interleaved rounds; one table row as a dict."""
    method, _ = MODELS[name]
    base = str(Path(tmp) / name)
    prepared = run_child("prepare", name, method, base)
    if "error" in prepared:  # the preparation process died (not a runtime that refused the model): no files at all
        status = {rt: {"error": f"preparation failed: {prepared['error']}"} for rt in RUNTIMES}
    else:
        info["torch"] = prepared["torch"]
        status = prepared["status"]
    errors = {rt: s["error"] for rt, s in status.items() if "error" in s}
    times: dict[str, list[float]] = {rt: [] for rt in RUNTIMES}
    rss: dict[str, list[float]] = {rt: [] for rt in RUNTIMES}
    load_ms: dict[str, list[float]] = {rt: [] for rt in LOADS}
    per_round: list[dict[str, float]] = []  # each round's median per runtime, for the paired ratios
    for k in range(args.rounds):
        per_round.append({})
        # every other round in reverse order, so that a drift during a round does not favour the runtimes run first
        for rt in (list(RUNTIMES) if k % 2 == 0 else list(reversed(RUNTIMES))):
            if rt in errors:
                continue
            res = run_child(rt, name, base, str(args.warmup), str(args.runs))
            if "error" in res:
                errors[rt] = res["error"]
                continue
            times[rt] += res["times"]
            per_round[-1][rt] = statistics.median(res["times"])
            rss[rt].append(res["rss_mb"])
            if rt in LOADS:
                load_ms[rt].append(res["load_ms"])
            info.update({k: v for k, v in res.items() if k in ("numpy", "blas", "onnxruntime", "executorch", "ptlite")})
    opt = base + RUNTIMES["native"][1]
    return {
        "name": name,
        "ms": {rt: statistics.median(t) for rt, t in times.items() if t and rt not in errors},
        "rounds": [{rt: ms for rt, ms in r.items() if rt not in errors} for r in per_round],
        "rss": {rt: max(r) for rt, r in rss.items() if r and rt not in errors},
        "notes": {rt: s.get("note", "") for rt, s in status.items()},
        "errors": errors,
        "load_ms": {rt: statistics.median(t) for rt, t in load_ms.items() if t and rt not in errors},
        "size_mb": os.path.getsize(opt) / 1e6 if os.path.exists(opt) else None,
        "flops": prepared.get("flops"),
    }


def fmt_ms(value: float) -> str:
    return f"{value:.1f}" if value >= 1 else f"{value:.2f}"


def cell(row: dict, rt: str) -> str:
    """A runtime's median latency, marked with how its file was made when unusual, or why it has none."""
    if rt in row["errors"]:
        reason = row["errors"][rt].replace("|", "/")
        return f"n/a ({reason[:60]}{'…' if len(reason) > 60 else ''})"
    note = row["notes"].get(rt, "")
    mark = f" ({note})" if rt in USUAL_NOTE and note != USUAL_NOTE[rt] else ""
    return fmt_ms(row["ms"][rt]) + mark


def paired_ratio(row: dict, num: str, den: str) -> float | None:
    """The median over the rounds of num's median / den's median in that round (the two timed minutes apart at
    most, so that the VM's drift between rounds cancels); None when either runtime has no timings."""
    pairs = [r[num] / r[den] for r in row.get("rounds", []) if num in r and den in r]
    return statistics.median(pairs) if pairs else None


def ratio(row: dict, num: str, den: str) -> str:
    value = paired_ratio(row, num, den)
    return "n/a" if value is None else f"{value:.2f}"


def optional(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def table(rows: list[dict]) -> list[str]:
    """The Markdown table, one row per model."""
    head = ["model", *(f"{label} (ms)" for label, _ in RUNTIMES.values()), "native / PyTorch", "native / ORT",
            "native / ExecuTorch", "native GFLOP/s", "load (ms)", "load .ptl: lite (ms)", "load .ptl: ptlite (ms)",
            "peak RSS PyTorch (MB)", "peak RSS lite (MB)", "peak RSS ORT (MB)", "peak RSS ptlite native (MB)",
            "file (MB)"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for row in rows:
        gflops = row["flops"] / row["ms"]["native"] / 1e6 if row.get("flops") and "native" in row["ms"] else None
        cells = [row["name"], *(cell(row, rt) for rt in RUNTIMES), ratio(row, "native", "torch"),
                 ratio(row, "native", "ort"), ratio(row, "native", "executorch"), optional(gflops, ".1f"),
                 *(optional(row["load_ms"].get(rt), ".0f") for rt in LOADS),
                 *(optional(row["rss"].get(rt), ".0f") for rt in ("torch", "lite", "ort", "native")),
                 optional(row["size_mb"], ".1f")]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def plot(rows: list[dict], path: Path, title: str) -> bool:
    """Grouped bar chart of each runtime's median latency / eager PyTorch's, per model (log scale); False if
    matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed (pip install -e .[bench]): no chart", file=sys.stderr)
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    runtimes = [rt for rt in RUNTIMES if rt != "torch"]
    width = 0.8 / len(runtimes)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(rows) + 2), 5.0))
    for k, rt in enumerate(runtimes):
        xs, ys = [], []
        for i, row in enumerate(rows):
            value = paired_ratio(row, rt, "torch")
            if value is not None:
                xs.append(i + (k - (len(runtimes) - 1) / 2) * width)
                ys.append(value)
        bars = ax.bar(xs, ys, width, label=RUNTIMES[rt][0])
        ax.bar_label(bars, labels=[f"{y:.2f}" for y in ys], fontsize=6, rotation=90, padding=2)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--", label="eager PyTorch")
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks(range(len(rows)), [row["name"] for row in rows], rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("median latency / eager PyTorch (log; lower is faster)")
    ax.set_title(title, fontsize=9)
    ax.margins(y=0.15)
    ax.legend(fontsize=7, ncols=5 if len(rows) > 2 else 3, loc="upper center", bbox_to_anchor=(0.5, -0.22),
              frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return True


def describe(args: argparse.Namespace, info: dict, load_before: float, load_after: float) -> list[str]:
    """The text above the table: how it was measured, on what, by which command."""
    command = shlex.join(["python", "benchmarks/bench_models.py", *sys.argv[1:]])
    return [
        "# Benchmarks: ptlite vs eager PyTorch, PyTorch's lite interpreter, ONNX Runtime and ExecuTorch (batch 1, 2 "
        "threads)",
        "",
        "Float32 models; int8 and fp16 ones (ptlite's quantization against ONNX Runtime's int8 and the lite "
        "interpreter's qnnpack int8): [benchmarks-quantized.md](benchmarks-quantized.md) "
        "(`benchmarks/bench_quantized.py`).",
        "",
        f"Written by `{command}`. For each model a preparation process builds it (`ptlite.tools.zoo`) and writes each "
        "runtime's file; then a fresh process per runtime, one at a time, loads it and times it, in "
        f"{args.rounds} interleaved rounds of {args.runs} timed runs (after {args.warmup} warm-up runs), all with "
        f"batch 1 and {THREADS} threads; the table gives the median over all {args.rounds * args.runs} timed runs.",
        "",
        "- *eager PyTorch*: the zoo model under `torch.inference_mode()`, `torch.set_num_threads(2)`.",
        "- *lite interpreter*: `torch.jit.script` of the zoo model (`(trace)`: `torch.jit.trace`, where scripting "
        "fails), saved with `_save_for_lite_interpreter` (without `torch.utils.mobile_optimizer`), run from "
        "`torch.jit.mobile._load_for_lite_interpreter` under `torch.inference_mode()`, `torch.set_num_threads(2)`.",
        "- *ptlite .ptl*: that same .ptl file loaded by `ptlite.load` (translated and optimized at load, then "
        "specialized for the input's shapes by the first warm-up call; docs/legacy-ptl.md), in a process that never "
        "imports torch.",
        "- *ONNX Runtime*: `torch.onnx.export(..., dynamo=False)` (`(dynamo=True)`: the dynamo exporter, where "
        "that fails), run by an `InferenceSession` with the default `SessionOptions` except "
        "`intra_op_num_threads=2`, on the `CPUExecutionProvider`; its process does not import torch.",
        "- *ExecuTorch (XNNPACK)*: `torch.export` of the zoo model, `to_edge_transform_and_lower` with the "
        "`XnnpackPartitioner` (float32; what XNNPACK does not take runs on ExecuTorch's portable kernels), "
        "`.to_executorch()`, run by `executorch.runtime` (its Python bindings) with XNNPACK's threadpool at 2 threads.",
        "- *ptlite captured*: the program as captured (`ptlite.capture`, torch.export), run as it is; *ptlite "
        "NumPy*: after `ptlite.optimize_for_mobile(program, backend=\"numpy\")`, run on the NumPy backend; *ptlite "
        "native*: after `ptlite.optimize_for_mobile(program, backend=\"native\")` (what `ptlite convert` writes by "
        "default), run on the native backend (compiled kernels, 2 threads) with NumPy for what it declines. ptlite's "
        "processes never import torch; NumPy's BLAS gets 2 threads (`OPENBLAS_NUM_THREADS=2`). *ptlite .ptl "
        "converted*: the lite interpreter's .ptl file after `ptlite convert model.ptl --input-shape ...` (the example "
        "inputs' shapes).",
        "- *native / PyTorch*, *native / ORT*, *native / ExecuTorch* (and the chart's bars): the median over the "
        "rounds of the two runtimes' ratio within a round (below 1: ptlite is faster); within a round the runtimes run "
        "one after another, in reverse order every other round, so that the VM's drift between rounds cancels.",
        "- *native GFLOP/s*: the model's floating-point operations (PyTorch's FlopCounterMode, a multiply-add "
        "counting 2) over ptlite native's median latency; the machine's single-precision GEMM peak is given below.",
        "- *load*: the `ptlite.load` call alone on the native file, in a fresh process after `import ptlite` "
        "(its first call also imports the kernel families the program uses; ptlite's modules are byte-compiled first, "
        "as in an installed package); median over the rounds. *load .ptl*: the same for the .ptl file, by "
        "`_load_for_lite_interpreter` (torch already imported) and by `ptlite.load` (translation and "
        "optimization included).",
        "- *peak RSS*: the runtime process's peak resident set (VmHWM) after its timed runs (imports, loading and "
        "running included), the largest over the rounds; MB = 10^6 bytes. *file*: size of the native .ptlite file.",
        "- *n/a (...)*: the runtime could not take the model, and why.",
        "",
        f"Machine: {cpu_name()}, {os.cpu_count()} cores (a virtual machine: expect 10-30 % drift between runs); "
        f"1-minute load average {load_before:.2f} before the run and {load_after:.2f} after it. "
        f"PyTorch {info.get('torch')}, ONNX Runtime {info.get('onnxruntime')}, ExecuTorch {info.get('executorch')}, "
        f"NumPy {info.get('numpy')}, "
        f"ptlite {info.get('ptlite')}, BLAS (threadpoolctl, in ptlite's processes): "
        f"{'; '.join(info.get('blas', [])) or 'unknown'}. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are unset in the "
        "child processes. Single-precision GEMM measured here (2 threads, median of 20): "
        f"{info.get('peak', 'not measured')}.",
        "",
    ]


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help=f"any of: {', '.join(MODELS)}")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    args = parser.parse_args()
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        parser.error(f"unknown model(s) {', '.join(unknown)}; the script knows: {', '.join(MODELS)}")
    # An installed package has byte-compiled modules; this checkout may not (PYTHONDONTWRITEBYTECODE), and
    # compiling ptlite's sources on every import would count in its load time.
    import compileall

    compileall.compile_dir(str(ROOT / "src" / "ptlite"), quiet=1)
    load_before = os.getloadavg()[0]
    rows, info = [], {}
    peak = run_child("peak")
    info["peak"] = peak.get("peak", f"not measured ({peak.get('error')})")
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            row = bench_model(name, args, tmp, info)
            rows.append(row)
            print(f"{name:30s} " + "  ".join(f"{rt} {cell(row, rt)}" for rt in RUNTIMES)
                  + f"  load {optional(row['load_ms'].get('native'), '.0f')} ms", flush=True)
    load_after = os.getloadavg()[0]
    out = Path(args.out)
    png = out.with_suffix(".png")
    lines = describe(args, info, load_before, load_after)
    title = f"ptlite vs PyTorch runtimes, batch 1, {THREADS} threads, {cpu_name()}"
    charted = plot(rows, png, title)
    if charted:
        lines += [f"![median latency relative to eager PyTorch, per model and runtime]({png.name})", ""]
    out.write_text("\n".join(lines + table(rows)) + "\n")
    print(f"wrote {out}" + (f" and {png}" if charted else ""))


if __name__ == "__main__":
    main()
