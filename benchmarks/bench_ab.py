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
    args = parser.parse_args()

    model = getattr(zoo, args.model)()
    inputs = zoo.example_inputs(args.model)
    program = ptlite.capture(model, inputs, method=args.method)
    a = ptlite.Module(ptlite.optimize_for_mobile(program))
    b = ptlite.Module(ptlite.optimize_for_mobile(program, optimization_blocklist=args.blocklist))
    t = side_by_side(a, b, [t.numpy() for t in inputs], args.warmup, args.runs)
    print(f"{args.model} ({args.method}), {args.runs} alternating calls each:")
    print(f"  A all optimizations          {t.a_ms:8.2f} ms")
    print(f"  B without {', '.join(args.blocklist):<18} {t.b_ms:8.2f} ms")
    print(f"  median B/A {t.ratio:.3f}; max |A - B| = {t.max_diff:.3g}")


if __name__ == "__main__":
    main()
