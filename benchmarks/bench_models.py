"""Latency of ptlite vs eager PyTorch on the foundation models, one runtime per fresh process, side by side.

    python benchmarks/bench_models.py [--models resnet18,mobilenet_v2] [--runs 20] [--rounds 3]
                                      [--out docs/benchmarks.md]

For each model: a preparation process captures it (ptlite.zoo builders, method given per model) and saves two
.ptlite files, as captured and after ptlite.optimize_for_mobile (what `ptlite convert` writes by default), and the
input. Then, one at a time, fresh processes time eager PyTorch (inference_mode), ptlite on the captured file and
ptlite on the optimized file (ptlite's processes never import torch), each with 2 threads, warm-up runs first.
This is repeated for --rounds rounds (a virtual machine's speed drifts; interleaving keeps the comparison fair)
and the median over all timed runs is reported. OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are unset in the child
processes (they select a slow kernel on some machines); the BLAS kernel threadpoolctl reports is written with the
table. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# model -> (capture method, input shape or None; inputs come from ptlite.zoo.example_inputs)
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

PREPARE = textwrap.dedent("""
    import sys, numpy as np, torch, ptlite
    from ptlite import zoo
    name, method, out = sys.argv[1], sys.argv[2], sys.argv[3]
    model = getattr(zoo, name)()
    inputs = zoo.example_inputs(name)
    program = ptlite.capture(model, inputs, method=method)
    ptlite.save(program, out + ".ptlite")
    ptlite.save(ptlite.optimize_for_mobile(program), out + ".opt.ptlite")
    np.savez(out + ".npz", *[t.numpy() for t in inputs])
""")

TIMER = textwrap.dedent("""
    import json, statistics, sys, time
    def timeit(fn, warmup, runs):
        for _ in range(warmup):
            fn()
        times = []
        for _ in range(runs):
            t = time.perf_counter(); fn(); times.append((time.perf_counter() - t) * 1e3)
        return times
""")

RUN_TORCH = TIMER + textwrap.dedent("""
    import numpy as np, torch
    from ptlite import zoo
    torch.set_num_threads(2)
    name, base, warmup, runs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    model = getattr(zoo, name)()
    with np.load(base + ".npz") as data:
        inputs = [torch.from_numpy(data[k]) for k in sorted(data.files, key=lambda k: int(k.split("_")[1]))]
    with torch.inference_mode():
        times = timeit(lambda: model(*inputs), warmup, runs)
    print(json.dumps({"times": times, "torch": torch.__version__}))
""")

RUN_PTLITE = TIMER + textwrap.dedent("""
    import numpy as np, ptlite
    name, base, warmup, runs, suffix = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    t = time.perf_counter(); module = ptlite.load(base + suffix); load_ms = (time.perf_counter() - t) * 1e3
    with np.load(base + ".npz") as data:
        inputs = [data[k] for k in sorted(data.files, key=lambda k: int(k.split("_")[1]))]
    times = timeit(lambda: module(*inputs), warmup, runs)
    from threadpoolctl import threadpool_info
    blas = [f"{i.get('internal_api')} {i.get('version')} {i.get('architecture')} x{i.get('num_threads')}"
            for i in threadpool_info() if i.get("user_api") == "blas"]
    assert "torch" not in sys.modules
    print(json.dumps({"times": times, "load_ms": load_ms, "blas": blas, "numpy": np.__version__}))
""")


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    for var in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
        env.pop(var, None)
    env.update(OMP_NUM_THREADS="2", OPENBLAS_NUM_THREADS="2", MKL_NUM_THREADS="2")
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run(code: str, *args: str) -> dict:
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=child_env())
    if result.returncode != 0:
        raise RuntimeError(f"child failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks.md"))
    args = parser.parse_args()
    names = [n for n in args.models.split(",") if n]
    rows, info = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            method, _ = MODELS[name]
            base = str(Path(tmp) / name)
            subprocess.run([sys.executable, "-c", PREPARE, name, method, base], check=True,
                           env=child_env(), capture_output=True)
            times: dict[str, list[float]] = {"torch": [], "ptlite": [], "optimized": []}
            load_ms = []
            for _ in range(args.rounds):
                res = run(RUN_TORCH, name, base, str(args.warmup), str(args.runs))
                times["torch"] += res["times"]
                info["torch"] = res["torch"]
                for key, suffix in (("ptlite", ".ptlite"), ("optimized", ".opt.ptlite")):
                    res = run(RUN_PTLITE, name, base, str(args.warmup), str(args.runs), suffix)
                    times[key] += res["times"]
                    load_ms.append(res["load_ms"])
                    info.update(numpy=res["numpy"], blas=res["blas"])
            med = {k: statistics.median(v) for k, v in times.items()}
            row = (name, method, med["torch"], med["ptlite"], med["ptlite"] / med["torch"], med["optimized"],
                   med["optimized"] / med["torch"], statistics.median(load_ms),
                   os.path.getsize(base + ".opt.ptlite") / 1e6)
            rows.append(row)
            print(f"{name:30s} torch {row[2]:7.2f} ms  ptlite {row[3]:7.2f} ms ({row[4]:4.2f}x)  "
                  f"optimized {row[5]:7.2f} ms ({row[6]:4.2f}x)  load {row[7]:6.1f} ms", flush=True)
    lines = [
        "# Benchmarks: ptlite vs eager PyTorch (batch 1, 2 threads)",
        "",
        f"Written by `python benchmarks/bench_models.py --models {args.models} --runs {args.runs} "
        f"--rounds {args.rounds}`. Fresh process per "
        f"runtime, one at a time, in {args.rounds} interleaved rounds of {args.runs} timed runs (after "
        f"{args.warmup} warm-up runs); median over all timed runs. Ratio = ptlite / PyTorch (lower is better for "
        "ptlite). *ptlite* runs the program as captured; *optimized* runs it after `ptlite.optimize_for_mobile` "
        "(what `ptlite convert` writes by default). Load = `ptlite.load` of the optimized file in a fresh process "
        "(its first call also imports the kernels).",
        "",
        f"Machine: {cpu_name()}, {os.cpu_count()} cores (a virtual machine: expect 10-30 % drift between runs). "
        f"PyTorch {info.get('torch')}, NumPy {info.get('numpy')}, "
        f"BLAS (threadpoolctl): {'; '.join(info.get('blas', [])) or 'unknown'}.",
        "",
        "| model | capture | PyTorch eager (ms) | ptlite (ms) | ratio | optimized (ms) | ratio | load (ms) "
        "| file (MB) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, method, t_ms, p_ms, p_ratio, o_ms, o_ratio, load, size in rows:
        lines.append(f"| {name} | {method} | {t_ms:.1f} | {p_ms:.1f} | {p_ratio:.2f} | {o_ms:.1f} | {o_ratio:.2f} | "
                     f"{load:.0f} | {size:.1f} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
