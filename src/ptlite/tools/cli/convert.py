"""`ptlite convert`: capture a PyTorch model (or read a PyTorch Mobile file), optimize it, save a .ptlite file."""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from typing import Any, NamedTuple

import numpy as np

import ptlite
from ptlite.format.layout import MIN_VERSION_KEY
from ptlite.format.ptl import is_pytorch_mobile
from ptlite.preprocess.spec import stored_preprocessing
from ptlite.quantization import OBSERVERS, SCHEMES, report
from ptlite.tools import models
from ptlite.tools.errors import ToolError, require_file

from .options import check_blocklist, human_bytes, input_shape, log, tolerance

CAPTURE_METHODS = ("auto", "export", "script", "trace")
CAPTURE_STEPS = {"auto": "torch.export, else torch.jit.script, else torch.jit.trace", "export": "torch.export",
                 "script": "torch.jit.script", "trace": "torch.jit.trace"}
TORCHVISION_LABELS = {"imagenet": "_IMAGENET_CATEGORIES", "voc": "_VOC_CATEGORIES"}  # --labels NAME
INPUT_DTYPES = ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8", "bool")
CONVERT_EPILOG = """\
MODEL is 'module:function', a function or class called without arguments that returns an nn.Module (or
a (module, example_inputs) tuple); the current directory is importable, and 'path/to/file.py:function'
works too. MODEL can also be a file saved with torch.jit.save, or a PyTorch Mobile .ptl file
(_save_for_lite_interpreter), which is read without torch.

example: ptlite convert torchvision.models:resnet18 --input-shape 1,3,224,224 -o resnet18.ptlite"""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "convert", help="capture a PyTorch model (or read a .ptl file) into a .ptlite file (needs torch, except .ptl)",
        description=f"Capture a PyTorch model and save it as a .ptlite file. Needs torch ({models.TORCH_INSTALL}), "
                    "except for a PyTorch Mobile .ptl file, which ptlite reads itself.",
        epilog=CONVERT_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", metavar="MODEL",
                        help="'module:function', a TorchScript file, or a PyTorch Mobile .ptl file")
    parser.add_argument("-o", "--output", metavar="OUT",
                        help="the .ptlite file to write (default: MODEL's name with .ptlite, here)")
    parser.add_argument("--method", choices=CAPTURE_METHODS, default="auto",
                        help="how to capture: torch.export, torch.jit.script, torch.jit.trace, or auto "
                             "(try them in that order; default)")
    parser.add_argument("--input-shape", metavar="SHAPE", type=input_shape, action="append", default=[],
                        help="shape of an example input, e.g. 1,3,224,224; repeat for each input "
                             "(export and trace need them)")
    parser.add_argument("--input-dtype", metavar="DTYPE", choices=INPUT_DTYPES, action="append", default=[],
                        help="dtype of the example inputs: " + ", ".join(INPUT_DTYPES) + " (default "
                             "float32); give once for all inputs or once per --input-shape")
    parser.add_argument("--dynamic-batch", action="store_true",
                        help="with export: let the first dimension of every input vary (by default an "
                             "exported program accepts only the example shapes)")
    parser.add_argument("--no-optimize", action="store_true",
                        help="save the program as captured, without ptlite.optimize_for_mobile (which folds "
                             "batch norms into convolutions and drops dropout and dead code)")
    parser.add_argument("--blocklist", metavar="PASS", action="append", default=[],
                        help="skip one optimization (repeatable), by the names optimize_for_mobile's "
                             "optimization_blocklist takes: WINOGRAD (im2col for 3x3 convolutions: about 10x less "
                             "rounding error, slower), CONV_BN_FUSION, FUSE_ADD_RELU, MEMORY_PLAN, ...")
    parser.add_argument("--backend", default="cpu", metavar="NAME",
                        help="the backend the program is lowered for: its weight layouts, fusions and memory plan "
                             "(cpu: native where its library was built, else numpy; native; numpy). The file runs "
                             "anywhere: where that backend is missing, the NumPy reference runs it")
    parser.add_argument("--quantize", metavar="SCHEME", choices=SCHEMES,
                        help="quantize (before optimizing): " + ", ".join(SCHEMES) + " (fp16_weights: weight "
                             "matrices stored as float16, half the file, computed in float32; 3x3 convolutions "
                             "without Winograd. int8_static: convolutions, linear layers and additions in 8-bit "
                             "integers, a quarter of the file; needs --calibrate. int8_dynamic: linear layers' "
                             "weights in int8, their inputs quantized at each call; for transformers)")
    parser.add_argument("--calibrate", metavar="DIR",
                        help="int8_static's calibration data: a folder of images (preprocessed as 'run' does, "
                             "batched to the input's batch size), .npy files (one input each) or .npz files (one "
                             "call's inputs each); a few dozen the model sees in use")
    parser.add_argument("--observer", choices=OBSERVERS, default="histogram",
                        help="how int8_static picks each activation's range: histogram (the range with the least "
                             "rounding and clipping error; default) or minmax (every value seen)")
    parser.add_argument("--preserve-method", metavar="NAME", action="append", default=[],
                        help="keep another method of a scripted module (repeatable); run it with "
                             "'ptlite run --method NAME'")
    described = parser.add_argument_group(
        "what the file carries for the app (ptlite inspect shows it; ptlite run and Module.preprocessing use it)")
    described.add_argument("--preprocess", metavar="SPEC",
                           help="how an image becomes the input: 'imagenet' (resize 256, crop 224, RGB in [0, 1], "
                                "ImageNet mean/std, NCHW) and/or key=value words overriding it: size=H[,W] resize=N "
                                "crop=yes|no channels=RGB|BGR|L range=LOW,HIGH mean=A,B,C std=A,B,C "
                                "layout=NCHW|NHWC input=NAME; e.g. 'size=28 channels=L mean=0.1307 std=0.3081'")
    described.add_argument("--labels", metavar="FILE",
                           help="class names, one a line; or 'imagenet' / 'voc' for torchvision's lists")
    described.add_argument("--meta", metavar="KEY=VALUE", action="append", default=[],
                           help="a key of your own (repeatable; VALUE is JSON if it parses as JSON, else a string): "
                                "Module.metadata['user']")
    described.add_argument("--bundle-inputs", metavar="INPUT", nargs="*",
                           help="store example calls with PyTorch's outputs for them, which 'ptlite check' replays "
                                "on the device: images (preprocessed as --preprocess says), .npy files (one-input "
                                "models) or .npz files (one call's inputs each); none: the example inputs. It takes "
                                "every word after it: give it after MODEL")
    described.add_argument("--bundle-tolerance", metavar="T", type=tolerance, default=None,
                           help="each bundled output may differ from PyTorch's by T x its largest magnitude plus T "
                                "x |torch| per element (default 1e-3; with --quantize int8_*, 0.1)")
    parser.set_defaults(handler=run)


