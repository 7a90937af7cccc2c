"""The `ptlite` command line: convert a PyTorch model, run, benchmark, inspect and list the operators of a .ptlite file,
and compare its outputs with PyTorch's.

Only `convert` (except of a PyTorch Mobile .ptl file), `compare`, `demo` and `bench --compare` need torch; `run`,
`bench`, `ops` and `inspect` work with NumPy alone.
Every error is reported as `ptlite: error: ...` with exit status 2, never a traceback
(set PTLITE_DEBUG=1 to see one).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import importlib.util
import json
import os
import re
import shlex
import sys
import time
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

import ptlite
from ptlite.errors import PtliteError

EXIT_ERROR = 2
EXIT_DIFFERENT = 1  # compare, bench --compare: the outputs differ
SOURCE_KEY = "source"  # metadata: the 'module:function' a file was converted from
_SOURCE_PATTERN = re.compile(r"[\w./-]+:[\w.]+")  # what convert records, and all that inspect and compare show
TORCH_INSTALL = "pip install 'ptlite[export]'"
CAPTURE_METHODS = ("auto", "export", "script", "trace")
INPUT_DTYPES = ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")


_SCALAR_INPUTS = ("int", "float", "bool", "str")


class CliError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


# ----------------------------------------------------------------------------------------------------
# argument parsing


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors that point at --help instead of printing the whole usage."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _input_shape(text: str) -> tuple[int, ...]:
    parts = [p.strip() for p in text.replace("x", ",").split(",")]
    try:
        shape = tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid shape {text!r}: expected comma-separated sizes such as "
                                         "1,3,224,224") from None
    if any(d < 0 for d in shape):
        raise argparse.ArgumentTypeError(f"invalid shape {text!r}: sizes must not be negative")
    return shape


def _int_at_least(minimum: int, what: str):
    """An argparse type: an integer >= minimum, or a one-line error naming what was expected."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value
    return parse


_positive_int = _int_at_least(1, "a positive integer")
_non_negative_int = _int_at_least(0, "a non-negative integer")


def _image_size(text: str) -> tuple[int, int]:
    try:
        parts = [int(p) for p in text.replace("x", ",").split(",")]
    except ValueError:
        parts = []
    if len(parts) not in (1, 2) or min(parts) <= 0:
        raise argparse.ArgumentTypeError(f"invalid image size {text!r}: expected SIZE or HEIGHT,WIDTH")
    return (parts[0], parts[-1])


CONVERT_EPILOG = """\
MODEL is 'module:function', a function or class called without arguments that returns an nn.Module (or
a (module, example_inputs) tuple); the current directory is importable, and 'path/to/file.py:function'
works too. MODEL can also be a file saved with torch.jit.save, or a PyTorch Mobile .ptl file
(_save_for_lite_interpreter), which is read without torch.

example: ptlite convert torchvision.models:resnet18 --input-shape 1,3,224,224 -o resnet18.ptlite"""

