"""`import ptlite` and the first `ptlite.load` of a file, the working tree against a git revision: each measured in
a fresh process (byte-compiled modules, after `import numpy`), the two trees alternating, pair after pair, so that
the VM's drift hits both alike. Prints the medians, the fastest runs and the median of the paired differences
(new - old), which resolves a few tenths of a millisecond where the medians alone move by ~1 ms between batches.

    python benchmarks/bench_load.py 802e994 mobilenet_v2.ptlite --pairs 301

The file is one both revisions can read (convert it with the working tree: `ptlite convert ptlite.tools.zoo:
mobilenet_v2 --input-shape 1,3,224,224`). Both trees use the working tree's built native library.
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE are unset in the measuring processes.
"""

from __future__ import annotations

import argparse
import compileall
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CODE = ("import numpy, time\nt0 = time.perf_counter()\nimport ptlite\nt1 = time.perf_counter()\n"
        "ptlite.load({path!r})\nt2 = time.perf_counter()\nprint((t1 - t0) * 1e3, (t2 - t1) * 1e3)")


def extract(rev: str, into: Path) -> Path:
    """src/ptlite as of `rev`, as the package `ptlite` under `into` (returned: the folder to put on PYTHONPATH)."""
    archive = subprocess.run(["git", "archive", rev, "src/ptlite"], cwd=ROOT, check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        try:
            tar.extractall(into, filter="data")
        except TypeError:  # Python before 3.10.12 / 3.11.4: no extraction filters (the archive is our own)
            tar.extractall(into)
    return into / "src"


def share_library(src: Path) -> None:
    """Put the working tree's built native library into an extracted tree (git archive has no build outputs; without
    it the old tree would load on the NumPy backend alone). Its C sources may differ from the revision's: timing
    the load's Python is the point here."""
    native = ROOT / "src" / "ptlite" / "backends" / "native"
    for built in native.glob("_native*.so"):
        shutil.copy2(built, src / "ptlite" / "backends" / "native" / built.name)


def measure(src: Path, path: str, env: dict[str, str]) -> tuple[float, float]:
    out = subprocess.run([sys.executable, "-c", CODE.format(path=os.path.abspath(path))], capture_output=True,
                         text=True, env={**env, "PYTHONPATH": str(src)}, check=True)
    import_ms, load_ms = (float(x) for x in out.stdout.split())
    return import_ms, load_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("revision", help="the git revision to compare with (e.g. HEAD~1, a commit)")
    parser.add_argument("file", help="a .ptlite (or .ptl) file both revisions load")
    parser.add_argument("--pairs", type=int, default=101, help="fresh-process pairs (default 101)")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"old": extract(args.revision, Path(tmp)), "new": ROOT / "src"}
        share_library(trees["old"])
        for src in trees.values():
            compileall.compile_dir(src, quiet=1)  # as an installed package is: PYTHONDONTWRITEBYTECODE may be set
        times: dict[str, list[tuple[float, float]]] = {"old": [], "new": []}
        for i in range(args.pairs):
            for name in ("old", "new") if i % 2 == 0 else ("new", "old"):
                times[name].append(measure(trees[name], args.file, env))
    print(f"working tree vs {args.revision}, {args.pairs} pairs of fresh processes, {args.file}:")
    for k, what in enumerate(("import ptlite", "first load")):
        old, new = [t[k] for t in times["old"]], [t[k] for t in times["new"]]
        diff = statistics.median(n - o for o, n in zip(old, new))
        print(f"  {what:<14} {args.revision} median {statistics.median(old):.2f} ms (fastest {min(old):.2f}), working "
              f"tree {statistics.median(new):.2f} ms (fastest {min(new):.2f}); paired new - old {diff:+.2f} ms")


if __name__ == "__main__":
    main()
