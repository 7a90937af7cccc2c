"""A model's inputs from files and text: .npy and .npz arrays, images (preprocessed to the input's shape), numbers;
as `ptlite run`, `bench --inputs` and `compare --inputs` take them."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

import ptlite
from ptlite.preprocess.spec import Preprocessing

from .errors import ToolError, require_file

log = logging.getLogger(__name__)

_SCALAR_INPUTS = ("int", "float", "bool", "str")


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
        raise ToolError(f"input {text!r} is not a valid {kind}") from None
    return text  # str inputs are taken as given


def _image_layout(spec: ptlite.ValueSpec | None,
                  override: tuple[int, int] | None) -> tuple[int, int, int, bool]:
    """(height, width, channels, batched) for images fed to an input with this spec."""
    shape = spec.shape if spec is not None else None
    rank = len(shape) if shape is not None else 4
    if rank not in (3, 4):
        raise ToolError(f"input '{spec.name if spec else '?'}' has {rank} dimensions; images need "
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
        raise ToolError(f"{path}: not a NumPy .npy file without Python objects ({exc})") from None
    if not isinstance(value, np.ndarray):
        raise ToolError(f"{path}: holds several arrays; give one .npy file per input")
    return value


def _read_images(paths: list[str], spec: ptlite.ValueSpec | None, size: tuple[int, int] | None,
                 normalize: bool, preprocessing: Preprocessing | None = None) -> np.ndarray:
    """Images as one input: preprocessed as the file says (`preprocessing`), else ImageNet's evaluation transform to
    the input's shape; stacked into a batch for a 4-D input."""
    from dataclasses import replace

    from ptlite.preprocess.image import load_image

    height, width, channels, batched = _image_layout(spec, size)
    if preprocessing is not None:
        try:
            preprocessing = preprocessing.with_input_shape(spec.shape if spec is not None else None)
        except ValueError as exc:
            raise ToolError(f"the file's preprocessing does not fit input '{spec.name if spec else '?'}': {exc}") \
                from None
        if size is not None:
            preprocessing = replace(preprocessing, size=size, resize=None)
        if not normalize:
            preprocessing = replace(preprocessing, mean=(0.0,), std=(1.0,))
    images = []
    for path in paths:
        try:
            images.append(preprocessing.load(path)[0] if preprocessing is not None else
                          load_image(path, (height, width), channels=channels, normalized=normalize))
        except ValueError as exc:  # the errors name the file
            raise ToolError(str(exc)) from None
    if batched:
        return np.stack(images)
    if len(images) > 1:
        raise ToolError(f"input '{spec.name if spec else '?'}' takes one image [C, H, W], got {len(images)}")
    return images[0]


