"""The preprocessing a model file can carry: how an image becomes its input (size, resize and crop, channel order,
value range, mean/std, layout), stored in the file's metadata so that the app and `ptlite run` agree with training.

The text form is what `ptlite convert --preprocess` takes and `ptlite inspect` shows::

    imagenet                                   # torchvision's evaluation transform: resize 256, crop 224, ...
    imagenet size=320 resize=320 crop=no       # the same statistics, the whole image squeezed to 320x320
    size=28 channels=L mean=0.1307 std=0.3081  # MNIST
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from .image import CROP_FRACTION, IMAGENET_MEAN, IMAGENET_STD

# Program.metadata keys.
PREPROCESSING_KEY = "preprocessing"
LABELS_KEY = "labels"


CHANNEL_ORDERS = ("RGB", "BGR", "L")
LAYOUTS = ("NCHW", "NHWC")
MAX_LABELS = 1_000_000  # more class names than any model has: a file claiming more is refused
MAX_SIZE = 1 << 16


@dataclass(frozen=True)
class Preprocessing:
    """How an image becomes a model's input, in order: resize (the shorter side to `resize`, keeping the aspect
    ratio; or, with crop=False, the whole image to `size`), centre crop to `size` (height, width), channels in
    `channels` order (RGB, BGR, or L for grayscale), pixel values scaled from 0..255 to `value_range`, then
    (x - mean) / std per channel, laid out as `layout` (NCHW or NHWC) with a batch dimension.

    size: None takes the input's recorded shape (224 where the shape is unknown). resize: None is max(size) / 0.875
    (256 for 224), as torchvision's evaluation transforms. input: the forward input it applies to (None: the first).
    """

    size: tuple[int, int] | None = None
    resize: int | None = None
    crop: bool = True
    channels: str = "RGB"
    value_range: tuple[float, float] = (0.0, 1.0)
    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD
    layout: str = "NCHW"
    input: str | None = None

    def __post_init__(self) -> None:
        if self.channels == "L":  # ImageNet's statistics for grayscale: their average
            for name, rgb in (("mean", IMAGENET_MEAN), ("std", IMAGENET_STD)):
                if getattr(self, name) == rgb:
                    object.__setattr__(self, name, (sum(rgb) / 3,))
        problem = _problem(self)
        if problem:
            raise ValueError(f"preprocessing: {problem}")

    # -- the forms it is stored and written in ------------------------------------------------------------------

    def to_metadata(self) -> dict[str, Any]:
        """The JSON object stored under metadata["preprocessing"] (lists, numbers, strings, None)."""
        doc = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in doc.items()}

    @classmethod
    def from_metadata(cls, doc: Any) -> Preprocessing:
        """The preprocessing a file stores; ValueError naming the field when it is malformed (a file is untrusted)."""
        if not isinstance(doc, Mapping):
            raise ValueError(f"must be an object, not {type(doc).__name__}")
        unknown = set(doc) - set(_FIELDS)
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(sorted(map(str, unknown)))[:200]}; this ptlite knows "
                             f"{', '.join(_FIELDS)} (a newer ptlite may have written the file)")
        values = {}
        for key, value in doc.items():
            values[key] = _field_value(key, value)
        return cls(**values)

    @classmethod
    def parse(cls, text: str) -> Preprocessing:
        """From `key=value` words (values with commas are lists; `imagenet` first takes ImageNet's defaults, which
        are also what an empty text gives). ValueError naming a bad word."""
        values: dict[str, Any] = {}
        for word in text.replace(";", " ").split():
            if word.lower() == "imagenet":
                continue  # the defaults
            key, sep, value = word.partition("=")
            key = _ALIASES.get(key.strip().lower(), key.strip().lower())
            if not sep or key not in _FIELDS:
                raise ValueError(f"{word!r} is not key=value with a key among {', '.join(_FIELDS)} (or 'imagenet')")
            values[key] = _parse_value(key, value.strip())
        return cls(**values)

    def describe(self) -> str:
        """The text form (`parse` reads it back)."""
        words = []
        for key, default in _DEFAULTS.items():
            value = getattr(self, key)
            if value == default:
                continue
            if isinstance(value, tuple):  # repr: the shortest text that reads back as the same float
                text = ",".join(repr(v) if isinstance(v, float) else str(v) for v in value)
            elif isinstance(value, bool):
                text = "yes" if value else "no"
            else:
                text = str(value)
            words.append(f"{key}={text}")
        return " ".join(words) or "imagenet"

    # -- applying it ---------------------------------------------------------------------------------------------

    def with_input_shape(self, shape: Sequence[int | None] | None) -> Preprocessing:
        """A copy whose size (when not given) and channel count agree with an input shape (N, C, H, W or N, H, W, C
        per layout); ValueError when they cannot."""
        if shape is None or len(shape) not in (3, 4):
            return self if self.size else replace(self, size=(224, 224))
        dims = list(shape[-3:])
        c, h, w = (dims[2], dims[0], dims[1]) if self.layout == "NHWC" else dims
        made = 1 if self.channels == "L" else 3
        if c is not None and c != made:
            other = dims[0] if self.layout == "NHWC" else dims[2]
            hint = (f"; the input's shape {list(shape)} looks {'NCHW' if self.layout == 'NHWC' else 'NHWC'}: give "
                    f"layout={'NCHW' if self.layout == 'NHWC' else 'NHWC'}" if other == made else "")
            raise ValueError(f"the input takes {c} channel(s), the preprocessing makes {made} ({self.channels}, "
                             f"{self.layout}){hint}")
        if self.size:
            if (h is not None and h != self.size[0]) or (w is not None and w != self.size[1]):
                raise ValueError(f"size {self.size[0]}x{self.size[1]} does not fit the input, which takes "
                                 f"{h or '?'}x{w or '?'} images (leave size out to take the input's)")
            return self
        return replace(self, size=(h or 224, w or h or 224))

    def shorter_side(self) -> int:
        """The shorter side the image is resized to before cropping."""
        height, width = self.size or (224, 224)
        return self.resize if self.resize is not None else round(max(height, width) / CROP_FRACTION)

    def apply(self, image: Any) -> np.ndarray:
        """A PIL image as the model's input: float32, [1, C, H, W] or [1, H, W, C] (a batch of one: take [0] for an
        input without a batch dimension)."""
        from .image import center_crop, resize_shorter_side

        height, width = self.size or (224, 224)
        image = image.convert("L" if self.channels == "L" else "RGB")
        if self.crop:
            image = center_crop(resize_shorter_side(image, self.shorter_side()), height, width)
        else:
            from .image import require_pillow

            Image = require_pillow()
            image = image.resize((width, height), getattr(Image, "Resampling", Image).BILINEAR)
        hwc = np.asarray(image, dtype=np.uint8)
        hwc = hwc[:, :, None] if hwc.ndim == 2 else hwc
        if self.channels == "BGR":
            hwc = hwc[:, :, ::-1]
        return self.normalize(hwc)[None]

    def load(self, path: str | os.PathLike) -> np.ndarray:
        """An image file as the model's input (`apply`); ValueError starting with the path when it cannot be read."""
        from .image import read_image

        return read_image(path, self.apply)

    def frame_options(self, width: int, height: int, rotate: int = 0) -> dict[str, Any]:
        """The keyword arguments that make `ptlite.preprocess.camera`'s functions preprocess a camera frame of this
        size (as stored, before `rotate`) as this preprocessing does an image: the same crop of the upright frame (the
        centre `size` of the frame resized to `shorter_side()`, in the frame's pixels; the whole frame with
        crop=False), sampled to `size` (nearest, as apps do, where `apply` resizes bilinearly), scaled to the value
        range and normalized, in this layout. ValueError for BGR or grayscale, which the camera helpers do not make."""
        if self.channels != "RGB":
            raise ValueError(f"the camera helpers make RGB tensors; this model takes {self.channels}")
        height, width = (width, height) if rotate % 180 else (height, width)  # the upright frame
        out_h, out_w = self.size or (224, 224)
        if self.crop:
            scale = min(height, width) / self.shorter_side()
            crop = (min(height, max(1, round(out_h * scale))), min(width, max(1, round(out_w * scale))))
        else:
            crop = (height, width)
        low, high = self.value_range  # ((p / 255) * (high - low) + low - mean) / std, as the camera's (p / 255 - m) / s
        mean = tuple((m - low) / (high - low) for m in self.mean)
        std = tuple(s / (high - low) for s in self.std)
        return {"crop": crop, "size": (out_h, out_w), "mean": mean, "std": std, "layout": self.layout}

    def normalize(self, hwc: np.ndarray) -> np.ndarray:
        """Pixels (uint8 [H, W, C], in this preprocessing's channel order) scaled, normalized and laid out: float32
        [C, H, W] or [H, W, C], contiguous."""
        low, high = self.value_range
        channels = hwc.shape[-1]
        mean = np.asarray(self.mean, np.float32)
        std = np.asarray(self.std, np.float32)
        if mean.size not in (1, channels) or std.size not in (1, channels):
            raise ValueError(f"mean and std need 1 or {channels} values, got {mean.size} and {std.size}")
        # one multiply-add per pixel: ((p / 255) * (high - low) + low - mean) / std
        scale = np.float32((high - low) / 255) / std
        offset = (np.float32(low) - mean) / std
        out = hwc.astype(np.float32) * scale + offset
        return np.ascontiguousarray(out if self.layout == "NHWC" else out.transpose(2, 0, 1))




