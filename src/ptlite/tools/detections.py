"""Object detectors on the command line: images as a detector takes them (a list of 3xHxW float images in [0, 1],
as torchvision's do), its detections found in what it returns, printed, and drawn on the image (Pillow)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ptlite.tools.errors import ToolError

DETECTION_KEYS = ("boxes", "scores", "labels")
LIST_OF_IMAGES = "List[Tensor]"


def takes_image_list(specs: list[Any]) -> bool:
    """Whether a method's first input is a list of images (torchvision's detectors: List[Tensor])."""
    return bool(specs) and specs[0].type.replace(" ", "") == LIST_OF_IMAGES


def read_image_list(paths: list[str], size: tuple[int, int] | None = None) -> list[np.ndarray]:
    """Image files as a detector takes them: RGB, 3xHxW float32 in [0, 1], upright as their EXIF says, at their
    own size (detectors resize inside) or resized to size (height, width)."""
    from ptlite.preprocess.image import read_image, to_chw_float

    def convert(image: Any) -> np.ndarray:
        image = image.convert("RGB")
        if size is not None:
            image = image.resize((size[1], size[0]))
        return to_chw_float(image)

    images = []
    for path in paths:
        if not os.path.isfile(path):
            raise ToolError(f"{path}: no such file")
        try:
            images.append(read_image(path, convert))
        except ValueError as exc:  # names the file
            raise ToolError(str(exc)) from None
    return images


def find_detections(result: Any) -> list[dict[str, np.ndarray]] | None:
    """The per-image detections in a method's result: a list of dicts holding boxes, scores and labels (what
    torchvision's detectors return; scripted, inside a (losses, detections) tuple), else None."""
    if isinstance(result, list) and result and all(
            isinstance(d, dict) and all(k in d for k in DETECTION_KEYS) for d in result):
        return result
    if isinstance(result, (tuple, list)):
        for item in result:
            found = find_detections(item)
            if found is not None:
                return found
    return None


def _label_name(label: int, labels: list[str]) -> str:
    return labels[label] if 0 <= label < len(labels) and labels[label] else f"class {label}"


def best(detections: dict[str, np.ndarray], k: int) -> np.ndarray:
    """Indices of the k highest-scoring detections (all for k=0), best first."""
    order = np.argsort(-np.asarray(detections["scores"], np.float64), kind="stable")
    return order[:k] if k else order


def print_detections(detections: list[dict[str, np.ndarray]], k: int, labels: list[str],
                     names: list[str]) -> None:
    """For each image: how many detections, then the k best (all for k=0): score, label and box."""
    for i, found in enumerate(detections):
        count = len(found["scores"])
        title = f"  {count} detection{'s' if count != 1 else ''}"
        if len(detections) > 1:
            title += f" in {names[i] if i < len(names) else f'image {i}'}"
        shown = best(found, k)
        if count > len(shown):
            title += f", the {len(shown)} best"
        print(title + (":" if len(shown) else ""))
        for rank, j in enumerate(shown, 1):
            x1, y1, x2, y2 = (float(v) for v in found["boxes"][j])
            name = _label_name(int(found["labels"][j]), labels)
            print(f"    {rank}. {name}  {float(found['scores'][j]):.3f}  box ({x1:.1f}, {y1:.1f}, {x2:.1f}, {y2:.1f})")


def _colour(label: int) -> tuple[int, int, int]:
    """A bright colour per label, the same on every run."""
    rng = np.random.default_rng(label)
    rgb = rng.integers(64, 256, 3)
    rgb[label % 3] = 255
    return int(rgb[0]), int(rgb[1]), int(rgb[2])


def draw(image: np.ndarray, detections: dict[str, np.ndarray], indices: np.ndarray, labels: list[str],
         path: str) -> str:
    """Write the image (3xHxW in [0, 1]) as a PNG with the chosen detections drawn: a box and 'label score' per
    detection, best last (on top). Returns the path written."""
    from PIL import Image, ImageDraw

    pixels = np.clip(np.asarray(image, np.float32).transpose(1, 2, 0) * 255 + 0.5, 0, 255).astype(np.uint8)
    picture = Image.fromarray(pixels if pixels.shape[2] == 3 else pixels[:, :, 0])
    if picture.mode != "RGB":
        picture = picture.convert("RGB")
    pen = ImageDraw.Draw(picture)
    for j in indices[::-1]:
        label = int(detections["labels"][j])
        colour = _colour(label)
        x1, y1, x2, y2 = (float(v) for v in detections["boxes"][j])
        pen.rectangle([x1, y1, max(x1, x2), max(y1, y2)], outline=colour, width=2)
        text = f"{_label_name(label, labels)} {float(detections['scores'][j]):.2f}"
        left, top, right, bottom = pen.textbbox((x1, y1), text)
        y = y1 - (bottom - top) - 2 if y1 - (bottom - top) - 2 >= 0 else y1
        pen.rectangle([x1, y, x1 + right - left + 2, y + bottom - top + 2], fill=colour)
        pen.text((x1 + 1, y), text, fill=(0, 0, 0))
    try:
        picture.save(path, format="PNG")
    except OSError as exc:
        raise ToolError(f"cannot write {path}: {exc}") from None
    return path


def draw_paths(path: str, count: int) -> list[str]:
    """Where --draw writes each image's picture: the path itself for one image, PATH-i.png for several."""
    if count == 1:
        return [path]
    stem, ext = os.path.splitext(path)
    return [f"{stem}-{i}{ext or '.png'}" for i in range(count)]
