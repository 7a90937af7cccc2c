"""`ptlite bench`: measure a .ptlite file (ptlite.tools.bench), optionally beside PyTorch and ONNX Runtime."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import ptlite
from ptlite.preprocess.spec import stored_preprocessing
from ptlite.tools import bench
from ptlite.tools.errors import ToolError, require_file
from ptlite.tools.inputs import inputs_from

from .options import EXIT_DIFFERENT, add_backend_option, add_input_options, load_program, non_negative_int, positive_int

BENCH_EPILOG = """\
Inputs are random (seed 0: normal floats, small non-negative integers, False for booleans) with the shapes the
program was captured with; dynamic dimensions need --input-shape. Load time is that of ptlite.load (the first
load in a process also imports the kernels). Memory is the process's peak resident set size (VmHWM on Linux,
getrusage's ru_maxrss elsewhere; n/a where neither exists).

--compare ENTRY ('module:function', as 'ptlite convert' takes it) also measures eager PyTorch and ONNX Runtime
(the model exported with torch.onnx.export) on the same inputs, each runtime in its own fresh process, one at a
time, ptlite included, without OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE. It checks that the runtimes' outputs agree
(as 'ptlite compare' does) and exits with status 1, after the report, when they do not.

example: ptlite bench mobilenet_v2.ptlite --profile --compare ptlite.tools.zoo:mobilenet_v2"""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "bench", help="measure latency, load time and memory of a .ptlite or .ptl file (no torch needed)",
        description="Benchmark forward of a .ptlite (or PyTorch Mobile .ptl) file like TFLite's benchmark_model: "
                    "load time, latency (min, median, p90, mean), peak memory, optionally a per-operator profile and "
                    "a comparison with eager PyTorch and ONNX Runtime.",
        epilog=BENCH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", metavar="MODEL", help="a .ptlite file, or a PyTorch Mobile .ptl file")
    add_input_options(parser)
    parser.add_argument("--warmup", metavar="N", type=non_negative_int, default=5,
                        help="untimed runs first (default 5)")
    parser.add_argument("--runs", metavar="N", type=positive_int, default=50, help="timed runs (default 50)")
    parser.add_argument("--threads", metavar="N", type=positive_int, default=None,
                        help="threads for ptlite's kernels and BLAS (default: the CPUs this process may use, its "
                             "affinity capped by its cgroup quota: ptlite.get_num_threads())")
    parser.add_argument("--profile", action="store_true",
                        help="also time every operator node: share per operator type and the slowest nodes")
    parser.add_argument("--top", metavar="K", type=positive_int, default=10,
                        help="slowest nodes --profile lists (default 10)")
    parser.add_argument("--compare", metavar="ENTRY",
                        help="'module:function' building the PyTorch model: also measure eager PyTorch and ONNX "
                             "Runtime (needs torch; onnxruntime for the latter)")
    parser.add_argument("--json", metavar="PATH", help="also write every figure to a JSON file")
    add_backend_option(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    require_file(args.model)
    if args.inputs and args.input_shape:
        raise ToolError("give --inputs or --input-shape, not both")
    if args.compare is not None and ":" not in args.compare:
        raise ToolError(f"--compare {args.compare!r} must be 'module:function', like ptlite.tools.zoo:mobilenet_v2")
    settings = bench.Settings(warmup=args.warmup, runs=args.runs, threads=args.threads or ptlite.get_num_threads(),
                              profile=args.profile, top=args.top, backends=args.backends)
    preprocessing = None
    if args.inputs:  # images are preprocessed as the file says
        try:
            preprocessing = stored_preprocessing(load_program(args.model).metadata)
        except ValueError as exc:
            raise ToolError(f"{args.model}: the file's metadata is invalid: {exc}") from None
    if args.compare:
        forward = load_program(args.model).methods.get("forward")
        if forward is None:
            raise ToolError(f"{args.model} has no method 'forward'")
        inputs = inputs_from(args.inputs, args.input_shape, forward.input_specs, preprocessing=preprocessing)
        result = bench.compare(args.model, inputs, args.compare, settings)
    else:
        result = bench.measure(args.model, lambda specs: inputs_from(args.inputs, args.input_shape, specs,
                                                                     preprocessing=preprocessing), settings)
    result["input_source"] = (f"from {', '.join(args.inputs)}" if args.inputs
                              else f"random, seed {bench.SEED}")
    print(bench.format_report(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {args.json}")
    failed = bench.failures(result)
    if failed:
        raise ToolError("--compare: " + "; ".join(failed))
    differ = bench.differing_outputs(result)
    if differ:
        sys.stdout.flush()
        print("ptlite: --compare: the outputs differ from " + "; from ".join(differ), file=sys.stderr)
        return EXIT_DIFFERENT
    return 0