RUN_EPILOG = """\
Images are resized (shorter side) and center-cropped to the input shape the model was captured with
(224 when unknown), scaled to [0, 1] and normalized with ImageNet's mean and std. Several images for a
one-input model are stacked into a batch.

example: ptlite run resnet18.ptlite cat.jpg --labels imagenet_classes.txt"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ptlite",
        description="Capture PyTorch models into .ptlite files and run them with NumPy alone.",
        epilog="Start with 'ptlite demo' to see the whole round trip on a small model. "
               "'ptlite COMMAND --help' describes each command.")
    parser.add_argument("--version", action="version", version=f"ptlite {ptlite.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_convert(commands)
    _add_run(commands)
    _add_bench(commands)
    _add_compare(commands)
    _add_ops_and_inspect(commands)
    _add_demo(commands)
    return parser


def _add_convert(commands: Any) -> None:
    convert = commands.add_parser(
        "convert", help="capture a PyTorch model (or read a .ptl file) into a .ptlite file (needs torch, except .ptl)",
        description=f"Capture a PyTorch model and save it as a .ptlite file. Needs torch ({TORCH_INSTALL}), "
                    "except for a PyTorch Mobile .ptl file, which ptlite reads itself.",
        epilog=CONVERT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    convert.add_argument("model", metavar="MODEL", help="'module:function' or a TorchScript file")
    convert.add_argument("-o", "--output", metavar="OUT",
                         help="the .ptlite file to write (default: MODEL's name with .ptlite, here)")
    convert.add_argument("--method", choices=CAPTURE_METHODS, default="auto",
                         help="how to capture: torch.export, torch.jit.script, torch.jit.trace, or auto "
                              "(try them in that order; default)")
    convert.add_argument("--input-shape", metavar="SHAPE", type=_input_shape, action="append", default=[],
                         help="shape of an example input, e.g. 1,3,224,224; repeat for each input "
                              "(export and trace need them)")
    convert.add_argument("--input-dtype", metavar="DTYPE", choices=INPUT_DTYPES, action="append", default=[],
                         help="dtype of the example inputs: " + ", ".join(INPUT_DTYPES) + " (default "
                              "float32); give once for all inputs or once per --input-shape")
    convert.add_argument("--dynamic-batch", action="store_true",
                         help="with export: let the first dimension of every input vary (by default an "
                              "exported program accepts only the example shapes)")
    convert.add_argument("--no-optimize", action="store_true",
                         help="save the program as captured, without ptlite.optimize_for_mobile (which folds "
                              "batch norms into convolutions and drops dropout and dead code)")
    convert.add_argument("--blocklist", metavar="PASS", action="append", default=[],
                         help="skip one optimization (repeatable), by the names optimize_for_mobile's "
                              "optimization_blocklist takes: WINOGRAD (im2col for 3x3 convolutions: about 10x less "
                              "rounding error, slower), CONV_BN_FUSION, FUSE_ADD_RELU, MEMORY_PLAN, ...")
    convert.add_argument("--preserve-method", metavar="NAME", action="append", default=[],
                         help="keep another method of a scripted module (repeatable); run it with "
                              "'ptlite run --method NAME'")
    convert.set_defaults(handler=cmd_convert)


def _add_run(commands: Any) -> None:
    run = commands.add_parser(
        "run", help="run a .ptlite file on .npy or image inputs (no torch needed)",
        description="Run a method of a .ptlite file and print its outputs; for a classifier (an output "
                    "of shape [batch, classes]) print the top classes with softmax probabilities.",
        epilog=RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    run.add_argument("model", metavar="MODEL", help="a .ptlite file")
    run.add_argument("inputs", metavar="INPUT", nargs="+",
                     help="one per model input: an .npy file, an image file (png, jpg, ...), or a number "
                          "for an int/float/bool input")
    run.add_argument("--method", metavar="NAME", default="forward",
                     help="the method to run (default forward)")
    run.add_argument("--top-k", metavar="K", type=_non_negative_int, default=5,
                     help="classes to show for classifier outputs (default 5; 0 turns this off)")
    run.add_argument("--labels", metavar="FILE", help="a text file with one class name a line")
    run.add_argument("--image-size", metavar="SIZE", type=_image_size,
                     help="crop images to SIZE or HEIGHT,WIDTH instead of the model's input shape")
    run.add_argument("--no-normalize", action="store_true",
                     help="feed images scaled to [0, 1], without ImageNet mean/std normalization")
    run.add_argument("--save-outputs", metavar="OUT.npz", help="save every output array to an .npz file")
    run.set_defaults(handler=cmd_run)


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


def _add_input_options(parser: argparse.ArgumentParser) -> None:
    """--input-shape and --inputs, as bench and compare take them (read by _bench_inputs)."""
    parser.add_argument("--input-shape", metavar="SHAPE", type=_input_shape, action="append", default=[],
                        help="shape of each tensor input, e.g. 1,3,224,224; repeat for each input, in order "
                             "(default: the shapes the program records)")
    parser.add_argument("--inputs", metavar="FILE", action="append", default=[],
                        help="inputs instead of random data: one .npz file with every input (saved under the "
                             "inputs' names or in order), or, repeated, one .npy file, image or number per input "
                             "as 'ptlite run' takes them")


def _add_bench(commands: Any) -> None:
    bench = commands.add_parser(
        "bench", help="measure latency, load time and memory of a .ptlite file (no torch needed)",
        description="Benchmark forward of a .ptlite file like TFLite's benchmark_model: load time, latency "
                    "(min, median, p90, mean), peak memory, optionally a per-operator profile and a comparison "
                    "with eager PyTorch and ONNX Runtime.",
        epilog=BENCH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    bench.add_argument("model", metavar="MODEL", help="a .ptlite file")
    _add_input_options(bench)
    bench.add_argument("--warmup", metavar="N", type=_non_negative_int, default=5,
                       help="untimed runs first (default 5)")
    bench.add_argument("--runs", metavar="N", type=_positive_int, default=50, help="timed runs (default 50)")
    bench.add_argument("--threads", metavar="N", type=_positive_int, default=None,
                       help=f"threads for ptlite's kernels and BLAS (default: the cores, {os.cpu_count() or 1})")
    bench.add_argument("--profile", action="store_true",
                       help="also time every operator node: share per operator type and the slowest nodes")
    bench.add_argument("--top", metavar="K", type=_positive_int, default=10,
                       help="slowest nodes --profile lists (default 10)")
    bench.add_argument("--compare", metavar="ENTRY",
                       help="'module:function' building the PyTorch model: also measure eager PyTorch and ONNX "
                            "Runtime (needs torch; onnxruntime for the latter)")
    bench.add_argument("--json", metavar="PATH", help="also write every figure to a JSON file")
    bench.set_defaults(handler=cmd_bench)


COMPARE_EPILOG = """\
Both sides get the same inputs: random ones (seed 0, as 'ptlite bench' makes them) with the shapes the program
records or --input-shape gives, or --inputs files (.npz, .npy, images, numbers, as 'ptlite bench' takes them).
An output matches when max |ptlite - reference| <= TOLERANCE x max |reference| (1e-4, the criterion ptlite's
own tests hold models to); integer, boolean and string outputs must be equal. Exit status: 0 when every output
matches, 1 when one differs, 2 on an error.