def _field_value(key: str, value: Any) -> Any:
    """A stored field's value in the dataclass's types; ValueError when it has the wrong type."""
    if key in ("size", "value_range", "mean", "std"):
        if value is None and key == "size":
            return None
        if (type(value) is not list or len(value) > 4
                or not all(type(v) in (int, float) and math.isfinite(v) for v in value)):
            raise ValueError(f"{key} must be a list of at most 4 finite numbers, not {str(value)[:60]}")
        if key == "size":
            if not all(v == int(v) for v in value):
                raise ValueError(f"size must be whole numbers, not {str(value)[:60]}")
            return tuple(int(v) for v in value)
        return tuple(float(v) for v in value)
    if key == "resize":
        if value is not None and type(value) is not int:
            raise ValueError(f"resize must be an integer or null, not {str(value)[:60]}")
        return value
    if key == "crop":
        if type(value) is not bool:
            raise ValueError(f"crop must be true or false, not {str(value)[:60]}")
        return value
    if value is not None and type(value) is not str:
        raise ValueError(f"{key} must be a string, not {str(value)[:60]}")
    return value


def _parse_value(key: str, text: str) -> Any:
    try:
        if key == "size":
            sizes = tuple(int(v) for v in text.replace("x", ",").split(","))
            return sizes * 2 if len(sizes) == 1 else sizes
        if key == "resize":
            return None if text.lower() in ("", "none") else int(text)
        if key == "crop":
            if text.lower() not in ("yes", "no", "true", "false", "1", "0"):
                raise ValueError(text)
            return text.lower() in ("yes", "true", "1")
        if key in ("value_range", "mean", "std"):
            return tuple(float(v) for v in text.split(","))
    except ValueError:
        raise ValueError(f"{key}={text!r}: not a valid value for {key}") from None
    if key in ("channels", "layout"):
        return text.upper()
    return text or None