def _is_npy(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(6) == b"\x93NUMPY"


def _convert_dtype(value: np.ndarray, spec: ptlite.ValueSpec, path: str) -> np.ndarray:
    """Cast float64 to float32 (NumPy's default vs PyTorch's) and the like, within the same kind only.

    When the program does not record the input's dtype, float64 becomes float32, PyTorch's default.
    """
    if spec.dtype is None and value.dtype == np.float64:
        log.info(f"{path}: converted float64 to float32 for input '{spec.name}' (the program does not say "
                 "which dtype it takes; PyTorch models usually take float32)")
        return value.astype(np.float32)
    if spec.dtype is None or value.dtype == np.dtype(spec.dtype):
        return value
    want = np.dtype(spec.dtype)
    if value.dtype.kind == want.kind or (value.dtype.kind in "iu" and want.kind in "iu"):
        log.info(f"{path}: converted {value.dtype} to {want} for input '{spec.name}'")
        return value.astype(want)
    return value  # the module reports the mismatch with the expected dtype


def read_inputs(items: Sequence[str], specs: list[ptlite.ValueSpec], method: str = "forward",
                image_size: tuple[int, int] | None = None, normalize: bool = True,
                preprocessing: Preprocessing | None = None) -> list[Any]:
    """One value per item for a method with these input specs: an .npy file, an image or a number; several images
    for a one-input method are stacked into a batch. Images are preprocessed as `preprocessing` (the file's own)
    says, else resized and cropped to the input's shape and ImageNet-normalized; `image_size` overrides the size,
    `normalize=False` stops after scaling the pixels."""
    items = list(items)
    stack = len(specs) == 1 and len(items) > 1 and all(_looks_like_image(p) for p in items)
    if stack:
        return [_read_images(items, specs[0], image_size, normalize, preprocessing)]
    if specs and len(items) > len(specs):
        names = ", ".join(s.name for s in specs)
        raise ToolError(f"method '{method}' takes {len(specs)} input(s) ({names}), got {len(items)}")
    values = []
    for i, item in enumerate(items):
        spec = specs[i] if i < len(specs) else None
        if spec is not None and spec.type in _SCALAR_INPUTS and not os.path.exists(item):
            values.append(_parse_scalar(item, spec.type))
            continue
        if spec is not None and not os.path.exists(item) and _is_number(item):
            raise ToolError(f"input {spec.describe()} takes an .npy file or an image, not the number {item}")
        require_file(item)
        if _looks_like_image(item) and not _is_npy(item):
            values.append(_read_images([item], spec, image_size, normalize,
                                       preprocessing if spec is None or spec.name == _target(preprocessing, specs)
                                       else None))
            continue
        if not _is_npy(item):
            raise ToolError(f"{item}: not an .npy file or an image (png, jpg, ...)")
        value = _read_npy(item)
        values.append(_convert_dtype(value, spec, item) if spec is not None else value)
    return values


def _target(preprocessing: Preprocessing | None, specs: list[ptlite.ValueSpec]) -> str | None:
    """The name of the input a file's preprocessing applies to (its `input`, else the first)."""
    if preprocessing is None or not specs:
        return None
    return preprocessing.input or specs[0].name


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _looks_like_image(path: str) -> bool:
    from ptlite.preprocess.image import is_image_path

    return is_image_path(path)


def read_npz(path: str, specs: list[ptlite.ValueSpec]) -> list[Any]:
    """Inputs from an .npz file: arrays named after the inputs, or saved in order (np.savez(path, *arrays))."""
    require_file(path)
    try:
        data = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise ToolError(f"{path}: not a NumPy .npz file without Python objects ({exc})") from None
    if not hasattr(data, "files"):
        raise ToolError(f"{path}: holds one array, not an .npz file of inputs")
    with data:
        names = list(data.files)
        in_order = names == [f"arr_{i}" for i in range(len(names))]
        if not in_order and not set(names) <= {s.name for s in specs}:
            raise ToolError(f"{path}: holds {', '.join(names)}; the inputs are {', '.join(s.name for s in specs)}: "
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
                raise ToolError(f"{path}: has no array for input '{spec.name}'")
        return values


def _npz_value(value: np.ndarray, spec: ptlite.ValueSpec | None, path: str) -> Any:
    if spec is None:
        return value
    if spec.type in _SCALAR_INPUTS and value.ndim == 0:
        return value.item()
    return _convert_dtype(value, spec, path)


def inputs_from(files: Sequence[str], shapes: Sequence[tuple[int, ...]], specs: list[ptlite.ValueSpec],
                method: str = "forward", preprocessing: Preprocessing | None = None) -> list[Any]:
    """Inputs as `--inputs FILE ...` / `--input-shape SHAPE ...` give them (bench, compare): one .npz file with
    every input, or one file or number per input as read_inputs takes them (images as `preprocessing`, the file's,
    says); without files, random inputs (seed 0) of the shapes given or recorded."""
    if not files:
        from .bench import random_inputs

        return random_inputs(specs, shapes)
    if len(files) == 1 and files[0].endswith(".npz"):
        return read_npz(files[0], specs)
    return read_inputs(files, specs, method, preprocessing=preprocessing if method == "forward" else None)


def calibration_samples(folder: str, specs: list[ptlite.ValueSpec], method: str = "forward",
                        preprocessing: Preprocessing | None = None) -> list[tuple]:
    """`convert --calibrate DIR`: the method's inputs from every file of a folder, in name order: an .npz file is
    one call's inputs (as read_npz takes them), an .npy file one input's value (for a one-input method); images
    (png, jpg, ...) are preprocessed as `run` does them (as `preprocessing`, the file's, says) and batched to the
    input's static batch size (one image a call where the batch may vary; images that do not fill a last batch are
    left out, with a note)."""
    if not os.path.isdir(folder):
        raise ToolError(f"--calibrate {folder}: not a folder (give a folder of images or .npy/.npz inputs)")
    names = sorted(n for n in os.listdir(folder) if not n.startswith(".")
                   and os.path.isfile(os.path.join(folder, n)))
    paths = [os.path.join(folder, n) for n in names]
    images = [p for p in paths if _looks_like_image(p) and not _is_npy(p)]
    others = [p for p in paths if p not in images]
    tensors = [s for s in specs if s.type == "Tensor"]
    samples: list[tuple] = []
    for path in others:
        if path.endswith(".npz"):
            samples.append(tuple(read_npz(path, specs)))
        elif _is_npy(path):
            if len(specs) != 1:
                raise ToolError(f"{path}: one array, but '{method}' takes {len(specs)} inputs: give each call's "
                                "inputs as an .npz file")
            samples.append((_convert_dtype(_read_npy(path), specs[0], path),))
        else:
            raise ToolError(f"{path}: not an image, .npy or .npz file (--calibrate reads every file in {folder})")
    if images:
        if len(specs) != 1 or len(tensors) != 1:
            raise ToolError(f"--calibrate {folder}: images feed a method of one tensor input; '{method}' takes "
                            f"{len(specs)}: give each call's inputs as an .npz file")
        spec = specs[0]
        batched = spec.shape is not None and len(spec.shape) == 4
        batch = spec.shape[0] if batched and spec.shape[0] is not None else 1
        usable = len(images) - len(images) % batch
        if usable < len(images):
            log.info(f"{len(images) - usable} image(s) of {folder} left out: '{spec.name}' takes batches of "
                     f"{batch}")
        for i in range(0, usable, batch):
            group = images[i:i + batch]
            samples.append((_read_images(group, spec, None, True, preprocessing),))
    if not samples:
        raise ToolError(f"--calibrate {folder}: no images, .npy or .npz files there")
    return samples
