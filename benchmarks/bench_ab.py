"""One optimization on or off, side by side in one process: a zoo model captured once, optimized twice (B with
--blocklist), both run on the same input in alternating calls (alternating which goes first), so that the VM's
drift hits both alike.

    python benchmarks/bench_ab.py mobilenet_v2 --blocklist FUSE_POINTWISE_DEPTHWISE [--runs 40] [--method export]
    python benchmarks/bench_ab.py mobilenet_v2 --blocklist MEMORY_PLAN --method script   # plan at first call or not
    python benchmarks/bench_ab.py resnet18 --blocklist WINOGRAD_2X2 --processes 8 --runs 60

With --processes ROUNDS the variants are saved and each round runs one fresh process per variant (in alternating
order) timing --runs calls: each model then has the caches to itself, as a user's does. In one process the two
variants' weights evict each other's from the cache between calls, which misjudges a change that trades a larger
weight for fewer operations (ResNet-18's Winograd F(2x2, 3x3): B/A 0.935 in one process, 1.069 in fresh ones).
The figures are then the medians over the rounds and the median of the per-round ratios.

Prints each variant's median latency, the median of the per-pair ratios B/A (above 1: the optimization helps) and
the largest difference between their outputs. Needs torch (to capture); unset OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE
in the command on machines that set them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_revision import RUN  # this directory's: load a file, time calls, print the median

import ptlite
from ptlite.tools import zoo
from ptlite.tools.bench import side_by_side


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help=f"a ptlite.tools.zoo model: {', '.join(zoo.VISION)}")
    parser.add_argument("--blocklist", action="append", required=True, help="optimization(s) variant B skips")
    parser.add_argument("--method", default="export", choices=["export", "script", "trace"])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--processes", type=int, default=0, metavar="ROUNDS",
                        help="run each variant in fresh processes, ROUNDS rounds (see above)")
    args = parser.parse_args()

    model = getattr(zoo, args.model)()
    inputs = zoo.example_inputs(args.model)
    program = ptlite.capture(model, inputs, method=args.method)
    a = ptlite.Module(ptlite.optimize_for_mobile(program))
    b = ptlite.Module(ptlite.optimize_for_mobile(program, optimization_blocklist=args.blocklist))
    if args.processes:
        fresh_rounds(args, {"A": a.program, "B": b.program}, [t.numpy() for t in inputs])
        return
    t = side_by_side(a, b, [t.numpy() for t in inputs], args.warmup, args.runs)
    print(f"{args.model} ({args.method}), {args.runs} alternating calls each:")
    print(f"  A all optimizations          {t.a_ms:8.2f} ms")
    print(f"  B without {', '.join(args.blocklist):<18} {t.b_ms:8.2f} ms")
    print(f"  median B/A {t.ratio:.3f}; max |A - B| = {t.max_diff:.3g}")


def fresh_rounds(args: argparse.Namespace, programs: dict, inputs: list) -> None:
    import numpy as np

    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for side, program in programs.items():
            paths[side] = Path(tmp) / f"{side}.ptlite"
            ptlite.save(program, paths[side])
        arrays = []
        for i, x in enumerate(inputs):
            arrays.append(str(Path(tmp) / f"in{i}.npy"))
            np.save(arrays[-1], x)
        ms: dict[str, list[float]] = {side: [] for side in programs}
        for r in range(args.processes):
            for side in list(programs)[:: 1 if r % 2 == 0 else -1]:
                out = subprocess.run([sys.executable, "-c", RUN, str(paths[side]), str(args.runs),
                                      str(Path(tmp) / f"{side}.npy"), *arrays], env=env, check=True,
                                     capture_output=True, text=True)
                ms[side].append(float(out.stdout.split()[-1]))
        diff = float(np.max(np.abs(np.load(Path(tmp) / "A.npy") - np.load(Path(tmp) / "B.npy"))))
    a, b = ms["A"], ms["B"]
    print(f"{args.model} ({args.method}), {args.processes} rounds of fresh processes, {args.runs} calls each:")
    print(f"  A all optimizations          {statistics.median(a):8.2f} ms")
    print(f"  B without {', '.join(args.blocklist):<18} {statistics.median(b):8.2f} ms")
    print(f"  median B/A {statistics.median(y / x for x, y in zip(a, b)):.3f}; max |A - B| = {diff:.3g}")


if __name__ == "__main__":
    main()
