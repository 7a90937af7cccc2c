"""The working tree's ptlite against an earlier revision's, side by side in one process: the revision's
src/ptlite is extracted (git archive) under the package name ptlite_rev, both load the same .ptlite files and run
the same input in alternating calls, so that the VM's drift (10-50 % between processes on the 2-core VMs) hits
both alike. Use it to measure a kernel change; figures in the docs and commit messages that say "in-process A/B
against the previous revision" come from it.

    python benchmarks/bench_revision.py HEAD~1 mobilenet_v2 resnet18 [--runs 40]
    python benchmarks/bench_revision.py HEAD~1 lstm_classifier gru_classifier transformer_encoder --runs 400
    python benchmarks/bench_revision.py HEAD~1 mobilenet_v2 --backend native --rounds 10

With --backend native the two revisions cannot share a process (each native library has its own thread pool, whose
spinning workers would slow the other's calls): the revision is checked out whole and its extension built in place,
and each round runs one fresh process per revision (in alternating order), each timing --runs calls; the figures are
the medians over the rounds and the median of the per-round ratios.

Models are ptlite.tools.zoo names, vision or sequence (run on zoo.example_inputs), captured with torch.export and
optimized by the working tree's ptlite (so both revisions run the same file; a change to the passes is not what
this measures); needs torch. Prints each
revision's median latency, the median of the per-pair ratios (above 1: the working tree is faster) and the largest
difference between their outputs. Unset OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE on machines that set them.
"""

from __future__ import annotations

import argparse
import importlib
import io
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from bench_load import extract  # this directory's: src/ptlite as of a revision

import ptlite
from ptlite.tools import zoo
from ptlite.tools.bench import side_by_side


def import_revision(rev: str, into: Path):
    """Import src/ptlite as of `rev` as the package ptlite_rev (its absolute imports renamed)."""
    package = into / "ptlite_rev"
    (extract(rev, into) / "ptlite").rename(package)
    pattern = re.compile(r"\bptlite\.")
    for path in package.rglob("*.py"):
        text = path.read_text()
        text = pattern.sub("ptlite_rev.", text)
        text = re.sub(r"^(\s*)import ptlite\s*$", r"\1import ptlite_rev as ptlite", text, flags=re.M)
        text = re.sub(r"^(\s*)from ptlite import ", r"\1from ptlite_rev import ", text, flags=re.M)
        path.write_text(text)
    sys.path.insert(0, str(into))
    return importlib.import_module("ptlite_rev")


ROOT = Path(__file__).resolve().parents[1]
RUN = """
import sys, time, numpy as np, ptlite
m = ptlite.load(sys.argv[1])
x = [np.load(p) for p in sys.argv[4:]]
out = m(*x)
np.save(sys.argv[3], np.asarray(out[0] if isinstance(out, (tuple, list)) else out))
for _ in range(5):
    m(*x)
times = []
for _ in range(int(sys.argv[2])):
    start = time.perf_counter()
    m(*x)
    times.append(time.perf_counter() - start)
print(1e3 * sorted(times)[len(times) // 2])
"""


def build_revision(rev: str, into: Path) -> Path:
    """The whole tree as of `rev`, its native extension built in place; returns its src/ (for PYTHONPATH)."""
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=into, check=True,
                   capture_output=True)
    return into / "src"


def fresh_rounds(args: argparse.Namespace, tmp: Path) -> None:
    """--backend native: one fresh process per revision and round (see the module's docstring)."""
    import numpy as np

    trees = {"working tree": ROOT / "src", args.revision: build_revision(args.revision, tmp / "rev")}
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    print(f"working tree vs {args.revision}, {args.rounds} rounds of fresh processes, {args.runs} calls each, "
          "batch 1:")
    for name in args.models:
        inputs = zoo.example_inputs(name)
        program = ptlite.optimize_for_mobile(ptlite.capture(getattr(zoo, name)(), inputs, method="export"),
                                             backend="native")
        path = tmp / f"{name}.ptlite"
        ptlite.save(program, path)
        arrays = []
        for i, t in enumerate(inputs):
            arrays.append(str(tmp / f"{name}.in{i}.npy"))
            np.save(arrays[-1], t.numpy())
        ms: dict[str, list[float]] = {side: [] for side in trees}
        for r in range(args.rounds):
            for side in list(trees)[:: 1 if r % 2 == 0 else -1]:
                out = subprocess.run([sys.executable, "-c", RUN, str(path), str(args.runs), str(tmp / f"{side}.npy"),
                                      *arrays], env={**env, "PYTHONPATH": str(trees[side])}, check=True,
                                     capture_output=True, text=True)
                ms[side].append(float(out.stdout.split()[-1]))
        new, old = ms["working tree"], ms[args.revision]
        diff = float(np.max(np.abs(np.load(tmp / "working tree.npy") - np.load(tmp / f"{args.revision}.npy"))))
        print(f"  {name:<30} working tree {statistics.median(new):7.2f} ms   {args.revision} "
              f"{statistics.median(old):7.2f} ms   old/new {statistics.median(o / n for o, n in zip(old, new)):.3f}"
              f"   max |diff| {diff:.3g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("revision", help="the git revision to compare with (e.g. HEAD, HEAD~1, a commit)")
    parser.add_argument("models", nargs="+", help=f"ptlite.tools.zoo models: {', '.join([*zoo.VISION, *zoo.SEQUENCE])}")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--backend", default="numpy",
                        help="the backend the file is lowered for, and that the working tree runs it on (default "
                             "numpy: a revision from before the native backend cannot read a native file); native: "
                             "fresh processes (see above)")
    parser.add_argument("--rounds", type=int, default=10, help="--backend native: fresh-process rounds")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        if args.backend == "native":
            fresh_rounds(args, Path(tmp))
            return
        old = import_revision(args.revision, Path(tmp))
        print(f"working tree vs {args.revision}, {args.runs} alternating calls each, batch 1:")
        for name in args.models:
            inputs = zoo.example_inputs(name)
            program = ptlite.optimize_for_mobile(ptlite.capture(getattr(zoo, name)(), inputs, method="export"),
                                                 backend=args.backend)
            path = Path(tmp) / f"{name}.ptlite"
            ptlite.save(program, path)
            new_module, old_module = ptlite.load(path), old.load(path)
            t = side_by_side(new_module, old_module, [t.numpy() for t in inputs], args.warmup, args.runs)
            print(f"  {name:<30} working tree {t.a_ms:7.2f} ms   {args.revision} "
                  f"{t.b_ms:7.2f} ms   old/new {t.ratio:.3f}   max |diff| {t.max_diff:.3g}")


if __name__ == "__main__":
    main()
