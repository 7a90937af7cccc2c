"""Turn camera frames (RGBA-family bitmaps, YUV 4:2:0 buffers) into the normalized float32 tensor a model expects.

What PyTorch Mobile's `TensorImageUtils` does on the phone, in NumPy: rotate the frame upright, centre-crop it,
optionally sample it to the model's size (nearest), convert YUV to RGB (BT.601), scale to [0, 1] and normalize::

    x = yuv420_to_tensor(nv21, 640, 480, format="NV21", range="full", rotate=90, size=224)  # [1, 3, 224, 224]
    x = rgba_to_tensor(bitmap_bytes, 640, 480, order="RGBA", crop=224, layout="NHWC")       # [1, 224, 224, 3]

Rotation, crop and sampling are index selection on the 8-bit planes (views where no sampling is needed), so only
the pixels that are kept are converted to float, once, straight into the output. docs/camera-frames.md has the
layouts, conventions and why the colour maths is what it is.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .image import IMAGENET_MEAN, IMAGENET_STD

Buffer = bytes | bytearray | memoryview | np.ndarray
Index = slice | np.ndarray

ROTATIONS = (0, 90, 180, 270)
LAYOUTS = ("NCHW", "NHWC")
PIXEL_ORDERS = ("RGBA", "BGRA", "ARGB", "ABGR", "RGBX", "BGRX", "XRGB", "XBGR", "RGB", "BGR")
YUV_FORMATS = ("I420", "YV12", "NV12", "NV21", "YUV_420_888")
YUV_RANGES = ("full", "video")

# BT.601 (Kr = 0.299, Kb = 0.114): R = Y + 1.402 V', G = Y - 0.344136 U' - 0.714136 V', B = Y + 1.772 U'
# with U' = U - 128, V' = V - 128 on full-range (JPEG) values. Video range first stretches Y' = (Y - 16) * 255/219
# and U', V' by 255/224.
_KR, _KB = 0.299, 0.114
_KG = 1.0 - _KR - _KB
_V_TO_R = 2.0 * (1.0 - _KR)
_U_TO_G = 2.0 * _KB * (1.0 - _KB) / _KG
_V_TO_G = 2.0 * _KR * (1.0 - _KR) / _KG
_U_TO_B = 2.0 * (1.0 - _KB)
_VIDEO_LUMA = 255.0 / 219.0
_VIDEO_CHROMA = 255.0 / 224.0


def rgba_to_tensor(buffer: Buffer, width: int, height: int, *, order: str = "RGBA", row_stride: int | None = None,
                   rotate: int = 0, crop: int | Sequence[int] | None = None, size: int | Sequence[int] | None = None,
                   mean: Sequence[float] | None = IMAGENET_MEAN, std: Sequence[float] | None = IMAGENET_STD,
                   layout: str = "NCHW", out: np.ndarray | None = None) -> np.ndarray:
    """An 8-bit packed RGB(A) frame as a float32 tensor [1, 3, H, W] (layout="NCHW") or [1, H, W, 3] ("NHWC").

    buffer: bytes, bytearray, memoryview or uint8 array, flat (rows of `row_stride` bytes) or shaped
    (height, width, len(order)) with any strides. order: the bytes of one pixel, e.g. "RGBA" (Android Bitmap
    ARGB_8888 copied with copyPixelsToBuffer, CameraX RGBA_8888), "BGRA" (iOS kCVPixelFormatType_32BGRA; also
    Android getPixels() ints viewed as bytes), "RGB", "BGR"; alpha/X bytes are ignored. row_stride: bytes from
    one row to the next (default width * len(order); camera and bitmap rows are often padded).
    rotate: degrees clockwise that make the frame upright (Android's rotationDegrees), applied first.
    crop: (height, width) or an int, centred in the rotated frame (torchvision's rounding). size: (height, width)
    or an int to sample the crop to (nearest); with size and no crop, the crop is the largest centred region with
    the aspect ratio of size. mean/std: per channel, on [0, 1] values (None, None: just scale to [0, 1]).
    out: a float32 array of the result's shape to write into (returned).
    """
    order = _choice(order, PIXEL_ORDERS, "order", "pixel byte order", upper=True)
    width, height = _positive(width, "width"), _positive(height, "height")
    channels = len(order)
    if isinstance(buffer, np.ndarray) and buffer.ndim == 3:
        _check_dtype(buffer, "buffer")
        if buffer.shape != (height, width, channels):
            raise ValueError(f"buffer has shape {buffer.shape}, but width={width}, height={height} and "
                             f"order={order!r} mean ({height}, {width}, {channels})")
        if row_stride is not None:
            raise ValueError("row_stride applies to flat buffers; a (height, width, channels) array carries its own "
                             "strides: leave row_stride out")
        pixels = buffer
    else:
        data = _flat_bytes(buffer, "buffer")
        row_stride = _stride(row_stride, width * channels, "row_stride", f"one row ({width} pixels x {channels} "
                             f"bytes of {order})")
        needed = (height - 1) * row_stride + width * channels
        if data.size < needed:
            raise ValueError(f"{order} buffer is too short for {width}x{height}: expected at least {needed} bytes "
                             f"({height} rows of {row_stride} bytes, the last {width * channels}), got {data.size}; "
                             "check width, height, order and row_stride")
        pixels = as_strided(data, shape=(height, width, channels), strides=(row_stride, channels, 1),
                            writeable=False)
    rows, cols, transpose, out_shape = _geometry(height, width, rotate, crop, size)
    scale, bias = _affine(mean, std)
    result, dst = _output(out, layout, out_shape)
    picked = _take(pixels, rows, cols)[:, :, _rgb_index(order)]
    if transpose:
        picked = picked.swapaxes(0, 1)
    np.multiply(picked, scale, out=dst)
    if bias is not None:
        dst += bias
    return result


def yuv420_to_tensor(frame: Buffer | Sequence[Buffer], width: int, height: int, *, format: str, range: str,
                     row_stride: int | None = None, uv_row_stride: int | None = None,
                     uv_pixel_stride: int | None = None, rotate: int = 0, crop: int | Sequence[int] | None = None,
                     size: int | Sequence[int] | None = None, mean: Sequence[float] | None = IMAGENET_MEAN,
                     std: Sequence[float] | None = IMAGENET_STD, layout: str = "NCHW",
                     out: np.ndarray | None = None) -> np.ndarray:
    """A YUV 4:2:0 frame (BT.601) as a float32 tensor [1, 3, H, W] (layout="NCHW") or [1, H, W, 3] ("NHWC").

    format: how the bytes are laid out; chroma planes are ceil(width/2) x ceil(height/2):
      "I420"  one buffer: Y plane, U plane, V plane
      "YV12"  one buffer: Y plane, V plane, U plane (Android's legacy camera preview format)
      "NV21"  one buffer: Y plane, then V and U interleaved (Android's legacy camera default), or planes (y, vu)
      "NV12"  one buffer: Y plane, then U and V interleaved, or planes (y, uv) (iOS 420f/420v CVPixelBuffer)
      "YUV_420_888"  planes (y, u, v) as Android's Image/ImageProxy gives them, with uv_pixel_stride 1 or 2
    range: "full" (JPEG, 0-255) or "video" (Y 16-235, chroma 16-240): a property of the source, so there is no
    default; iOS names it in the pixel format (420f full, 420v video).
    row_stride: bytes per Y row (default width); uv_row_stride: bytes per chroma row (default the unpadded row);
    uv_pixel_stride: bytes from one chroma sample to the next, YUV_420_888 only (Android's pixelStride).
    Buffers may be bytes, bytearray, memoryview or contiguous uint8 arrays; each may end right after its last
    sample (Android's plane buffers do). rotate, crop, size, mean, std, layout and out as `rgba_to_tensor`.
    Chroma is upsampled by repetition (each sample covers its 2x2 block), as PyTorch Mobile and libyuv do.
    """
    fmt = _choice(format, YUV_FORMATS, "format", "YUV 4:2:0 layout", upper=True)
    video = _choice(range, YUV_RANGES, "range", "BT.601 range") == "video"
    width, height = _positive(width, "width"), _positive(height, "height")
    y_plane, u_plane, v_plane = _yuv_planes(frame, width, height, fmt, row_stride, uv_row_stride, uv_pixel_stride)
    rows, cols, transpose, out_shape = _geometry(height, width, rotate, crop, size)
    scale, bias = _affine(mean, std)
    result, dst = _output(out, layout, out_shape)
    chroma_rows, chroma_cols = _halve(rows, height), _halve(cols, width)
    luma = _take(y_plane, rows, cols).astype(np.float32)
    u = u_plane[np.ix_(chroma_rows, chroma_cols)].astype(np.float32)
    v = v_plane[np.ix_(chroma_rows, chroma_cols)].astype(np.float32)
    u -= 128.0
    v -= 128.0
    if video:
        luma -= 16.0
        luma *= np.float32(_VIDEO_LUMA)
        u *= np.float32(_VIDEO_CHROMA)
        v *= np.float32(_VIDEO_CHROMA)
    if transpose:
        luma, u, v = luma.T, u.T, v.T
    red, green, blue = dst[..., 0], dst[..., 1], dst[..., 2]
    np.multiply(v, np.float32(_V_TO_R), out=red)
    red += luma
    np.multiply(u, np.float32(-_U_TO_G), out=green)
    green -= np.float32(_V_TO_G) * v
    green += luma
    np.multiply(u, np.float32(_U_TO_B), out=blue)
    blue += luma
    np.clip(dst, 0.0, 255.0, out=dst)
    dst *= scale
    if bias is not None:
        dst += bias
    return result


# ---- frame layouts -------------------------------------------------------------------------------------------


def _yuv_planes(frame: Buffer | Sequence[Buffer], width: int, height: int, fmt: str, row_stride: int | None,
                uv_row_stride: int | None, uv_pixel_stride: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Y, U and V planes of a frame as 2-D uint8 views, Y (height, width), U and V ceil-halved."""
    chroma_w, chroma_h = (width + 1) // 2, (height + 1) // 2
    semi = fmt in ("NV12", "NV21")
    if uv_pixel_stride is not None and fmt != "YUV_420_888":
        raise ValueError(f"uv_pixel_stride applies to format='YUV_420_888' (three planes) only; {fmt} fixes it at "
                         f"{2 if semi else 1}: leave it out")
    pixel = _positive(uv_pixel_stride, "uv_pixel_stride") if uv_pixel_stride is not None else (2 if semi else 1)
    y_stride = _stride(row_stride, width, "row_stride", f"one row of Y ({width} bytes)")
    uv_stride = _stride(uv_row_stride, (chroma_w - 1) * pixel + (2 if semi else 1), "uv_row_stride",
                        f"one row of chroma ({chroma_w} samples{' interleaved' if semi else ''})")
    chroma = (chroma_h, chroma_w, uv_stride, pixel)
    planes = tuple(frame) if isinstance(frame, (tuple, list)) else None
    if fmt == "YUV_420_888":
        if planes is None or len(planes) != 3:
            raise ValueError("format='YUV_420_888' takes the three planes (y, u, v), e.g. from Android's "
                             "image.planes; for one buffer use format='I420', 'YV12', 'NV12' or 'NV21'")
        return (_plane(planes[0], 0, (height, width, y_stride, 1), fmt, "Y"),
                _plane(planes[1], 0, chroma, fmt, "U"), _plane(planes[2], 0, chroma, fmt, "V"))
    first, second = ("V", "U") if fmt in ("YV12", "NV21") else ("U", "V")
    if planes is not None:
        if not semi or len(planes) != 2:
            takes = f"two planes (y, {(first + second).lower()}) or one buffer" if semi else "one buffer"
            raise ValueError(f"format={fmt!r} takes {takes}, got {len(planes)} planes; for Android's three planes "
                             "(y, u, v) use format='YUV_420_888'")
        y_plane = _plane(planes[0], 0, (height, width, y_stride, 1), fmt, "Y")
        return (y_plane, *_order_uv(fmt, _plane(planes[1], 0, chroma, fmt, first + second),
                                    _plane(planes[1], 1, chroma, fmt, first + second)))
    data = _flat_bytes(frame, "frame")
    chroma_at = y_stride * height
    second_at = chroma_at + 1 if semi else chroma_at + uv_stride * chroma_h
    needed = second_at + (chroma_h - 1) * uv_stride + (chroma_w - 1) * pixel + 1
    if data.size < needed:
        chroma_desc = (f"interleaved {first}{second} {chroma_h} rows x {uv_stride}" if semi
                       else f"{first} and {second} {chroma_h} rows x {uv_stride} each")
        raise ValueError(f"{fmt} frame {width}x{height} is too short: expected at least {needed} bytes "
                         f"(Y {height} rows x {y_stride}, {chroma_desc}), got {data.size}; check width, height, "
                         "format and the strides")
    y_plane = _plane(data, 0, (height, width, y_stride, 1), fmt, "Y")
    return (y_plane, *_order_uv(fmt, _plane(data, chroma_at, chroma, fmt, first),
                                _plane(data, second_at, chroma, fmt, second)))


def _order_uv(fmt: str, first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return (second, first) if fmt in ("YV12", "NV21") else (first, second)


def _plane(buffer: Buffer | np.ndarray, offset: int, shape: tuple[int, int, int, int], fmt: str,
           name: str) -> np.ndarray:
    """A (rows, cols) uint8 view of `buffer` from byte `offset`, rows `row_stride` and samples `pixel` apart."""
    rows, cols, row_stride, pixel = shape
    data = _flat_bytes(buffer, f"the {name} plane")
    needed = offset + (rows - 1) * row_stride + (cols - 1) * pixel + 1
    if data.size < needed:
        raise ValueError(f"{fmt} {name} plane is too short: {rows} rows of {cols} samples, row stride {row_stride}, "
                         f"pixel stride {pixel}{f' from byte {offset}' if offset else ''} need {needed} bytes, got "
                         f"{data.size}; check width, height and the strides")
    return as_strided(data[offset:], shape=(rows, cols), strides=(row_stride, pixel), writeable=False)


def _flat_bytes(buffer: object, what: str) -> np.ndarray:
    """The bytes of a buffer as a flat uint8 array, without copying."""
    if isinstance(buffer, np.ndarray):
        _check_dtype(buffer, what)
        if not buffer.flags.c_contiguous:
            raise ValueError(f"{what} is a non-contiguous array of shape {buffer.shape}: its bytes are not one "
                             "buffer; pass np.ascontiguousarray(...) (or, for packed RGB(A), the (height, width, "
                             "channels) view itself)")
        return buffer.reshape(-1)
    try:
        view = memoryview(buffer)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{what} must be bytes, bytearray, memoryview or a uint8 NumPy array, got "
                        f"{type(buffer).__name__}") from None
    if not view.c_contiguous:
        raise ValueError(f"{what} is a non-contiguous memoryview; pass bytes(view) or the underlying buffer")
    return np.frombuffer(view.cast("B"), dtype=np.uint8)


def _check_dtype(array: np.ndarray, what: str) -> None:
    if array.dtype == np.uint8:
        return
    hint = ("; for Android getPixels() ints (0xAARRGGBB) pass pixels.view(np.uint8) with order='BGRA' (on a "
            "little-endian device)" if array.dtype.kind in "iu" and array.dtype.itemsize == 4 else "")
    raise TypeError(f"{what} must hold 8-bit samples (uint8), got a {array.dtype} array{hint}")


def _rgb_index(order: str) -> slice | list[int]:
    """Where R, G and B sit among a pixel's bytes: a slice (a view) for the usual orders."""
    r, g, b = (order.index(c) for c in "RGB")
    step = g - r
    if step in (1, -1) and b - g == step:
        stop = b + step
        return slice(r, stop if stop >= 0 else None, step)
    return [r, g, b]


# ---- geometry ------------------------------------------------------------------------------------------------


def _geometry(height: int, width: int, rotate: int, crop: int | Sequence[int] | None,
              size: int | Sequence[int] | None) -> tuple[Index, Index, bool, tuple[int, int]]:
    """Source rows and columns to read, whether to transpose what they select, and the output (height, width).

    The crop and the sampling are defined on the rotated frame; they are mapped back to source coordinates here, so
    that reading `source[rows][:, cols]` (transposed for 90 and 270) is rotation, crop and sampling in one step.
    """
    if isinstance(rotate, bool) or rotate not in ROTATIONS:
        raise ValueError(f"rotate must be one of {', '.join(map(str, ROTATIONS))} (degrees clockwise), "
                         f"got {rotate!r}")
    quarter = rotate in (90, 270)
    rot_h, rot_w = (width, height) if quarter else (height, width)
    out_h, out_w = _pair(size, "size") if size is not None else (None, None)
    if crop is not None:
        crop_h, crop_w = _pair(crop, "crop")
        if crop_h > rot_h or crop_w > rot_w:
            turned = f" after rotate={rotate}" if quarter else ""
            raise ValueError(f"crop {crop_h}x{crop_w} (height x width) is larger than the frame{turned}, which is "
                             f"{rot_h}x{rot_w}; crop at most that, or pass size= to sample the crop to another size")
    elif out_h is not None and out_w is not None:  # the largest centred region with the output's aspect ratio
        if out_w * rot_h <= out_h * rot_w:
            crop_h, crop_w = rot_h, max(1, out_w * rot_h // out_h)
        else:
            crop_h, crop_w = max(1, out_h * rot_w // out_w), rot_w
    else:
        crop_h, crop_w = rot_h, rot_w
    if out_h is None or out_w is None:
        out_h, out_w = crop_h, crop_w
    top, left = int(round((rot_h - crop_h) / 2)), int(round((rot_w - crop_w) / 2))  # as torchvision's CenterCrop
    down, across = (top, crop_h, out_h), (left, crop_w, out_w)  # along the rotated frame's rows and columns
    if rotate == 0:
        rows, cols = _axis(*down, height, False), _axis(*across, width, False)
    elif rotate == 90:  # rotated[i, j] = source[H - 1 - j, i]
        rows, cols = _axis(*across, height, True), _axis(*down, width, False)
    elif rotate == 180:  # rotated[i, j] = source[H - 1 - i, W - 1 - j]
        rows, cols = _axis(*down, height, True), _axis(*across, width, True)
    else:  # 270: rotated[i, j] = source[j, W - 1 - i]
        rows, cols = _axis(*across, height, False), _axis(*down, width, True)
    return rows, cols, quarter, (out_h, out_w)


def _axis(start: int, count: int, samples: int, extent: int, flip: bool) -> Index:
    """Source indices along one axis for `count` pixels from `start`, sampled to `samples` (nearest, centre of each
    output pixel), reversed when `flip`: a slice where every pixel is kept, else an index array."""
    if samples == count:
        if not flip:
            return slice(start, start + count)
        first = extent - 1 - start
        return slice(first, first - count if first - count >= 0 else None, -1)
    picks = start + (2 * np.arange(samples, dtype=np.intp) + 1) * count // (2 * samples)
    return extent - 1 - picks if flip else picks


def _take(plane: np.ndarray, rows: Index, cols: Index) -> np.ndarray:
    """plane[rows][:, cols] for slices or index arrays: a view when both are slices, else one gather."""
    if isinstance(rows, slice) and isinstance(cols, slice):
        return plane[rows, cols]
    if isinstance(rows, slice):
        return plane[rows][:, cols]
    if isinstance(cols, slice):
        return plane[:, cols][rows]
    return plane[np.ix_(rows, cols)]


def _halve(index: Index, extent: int) -> np.ndarray:
    """The chroma indices (index // 2) of luma rows or columns."""
    return np.arange(extent, dtype=np.intp)[index] >> 1


# ---- arguments and output ------------------------------------------------------------------------------------


def _affine(mean: Sequence[float] | None, std: Sequence[float] | None) -> tuple[np.ndarray, np.ndarray | None]:
    """Per-channel scale and bias that take 0-255 values to (value / 255 - mean) / std; bias None when zero."""
    mean_arr = _channel_values(mean, 0.0, "mean")
    std_arr = _channel_values(std, 1.0, "std")
    if np.any(std_arr == 0):
        raise ValueError(f"std must not contain zeros, got {tuple(std_arr.tolist())}")
    scale = (1.0 / (255.0 * std_arr)).astype(np.float32)
    bias = None if not np.any(mean_arr) else (-mean_arr / std_arr).astype(np.float32)
    return scale, bias


def _channel_values(values: Sequence[float] | None, default: float, name: str) -> np.ndarray:
    if values is None:
        return np.full(3, default)
    try:
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be 3 numbers (R, G, B), 1 number or None, got {values!r}") from None
    if arr.size not in (1, 3) or not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be 3 finite numbers (R, G, B) or 1 for every channel, got {values!r}")
    return np.broadcast_to(arr, (3,)).copy()


def _output(out: np.ndarray | None, layout: str, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """The result array and its (H, W, 3) view that the conversion writes into."""
    layout = _choice(layout, LAYOUTS, "layout", "tensor layout", upper=True)
    full = (1, 3, *shape) if layout == "NCHW" else (1, *shape, 3)
    if out is None:
        out = np.empty(full, dtype=np.float32)
    elif not isinstance(out, np.ndarray) or out.dtype != np.float32 or out.shape != full:
        got = f"a {out.dtype} array of shape {out.shape}" if isinstance(out, np.ndarray) else type(out).__name__
        raise ValueError(f"out must be a float32 array of shape {full} ({layout}), got {got}")
    elif not out.flags.writeable:
        raise ValueError("out is read-only; pass a writeable float32 array")
    return out, (out[0].transpose(1, 2, 0) if layout == "NCHW" else out[0])


def _choice(value: object, valid: tuple[str, ...], name: str, what: str, upper: bool = False) -> str:
    key = value.upper() if upper and isinstance(value, str) else value
    if key not in valid:
        raise ValueError(f"{name} must name a {what}, one of {', '.join(valid)}; got {value!r}")
    return key  # type: ignore[return-value]


def _positive(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _pair(value: int | Sequence[int], name: str) -> tuple[int, int]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return _positive(value, name), _positive(value, name)
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return _positive(value[0], f"{name} height"), _positive(value[1], f"{name} width")
    raise ValueError(f"{name} must be an int or (height, width), got {value!r}")


def _stride(value: int | None, minimum: int, name: str, what: str) -> int:
    """A stride in bytes: `minimum` by default, and never less."""
    if value is None:
        return minimum
    value = _positive(value, name)
    if value < minimum:
        raise ValueError(f"{name} {value} is less than {what}, {minimum} bytes; strides count bytes and include any "
                         "padding")
    return value
