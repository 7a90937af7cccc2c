"""The working tree's ptlite against an earlier revision's, side by side in one process: the revision's
src/ptlite is extracted (git archive) under the package name ptlite_rev, both load the same .ptlite files and run
the same input in alternating calls, so that the VM's drift (10-50 % between processes on the 2-core VMs) hits
both alike. Use it to measure a kernel change; figures in the docs and commit messages that say "in-process A/B
against the previous revision" come from it.

    python benchmarks/bench_revision.py HEAD~1 mobilenet_v2 resnet18 [--runs 40]
    python benchmarks/bench_revision.py HEAD~1 lstm_classifier gru_classifier transformer_encoder --runs 400

Models are ptlite.tools.zoo names, vision or sequence (run on zoo.example_inputs), captured with torch.export and
optimized by the working tree's ptlite (so both revisions run the same file; a change to the passes is not what
this measures); needs torch. Prints each
revision's median latency, the median of the per-pair ratios (above 1: the working tree is faster) and the largest
difference between their outputs. Unset OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE on machines that set them.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("revision", help="the git revision to compare with (e.g. HEAD, HEAD~1, a commit)")
    parser.add_argument("models", nargs="+", help=f"ptlite.tools.zoo models: {', '.join([*zoo.VISION, *zoo.SEQUENCE])}")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--backend", default="numpy",
                        help="the backend the file is lowered for, and that the working tree runs it on (default "
                             "numpy: a revision from before the native backend cannot read a native file)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
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
