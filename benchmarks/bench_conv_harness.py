"""Compare one convolution's C driver between a git revision and the working tree, without Python in the timing:
benchmarks/conv_harness.c compiled against each tree's csrc/, run alternately (a fresh process per run), printing
each side's median and minimum over the rounds (milliseconds). The figures in docs/decisions.md that say "C harness"
come from this.

    python benchmarks/bench_conv_harness.py HEAD~1 --layer 16,112,96,1,1,0 --threads 1 --rounds 3
    (a layer is C,HW,O,K,STRIDE,PAD; --planar for an NCHW input, --depthwise for groups = C; --act the epilogue:
    relu6 by default, or none, relu, hardswish, silu)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CSRC = "src/ptlite/backends/native/csrc"
FLAGS = ["-O3", "-std=c11", "-ffp-contract=fast", "-fno-math-errno", "-pthread"]


def build(csrc: Path, out: Path) -> Path:
    sources = [str(p) for p in sorted(csrc.glob("*.c")) if p.name not in ("module.c", "selftest.c")]
    subprocess.run(["gcc", *FLAGS, f"-I{csrc}", str(ROOT / "benchmarks" / "conv_harness.c"), *sources, "-lm", "-o",
                    str(out)], check=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revision", help="the git revision to compare the working tree with")
    parser.add_argument("--layer", action="append", required=True, help="C,HW,O,K,STRIDE,PAD (repeatable)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--planar", action="store_true")
    parser.add_argument("--depthwise", action="store_true")
    parser.add_argument("--act", default="relu6", choices=["relu6", "none", "relu", "hardswish", "silu"])
    parser.add_argument("--runs", type=int, default=300, help="calls per process")
    parser.add_argument("--rounds", type=int, default=3, help="alternating processes per side")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.revision, CSRC], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        binaries = {args.revision: build(old / CSRC, Path(tmp) / "old_harness"),
                    "working tree": build(ROOT / CSRC, Path(tmp) / "new_harness")}
        for layer in args.layer:
            c, hw, o, k, s, p = layer.split(",")
            argv = [c, hw, o, k, s, p, str(args.threads), str(int(args.planar)), str(int(args.depthwise)),
                    str(args.runs), args.act]
            times: dict[str, list[tuple[float, float]]] = {name: [] for name in binaries}
            for r in range(args.rounds):
                for name in (list(binaries) if r % 2 == 0 else list(binaries)[::-1]):
                    out = subprocess.run([str(binaries[name]), *argv], check=True, capture_output=True, text=True)
                    median, minimum = (float(v) for v in out.stdout.split())
                    times[name].append((median, minimum))
            for name, got in times.items():
                print(f"{layer:>24}  {name:>14}: median {statistics.median(m for m, _ in got):.3f} ms, "
                      f"min {min(v for _, v in got):.3f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
