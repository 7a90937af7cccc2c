"""Turn an image file into the float32 CHW array a vision model expects, without torch (Pillow decodes).

The steps are the usual ImageNet evaluation transform: resize so the shorter side is `size / 0.875`
(256 for 224), center-crop to `size`, scale to [0, 1], subtract the mean and divide by the standard deviation
of each channel::

    chw = load_image("cat.jpg", size=224)          # float32 [3, 224, 224]
    logits = module(chw[None])
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

# The crop covers this fraction of the resized image (torchvision's 224/256).
CROP_FRACTION = 0.875

IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm",
                              ".pgm"})

T = TypeVar("T")

_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def is_image_path(path: str | os.PathLike) -> bool:
    """Whether the file name has an image extension that Pillow reads."""
    return os.path.splitext(os.fspath(path))[1].lower() in IMAGE_EXTENSIONS


def require_pillow() -> Any:
    """The PIL.Image module, or an ImportError saying how to install Pillow."""
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("reading images needs Pillow, which is not installed: pip install pillow "
                          "(or pip install 'ptlite[image]')") from None
    return Image


def _pair(size: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(size, (int, np.integer)):
        size = (int(size), int(size))
    height, width = (int(s) for s in size)
    if height <= 0 or width <= 0:
        raise ValueError(f"image size must be positive, got {height}x{width}")
    return height, width


def resize_shorter_side(image: Any, size: int) -> Any:
    """Resize a PIL image (bilinear) so that its shorter side is `size`, keeping the aspect ratio."""
    Image = require_pillow()
    width, height = image.size
    if min(width, height) == size:
        return image
    if width <= height:  # the longer side is truncated, as torchvision's Resize does
        new = (size, max(1, int(size * height / width)))
    else:
        new = (max(1, int(size * width / height)), size)
    bilinear = getattr(Image, "Resampling", Image).BILINEAR
    return image.resize(new, bilinear)


def center_crop(image: Any, height: int, width: int) -> Any:
    """The central `height` x `width` region of a PIL image at least that large."""
    img_w, img_h = image.size
    if img_w < width or img_h < height:
        raise ValueError(f"cannot crop {height}x{width} from a {img_h}x{img_w} image")
    left = int(round((img_w - width) / 2))  # rounded as torchvision's CenterCrop does
    top = int(round((img_h - height) / 2))
    return image.crop((left, top, left + width, top + height))


def to_chw_float(image: Any) -> np.ndarray:
    """A PIL image as float32 [C, H, W] with values in [0, 1]."""
    hwc = np.asarray(image, dtype=np.uint8)
    if hwc.ndim == 2:
        hwc = hwc[:, :, None]
    chw = hwc.transpose(2, 0, 1).astype(np.float32)
    chw *= np.float32(1 / 255)
    return chw


def normalize(chw: np.ndarray, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """(chw - mean) / std per channel, in float32; one mean/std value applies to every channel."""
    channels = chw.shape[0]
    mean_arr = np.asarray(mean, dtype=np.float32).reshape(-1, 1, 1)
    std_arr = np.asarray(std, dtype=np.float32).reshape(-1, 1, 1)
    if mean_arr.shape[0] not in (1, channels) or std_arr.shape[0] not in (1, channels):
        raise ValueError(f"mean and std need 1 or {channels} values, got {mean_arr.shape[0]} and "
                         f"{std_arr.shape[0]}")
    if np.any(std_arr == 0):
        raise ValueError("std must not contain zeros")
    return ((chw - mean_arr) / std_arr).astype(np.float32, copy=False)


def default_mean_std(channels: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """ImageNet statistics for RGB; their average for grayscale; RGB plus (0, 1) for an alpha channel."""
    if channels == 3:
        return IMAGENET_MEAN, IMAGENET_STD
    if channels == 1:
        return (sum(IMAGENET_MEAN) / 3,), (sum(IMAGENET_STD) / 3,)
    if channels == 4:
        return IMAGENET_MEAN + (0.0,), IMAGENET_STD + (1.0,)
    raise ValueError(f"images have 1, 3 or 4 channels; the model wants {channels}")


def preprocess_image(image: Any, size: int | Sequence[int] = 224, *, channels: int = 3,
                     resize: int | None = None, mean: Sequence[float] | None = None,
                     std: Sequence[float] | None = None, normalized: bool = True) -> np.ndarray:
    """A PIL image as a float32 [channels, H, W] array: resize shorter side, center crop, scale, normalize.

    size: the crop, an int or (height, width). resize: the shorter side before cropping (default
    max(size) / 0.875, so 256 for 224). mean/std: per-channel statistics (default ImageNet's).
    normalized=False stops after scaling to [0, 1].
    """
    if channels not in _MODES:
        raise ValueError(f"images have 1, 3 or 4 channels; the model wants {channels}")
    height, width = _pair(size)
    shorter = resize if resize is not None else round(max(height, width) / CROP_FRACTION)
    if shorter < max(height, width):
        raise ValueError(f"resize ({shorter}) must be at least the crop size ({height}x{width})")
    image = image.convert(_MODES[channels])
    image = center_crop(resize_shorter_side(image, shorter), height, width)
    chw = to_chw_float(image)
    if not normalized:
        return chw
    default_mean, default_std = default_mean_std(channels)
    return normalize(chw, default_mean if mean is None else mean, default_std if std is None else std)


def load_image(path: str | os.PathLike, size: int | Sequence[int] = 224, **options: Any) -> np.ndarray:
    """Read an image file (png, jpg, ...) into a float32 [C, H, W] array; options as `preprocess_image`. Every
    ValueError it raises (not an image, damaged, unusable size or channels) starts with the path."""
    return read_image(path, lambda image: preprocess_image(image, size, **options))


def read_image(path: str | os.PathLike, convert: Callable[[Any], T]) -> T:
    """convert(image) for the image in a file, turned upright as its EXIF says (photos store their rotation there).
    Every ValueError (not an image, damaged, or one `convert` raises) starts with the path."""
    Image = require_pillow()
    from PIL import ImageOps, UnidentifiedImageError

    try:
        opened = Image.open(path)
    except UnidentifiedImageError:
        raise ValueError(f"{os.fspath(path)}: not an image that Pillow can read") from None
    with opened as image:
        try:
            return convert(ImageOps.exif_transpose(image))
        except (OSError, SyntaxError) as exc:  # Pillow decodes lazily: a damaged file fails here, not at open
            raise ValueError(f"{os.fspath(path)}: the image cannot be decoded ({exc}); the file is truncated or "
                             "corrupt") from None
        except ValueError as exc:  # convert's (channels, sizes): say which file
            raise ValueError(f"{os.fspath(path)}: {exc}") from None
