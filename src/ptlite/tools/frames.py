"""Raw camera frames as model inputs on the command line (`ptlite run --frame`): a frame dumped from an app (NV21
from Android's camera, BGRA from iOS's, ...) preprocessed as the model's file says."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ptlite.preprocess.camera import PIXEL_ORDERS, YUV_FORMATS, rgba_to_tensor, yuv420_to_tensor
from ptlite.preprocess.spec import Preprocessing

from .errors import ToolError, require_file

FRAME_FORMATS = tuple(f for f in YUV_FORMATS if f != "YUV_420_888") + PIXEL_ORDERS  # one buffer each


@dataclass(frozen=True)
class FrameSpec:
    """How to read a raw frame file: its format, size as stored, rotation to upright, YUV range, row stride."""

    format: str
    width: int
    height: int
    rotate: int = 0
    range: str | None = None  # YUV: "full" or "video", given (a wrong guess gives plausible wrong colours)
    row_stride: int | None = None

    @classmethod
    def parse(cls, text: str) -> FrameSpec:
        """'NV21,640x480[,rotate=90][,range=video][,stride=BYTES]'; ValueError naming the bad part."""
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if len(parts) < 2:
            raise ValueError(f"{text!r}: expected FORMAT,WIDTHxHEIGHT[,rotate=DEG][,range=full|video]"
                             "[,stride=BYTES]")
        fmt = parts[0].upper()
        if fmt not in FRAME_FORMATS:
            raise ValueError(f"{text!r}: unknown format {parts[0]!r}; formats: {', '.join(FRAME_FORMATS)}")
        try:
            width, height = (int(v) for v in parts[1].lower().split("x"))
        except ValueError:
            raise ValueError(f"{text!r}: {parts[1]!r} is not WIDTHxHEIGHT, e.g. 640x480") from None
        options: dict[str, Any] = {}
        for part in parts[2:]:
            key, _, value = part.partition("=")
            try:
                if key == "rotate":
                    options["rotate"] = int(value)
                elif key == "range" and value in ("full", "video"):
                    options["range"] = value
                elif key == "stride":
                    options["row_stride"] = int(value)
                else:
                    raise ValueError
            except ValueError:
                raise ValueError(f"{text!r}: {part!r} is not rotate=DEG, range=full|video or stride=BYTES") from None
        if fmt in YUV_FORMATS and "range" not in options:
            raise ValueError(f"{text!r}: a YUV frame needs its range: add range=full (JPEG-style, most phone "
                             "cameras' YUV_420_888 and iOS's full-range formats) or range=video (16-235)")
        return cls(fmt, width, height, **options)

    def read(self, path: str, preprocessing: Preprocessing) -> np.ndarray:
        """The frame in file `path` as the model's input [1, ...], cropped and normalized as `preprocessing` says."""
        with open(require_file(path), "rb") as f:
            data = f.read()
        options = preprocessing.frame_options(self.width, self.height, self.rotate)
        try:
            if self.format in PIXEL_ORDERS:
                return rgba_to_tensor(data, self.width, self.height, order=self.format, row_stride=self.row_stride,
                                      rotate=self.rotate, **options)
            return yuv420_to_tensor(data, self.width, self.height, format=self.format, range=self.range,
                                    row_stride=self.row_stride, rotate=self.rotate, **options)
        except (ValueError, TypeError) as exc:
            raise ToolError(f"{path}: {exc}") from None


def read_frames(paths: list[str], spec: FrameSpec, preprocessing: Preprocessing,
                input_shape: tuple[int | None, ...] | None) -> np.ndarray:
    """Frame files as one batched input for an input of this shape (the file's preprocessing, or ImageNet's)."""
    try:
        preprocessing = preprocessing.with_input_shape(input_shape)
        frames = [spec.read(path, preprocessing) for path in paths]
    except ValueError as exc:
        raise ToolError(f"--frame: {exc}") from None
    if input_shape is not None and len(input_shape) == 3:
        if len(frames) > 1:
            raise ToolError(f"the input takes one image [C, H, W]; got {len(frames)} frames")
        return frames[0][0]
    return np.concatenate(frames)

