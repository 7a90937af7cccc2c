"""`ptlite run`: run a method of a .ptlite file on files or numbers and print its outputs (the top classes of a
classifier's, the best boxes of a detector's, drawn on the image with --draw)."""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

import ptlite
from ptlite.preprocess.spec import stored_labels, stored_preprocessing
from ptlite.tools import detections as detector
from ptlite.tools import inputs as model_inputs
from ptlite.tools.errors import ToolError, require_file
from ptlite.tools.frames import FRAME_FORMATS, FrameSpec, read_frames

from .options import add_backend_option, image_size, load_program, non_negative_int


def frame_spec(text: str) -> FrameSpec:
    """--frame: argparse's type."""
    try:
        return FrameSpec.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None

RUN_EPILOG = """\
Images are preprocessed as the file says (ptlite convert --preprocess; 'ptlite inspect' shows it). A file that
does not say is given ImageNet's evaluation transform: resized (shorter side) and center-cropped to the input
shape the model was captured with (224 when unknown), scaled to [0, 1] and normalized with ImageNet's mean and
std. Several images for a one-input model are stacked into a batch. Classes are named by the file's labels
(ptlite convert --labels) unless --labels gives others.

A detector taking a list of images (torchvision's, scripted: List[Tensor]) is given the images as they are, RGB
in [0, 1] at their own size; its best boxes are printed (--top-k), and --draw writes the image with them drawn.

examples: ptlite run resnet18.ptlite cat.jpg
          ptlite run ssdlite.ptlite street.jpg --top-k 10 --draw boxes.png"""


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "run", help="run a .ptlite or .ptl file on .npy or image inputs (no torch needed)",
        description="Run a method of a .ptlite (or PyTorch Mobile .ptl) file and print its outputs; for a "
                    "classifier (an output of shape [batch, classes]) print the top classes with softmax "
                    "probabilities.",
        epilog=RUN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", metavar="MODEL", help="a .ptlite file, or a PyTorch Mobile .ptl file")
    parser.add_argument("inputs", metavar="INPUT", nargs="+",
                        help="one per model input: an .npy file, an image file (png, jpg, ...), or a number "
                             "for an int/float/bool input")
    parser.add_argument("--method", metavar="NAME", default="forward",
                        help="the method to run (default forward)")
    parser.add_argument("--top-k", metavar="K", type=non_negative_int, default=5,
                        help="classes to show for classifier outputs, boxes for a detector's (default 5; 0 "
                             "turns classes off and shows every box)")
    parser.add_argument("--labels", metavar="FILE",
                        help="a text file with one class name a line (default: the labels the file records)")
    parser.add_argument("--image-size", metavar="SIZE", type=image_size,
                        help="crop images to SIZE or HEIGHT,WIDTH instead of the model's input shape")
    parser.add_argument("--frame", metavar="SPEC", type=frame_spec,
                        help="the INPUTs are raw camera frames (dumped from an app): FORMAT,WIDTHxHEIGHT"
                             "[,rotate=DEG][,range=full|video][,stride=BYTES], FORMAT one of "
                             f"{', '.join(FRAME_FORMATS)}; rotated upright, cropped and normalized as the file's "
                             "preprocessing says (ImageNet's where it says nothing)")
    parser.add_argument("--no-normalize", action="store_true",
                        help="feed images scaled to their value range ([0, 1] unless the file says otherwise), "
                             "without mean/std normalization")
    parser.add_argument("--save-outputs", metavar="OUT.npz", help="save every output array to an .npz file")
    parser.add_argument("--draw", metavar="OUT.png",
                        help="a detector's image with the boxes shown (--top-k) drawn, as a PNG (OUT-i.png for "
                             "several images)")
    parser.add_argument("--no-limits", action="store_true",
                        help="lift the run-time limits on memory, loop iterations and time (ptlite.Limits; for "
                             "trusted files that need more than the defaults)")
    add_backend_option(parser)
    parser.set_defaults(handler=run)