examples:
  ptlite compare mobilenet_v2.ptlite --with ptlite.tools.zoo:mobilenet_v2
  ptlite compare mobilenet_v2.ptlite --with ptlite.tools.zoo:mobilenet_v2 --inputs cat.jpg
  ptlite compare model.ptl --input-shape 1,3,224,224      (against PyTorch's lite interpreter)
  ptlite compare model.ptlite --with model.ptl --inputs cat.jpg"""


def _add_compare(commands: Any) -> None:
    compare = commands.add_parser(
        "compare", help="check that a .ptlite or .ptl file computes what PyTorch computes (needs torch)",
        description="Run a .ptlite (or PyTorch Mobile .ptl) file with ptlite and the model it came from with "
                    "PyTorch, on the same inputs, and report every output's largest difference.",
        epilog=COMPARE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    compare.add_argument("model", metavar="MODEL", help="a .ptlite or .ptl file")
    compare.add_argument("--with", dest="reference", metavar="REFERENCE",
                         help="what PyTorch runs: 'module:function' building the model (run eagerly), a TorchScript "
                              "file, or a .ptl file (run on PyTorch's lite interpreter); for a .ptl MODEL, MODEL "
                              "itself on the lite interpreter by default")
    compare.add_argument("--method", metavar="NAME", default="forward", help="the method to compare (default forward)")
    _add_input_options(compare)
    compare.add_argument("--tolerance", metavar="T", type=_tolerance, default=None,
                         help="largest difference allowed, relative to max |reference| (default 1e-4)")
    compare.add_argument("--no-optimize", action="store_true",
                         help="a .ptl MODEL: run it as translated, without optimize_for_mobile (ptlite.load(path, "
                              "optimize=False)); a .ptlite file always runs as written")
    compare.add_argument("--blocklist", metavar="PASS", action="append", default=[],
                         help="a .ptl MODEL: optimize it without this pass (repeatable; names as 'ptlite convert "
                              "--blocklist' takes them, e.g. WINOGRAD)")
    compare.set_defaults(handler=cmd_compare)


def _tolerance(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number such as 1e-4, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a non-negative number such as 1e-4, got {text!r}")
    return value


def _add_ops_and_inspect(commands: Any) -> None:
    ops = commands.add_parser(
        "ops", help="list the operators a .ptlite file uses",
        description="Print the operators the program uses (ptlite.export_opnames), one a line; with "
                    "--yaml as the YAML list that PyTorch's selective build takes (like "
                    "torch.jit.mobile._export_operator_list).")
    ops.add_argument("model", metavar="MODEL", help="a .ptlite file")
    ops.add_argument("--yaml", action="store_true", help="print a YAML list")
    ops.set_defaults(handler=cmd_ops)

    inspect = commands.add_parser(
        "inspect", help="describe a .ptlite file: methods, operators, weights",
        description="Describe a .ptlite file: its methods with their inputs and outputs, how many times "
                    "each operator is used, its weights, and how it was made.")
    inspect.add_argument("model", metavar="MODEL", help="a .ptlite file")
    inspect.add_argument("--graph", action="store_true", help="also print the program's IR")
    inspect.set_defaults(handler=cmd_inspect)


def _add_demo(commands: Any) -> None:
    demo = commands.add_parser(
        "demo", help="train a small CNN, convert it two ways, compare ptlite with PyTorch (needs torch)",
        description="Train a small CNN on scikit-learn's digits (no download), capture it with "
                    "torch.jit.script and torch.export, save, load and run it with ptlite, and compare "
                    "accuracy, outputs, file size, load time and latency with PyTorch. Needs torch and "
                    "scikit-learn.")
    demo.add_argument("--quick", action="store_true", help="train fewer epochs and time fewer runs")
    demo.add_argument("--out-dir", metavar="DIR",
                      help="where to save the files (default: a new temporary folder)")
    demo.set_defaults(handler=cmd_demo)


# ----------------------------------------------------------------------------------------------------
# helpers


def _human_bytes(n: int | float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def _require_file(path: str) -> str:
    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CliError(f"{path}: is a directory, not a file")
    return path


def _load_program(path: str) -> ptlite.Program:
    return ptlite.load_program(_require_file(path))


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        raise CliError(f"this command needs PyTorch, which is not installed: {TORCH_INSTALL}") from None
    return torch


# ----------------------------------------------------------------------------------------------------
# convert


def _import_callable(spec: str, what: str = "MODEL") -> Any:
    """The object named by 'package.module:attr.path' or 'path/to/file.py:attr' (`what`: the argument that gave it,
    for errors)."""
    module_name, _, attr_path = spec.rpartition(":")
    if not module_name or not attr_path:
        raise CliError(f"{what} {spec!r} must be 'module:function' or a TorchScript file")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        if module_name.endswith(".py"):
            module = _import_file(module_name)
        else:
            module = importlib.import_module(module_name)
    except CliError:
        raise
    except ModuleNotFoundError as exc:
        raise CliError(f"cannot import {module_name!r}: {exc}") from None
    except Exception as exc:
        raise CliError(f"importing {module_name!r} failed: {type(exc).__name__}: {exc}") from None
    obj: Any = module
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise CliError(f"{module_name!r} has no attribute {attr_path!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise CliError(f"{spec} is not callable: it must be a function or class returning an nn.Module")
    return obj


def _import_file(path: str) -> Any:
    _require_file(path)
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise CliError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # torch.jit.script reads the source of classes through their module
    spec.loader.exec_module(module)
    return module


def _make_model(spec: str, torch: Any, what: str = "MODEL") -> tuple[Any, tuple | None]:
    factory = _import_callable(spec, what)
    try:
        made = factory()
    except Exception as exc:
        raise CliError(f"calling {spec}() failed: {type(exc).__name__}: {exc}") from None
    example = None
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module):
        made, example = made
        example = (example,) if isinstance(example, torch.Tensor) else tuple(example)
    if not isinstance(made, torch.nn.Module):
        raise CliError(f"{spec}() returned {type(made).__name__}, not an nn.Module")
    return made, example


def _load_torchscript(path: str, torch: Any) -> Any:
    try:
        with warnings.catch_warnings():  # torch.jit.load warns that TorchScript is deprecated
            warnings.filterwarnings("ignore", message=r".*torch\.jit\..*deprecated", category=FutureWarning)
            return torch.jit.load(path, map_location="cpu")
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0].split(". ")[0]
        raise CliError(f"{path}: not a TorchScript file that torch.jit.load can read ({first})") from None


def _example_inputs(shapes: list[tuple[int, ...]], dtypes: list[str], torch: Any) -> tuple | None:
    if not shapes:
        if dtypes:
            raise CliError("--input-dtype needs --input-shape")
        return None
    if len(dtypes) > 1 and len(dtypes) != len(shapes):
        raise CliError(f"give --input-dtype once, or once per --input-shape ({len(shapes)}), "
                       f"not {len(dtypes)} times")
    dtypes = dtypes if len(dtypes) > 1 else [dtypes[0] if dtypes else "float32"] * len(shapes)
    generator = torch.Generator().manual_seed(0)
    examples = []
    for shape, name in zip(shapes, dtypes, strict=True):
        dtype = getattr(torch, name)
        if dtype.is_floating_point:
            examples.append(torch.randn(shape, generator=generator).to(dtype))
        else:
            examples.append(torch.zeros(shape, dtype=dtype))  # zeros are valid indices, masks and lengths
    return tuple(examples)


def _dynamic_batch(example: tuple | None, torch: Any) -> tuple[tuple, tuple]:
    """Examples and torch.export dynamic_shapes in which the first dimension of every input may vary.

    torch.export fixes a dimension whose example size is 1, so a batch of 1 is repeated to make 2.
    """
    if example is None:
        raise CliError("--dynamic-batch needs --input-shape")
    example = tuple(torch.cat([t, t]) if t.dim() > 0 and t.shape[0] == 1 else t for t in example)
    return example, tuple({0: torch.export.Dim.AUTO} if t.dim() > 0 else None for t in example)


def _default_output(model: str) -> str:
    if ":" in model and not os.path.exists(model):
        stem = model.rpartition(":")[2].split(".")[-1]
    else:
        stem = os.path.splitext(os.path.basename(model))[0]
    return f"{stem or 'model'}.ptlite"


def cmd_convert(args: argparse.Namespace) -> int:
    _check_blocklist(args)
    if os.path.isfile(args.model) and _is_pytorch_mobile(args.model):
        return _convert_pytorch_mobile(args)
    torch = _import_torch()
    example = _example_inputs(args.input_shape, args.input_dtype, torch)
    if os.path.isfile(args.model):
        model = _load_torchscript(args.model, torch)
    elif ":" in args.model:
        model, built_example = _make_model(args.model, torch)
        example = example if example is not None else built_example
    else:
        raise CliError(f"{args.model}: no such file, and not 'module:function'")
    options: dict[str, Any] = {"preserved_methods": tuple(args.preserve_method)}
    if args.dynamic_batch:
        example, options["dynamic_shapes"] = _dynamic_batch(example, torch)
    if args.method in ("export", "trace") and example is None:
        raise CliError(f"--method {args.method} needs example inputs: give --input-shape (e.g. 1,3,224,224)")
    start = time.perf_counter()
    with warnings.catch_warnings():  # TorchScript's deprecation notices: converting is what the user asked
        warnings.filterwarnings("ignore", message=r".*torch\.jit\..*deprecated", category=FutureWarning)
        program = ptlite.capture(model, example, method=args.method, **options)
    captured_s = time.perf_counter() - start
    if not os.path.isfile(args.model) and _SOURCE_PATTERN.fullmatch(args.model):  # shown by inspect and compare
        program.metadata[SOURCE_KEY] = args.model
    return _optimize_and_save(program, args, f"captured {args.model} with "
                              f"{program.metadata.get('capture', args.method)} in {captured_s:.1f} s")


def _is_pytorch_mobile(path: str) -> bool:
    from ptlite.format.ptl import is_pytorch_mobile

    return is_pytorch_mobile(path)


def _convert_pytorch_mobile(args: argparse.Namespace) -> int:
    """A PyTorch Mobile .ptl file: translated by ptlite's own reader (no torch needed), optimized and saved."""
    ignored = [flag for flag, given in (("--method", args.method != "auto"), ("--dynamic-batch", args.dynamic_batch),
                                        ("--preserve-method", args.preserve_method)) if given]
    if ignored:
        print(f"note: {', '.join(ignored)} ignored: {args.model} is a PyTorch Mobile file, read as it is (forward "
              "and the public methods; ptlite.format.ptl.read_ptl(path, methods=[...]) reads others)", file=sys.stderr)
    start = time.perf_counter()
    program = ptlite.load_program(args.model)
    read_s = time.perf_counter() - start
    if args.input_shape:
        _fix_input_shapes(program, args.input_shape, args.input_dtype)
        _try_input_shapes(program)
    elif args.input_dtype:
        raise CliError("--input-dtype needs --input-shape")
    return _optimize_and_save(program, args, f"read {args.model} (PyTorch Mobile, bytecode version "
                                             f"{program.metadata.get('bytecode_version')}) in {read_s:.1f} s")


def _try_input_shapes(program: ptlite.Program) -> None:
    """Run forward once on random inputs of the --input-shape given: a .ptl file records no shapes, so a wrong one
    (a missing batch dimension, channels last) would otherwise surface only when the converted file refuses every
    real input. A note, not an error: a model may refuse random data for reasons of its own."""
    from .bench import random_inputs

    specs = program.methods["forward"].input_specs
    try:
        ptlite.Module(program).forward(*random_inputs(specs))
    except (ptlite.errors.PtliteError, ValueError) as exc:
        shapes = ", ".join(f"{s.name} {list(s.shape)}" for s in specs if s.type == "Tensor")
        print(f"note: forward fails on random inputs of the shapes given ({shapes}): {str(exc)[:300]}; the file is "
              "written with these shapes, and accepts no others: check --input-shape", file=sys.stderr)


def _fix_input_shapes(program: ptlite.Program, shapes: list[tuple[int, ...]], dtypes: list[str]) -> None:
    """--input-shape (and --input-dtype, default float32) for a .ptl file, which records neither: forward's tensor
    inputs get these static shapes and dtypes, so that optimize_for_mobile can plan memory; the converted file then
    accepts only them."""
    specs = [s for s in program.methods["forward"].input_specs if s.type == "Tensor"]
    if len(shapes) != len(specs):
        raise CliError(f"forward takes {len(specs)} tensor input(s); give --input-shape once for each "
                       f"(got {len(shapes)})")
    if len(dtypes) not in (0, 1, len(shapes)):
        raise CliError(f"give --input-dtype once, or once per --input-shape ({len(shapes)}), not {len(dtypes)} times")
    dtypes = dtypes * len(shapes) if len(dtypes) == 1 else dtypes or ["float32"] * len(shapes)
    for spec, shape, dtype in zip(specs, shapes, dtypes):
        if spec.shape is not None and len(spec.shape) != len(shape):
            raise CliError(f"input '{spec.name}' has {len(spec.shape)} dimensions, --input-shape gives {len(shape)}")
        if spec.dtype is not None and spec.dtype != dtype:
            raise CliError(f"input '{spec.name}' is {spec.dtype}, --input-dtype gives {dtype}")
        spec.shape, spec.dtype = tuple(shape), dtype


def _check_blocklist(args: argparse.Namespace) -> None:
    """--blocklist's names (convert, compare), checked before anything is captured or run."""
    if args.blocklist and args.no_optimize:
        raise CliError("--blocklist skips some optimizations, --no-optimize all of them: give one or the other")
    from ptlite.passes import blocklist_names

    try:
        blocklist_names(args.blocklist)
    except ValueError as exc:
        raise CliError(f"--blocklist: {exc}") from None


def _optimize_and_save(program: ptlite.Program, args: argparse.Namespace, headline: str) -> int:
    if not args.no_optimize:
        program = ptlite.optimize_for_mobile(program, optimization_blocklist=args.blocklist)
    output = args.output or _default_output(args.model)
    ptlite.save(program, output)
    weight_bytes = sum(np.asarray(w).nbytes for w in program.weights.values())
    print(headline)
    if not args.no_optimize:
        print(f"optimized: {', '.join(program.metadata.get('passes', [])) or 'nothing to change'}")
    for name, graph in program.methods.items():
        print(f"  {name}(" + ", ".join(s.describe() for s in graph.input_specs) + ")")
    print(f"operators: {len(ptlite.export_opnames(program))}")
    print(f"weights:   {len(program.weights)} tensors, {_human_bytes(weight_bytes)}")
    print(f"wrote {output} ({_human_bytes(os.path.getsize(output))})")
    return 0


# ----------------------------------------------------------------------------------------------------
# run


def _parse_scalar(text: str, kind: str) -> Any:
    try:
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
        if kind == "bool":
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no"):
                return False
            raise ValueError(text)
    except ValueError:
        raise CliError(f"input {text!r} is not a valid {kind}") from None
    return text  # str inputs are taken as given


def _image_layout(spec: ptlite.ValueSpec | None,
                  override: tuple[int, int] | None) -> tuple[int, int, int, bool]:
    """(height, width, channels, batched) for images fed to an input with this spec."""
    shape = spec.shape if spec is not None else None
    rank = len(shape) if shape is not None else 4
    if rank not in (3, 4):
        raise CliError(f"input '{spec.name if spec else '?'}' has {rank} dimensions; images need "
                       "3 (C,H,W) or 4 (N,C,H,W)")
    height = width = None
    channels = 3
    if shape is not None:
        c, height, width = shape[-3:]
        channels = c if c is not None else 3
    if override is not None:
        height, width = override
    return (height or 224, width or 224, channels, rank == 4)


def _read_npy(path: str) -> np.ndarray:
    try:
        value = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise CliError(f"{path}: not a NumPy .npy file without Python objects ({exc})") from None
    if not isinstance(value, np.ndarray):
        raise CliError(f"{path}: holds several arrays; give one .npy file per input")
    return value


def _read_images(paths: list[str], spec: ptlite.ValueSpec | None, args: argparse.Namespace) -> np.ndarray:
    from .preprocess import load_image

    height, width, channels, batched = _image_layout(spec, args.image_size)
    images = []
    for path in paths:
        try:
            images.append(load_image(path, (height, width), channels=channels,
                                     normalized=not args.no_normalize))
        except ValueError as exc:  # load_image's errors name the file
            raise CliError(str(exc)) from None
    if batched:
        return np.stack(images)
    if len(images) > 1:
        raise CliError(f"input '{spec.name if spec else '?'}' takes one image [C, H, W], got {len(images)}")
    return images[0]


def _is_npy(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(6) == b"\x93NUMPY"


def _convert_dtype(value: np.ndarray, spec: ptlite.ValueSpec, path: str) -> np.ndarray:
    """Cast float64 to float32 (NumPy's default vs PyTorch's) and the like, within the same kind only.

    When the program does not record the input's dtype, float64 becomes float32, PyTorch's default.
    """
    if spec.dtype is None and value.dtype == np.float64:
        print(f"note: {path}: converted float64 to float32 for input '{spec.name}' (the program does not say "
              "which dtype it takes; PyTorch models usually take float32)", file=sys.stderr)
        return value.astype(np.float32)
    if spec.dtype is None or value.dtype == np.dtype(spec.dtype):
        return value
    want = np.dtype(spec.dtype)
    if value.dtype.kind == want.kind or (value.dtype.kind in "iu" and want.kind in "iu"):
        print(f"note: {path}: converted {value.dtype} to {want} for input '{spec.name}'", file=sys.stderr)
        return value.astype(want)
    return value  # the module reports the mismatch with the expected dtype


def _read_inputs(args: argparse.Namespace, specs: list[ptlite.ValueSpec]) -> list[Any]:
    items = list(args.inputs)
    stack = len(specs) == 1 and len(items) > 1 and all(_looks_like_image(p) for p in items)
    if stack:
        return [_read_images(items, specs[0], args)]
    if specs and len(items) > len(specs):
        names = ", ".join(s.name for s in specs)
        raise CliError(f"method '{args.method}' takes {len(specs)} input(s) ({names}), got {len(items)}")
    values = []
    for i, item in enumerate(items):
        spec = specs[i] if i < len(specs) else None
        if spec is not None and spec.type in _SCALAR_INPUTS and not os.path.exists(item):
            values.append(_parse_scalar(item, spec.type))
            continue
        if spec is not None and not os.path.exists(item) and _is_number(item):
            raise CliError(f"input {spec.describe()} takes an .npy file or an image, not the number {item}")
        _require_file(item)
        if _looks_like_image(item) and not _is_npy(item):
            values.append(_read_images([item], spec, args))
            continue
        if not _is_npy(item):
            raise CliError(f"{item}: not an .npy file or an image (png, jpg, ...)")
        value = _read_npy(item)
        values.append(_convert_dtype(value, spec, item) if spec is not None else value)
    return values


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _looks_like_image(path: str) -> bool:
    from .preprocess import is_image_path

    return is_image_path(path)


def _output_leaves(result: Any, specs: list[ptlite.ValueSpec]) -> list[tuple[str, Any]]:
    from .compare import flatten_outputs

    leaves = flatten_outputs(result)
    if len(specs) == len(leaves) and not isinstance(result, dict):
        return [(spec.name or name, value) for spec, (name, value) in zip(specs, leaves, strict=True)]
    return leaves


def _read_labels(path: str | None) -> list[str]:
    if path is None:
        return []
    _require_file(path)
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.strip() for line in f.read().splitlines()]


def _softmax(logits: np.ndarray) -> np.ndarray:
    x = logits.astype(np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def _print_top_k(logits: np.ndarray, k: int, labels: list[str], row_names: list[str]) -> None:
    probs = _softmax(logits)
    k = min(k, logits.shape[1])
    for row in range(logits.shape[0]):
        title = f"  top-{k} of {logits.shape[1]} classes"
        if logits.shape[0] > 1:
            title += f" for {row_names[row] if row < len(row_names) else f'row {row}'}"
        print(title + ":")
        order = np.argsort(-probs[row], kind="stable")[:k]
        width = len(str(logits.shape[1] - 1))
        names = [labels[cls] if cls < len(labels) else "" for cls in order]
        label_width = max(len(name) for name in names)
        for rank, (cls, name) in enumerate(zip(order, names, strict=True), 1):
            label = f"  {name:<{label_width}}" if label_width else ""
            print(f"    {rank}. class {cls:>{width}}{label}  {probs[row, cls] * 100:6.2f}%  "
                  f"(logit {logits[row, cls]:.4g})")


def _describe_value(name: str, value: Any) -> str:
    if isinstance(value, np.ndarray):
        text = f"{name}: shape {tuple(value.shape)} {value.dtype}"
        if value.size and value.size <= 8:
            text += f"  values {np.array2string(value.ravel(), precision=4, separator=', ')}"
        elif value.size and value.dtype.kind in "fiub":
            v = value.astype(np.float64)
            text += f"  min {v.min():.4g}  max {v.max():.4g}  mean {v.mean():.4g}"
        return text
    return f"{name}: {type(value).__name__} {value!r}"


def _is_classifier(value: Any) -> bool:
    """A [batch, classes] float array: worth showing the top classes of."""
    return (isinstance(value, np.ndarray) and value.ndim == 2 and value.dtype.kind == "f"
            and value.shape[1] >= 2)


def _save_outputs(path: str, leaves: list[tuple[str, Any]]) -> str:
    arrays = {}
    for name, value in leaves:
        if isinstance(value, np.ndarray) or isinstance(value, (int, float, bool, list, tuple)):
            arrays[name] = np.asarray(value)
    np.savez(path, **arrays)
    return path if path.endswith(".npz") else path + ".npz"


def cmd_run(args: argparse.Namespace) -> int:
    program = _load_program(args.model)
    if args.method not in program.methods:
        raise CliError(f"{args.model} has no method '{args.method}'; it has {', '.join(program.methods)}")
    specs = program.methods[args.method].input_specs
    labels = _read_labels(args.labels)
    inputs = _read_inputs(args, specs)
    start = time.perf_counter()
    module = ptlite.Module(program)
    loaded_s = time.perf_counter() - start
    start = time.perf_counter()
    result = module.run_method(args.method, *inputs)
    ran_s = time.perf_counter() - start
    print(f"{args.method} ran in {ran_s * 1e3:.1f} ms (prepared in {loaded_s * 1e3:.1f} ms)")
    leaves = _output_leaves(result, program.methods[args.method].output_specs)
    stacked_names = list(args.inputs) if len(args.inputs) > 1 and len(specs) == 1 else []
    for name, value in leaves:
        print(_describe_value(name, value))
        if args.top_k and _is_classifier(value):
            _print_top_k(value, args.top_k, labels, stacked_names)
    if args.save_outputs:
        print(f"saved outputs to {_save_outputs(args.save_outputs, leaves)}")
    return 0


# ----------------------------------------------------------------------------------------------------
# bench


def _read_npz(path: str, specs: list[ptlite.ValueSpec]) -> list[Any]:
    """Inputs from an .npz file: arrays named after the inputs, or saved in order (np.savez(path, *arrays))."""
    _require_file(path)
    try:
        data = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise CliError(f"{path}: not a NumPy .npz file without Python objects ({exc})") from None
    if not hasattr(data, "files"):
        raise CliError(f"{path}: holds one array, not an .npz file of inputs")
    with data:
        names = list(data.files)
        in_order = names == [f"arr_{i}" for i in range(len(names))]
        if not in_order and not set(names) <= {s.name for s in specs}:
            raise CliError(f"{path}: holds {', '.join(names)}; the inputs are {', '.join(s.name for s in specs)}: "
                           "save the arrays under these names, or in order with np.savez(path, *arrays)")
        if in_order:
            arrays = [data[name] for name in names]
            return [_npz_value(a, specs[i] if i < len(specs) else None, path) for i, a in enumerate(arrays)]
        values = []
        for spec in specs:
            if spec.name in names:
                values.append(_npz_value(data[spec.name], spec, path))
            elif spec.has_default:
                values.append(spec.default)
            else:
                raise CliError(f"{path}: has no array for input '{spec.name}'")
        return values


def _npz_value(value: np.ndarray, spec: ptlite.ValueSpec | None, path: str) -> Any:
    if spec is None:
        return value
    if spec.type in _SCALAR_INPUTS and value.ndim == 0:
        return value.item()
    return _convert_dtype(value, spec, path)


def _bench_inputs(args: argparse.Namespace, specs: list[ptlite.ValueSpec]) -> list[Any]:
    if not args.inputs:
        from .bench import random_inputs

        return random_inputs(specs, args.input_shape)
    if len(args.inputs) == 1 and args.inputs[0].endswith(".npz"):
        return _read_npz(args.inputs[0], specs)
    as_run = argparse.Namespace(inputs=args.inputs, method=getattr(args, "method", "forward"), image_size=None,
                                no_normalize=False)
    return _read_inputs(as_run, specs)


def cmd_bench(args: argparse.Namespace) -> int:
    from . import bench

    _require_file(args.model)
    if args.inputs and args.input_shape:
        raise CliError("give --inputs or --input-shape, not both")
    if args.compare is not None and ":" not in args.compare:
        raise CliError(f"--compare {args.compare!r} must be 'module:function', like ptlite.tools.zoo:mobilenet_v2")
    settings = bench.Settings(warmup=args.warmup, runs=args.runs, threads=args.threads or os.cpu_count() or 1,
                              profile=args.profile, top=args.top)
    if args.compare:
        forward = _load_program(args.model).methods.get("forward")
        if forward is None:
            raise CliError(f"{args.model} has no method 'forward'")
        result = bench.compare(args.model, _bench_inputs(args, forward.input_specs), args.compare, settings)
    else:
        result = bench.measure(args.model, lambda specs: _bench_inputs(args, specs), settings)
    result["input_source"] = (f"from {', '.join(args.inputs)}" if args.inputs
                              else f"random, seed {bench.SEED}")
    print(bench.format_report(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
        print(f"wrote {args.json}")
    failed = bench.failures(result)
    if failed:
        raise CliError("--compare: " + "; ".join(failed))
    differ = bench.differing_outputs(result)
    if differ:
        sys.stdout.flush()
        print("ptlite: --compare: the outputs differ from " + "; from ".join(differ), file=sys.stderr)
        return EXIT_DIFFERENT
    return 0


# ----------------------------------------------------------------------------------------------------
# compare


def cmd_compare(args: argparse.Namespace) -> int:
    from . import compare
    from .bench import SEED, describe_input, describe_inputs

    _require_file(args.model)
    if args.inputs and args.input_shape:
        raise CliError("give --inputs or --input-shape, not both")
    reference = args.reference
    pytorch_mobile = _is_pytorch_mobile(args.model)
    if reference is None:
        if not pytorch_mobile:
            # a name recorded in the file is only suggested: importing and calling it would run code a file chose
            source = _recorded_source(ptlite.load_program(args.model))
            hint = f"; it records that it was converted from {source}: --with {shlex.quote(source)}" if source else ""
            raise CliError(f"say what to compare {args.model} with: --with 'module:function' (the model it was "
                           f"converted from), a TorchScript file or a .ptl file{hint}")
        reference = args.model
    if (args.no_optimize or args.blocklist) and not pytorch_mobile:
        raise CliError("--no-optimize and --blocklist are for a .ptl file, optimized at load; a .ptlite file runs "
                       "as it was written (convert it again with 'ptlite convert --blocklist ...' to change that)")
    _check_blocklist(args)
    if not os.path.isfile(reference) and ":" not in reference:
        raise CliError(f"--with {reference}: no such file, and not 'module:function'")
    _import_torch()  # before running anything: the reference needs it
    if args.blocklist:
        module = ptlite.Module(ptlite.optimize_for_mobile(ptlite.load_program(args.model),
                                                          optimization_blocklist=args.blocklist))
    else:
        module = ptlite.load(args.model, optimize=False if args.no_optimize else None)
    if args.method not in module.method_names:
        raise CliError(f"{args.model} has no method '{args.method}'; it has {', '.join(module.method_names)}")
    specs = module.program.methods[args.method].input_specs
    inputs = _bench_inputs(args, specs)
    ours = module.run_method(args.method, *[np.array(v) if isinstance(v, np.ndarray) else v for v in inputs])
    theirs, title = compare.run_reference(reference, inputs, args.method)
    tolerance = compare.DEFAULT_TOLERANCE if args.tolerance is None else args.tolerance
    differences = compare.compare_outputs(ours, theirs, tolerance)
    source = f"from {', '.join(args.inputs)}" if args.inputs else f"random, seed {SEED}"
    described = ", ".join(map(describe_input, describe_inputs(specs, inputs)))
    how = ", not optimized" if args.no_optimize else ""
    how += f", without {', '.join(args.blocklist)}" if args.blocklist else ""
    print(f"ptlite:    {args.model} ({args.method}{how})")
    print(f"reference: {reference}, {title}")
    print(f"inputs:    {described or 'none'} ({source})")
    print(f"tolerance: {tolerance:g} x max |reference| (integer, boolean and string outputs: equal)")
    print("\n".join(compare.format_table(differences, "reference")))
    verdict = compare.summary(differences)
    if all(d.ok for d in differences):
        print(verdict)
        return 0
    sys.stdout.flush()
    print(f"ptlite: {verdict}", file=sys.stderr)
    return EXIT_DIFFERENT


def _recorded_source(program: ptlite.Program) -> str | None:
    """The 'module:function' a file records it was converted from, if it looks like one (it is the file's text:
    never imported here, and shown only when it cannot carry shell syntax or terminal escapes)."""
    source = program.metadata.get(SOURCE_KEY)
    return source if isinstance(source, str) and _SOURCE_PATTERN.fullmatch(source) else None


# ----------------------------------------------------------------------------------------------------
# ops, inspect, demo


def cmd_ops(args: argparse.Namespace) -> int:
    names = ptlite.export_opnames(_load_program(args.model))
    if args.yaml:
        print("\n".join(f"- {name}" for name in names) if names else "[]")
    else:
        print("\n".join(names))
    return 0


_NO_PLAN = "no memory plan in the file (if every input is a tensor, the first call makes one for its shapes)"


def _operator_counts(program: ptlite.Program) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    for graph in program.methods.values():
        for node in graph.walk():
            if node.op != "prim::Constant":
                counts[node.op] += 1
    return counts


def cmd_inspect(args: argparse.Namespace) -> int:
    program = _load_program(args.model)
    meta = program.metadata
    size = os.path.getsize(args.model)
    print(f"file:       {args.model} ({_human_bytes(size)}, {size} bytes)")
    print(f"producer:   {meta.get('producer') or 'unknown'}")
    print(f"captured:   {meta.get('capture', 'unknown')}"
          + (f" with torch {meta['torch_version']}" if meta.get("torch_version") else "")
          + (f" from {source}" if (source := _recorded_source(program)) else ""))
    print(f"methods:    {len(program.methods)}")
    for graph in program.methods.values():
        print(f"  {graph.name}")
        for spec in graph.input_specs:
            print(f"    in   {spec.describe()}")
        for spec in graph.output_specs:
            print(f"    out  {spec.describe()}")
    counts = _operator_counts(program)
    print(f"operators:  {len(counts)} distinct, {sum(counts.values())} calls")
    width = max((len(op) for op in counts), default=0)
    for op, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        print(f"  {op:<{width}}  {n}")
    _print_weights(program)
    from ptlite.ir.memory_plan import summary

    for graph in program.methods.values():
        plan = summary(program, graph.name)
        print(f"memory:     {graph.name}: {plan.describe() if plan else _NO_PLAN}")
    from ptlite.runtime.interpreter import missing_operators

    missing = missing_operators(program)
    if missing:
        print(f"runnable:   no; this ptlite lacks {', '.join(sorted(missing))}")
    else:
        print("runnable:   yes, every operator has a kernel here")
    if args.graph:
        print()
        print(program)
    return 0


def _print_weights(program: ptlite.Program) -> None:
    arrays = [np.asarray(w) for w in program.weights.values()]
    by_dtype: collections.Counter = collections.Counter()
    for arr in arrays:
        by_dtype[arr.dtype.name] += arr.nbytes
    total = sum(by_dtype.values())
    detail = ", ".join(f"{dtype} {_human_bytes(n)}" for dtype, n in sorted(by_dtype.items()))
    print(f"weights:    {len(arrays)} tensors, {sum(a.size for a in arrays)} values, {_human_bytes(total)}"
          + (f" ({detail})" if len(by_dtype) > 1 else ""))


def cmd_demo(args: argparse.Namespace) -> int:
    from . import demo

    return demo.run(quick=args.quick, out_dir=args.out_dir)


# ----------------------------------------------------------------------------------------------------
# entry point


def _error_text(exc: BaseException) -> str:
    """The error as one headline line; further lines (e.g. lists of operators) are indented under it."""
    if isinstance(exc, FileNotFoundError) and exc.filename:
        return f"{exc.filename}: no such file"
    if isinstance(exc, OSError) and exc.filename:
        return f"{exc.filename}: {exc.strerror or exc}"
    text = str(exc).strip() or type(exc).__name__
    if not isinstance(exc, (CliError, PtliteError, ImportError)):
        text = f"{type(exc).__name__}: {text}"
    lines = text.splitlines()
    return "\n".join([lines[0]] + [f"  {line}" for line in lines[1:21]]
                     + ([f"  ... ({len(lines) - 21} more lines)"] if len(lines) > 21 else []))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 outputs differ (compare, bench --compare), 2 error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a usage error already printed by argparse
        return exc.code if isinstance(exc.code, int) else EXIT_ERROR
    if args.command is None:
        parser.print_help()
        return EXIT_ERROR
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("ptlite: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `ptlite ops model.ptlite | head`
        return 0
    except Exception as exc:
        if os.environ.get("PTLITE_DEBUG"):
            raise
        sys.stdout.flush()
        print(f"ptlite: error: {_error_text(exc)}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