def _problem(p: Preprocessing) -> str | None:
    """What is wrong with a preprocessing's values, or None."""
    if p.size is not None and (len(p.size) != 2 or not all(0 < s <= MAX_SIZE for s in p.size)):
        return f"size must be one or two positive integers (height, width) up to {MAX_SIZE}, not {str(p.size)[:60]}"
    if p.resize is not None and not 0 < p.resize <= MAX_SIZE:
        return f"resize must be a positive integer up to {MAX_SIZE}, not {str(p.resize)[:60]}"
    if p.crop and p.resize is not None and p.size is not None and p.resize < min(p.size):
        return f"resize ({p.resize}) must be at least the crop's shorter side ({min(p.size)})"
    if p.channels not in CHANNEL_ORDERS:
        return f"channels must be one of {', '.join(CHANNEL_ORDERS)}, not {p.channels!r}"
    if p.layout not in LAYOUTS:
        return f"layout must be NCHW or NHWC, not {p.layout!r}"
    if (len(p.value_range) != 2 or not all(math.isfinite(v) for v in p.value_range)
            or not p.value_range[0] < p.value_range[1]):
        return f"value_range must be two increasing numbers (low, high), not {p.value_range}"
    count = 1 if p.channels == "L" else 3
    for name, values in (("mean", p.mean), ("std", p.std)):
        if len(values) not in (1, count) or not all(math.isfinite(v) for v in values):
            return f"{name} needs {'1 finite value' if count == 1 else '1 or 3 finite values'} for {p.channels}, " \
                   f"not {values}"
    if any(v <= 0 for v in p.std):
        return f"std values must be positive, not {p.std}"
    if p.input is not None and not p.input:
        return "input must name an input, or be left out"
    return None


def stored_preprocessing(metadata: Mapping[str, Any]) -> Preprocessing | None:
    """The preprocessing a program's metadata records, or None; ValueError naming the field when it is malformed."""
    stored = metadata.get(PREPROCESSING_KEY)
    return None if stored is None else Preprocessing.from_metadata(stored)


def stored_labels(metadata: Mapping[str, Any]) -> list[str] | None:
    """The class labels a program's metadata records, or None; ValueError when they are not a list of strings."""
    stored = metadata.get(LABELS_KEY)
    if stored is None:
        return None
    if type(stored) is not list or len(stored) > MAX_LABELS or not all(type(v) is str for v in stored):
        raise ValueError(f"labels must be a list of strings, not {str(stored)[:60]}")
    return list(stored)


_DEFAULTS = asdict(Preprocessing())
_FIELDS = tuple(_DEFAULTS)
_ALIASES = {"channel_order": "channels", "range": "value_range", "image_size": "size"}
IMAGENET = Preprocessing()
