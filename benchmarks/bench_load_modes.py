"""What the two ways of loading a file cost: mapped and guarded (the default) against read into memory
(`ptlite.load(path, in_memory=True)`), for the zoo's models lowered for the native backend.

    python benchmarks/bench_load_modes.py [--models mobilenet_v2,resnet18] [--rounds 7] [--out FILE.md]

A preparation process writes each model's file (ptlite.tools.zoo, as `ptlite convert` does); then, for --rounds
rounds, a fresh process per mode, the two alternating, loads the file after `import ptlite` and calls it once
(the file is in the page cache: its first round is not timed). Reported: the medians of `ptlite.load`, of load and
first call together (a mapped file's pages are read by the first call), the largest peak RSS (VmHWM), and what the
check after each call costs a mapped module (`FileChangedError`: docs/reliability.md), median of 2000 checks.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_threads import prepare  # the zoo model's native file, as `ptlite convert` writes it

ROOT = Path(__file__).resolve().parents[1]


def peak_rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024 / 1e6
    return float("nan")


def measure(path: str, in_memory: bool) -> dict:
    import numpy as np

    import ptlite
    from ptlite.format.source import check_sources, sources_of

    t0 = time.perf_counter()
    module = ptlite.load(path, in_memory=in_memory)
    t1 = time.perf_counter()
    x = np.random.default_rng(0).standard_normal(module.input_specs[0].shape).astype(np.float32)
    t2 = time.perf_counter()
    module(x)
    t3 = time.perf_counter()
    row = {"load_ms": (t1 - t0) * 1e3, "first_ms": (t1 - t0 + t3 - t2) * 1e3, "rss_mb": peak_rss_mb()}
    sources = sources_of(module.program.weights.values())
    if sources:
        checks = []
        for _ in range(2000):
            t = time.perf_counter()
            check_sources(sources)
            checks.append(time.perf_counter() - t)
        row["check_us"] = statistics.median(checks) * 1e6
    return row


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        kind, *args = sys.argv[2:]
        if kind == "prepare":
            prepare(*args)
        else:
            print(json.dumps(measure(args[0], args[1] == "1")))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="mobilenet_v2,mobilenet_v3_large,resnet18,resnet50,efficientnet_b0,"
                                            "deeplabv3_mobilenet_v3_large")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks-load-modes.md"))
    args = parser.parse_args()
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            path = str(Path(tmp) / f"{name}.ptlite")
            run = [sys.executable, __file__, "--child"]
            subprocess.run([*run, "prepare", name, path], check=True, capture_output=True, env=env)
            got: dict[str, list[dict]] = {"0": [], "1": []}
            for r in range(args.rounds + 1):
                for mode in ("0", "1") if r % 2 else ("1", "0"):
                    out = subprocess.run([*run, "measure", path, mode], check=True, capture_output=True, text=True,
                                         env=env)
                    if r:  # the first round warms the page cache
                        got[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
            row = {"name": name, "mb": os.path.getsize(path) / 1e6}
            for mode, key in (("0", "mapped"), ("1", "read")):
                for field in ("load_ms", "first_ms"):
                    row[f"{key}_{field}"] = statistics.median(g[field] for g in got[mode])
                row[f"{key}_rss"] = max(g["rss_mb"] for g in got[mode])
            checks = [g["check_us"] for g in got["0"] if "check_us" in g]
            row["check_us"] = statistics.median(checks) if checks else None
            rows.append(row)
            print(row, flush=True)
    command = " ".join(["python", "benchmarks/bench_load_modes.py", *sys.argv[1:]])
    lines = ["# Loading a file mapped (the default) or read into memory (`in_memory=True`)", "",
             f"Written by `{command}`: each model's native file, a fresh process per mode and round ({args.rounds} "
             "alternating rounds after one that fills the page cache; medians, and the largest peak RSS). *first "
             "call*: `ptlite.load` and the first call together (a mapped file's pages are read by the first call). "
             "*check*: what a mapped module's check after each call costs (docs/reliability.md). MB = 10^6 bytes.", "",
             "| model | file (MB) | load mapped (ms) | load read (ms) | load + first call mapped (ms) | "
             "load + first call read (ms) | peak RSS mapped (MB) | peak RSS read (MB) | check (us) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        check = f"{r['check_us']:.1f}" if r["check_us"] is not None else "-"
        lines.append(f"| {r['name']} | {r['mb']:.1f} | {r['mapped_load_ms']:.1f} | {r['read_load_ms']:.1f} | "
                     f"{r['mapped_first_ms']:.1f} | {r['read_first_ms']:.1f} | {r['mapped_rss']:.0f} | "
                     f"{r['read_rss']:.0f} | {check} |")
    Path(args.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