def _output_leaves(result: Any, specs: list[ptlite.ValueSpec]) -> list[tuple[str, Any]]:
    from ptlite.tools.compare import flatten_outputs

    leaves = flatten_outputs(result)
    if len(specs) == len(leaves) and not isinstance(result, dict):
        return [(spec.name or name, value) for spec, (name, value) in zip(specs, leaves, strict=True)]
    return leaves


def _read_labels(path: str | None) -> list[str]:
    if path is None:
        return []
    require_file(path)
    with open(path, encoding="utf-8", errors="replace") as f:
        return [line.strip() for line in f.read().splitlines()]


def _described(program: ptlite.Program, path: str) -> tuple[ptlite.Preprocessing | None, list[str]]:
    """The preprocessing and labels a file records (None and [] where it records none)."""
    try:
        return stored_preprocessing(program.metadata), stored_labels(program.metadata) or []
    except ValueError as exc:
        raise ToolError(f"{path}: the file's metadata is invalid: {exc}") from None


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


def run(args: argparse.Namespace) -> int:
    program = load_program(args.model)
    if args.method not in program.methods:
        raise ToolError(f"{args.model} has no method '{args.method}'; it has {', '.join(program.methods)}")
    specs = program.methods[args.method].input_specs
    preprocessing, file_labels = _described(program, args.model)
    labels = _read_labels(args.labels) if args.labels else file_labels
    if args.draw and (args.frame is not None or not detector.takes_image_list(specs)):
        raise ToolError(f"--draw draws on the images given to a detector that takes a list of them (List[Tensor], "
                        f"as torchvision's scripted ones); '{args.method}' of {args.model} takes "
                        f"{', '.join(s.describe() for s in specs) or 'nothing'}")
    images = None
    if args.frame is None and detector.takes_image_list(specs):
        images = detector.read_image_list(args.inputs, args.image_size)
        inputs = [images]
    elif args.frame is not None:
        if len(specs) != 1:
            raise ToolError(f"--frame feeds a method of one image input; '{args.method}' takes {len(specs)}")
        inputs = [read_frames(args.inputs, args.frame, preprocessing or ptlite.Preprocessing(), specs[0].shape)]
    else:
        inputs = model_inputs.read_inputs(args.inputs, specs, args.method, args.image_size, not args.no_normalize,
                                          preprocessing if args.method == "forward" else None)
    start = time.perf_counter()
    module = ptlite.Module(program, args.backends, limits=ptlite.Limits.none() if args.no_limits else None)
    loaded_s = time.perf_counter() - start
    start = time.perf_counter()
    result = module.run_method(args.method, *inputs)
    ran_s = time.perf_counter() - start
    print(f"{args.method} ran in {ran_s * 1e3:.1f} ms (prepared in {loaded_s * 1e3:.1f} ms)")
    leaves = _output_leaves(result, program.methods[args.method].output_specs)
    stacked_names = list(args.inputs) if len(args.inputs) > 1 and len(specs) == 1 else []
    for name, value in leaves:
        print(_describe_value(name, value))
        if args.top_k and _is_classifier(value) and detector.find_detections(result) is None:
            _print_top_k(value, args.top_k, labels, stacked_names)
    _show_detections(args, result, labels, images)
    if args.save_outputs:
        print(f"saved outputs to {_save_outputs(args.save_outputs, leaves)}")
    return 0


def _show_detections(args: argparse.Namespace, result: Any, labels: list[str], images: list | None) -> None:
    """A detector's best boxes, printed and, with --draw, drawn on its images."""
    found = detector.find_detections(result)
    if found is None:
        if args.draw:
            raise ToolError(f"--draw needs a detector's output (a list of dicts of boxes, scores and labels); "
                            f"'{args.method}' of {args.model} returns none")
        return
    detector.print_detections(found, args.top_k, labels, list(args.inputs))
    if args.draw:
        if images is None or len(images) != len(found):
            raise ToolError(f"--draw: the detector returned detections for {len(found)} images, given "
                            f"{len(images or [])}")
        for image, detections, path in zip(images, found, detector.draw_paths(args.draw, len(found)), strict=True):
            shown = detector.best(detections, args.top_k)
            print(f"drew {len(shown)} boxes on {detector.draw(image, detections, shown, labels, path)}")