def _quantize(program: ptlite.Program, args: argparse.Namespace) -> ptlite.Program:
    if args.quantize != "int8_static":
        if args.calibrate:
            raise ToolError(f"{args.quantize} takes no calibration data; --calibrate is for int8_static")
        log.info(f"quantizing ({args.quantize})")
        return ptlite.quantize(program, args.quantize)
    if not args.calibrate:
        raise ToolError("--quantize int8_static needs --calibrate DIR: a folder of images or .npy/.npz inputs the "
                        "model sees in use (a few dozen), to learn its activations' ranges")
    from ptlite.tools.inputs import calibration_samples
    from ptlite.tools.progress import ProgressBar

    forward = program.methods.get("forward")
    if forward is None:
        raise ToolError("int8_static quantizes forward, which the model lacks")
    samples = calibration_samples(args.calibrate, forward.input_specs,  # as --preprocess says, recorded already
                                  preprocessing=stored_preprocessing(program.metadata))
    try:
        return ptlite.quantize(program, "int8_static", samples, observer=args.observer,
                               progress=ProgressBar(f"calibrating on {len(samples)} input(s)"))
    except (ptlite.errors.InputError, ValueError) as exc:
        raise ToolError(f"--calibrate {args.calibrate}: {exc}") from None


def _default_output(model: str) -> str:
    if ":" in model and not os.path.exists(model):
        stem = model.rpartition(":")[2].split(".")[-1]
    else:
        stem = os.path.splitext(os.path.basename(model))[0]
    return f"{stem or 'model'}.ptlite"


