"""What a second concurrent call costs: one Module called from one Python thread, then from two at once.

    python benchmarks/bench_threads.py [--models mobilenet_v2,resnet18] [--runs 20] [--out docs/benchmarks-threads.md]

For each model a preparation process writes the file (ptlite.tools.zoo, lowered for the native backend); a fresh
process then loads it and times, alternately for --rounds rounds: --runs calls one after another on one thread
(the latency of one call, and the throughput), and --runs calls on each of two threads started together (each
call's latency, and calls per second over both). The native kernels release the GIL for a whole region and the pool
runs a call on the caller's thread when another call holds it, so two calls overlap; on a machine with as many cores
as the pool has threads, they share the cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def prepare(name: str, path: str) -> None:
    import ptlite
    from ptlite.tools import zoo

    program = ptlite.capture(getattr(zoo, name)(), zoo.example_inputs(name), method="export")
    ptlite.save(ptlite.optimize_for_mobile(program, backend="native"), path)


def measure(path: str, runs: int, rounds: int) -> dict:
    import numpy as np

    import ptlite

    module = ptlite.load(path)
    x = np.random.default_rng(0).standard_normal(module.input_specs[0].shape).astype(np.float32)
    for _ in range(5):
        module(x)
    alone, together, alone_rate, together_rate = [], [], [], []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(runs):
            t = time.perf_counter()
            module(x)
            alone.append(time.perf_counter() - t)
        alone_rate.append(runs / (time.perf_counter() - start))
        times: list[float] = []

        def worker(times: list[float] = times) -> None:
            for _ in range(runs):
                t = time.perf_counter()
                module(x)
                times.append(time.perf_counter() - t)

        threads = [threading.Thread(target=worker) for _ in range(2)]
        start = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        together_rate.append(2 * runs / (time.perf_counter() - start))
        together += times
    return {"alone_ms": statistics.median(alone) * 1e3, "together_ms": statistics.median(together) * 1e3,
            "alone_rate": statistics.median(alone_rate), "together_rate": statistics.median(together_rate)}


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        kind, *args = sys.argv[2:]
        if kind == "prepare":
            prepare(*args)
        else:
            print(json.dumps(measure(args[0], int(args[1]), int(args[2]))))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mobilenet_v2,resnet18")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks-threads.md"))
    args = parser.parse_args()
    env_path = str(ROOT / "src")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            path = str(Path(tmp) / f"{name}.ptlite")
            run = [sys.executable, __file__, "--child"]
            subprocess.run([*run, "prepare", name, path], check=True, capture_output=True,
                           env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
            out = subprocess.run([*run, "measure", path, str(args.runs), str(args.rounds)], check=True,
                                 capture_output=True, text=True, env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"})
            row = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append((name, row))
            print(name, row, flush=True)
    command = " ".join(["python", "benchmarks/bench_threads.py", *sys.argv[1:]])
    lines = ["# A second concurrent call (native backend, 2 threads in its pool, batch 1)", "",
             f"Written by `{command}` on a 2-core VM: one Module called from one Python thread, then from two at "
             f"once ({args.rounds} alternating rounds of {args.runs} calls per thread; medians).", "",
             "| model | one caller: ms a call | two callers: ms a call | one caller: calls/s | two callers: calls/s |",
             "|---|---:|---:|---:|---:|"]
    for name, r in rows:
        lines.append(f"| {name} | {r['alone_ms']:.1f} | {r['together_ms']:.1f} | {r['alone_rate']:.0f} | "
                     f"{r['together_rate']:.0f} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
