"""`ptlite demo --classify` and `--segment`: PyTorch Mobile's two vision demo apps, with ptlite on the device side.

Workstation (torch): build the model (MobileNetV2, or DeepLabV3 on MobileNetV3-Large), capture it with torch.export,
optimize it for mobile and save it with its preprocessing, its class labels and the first photograph bundled with
PyTorch's answer. Device (a separate Python in which `import torch` fails): load the file, preprocess each photograph
as the file says, run, print the top-5 classes with the file's labels (classify) or write a PNG with the class mask
blended over the photograph and a legend (segment), and replay the bundled input. Back on the workstation, the
device's outputs are compared with PyTorch's on the same inputs.

Nothing can be downloaded here, so the weights are random (calibrated so that outputs are O(1)): the classes are
meaningless, and the demo says so. What it shows is the workflow, and that ptlite's outputs equal PyTorch's.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

SAMPLE_PHOTOS = ("china.jpg", "flower.jpg")  # scikit-learn's sample photographs: the default images


@dataclass(frozen=True)
class Task:
    """One demo: the zoo model, the preprocessing its file records, the labels (torchvision's list)."""

    name: str
    model: str
    preprocessing: str
    labels: str
    input_size: int


TASKS = {
    "classify": Task("classify", "mobilenet_v2", "imagenet", "_IMAGENET_CATEGORIES", 224),
    # the segmentation app squeezes the whole photograph to the model's input (no crop): the mask covers all of it
    "segment": Task("segment", "deeplabv3_mobilenet_v3_large", "imagenet size=320 crop=no", "_VOC_CATEGORIES", 320),
}


# -- the device side (no torch) ----------------------------------------------------------------------------------------

def palette(count: int) -> np.ndarray:
    """`count` distinct RGB colours (uint8 [count, 3]): the background black, the others spread over the hues."""
    colours = np.zeros((count, 3), np.uint8)
    for i in range(1, count):
        hue = (i * 0.618034) % 1.0  # golden-ratio steps: neighbours differ
        k = (np.array([5.0, 3.0, 1.0]) + hue * 6) % 6
        rgb = 1 - np.clip(np.minimum(k, 4 - k), 0, 1)  # HSV to RGB at full saturation and value
        colours[i] = np.round(rgb * 235 + 20).astype(np.uint8)
    return colours


def class_mask(logits: np.ndarray, height: int, width: int) -> np.ndarray:
    """Per-pixel classes (int64 [height, width]) of [1, classes, h, w] logits, scaled to the photograph's size by
    nearest neighbour (as the demo app draws it)."""
    mask = np.argmax(logits[0], axis=0)
    rows = (np.arange(height) * mask.shape[0]) // height
    cols = (np.arange(width) * mask.shape[1]) // width
    return mask[rows][:, cols]


LEGEND_ROW = 18  # pixels per legend line
BLEND = 0.5  # the mask's weight over the photograph


def overlay(photo: np.ndarray, mask: np.ndarray, labels: list[str]) -> Any:
    """The photograph (uint8 [H, W, 3]) with each pixel's class colour blended over it, and below it a legend of
    the classes present (most pixels first) with their share: a PIL image of width W and height H + the legend's."""
    from PIL import Image, ImageDraw

    colours = palette(max(len(labels), int(mask.max()) + 1))
    blended = np.round(photo * (1 - BLEND) + colours[mask] * BLEND).astype(np.uint8)
    classes, counts = np.unique(mask, return_counts=True)
    order = np.argsort(-counts, kind="stable")
    height, width = mask.shape
    canvas = Image.new("RGB", (width, height + LEGEND_ROW * len(classes) + 8), (255, 255, 255))
    canvas.paste(Image.fromarray(blended), (0, 0))
    draw = ImageDraw.Draw(canvas)
    for line, i in enumerate(order):
        top = height + 4 + line * LEGEND_ROW
        cls = int(classes[i])
        draw.rectangle((6, top + 2, 6 + 24, top + LEGEND_ROW - 4), fill=tuple(int(c) for c in colours[cls]),
                       outline=(0, 0, 0))
        name = labels[cls] if cls < len(labels) else f"class {cls}"
        draw.text((38, top + 2), f"{name}  {counts[i] / mask.size * 100:.1f} %", fill=(0, 0, 0))
    return canvas


def device_run(model_path: str, image_paths: list[str], out_dir: str, task_name: str) -> dict[str, Any]:
    """What the app does, with ptlite alone: load, preprocess as the file says, run, show; replay the bundled input.
    Returns the report (JSON-able); the outputs go to out_dir/device_outputs.npz."""
    import ptlite
    from ptlite.preprocess.image import read_image

    start = time.perf_counter()
    module = ptlite.load(model_path)
    load_ms = (time.perf_counter() - start) * 1e3
    preprocessing, labels = module.preprocessing, module.labels or []
    report: dict[str, Any] = {"load_ms": load_ms, "preprocessing": preprocessing.describe(), "images": []}
    outputs = {}
    for i, path in enumerate(image_paths):
        x = preprocessing.load(path)
        start = time.perf_counter()
        result = module(x)
        run_ms = (time.perf_counter() - start) * 1e3
        entry: dict[str, Any] = {"image": path, "run_ms": run_ms}
        if task_name == "classify":
            outputs[f"image{i}"] = np.asarray(result)
            logits = outputs[f"image{i}"][0]
            probs = np.exp(logits - logits.max())
            probs /= probs.sum()
            top = np.argsort(-logits, kind="stable")[:5]
            entry["top5"] = [[int(c), labels[c] if c < len(labels) else "", float(probs[c])] for c in top]
        else:
            logits = np.asarray(result["out"])
            outputs[f"image{i}"] = logits
            photo = read_image(path, lambda image: np.asarray(image.convert("RGB")))  # upright, as preprocessed
            mask = class_mask(logits, *photo.shape[:2])
            png = os.path.join(out_dir, f"{os.path.splitext(os.path.basename(path))[0]}_segmented.png")
            overlay(photo, mask, labels).save(png)
            classes, counts = np.unique(mask, return_counts=True)
            entry["png"] = png
            entry["classes"] = [[int(c), labels[c] if c < len(labels) else "", float(n / mask.size)]
                                for c, n in sorted(zip(classes, counts), key=lambda p: -p[1])]
        report["images"].append(entry)
    np.savez(os.path.join(out_dir, "device_outputs.npz"), **outputs)
    checks = module.check_bundled()
    report["check"] = {"passed": all(c.passed for c in checks), "lines": [c.describe() for c in checks]}
    return report


# -- the workstation side ----------------------------------------------------------------------------------------------

def sample_photos(out_dir: str) -> list[str]:
    """scikit-learn's sample photographs, written as JPEG files (what an app would be given)."""
    from PIL import Image
    from sklearn.datasets import load_sample_image

    paths = []
    for name in SAMPLE_PHOTOS:
        path = os.path.join(out_dir, name)
        Image.fromarray(load_sample_image(name)).save(path, quality=95)
        paths.append(path)
    return paths


def convert(task: Task, photo: str, path: str) -> tuple[Any, dict[str, Any]]:
    """Build, capture, optimize and save the model with its preprocessing, labels and a bundled input; returns the
    PyTorch model and what each stage did."""
    import torch
    from torchvision.models import _meta

    import ptlite
    from ptlite.tools import zoo

    stages: dict[str, Any] = {}
    start = time.perf_counter()
    model = getattr(zoo, task.model)()
    stages["build_s"] = time.perf_counter() - start
    example = torch.from_numpy(ptlite.Preprocessing.parse(task.preprocessing).with_input_shape(
        (1, 3, task.input_size, task.input_size)).load(photo))
    start = time.perf_counter()
    captured = ptlite.capture(model, (example,), method="export")
    stages["capture_s"] = time.perf_counter() - start
    start = time.perf_counter()
    program = ptlite.optimize_for_mobile(captured)
    stages["optimize_s"] = time.perf_counter() - start
    stages["passes"] = program.metadata.get("passes", [])
    stages["nodes"] = (sum(1 for _ in captured.forward.walk()), sum(1 for _ in program.forward.walk()))
    ptlite.save(program, path, preprocessing=task.preprocessing, labels=list(getattr(_meta, task.labels)),
                metadata={"demo": task.name}, bundled_inputs=ptlite.bundle_inputs(model, (example,)))
    stages["operators"] = len(ptlite.export_opnames(program))
    return model, stages


def run_device_side(model_path: str, images: list[str], out_dir: str, task: str) -> dict[str, Any]:
    """device_run in a fresh Python in which importing torch fails; returns its report."""
    from .demo import run_torch_free

    code = ("import json, sys\nfrom ptlite.tools.vision_demo import device_run\n"
            "print(json.dumps(device_run(sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4])))\n"
            "print(json.dumps({'torch_loaded': 'torch' in sys.modules}))\n")
    lines = run_torch_free(code, [model_path, json.dumps(images), out_dir, task], timeout=600)
    report = json.loads(lines[-2])
    report["torch_loaded"] = json.loads(lines[-1])["torch_loaded"]
    return report


def torch_outputs(model: Any, model_path: str, images: list[str], task: Task) -> dict[str, np.ndarray]:
    """PyTorch's outputs for the images, preprocessed exactly as the device did (the file's preprocessing)."""
    import torch

    import ptlite

    spec = ptlite.load(model_path).preprocessing  # the file's, with the input's size
    outputs = {}
    with torch.no_grad():
        for i, path in enumerate(images):
            result = model(torch.from_numpy(spec.load(path)))
            outputs[f"image{i}"] = (result["out"] if task.name == "segment" else result).numpy()
    return outputs


def run(task_name: str, images: list[str] | None = None, out_dir: str | None = None) -> int:
    """The demo; prints as it goes and returns 0 when the device's outputs match PyTorch's, 1 when they do not."""
    try:
        import torch  # noqa: F401
        import torchvision  # noqa: F401
    except ImportError:
        raise ImportError("the vision demos build the model with PyTorch and torchvision: pip install torch "
                          "torchvision (the device side then runs without them)") from None
    task = TASKS[task_name]
    out_dir = out_dir or tempfile.mkdtemp(prefix=f"ptlite-{task_name}-")
    os.makedirs(out_dir, exist_ok=True)
    images = [os.path.abspath(p) for p in images] if images else sample_photos(out_dir)
    for path in images:
        if not os.path.isfile(path):
            raise FileNotFoundError(path)
    model_path = os.path.join(out_dir, f"{task.model}.ptlite")
    print(f"ptlite demo --{task_name}: {task.model}, as PyTorch Mobile's {task_name} demo app runs it")
    print("  note: nothing can be downloaded here, so the weights are random (calibrated so that outputs are O(1)):")
    print("        the classes below are meaningless; what the demo shows is that ptlite's outputs equal PyTorch's")
    model, stages = convert(task, images[0], model_path)
    print(f"  workstation: built in {stages['build_s']:.1f} s, captured with torch.export in "
          f"{stages['capture_s']:.1f} s, optimized in {stages['optimize_s']:.1f} s "
          f"({stages['nodes'][0]} -> {stages['nodes'][1]} nodes: {', '.join(stages['passes'])})")
    print(f"  saved {model_path} ({os.path.getsize(model_path) / 2**20:.1f} MiB, {stages['operators']} operators) "
          f"with its preprocessing ({task.preprocessing}), {task.labels.strip('_').split('_')[0].lower()} labels "
          f"and {os.path.basename(images[0])} bundled with PyTorch's answer")
    report = run_device_side(model_path, images, out_dir, task_name)
    if report["torch_loaded"]:
        raise RuntimeError("the device process imported torch; it proves nothing")
    print(f"  device (a Python in which 'import torch' fails): loaded in {report['load_ms']:.0f} ms, "
          f"preprocessing from the file: {report['preprocessing']}")
    expected = torch_outputs(model, model_path, images, task)
    with np.load(os.path.join(out_dir, "device_outputs.npz")) as device:
        got = {k: device[k] for k in device.files}
    agree = True
    for i, entry in enumerate(report["images"]):
        key = f"image{i}"
        diff = float(np.max(np.abs(got[key] - expected[key])))
        scale = float(np.max(np.abs(expected[key])))
        print(f"  {os.path.basename(entry['image'])}: ran in {entry['run_ms']:.0f} ms; max |ptlite - PyTorch| "
              f"{diff:.2g} (outputs up to {scale:.2g})")
        if task_name == "classify":
            torch_top = list(np.argsort(-expected[key][0], kind="stable")[:5])
            same = torch_top == [c for c, _, _ in entry["top5"]]
            for rank, (cls, name, prob) in enumerate(entry["top5"], 1):
                print(f"      {rank}. {name or cls:<28} {prob * 100:5.1f} %")
            print(f"      top-5 {'the same as' if same else 'DIFFERENT from'} PyTorch's")
        else:
            torch_mask = np.argmax(expected[key][0], axis=0)
            same_pixels = float(np.mean(torch_mask == np.argmax(got[key][0], axis=0)))
            same = same_pixels > 0.999
            shown = ", ".join(f"{name} {share * 100:.0f} %" for _, name, share in entry["classes"][:5])
            print(f"      classes: {shown}; {same_pixels * 100:.2f} % of the pixels get PyTorch's class")
            print(f"      wrote {entry['png']}")
        agree = agree and same and diff <= 1e-3 * max(scale, 1.0)
    check = report["check"]
    print(f"  bundled input replayed on the device: {'ok' if check['passed'] else 'FAILED'}: {check['lines'][0]}")
    agree = agree and check["passed"]
    print()
    print("result: " + ("ptlite on the device gives PyTorch's outputs" if agree else
                        "MISMATCH: ptlite's outputs differ from PyTorch's; this is a bug, please report it"))
    print(f"Try next: ptlite inspect {model_path}; ptlite check {model_path}; ptlite run {model_path} "
          f"{images[0]}")
    return 0 if agree else 1
