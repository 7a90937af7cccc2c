"""Two model files side by side in one process: both loaded by ptlite.load (.ptlite or PyTorch Mobile .ptl), run
on the same random input in alternating calls (alternating which goes first), so that the VM's drift hits both
alike — e.g. a .ptl file converted by `ptlite convert --input-shape` against the same model captured by ptlite.

    python benchmarks/bench_files.py A.ptlite B.ptlite [--input-shape 1,3,224,224 ...] [--runs 40]

Prints each file's median latency, the median of the per-pair ratios B/A (above 1: A is faster) and the largest
difference between their outputs. Needs only NumPy (no torch). Unset OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in
the command on machines that set them.
"""

from __future__ import annotations

import argparse

import ptlite
from ptlite.tools.bench import random_inputs, side_by_side


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("a", help="a .ptlite or .ptl file")
    parser.add_argument("b", help="a second file taking the same inputs")
    parser.add_argument("--input-shape", action="append", default=[], metavar="SHAPE",
                        help="shape of each tensor input, e.g. 1,3,224,224 (default: the shapes A records)")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    args = parser.parse_args()

    a, b = ptlite.load(args.a), ptlite.load(args.b)
    shapes = [tuple(int(s) for s in text.split(",")) for text in args.input_shape]
    t = side_by_side(a, b, random_inputs(a.input_specs, shapes), args.warmup, args.runs)
    print(f"{args.runs} alternating calls each:")
    print(f"  A {args.a:<40} {t.a_ms:8.2f} ms")
    print(f"  B {args.b:<40} {t.b_ms:8.2f} ms")
    print(f"  median B/A {t.ratio:.3f}; max |A - B| = {t.max_diff:.3g}")


if __name__ == "__main__":
    main()