def run(args: argparse.Namespace) -> int:
    check_blocklist(args)
    if os.path.isfile(args.model) and is_pytorch_mobile(args.model):
        return _convert_pytorch_mobile(args)
    torch = models.import_torch()
    example = models.example_inputs(args.input_shape, args.input_dtype, torch)
    if os.path.isfile(args.model):
        model = models.load_torchscript(args.model, torch)
    elif ":" in args.model:
        model, built_example = models.make_model(args.model, torch)
        example = example if example is not None else built_example
    else:
        raise ToolError(f"{args.model}: no such file, and not 'module:function'")
    options: dict[str, Any] = {"preserved_methods": tuple(args.preserve_method)}
    if args.dynamic_batch:
        example, options["dynamic_shapes"] = models.dynamic_batch(example, torch)
    if args.method in ("export", "trace") and example is None:
        raise ToolError(f"--method {args.method} needs example inputs: give --input-shape (e.g. 1,3,224,224)")
    log.info(f"capturing {args.model} ({CAPTURE_STEPS[args.method]})")
    start = time.perf_counter()
    with warnings.catch_warnings():  # TorchScript's deprecation notices: converting is what the user asked
        warnings.filterwarnings("ignore", message=r".*torch\.jit\..*deprecated", category=FutureWarning)
        program = ptlite.capture(model, example, method=args.method, **options)
    captured_s = time.perf_counter() - start
    if not os.path.isfile(args.model) and models.SOURCE_PATTERN.fullmatch(args.model):  # shown by inspect and compare
        program.metadata[models.SOURCE_KEY] = args.model
    # (a frozen trace's warning is torch's and ptlite's UserWarning, shown as it happens;
    # why the methods auto tried first failed: the ptlite.frontend logger's line on stderr)
    headline = f"captured {args.model} with {program.metadata.get('capture', args.method)} in {captured_s:.1f} s"
    return _optimize_and_save(program, args, headline, Reference(model, example))


def _convert_pytorch_mobile(args: argparse.Namespace) -> int:
    """A PyTorch Mobile .ptl file: translated by ptlite's own reader (no torch needed), optimized and saved."""
    ignored = [flag for flag, given in (("--method", args.method != "auto"), ("--dynamic-batch", args.dynamic_batch),
                                        ("--preserve-method", args.preserve_method)) if given]
    if ignored:
        log.warning(f"{', '.join(ignored)} ignored: {args.model} is a PyTorch Mobile file, read as it is (forward "
                    "and the public methods; ptlite.load_program(path, methods=[...]) reads others)")
    log.info(f"reading {args.model} (PyTorch Mobile)")
    start = time.perf_counter()
    program = ptlite.load_program(args.model)
    read_s = time.perf_counter() - start
    if args.input_shape:
        _fix_input_shapes(program, args.input_shape, args.input_dtype)
        _try_input_shapes(program)
    elif args.input_dtype:
        raise ToolError("--input-dtype needs --input-shape")
    reference = None
    if args.bundle_inputs is not None:  # PyTorch's own answers come from its lite interpreter
        torch = models.import_torch()  # a clear error where torch is missing
        from torch.jit.mobile import _load_for_lite_interpreter

        example = models.example_inputs(args.input_shape, args.input_dtype, torch)  # None without --input-shape
        reference = Reference(_load_for_lite_interpreter(args.model), example)
    return _optimize_and_save(program, args, f"read {args.model} (PyTorch Mobile, bytecode version "
                                             f"{program.metadata.get('bytecode_version')}) in {read_s:.1f} s",
                              reference)


