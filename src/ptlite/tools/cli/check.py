"""`ptlite check`: replay the example calls a file bundles and compare the outputs with PyTorch's (no torch needed)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

import ptlite
from ptlite.tools.errors import ToolError, require_file

from .options import EXIT_DIFFERENT, add_backend_option

CHECK_EPILOG = """\
The file must have been converted with 'ptlite convert ... --bundle-inputs'. Exit status: 0 when every output
is within its tolerance, 1 when one is not (each is named with its difference), 2 on an error (no bundled
inputs, an unreadable file). -v prints every output, not only the failures.

example: ptlite check mobilenet_v2.ptlite --backends numpy"""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "check", help="replay a file's bundled inputs and compare with PyTorch's outputs (no torch needed)",
        description="Run the example calls stored in a .ptlite file (convert --bundle-inputs) on this machine and "
                    "compare every output with the one PyTorch gave when the file was made.",
        epilog=CHECK_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", metavar="MODEL", help="a .ptlite file with bundled inputs")
    add_backend_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    module = ptlite.load(require_file(args.model), backends=args.backends)
    loaded_s = time.perf_counter() - start
    bundled = module.bundled_inputs()
    if not bundled:
        raise ToolError(f"{args.model} has no bundled inputs to check; convert the model with --bundle-inputs "
                        "(ptlite convert MODEL ... --bundle-inputs [IMAGE|.npy|.npz ...])")
    start = time.perf_counter()
    results = module.check_bundled()
    ran_s = time.perf_counter() - start
    failed = [r for r in results if not r.passed]
    for result in results if args.verbose else failed:  # -v: every output, not only the failures
        print(("  " if result.passed else "  FAIL ") + result.describe())
    worst = max((r.error for r in results if not r.problem), default=0.0)
    backends = ", ".join(module.backend_counts())
    summary = (f"{len(bundled)} bundled call(s), {len(results)} output(s) on {backends} in {ran_s * 1e3:.1f} ms "
               f"(loaded in {loaded_s * 1e3:.1f} ms); largest |diff| {worst:.3g}")
    if failed:
        print(f"{args.model}: {len(failed)} of {len(results)} output(s) exceed their tolerance; {summary}",
              file=sys.stderr)
        return EXIT_DIFFERENT
    print(f"{args.model}: ok: {summary}")
    return 0
