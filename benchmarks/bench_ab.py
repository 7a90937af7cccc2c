"""One optimization on or off, side by side in one process: a zoo model captured once, optimized twice (B with
--blocklist), both run on the same input in alternating calls (alternating which goes first), so that the VM's
drift hits both alike.

    python benchmarks/bench_ab.py mobilenet_v2 --blocklist FUSE_POINTWISE_DEPTHWISE [--runs 40] [--method export]
    python benchmarks/bench_ab.py mobilenet_v2 --blocklist MEMORY_PLAN --method script   # plan at first call or not

Prints each variant's median latency, the median of the per-pair ratios B/A (above 1: the optimization helps) and
the largest difference between their outputs. Needs torch (to capture); unset OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE
in the command on machines that set them.
"""

from __future__ import annotations

import argparse

import numpy as np

import ptlite
from ptlite import zoo
from ptlite.bench import time_pair


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help=f"a ptlite.zoo model: {', '.join(zoo.VISION)}")
    parser.add_argument("--blocklist", action="append", required=True, help="optimization(s) variant B skips")
    parser.add_argument("--method", default="export", choices=["export", "script", "trace"])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()

    model = getattr(zoo, args.model)()
    inputs = zoo.example_inputs(args.model)
    program = ptlite.capture(model, inputs, method=args.method)
    a = ptlite.Module(ptlite.optimize_for_mobile(program))
    b = ptlite.Module(ptlite.optimize_for_mobile(program, optimization_blocklist=args.blocklist))
    arrays = [t.numpy() for t in inputs]
    diff = float(np.max(np.abs(np.asarray(a(*arrays)) - np.asarray(b(*arrays)))))
    ta, tb = time_pair(lambda: a(*arrays), lambda: b(*arrays), args.warmup, args.runs)
    ratio = float(np.median(np.array(tb) / np.array(ta)))
    print(f"{args.model} ({args.method}), {args.runs} alternating calls each:")
    print(f"  A all optimizations          {np.median(ta):8.2f} ms")
    print(f"  B without {', '.join(args.blocklist):<18} {np.median(tb):8.2f} ms")
    print(f"  median B/A {ratio:.3f}; max |A - B| = {diff:.3g}")


if __name__ == "__main__":
    main()