def _try_input_shapes(program: ptlite.Program) -> None:
    """Run forward once on random inputs of the --input-shape given: a .ptl file records no shapes, so a wrong one
    (a missing batch dimension, channels last) would otherwise surface only when the converted file refuses every
    real input. A note, not an error: a model may refuse random data for reasons of its own."""
    from ptlite.tools.bench import random_inputs

    specs = program.methods["forward"].input_specs
    try:
        ptlite.Module(program).forward(*random_inputs(specs))
    except (ptlite.errors.PtliteError, ValueError) as exc:
        shapes = ", ".join(f"{s.name} {list(s.shape)}" for s in specs if s.type == "Tensor")
        log.warning(f"forward fails on random inputs of the shapes given ({shapes}): {str(exc)[:300]}; the file is "
                    "written with these shapes, and accepts no others: check --input-shape")


def _fix_input_shapes(program: ptlite.Program, shapes: list[tuple[int, ...]], dtypes: list[str]) -> None:
    """--input-shape (and --input-dtype, default float32) for a .ptl file, which records neither: forward's tensor
    inputs get these static shapes and dtypes, so that optimize_for_mobile can plan memory; the converted file then
    accepts only them."""
    specs = [s for s in program.methods["forward"].input_specs if s.type == "Tensor"]
    if len(shapes) != len(specs):
        raise ToolError(f"forward takes {len(specs)} tensor input(s); give --input-shape once for each "
                       f"(got {len(shapes)})")
    if len(dtypes) not in (0, 1, len(shapes)):
        raise ToolError(f"give --input-dtype once, or once per --input-shape ({len(shapes)}), not {len(dtypes)} times")
    dtypes = dtypes * len(shapes) if len(dtypes) == 1 else dtypes or ["float32"] * len(shapes)
    for spec, shape, dtype in zip(specs, shapes, dtypes):
        if spec.shape is not None and len(spec.shape) != len(shape):
            raise ToolError(f"input '{spec.name}' has {len(spec.shape)} dimensions, --input-shape gives {len(shape)}")
        if spec.dtype is not None and spec.dtype != dtype:
            raise ToolError(f"input '{spec.name}' is {spec.dtype}, --input-dtype gives {dtype}")
        spec.shape, spec.dtype = tuple(shape), dtype


class Reference(NamedTuple):
    """The PyTorch model a file is converted from, which answers the bundled inputs, and its example inputs."""

    model: Any
    example: tuple | None


def _optimize_and_save(program: ptlite.Program, args: argparse.Namespace, headline: str,
                       reference: Reference | None = None) -> int:
    program = _attach(program, args, reference)  # first: a wrong --preprocess fails before the slow steps
    if args.quantize:  # first: optimizing then keeps the scheme and skips what must not precede it
        program = _quantize(program, args)
    elif args.calibrate:
        raise ToolError("--calibrate is int8_static's calibration data: give --quantize int8_static too")
    if not args.no_optimize:
        log.info(f"optimizing for mobile (backend {args.backend})")
        start = time.perf_counter()
        program = ptlite.optimize_for_mobile(program, optimization_blocklist=args.blocklist, backend=args.backend)
        log.debug(f"optimized in {time.perf_counter() - start:.2f} s")
    output = args.output or _default_output(args.model)
    log.info(f"writing {output}")
    start = time.perf_counter()
    ptlite.save(program, output)
    log.debug(f"wrote {output} in {time.perf_counter() - start:.2f} s")
    weight_bytes = sum(np.asarray(w).nbytes for w in program.weights.values())
    print(headline)
    if not args.no_optimize:
        print(f"optimized: {', '.join(program.metadata.get('passes', [])) or 'nothing to change'}")
    for name, graph in program.methods.items():
        print(f"  {name}(" + ", ".join(s.describe() for s in graph.input_specs) + ")")
    print(f"operators: {len(ptlite.export_opnames(program))}")
    print(f"weights:   {len(program.weights)} tensors, {human_bytes(weight_bytes)}")
    if args.quantize:
        print(f"quantized: {report(program)}")
    print(f"wrote {output} ({human_bytes(os.path.getsize(output))}; needs ptlite >= "
          f"{ptlite.load_program(output).metadata.get(MIN_VERSION_KEY)})")
    if program.bundled_inputs:
        return _check_written(output)
    return 0


def _check_written(output: str) -> int:
    """Replay the bundled inputs on the file just written, as 'ptlite check' will on the device."""
    log.info(f"replaying the bundled inputs on {output}")
    results = ptlite.load(output).check_bundled()
    failed = [r for r in results if not r.passed]
    calls = len({r.call for r in results})
    worst = max(results, key=lambda r: (not r.passed, r.excess if not r.passed else r.error / max(r.atol, 1e-30)))
    print(f"bundled: {calls} call(s), {len(results)} output(s); here: {worst.describe()}")
    if failed:
        for result in failed[:10]:
            log.warning(result.describe())
        raise ToolError(f"{len(failed)} bundled output(s) already exceed their tolerance here; the file is written, "
                        "but 'ptlite check' would fail it: give a larger --bundle-tolerance, or compare the model "
                        f"with 'ptlite compare {output}'")
    return 0


def _attach(program: ptlite.Program, args: argparse.Namespace, reference: Reference | None) -> ptlite.Program:
    """--preprocess, --labels, --meta and --bundle-inputs recorded on the program."""
    try:
        preprocessing = ptlite.Preprocessing.parse(args.preprocess) if args.preprocess is not None else None
    except ValueError as exc:
        raise ToolError(f"--preprocess: {str(exc).removeprefix('preprocessing: ')}") from None
    metadata = dict(_meta_pair(text) for text in args.meta) if args.meta else None
    try:
        program = ptlite.attach(program, preprocessing=preprocessing, labels=_labels(args.labels),
                                  metadata=metadata)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    if args.bundle_inputs is None:
        if args.bundle_tolerance is not None:
            raise ToolError("--bundle-tolerance is for --bundle-inputs")
        return program
    if reference is None:
        raise ToolError("--bundle-inputs needs the PyTorch model to answer them")
    calls = _bundle_calls(program, args, reference)
    log.info(f"running PyTorch on {len(calls)} bundled input(s)")
    tolerance = args.bundle_tolerance
    if tolerance is None:
        tolerance = 0.1 if args.quantize and args.quantize.startswith("int8") else 1e-3
    if not tolerance >= 0:
        raise ToolError(f"--bundle-tolerance must be a non-negative number, not {tolerance}")
    try:
        return ptlite.attach(program, bundled_inputs=ptlite.bundle_inputs(reference.model, calls,
                                                                           tolerance=tolerance))
    except ptlite.CaptureError as exc:
        raise ToolError(f"--bundle-inputs: {exc}") from None


def _bundle_calls(program: ptlite.Program, args: argparse.Namespace, reference: Reference) -> list[tuple]:
    """The calls --bundle-inputs names: one per file (an .npz file holds one call's inputs), or the example inputs."""
    if not args.bundle_inputs:
        if reference.example is None:
            raise ToolError("--bundle-inputs without files bundles the example inputs: give --input-shape, or name "
                            "input files (images, .npy, .npz)")
        return [tuple(reference.example)]
    from ptlite.tools.inputs import read_inputs, read_npz

    specs = program.methods["forward"].input_specs
    preprocessing = stored_preprocessing(program.metadata)
    return [tuple(read_npz(item, specs) if item.endswith(".npz") else
                  read_inputs([item], specs, preprocessing=preprocessing)) for item in args.bundle_inputs]


def _labels(text: str | None) -> list[str] | None:
    """--labels: a file of class names, or torchvision's list by name."""
    if text is None:
        return None
    if text in TORCHVISION_LABELS and not os.path.exists(text):
        try:
            from torchvision.models import _meta
        except ImportError:
            raise ToolError(f"--labels {text} takes torchvision's list, and torchvision is not installed: pip "
                            "install torchvision, or give a file with one class name a line") from None
        return list(getattr(_meta, TORCHVISION_LABELS[text]))
    require_file(text)
    with open(text, encoding="utf-8", errors="replace") as f:
        names = [line.strip() for line in f.read().splitlines()]
    while names and not names[-1]:
        names.pop()
    if not names:
        raise ToolError(f"--labels {text}: the file has no class names (one a line)")
    return names


def _meta_pair(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ToolError(f"--meta {text!r}: expected KEY=VALUE")
    try:
        return key.strip(), json.loads(value)
    except ValueError:
        return key.strip(), value
