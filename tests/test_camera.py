"""Camera frames to tensors (ptlite.preprocess.camera), checked against a pixel-by-pixel BT.601 reference written here.

Tolerances: the reference works in float64 on [0, 1] values; the implementation in float32. After ImageNet
normalization values stay under 2.7 in magnitude, where float32 rounding of the few operations involved is below
1e-6, so 1e-5 (ATOL) passes any correct conversion and is still ~400x smaller than one 8-bit level (1/255/std).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ptlite.preprocess.camera import rgba_to_tensor, yuv420_to_tensor

ATOL = 1e-5
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
SIZES = [(7, 5), (13, 9), (8, 6), (1, 1), (2, 3)]  # (width, height): odd, even, tiny
FORMATS = ["I420", "YV12", "NV12", "NV21"]


# ---- the reference, written independently of the implementation ----------------------------------------------


def ref_pixel(y: int, u: int, v: int, video: bool) -> tuple[float, float, float]:
    """One BT.601 pixel to (r, g, b) in [0, 1], as the textbook writes it."""
    if video:
        yy, uu, vv = (y - 16) * 255 / 219, (u - 128) * 255 / 224, (v - 128) * 255 / 224
    else:
        yy, uu, vv = float(y), float(u - 128), float(v - 128)
    rgb = (yy + 1.402 * vv, yy - 0.344136 * uu - 0.714136 * vv, yy + 1.772 * uu)
    return tuple(min(max(c, 0.0), 255.0) / 255.0 for c in rgb)


def ref_decode(y_plane: np.ndarray, u_plane: np.ndarray, v_plane: np.ndarray, video: bool) -> np.ndarray:
    """(H, W, 3) float64 in [0, 1]; each chroma sample covers its 2x2 block of luma."""
    height, width = y_plane.shape
    out = np.zeros((height, width, 3))
    for i in range(height):
        for j in range(width):
            out[i, j] = ref_pixel(int(y_plane[i, j]), int(u_plane[i // 2, j // 2]), int(v_plane[i // 2, j // 2]),
                                  video)
    return out


def ref_geometry(hwc: np.ndarray, rotate: int = 0, crop: tuple[int, int] | None = None,
                 size: tuple[int, int] | None = None) -> np.ndarray:
    """Rotate clockwise (np.rot90 turns anticlockwise), centre-crop as torchvision, sample nearest to size."""
    img = np.rot90(hwc, -rotate // 90)
    if crop is not None:
        height, width = img.shape[:2]
        top, left = int(round((height - crop[0]) / 2.0)), int(round((width - crop[1]) / 2.0))
        img = img[top:top + crop[0], left:left + crop[1]]
    if size is not None:
        height, width = img.shape[:2]
        img = np.array([[img[math.floor((i + 0.5) * height / size[0]), math.floor((j + 0.5) * width / size[1])]
                         for j in range(size[1])] for i in range(size[0])])
    return img


def ref_tensor(hwc: np.ndarray, mean=None, std=None, layout: str = "NCHW") -> np.ndarray:
    mean = np.zeros(3) if mean is None else np.asarray(mean, dtype=np.float64)
    std = np.ones(3) if std is None else np.asarray(std, dtype=np.float64)
    normalized = (hwc - mean) / std
    return normalized.transpose(2, 0, 1)[None] if layout == "NCHW" else normalized[None]


def encode(rgb: np.ndarray, video: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An RGB uint8 image to BT.601 Y, U, V planes, chroma averaged over each (possibly partial) 2x2 block."""
    r, g, b = (rgb[..., c].astype(np.float64) for c in range(3))
    y = 0.299 * r + 0.587 * g + 0.114 * b
    u, v = (b - y) / 1.772, (r - y) / 1.402
    if video:
        y, u, v = 16 + y * 219 / 255, u * 224 / 255, v * 224 / 255
    height, width = y.shape
    padded = np.full((2, height + height % 2, width + width % 2), np.nan)
    padded[0, :height, :width], padded[1, :height, :width] = u + 128, v + 128
    blocks = np.nanmean(padded.reshape(2, padded.shape[1] // 2, 2, padded.shape[2] // 2, 2), axis=(2, 4))
    to_u8 = lambda a: np.clip(np.round(a), 0, 255).astype(np.uint8)  # noqa: E731
    return to_u8(y), to_u8(blocks[0]), to_u8(blocks[1])


def pack(fmt: str, y: np.ndarray, u: np.ndarray, v: np.ndarray, row_stride: int | None = None,
         uv_row_stride: int | None = None, fill: int = 0xA5) -> bytes:
    """One buffer in `fmt`, rows padded to the strides with `fill` (which a correct reader never looks at)."""
    def rows(plane: np.ndarray, stride: int | None) -> bytes:
        stride = stride or plane.shape[1]
        return b"".join(bytes(row) + bytes([fill]) * (stride - len(row)) for row in plane)

    if fmt in ("I420", "YV12"):
        first, second = (u, v) if fmt == "I420" else (v, u)
        return rows(y, row_stride) + rows(first, uv_row_stride) + rows(second, uv_row_stride)
    first, second = (u, v) if fmt == "NV12" else (v, u)
    interleaved = np.empty((u.shape[0], 2 * u.shape[1]), np.uint8)
    interleaved[:, 0::2], interleaved[:, 1::2] = first, second
    return rows(y, row_stride) + rows(interleaved, uv_row_stride)


def android_planes(y: np.ndarray, u: np.ndarray, v: np.ndarray, pixel_stride: int, row_stride: int,
                   uv_row_stride: int) -> tuple[bytes, bytes, bytes]:
    """Planes as Android's Image gives them: each buffer ends at its last sample; with pixel stride 2 the U and V
    buffers are two overlapping windows on one interleaved VU plane."""
    chroma_h, chroma_w = u.shape
    last = (chroma_h - 1) * uv_row_stride + (chroma_w - 1) * pixel_stride + 1
    y_bytes = pack("I420", y, u, v, row_stride=row_stride)[:(y.shape[0] - 1) * row_stride + y.shape[1]]
    if pixel_stride == 1:
        u_bytes = b"".join(bytes(row) + b"\x5a" * (uv_row_stride - chroma_w) for row in u)[:last]
        v_bytes = b"".join(bytes(row) + b"\x5a" * (uv_row_stride - chroma_w) for row in v)[:last]
        return y_bytes, u_bytes, v_bytes
    vu = pack("NV21", y, u, v, row_stride=row_stride, uv_row_stride=uv_row_stride)[row_stride * y.shape[0]:]
    return y_bytes, vu[1:1 + last], vu[:last]


def random_planes(rng: np.random.Generator, width: int, height: int):
    chroma = ((height + 1) // 2, (width + 1) // 2)
    return (rng.integers(0, 256, (height, width), dtype=np.uint8), rng.integers(0, 256, chroma, dtype=np.uint8),
            rng.integers(0, 256, chroma, dtype=np.uint8))


def check(got: np.ndarray, want: np.ndarray, what: str, atol: float = ATOL) -> None:
    """got == want within atol, or a message naming the case, the worst pixel and the difference."""
    assert got.dtype == np.float32, f"{what}: dtype {got.dtype}, want float32"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, reference {want.shape}"
    diff = np.abs(got.astype(np.float64) - want)
    worst = np.unravel_index(int(np.argmax(diff)), diff.shape)
    assert diff[worst] <= atol, (f"{what}: max |diff| {diff[worst]:.3g} at {tuple(map(int, worst))} (got "
                                 f"{got[worst]:.6f}, reference {want[worst]:.6f}) > tolerance {atol:g}")


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(601)


# ---- YUV colour ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("video", [False, True], ids=["full", "video"])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("width,height", SIZES)
def test_yuv_matches_reference_pixel_by_pixel(rng, fmt, video, width, height):
    y, u, v = random_planes(rng, width, height)  # random bytes: out-of-gamut colours exercise the clipping
    got = yuv420_to_tensor(pack(fmt, y, u, v), width, height, format=fmt, range="video" if video else "full",
                           mean=None, std=None)
    check(got, ref_tensor(ref_decode(y, u, v, video)), f"{fmt} {'video' if video else 'full'} {width}x{height}")


@pytest.mark.parametrize("video", [False, True], ids=["full", "video"])
def test_yuv_normalizes_with_imagenet_statistics_by_default(rng, video):
    y, u, v = random_planes(rng, 13, 9)
    got = yuv420_to_tensor(pack("NV21", y, u, v), 13, 9, format="NV21", range="video" if video else "full")
    check(got, ref_tensor(ref_decode(y, u, v, video), IMAGENET_MEAN, IMAGENET_STD), "NV21 13x9, ImageNet mean/std")


@pytest.mark.parametrize("video", [False, True], ids=["full", "video"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_encode_decode_round_trip(rng, fmt, video):
    # Colours constant on each 2x2 block lose nothing to chroma subsampling, so the error left is the half-level
    # rounding of Y, U and V carried through the matrix: at most 1.4 levels (full) and 1.6 (video) of 255.
    width, height = 13, 9
    blocks = rng.integers(0, 256, ((height + 1) // 2, (width + 1) // 2, 3), dtype=np.uint8)
    rgb = blocks.repeat(2, axis=0).repeat(2, axis=1)[:height, :width]
    got = yuv420_to_tensor(pack(fmt, *encode(rgb, video)), width, height, format=fmt,
                           range="video" if video else "full", mean=None, std=None)
    check(got, ref_tensor(rgb / 255.0), f"{fmt} {'video' if video else 'full'} round trip {width}x{height}",
          atol=1.65 / 255)


def test_nv21_interleaves_vu_and_nv12_uv(rng):
    # A saturated red: V far above 128 and U below. Read with the other semi-planar layout it turns blue.
    width, height = 6, 4
    rgb = np.zeros((height, width, 3), np.uint8)
    rgb[..., 0] = 230
    y, u, v = encode(rgb, video=False)
    assert u[0, 0] < 100 < 200 < v[0, 0]
    nv21, nv12 = pack("NV21", y, u, v), pack("NV12", y, u, v)
    assert nv21[width * height:width * height + 2] == bytes([v[0, 0], u[0, 0]]), "NV21 chroma must start with V"
    assert nv12[width * height:width * height + 2] == bytes([u[0, 0], v[0, 0]]), "NV12 chroma must start with U"
    for fmt, data in (("NV21", nv21), ("NV12", nv12)):
        red = yuv420_to_tensor(data, width, height, format=fmt, range="full", mean=None, std=None, layout="NHWC")
        assert red[..., 0].min() > 0.85 and red[..., 2].max() < 0.05, f"{fmt} decoded {red[0, 0, 0]}, want red"
    swapped = yuv420_to_tensor(nv21, width, height, format="NV12", range="full", mean=None, std=None, layout="NHWC")
    assert swapped[..., 2].min() > 0.5 > swapped[..., 0].max(), "NV21 bytes read as NV12 should come out blue"


@pytest.mark.parametrize("fmt", FORMATS)
def test_padded_rows_are_skipped(rng, fmt):
    width, height = 7, 5
    y, u, v = random_planes(rng, width, height)
    uv_row_stride = 8 if fmt in ("I420", "YV12") else 12  # unpadded: 4 and 8
    data = pack(fmt, y, u, v, row_stride=16, uv_row_stride=uv_row_stride)
    got = yuv420_to_tensor(data, width, height, format=fmt, range="full", row_stride=16, uv_row_stride=uv_row_stride,
                           mean=None, std=None)
    check(got, ref_tensor(ref_decode(y, u, v, False)), f"{fmt} {width}x{height} row stride 16/{uv_row_stride}")


@pytest.mark.parametrize("pixel_stride", [1, 2])
@pytest.mark.parametrize("width,height", [(7, 5), (8, 6)])
def test_android_yuv_420_888_planes(rng, pixel_stride, width, height):
    y, u, v = random_planes(rng, width, height)
    planes = android_planes(y, u, v, pixel_stride, row_stride=16, uv_row_stride=16)
    got = yuv420_to_tensor(planes, width, height, format="YUV_420_888", range="full", row_stride=16,
                           uv_row_stride=16, uv_pixel_stride=pixel_stride, mean=None, std=None)
    check(got, ref_tensor(ref_decode(y, u, v, False)), f"YUV_420_888 {width}x{height} pixel stride {pixel_stride}")


def test_ios_biplanar_nv12_planes(rng):
    width, height = 13, 9
    y, u, v = random_planes(rng, width, height)
    data = pack("NV12", y, u, v, row_stride=32, uv_row_stride=32)
    planes = (np.frombuffer(data[:32 * height], np.uint8), memoryview(data[32 * height:]))
    got = yuv420_to_tensor(planes, width, height, format="nv12", range="video", row_stride=32, uv_row_stride=32,
                           mean=None, std=None)
    check(got, ref_tensor(ref_decode(y, u, v, True)), "NV12 two planes 13x9 video range")


def test_agrees_with_pytorch_mobile_fixed_point_within_1_25_levels(rng):
    # TensorImageUtils.imageYUV420CenterCropToFloatBuffer (pytorch_vision_jni) decodes video range in 10-bit fixed
    # point and truncates; on legal video values (Y 16-235, chroma 16-240) it sits 1.25 to -0.18 levels below the
    # exact formula that ptlite uses (all 11 million triplets measured once; here a sample).
    y = rng.integers(16, 236, (64, 64), dtype=np.uint8)
    u, v = (rng.integers(16, 241, (32, 32), dtype=np.uint8) for _ in range(2))
    got = yuv420_to_tensor(pack("I420", y, u, v), 64, 64, format="I420", range="video", mean=None, std=None,
                           layout="NHWC")[0]
    yi = 1192 * np.maximum(y.astype(np.int64) - 16, 0)
    ui, vi = (c.astype(np.int64).repeat(2, 0).repeat(2, 1) - 128 for c in (u, v))
    fixed = np.stack([(yi + 1634 * vi) >> 10, (yi - 833 * vi - 400 * ui) >> 10, (yi + 2066 * ui) >> 10], axis=-1)
    diff = np.clip(fixed, 0, 255) / 255.0 - got
    assert -1.25 / 255 - 1e-6 <= diff.min() and diff.max() <= 0.19 / 255, (
        f"I420 64x64 video: fixed point minus ptlite spans [{diff.min() * 255:.3f}, {diff.max() * 255:.3f}] levels")


def test_real_photo_through_nv21():
    load_sample_image = pytest.importorskip("sklearn.datasets").load_sample_image
    rgb = load_sample_image("china.jpg")  # 427 x 640, odd height
    height, width = rgb.shape[:2]
    got = yuv420_to_tensor(pack("NV21", *encode(rgb, video=False)), width, height, format="NV21", range="full",
                           mean=None, std=None, layout="NHWC")[0]
    error = np.abs(got - rgb / 255.0) * 255  # in 8-bit levels
    luma_error = np.abs((got * 255 - rgb) @ np.array([0.299, 0.587, 0.114]))
    # Luma is kept at full resolution, so it comes back to within rounding (measured mean 0.18 levels). Colour is
    # stored once per 2x2 block, so colour edges blur: measured mean 1.72 levels, 99th percentile 14.2 (flower.jpg:
    # 1.17 and 12.6). The bounds leave ~40% room for other NumPy versions' rounding, not for a wrong matrix, swapped
    # chroma or misplaced blocks, which cost tens of levels.
    mean, p99, luma = float(error.mean()), float(np.percentile(error, 99)), float(luma_error.mean())
    assert luma < 0.5 and mean < 2.5 and p99 < 20, (
        f"china.jpg {width}x{height} via NV21 full range: mean |error| {mean:.2f} levels (want < 2.5), 99th "
        f"percentile {p99:.2f} (want < 20), luma mean |error| {luma:.2f} (want < 0.5)")


# ---- geometry ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rotate", [0, 90, 180, 270])
@pytest.mark.parametrize("crop", [None, (4, 3), (5, 6), (1, 1)])
def test_yuv_rotation_and_crop(rng, rotate, crop):
    width, height = 13, 9
    y, u, v = random_planes(rng, width, height)
    data = pack("NV21", y, u, v, row_stride=16, uv_row_stride=16)
    got = yuv420_to_tensor(data, width, height, format="NV21", range="video", row_stride=16, uv_row_stride=16,
                           rotate=rotate, crop=crop, mean=None, std=None)
    want = ref_tensor(ref_geometry(ref_decode(y, u, v, True), rotate, crop))
    check(got, want, f"NV21 {width}x{height} rotate {rotate} crop {crop}")


@pytest.mark.parametrize("rotate", [0, 90, 180, 270])
@pytest.mark.parametrize("crop,size", [(None, (4, 4)), ((7, 5), (3, 2)), ((7, 5), (11, 9)), (None, (2, 5))])
def test_yuv_sampling_to_a_size(rng, rotate, crop, size):
    width, height = 13, 9
    y, u, v = random_planes(rng, width, height)
    got = yuv420_to_tensor(pack("I420", y, u, v), width, height, format="I420", range="full", rotate=rotate,
                           crop=crop, size=size, mean=None, std=None)
    if crop is None:  # the largest centred region with the aspect ratio of size (the rotated frame is 9x13 or 13x9)
        upright = (9, 13) if rotate in (0, 180) else (13, 9)
        crop = (upright[0], upright[0] * size[1] // size[0]) if size[1] * upright[0] <= size[0] * upright[1] \
            else (upright[1] * size[0] // size[1], upright[1])
    want = ref_tensor(ref_geometry(ref_decode(y, u, v, False), rotate, crop, size))
    check(got, want, f"I420 {width}x{height} rotate {rotate} crop {crop} size {size}")


def test_centre_crop_rounds_as_torchvision():
    # 13 - 4 = 9 columns to share out: round(4.5) = 4 on the left; 9 - 6 = 3 rows: round(1.5) = 2 on top.
    y = np.arange(13 * 9, dtype=np.uint8).reshape(9, 13)
    u = v = np.full((5, 7), 128, np.uint8)
    got = yuv420_to_tensor(pack("I420", y, u, v), 13, 9, format="I420", range="full", crop=(6, 4), mean=None,
                           std=None)
    assert np.array_equal(np.round(got[0, 0] * 255).astype(np.uint8), y[2:8, 4:8]), "crop 6x4 of 9x13 misplaced"


@pytest.mark.parametrize("rotate", [0, 90, 180, 270])
def test_rotation_is_clockwise(rotate):
    # a 4x2 frame with one bright pixel at its top-left corner; clockwise 90 puts it at the top-right
    y = np.zeros((2, 4), np.uint8)
    y[0, 0] = 255
    u = v = np.full((1, 2), 128, np.uint8)
    got = yuv420_to_tensor(pack("I420", y, u, v), 4, 2, format="I420", range="full", rotate=rotate, mean=None,
                           std=None)[0, 0]
    corner = {0: (0, 0), 90: (0, 1), 180: (1, 3), 270: (3, 0)}[rotate]
    assert got.shape == ((2, 4) if rotate in (0, 180) else (4, 2)) and got[corner] == 1.0 and got.sum() == 1.0, \
        f"rotate {rotate}: the top-left pixel went to {np.argwhere(got == 1).tolist()}, want {corner}"


def test_layouts_hold_the_same_values(rng):
    y, u, v = random_planes(rng, 13, 9)
    data = pack("NV12", y, u, v)
    nchw = yuv420_to_tensor(data, 13, 9, format="NV12", range="full", rotate=90, crop=(8, 5))
    nhwc = yuv420_to_tensor(data, 13, 9, format="NV12", range="full", rotate=90, crop=(8, 5), layout="NHWC")
    assert nchw.shape == (1, 3, 8, 5) and nhwc.shape == (1, 8, 5, 3)
    assert nchw.flags.c_contiguous and nhwc.flags.c_contiguous
    assert np.array_equal(nchw.transpose(0, 2, 3, 1), nhwc), "NCHW and NHWC disagree"


def test_out_is_filled_and_returned(rng):
    y, u, v = random_planes(rng, 7, 5)
    out = np.full((1, 5, 7, 3), np.nan, np.float32)
    result = yuv420_to_tensor(pack("I420", y, u, v), 7, 5, format="I420", range="full", layout="NHWC", out=out)
    assert result is out
    check(out, ref_tensor(ref_decode(y, u, v, False), IMAGENET_MEAN, IMAGENET_STD, "NHWC"), "I420 7x5 into out")


# ---- packed RGB(A) -------------------------------------------------------------------------------------------


def pack_pixels(rgb: np.ndarray, order: str, rng: np.random.Generator) -> np.ndarray:
    """(H, W, len(order)) uint8 with R, G, B where order says and random bytes for A/X."""
    pixels = rng.integers(0, 256, (*rgb.shape[:2], len(order)), dtype=np.uint8)
    for c, name in enumerate("RGB"):
        pixels[..., order.index(name)] = rgb[..., c]
    return pixels


@pytest.mark.parametrize("order", ["RGBA", "BGRA", "ARGB", "ABGR", "RGBX", "BGRX", "XRGB", "XBGR", "RGB", "BGR"])
def test_pixel_orders(rng, order):
    width, height = 7, 5
    rgb = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    got = rgba_to_tensor(pack_pixels(rgb, order, rng).tobytes(), width, height, order=order)
    check(got, ref_tensor(rgb / 255.0, IMAGENET_MEAN, IMAGENET_STD), f"{order} {width}x{height}")


@pytest.mark.parametrize("rotate", [0, 90, 180, 270])
@pytest.mark.parametrize("crop,size", [(None, None), ((3, 4), None), ((5, 5), (3, 2)), (None, (4, 4))])
def test_rgba_geometry_with_padded_rows(rng, rotate, crop, size):
    width, height = 13, 9
    rgb = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    padded = np.full((height, 64), 0xEE, np.uint8)  # 13 * 4 = 52 bytes of pixels, 12 of padding a row
    padded[:, :52] = pack_pixels(rgb, "BGRA", rng).reshape(height, 52)
    got = rgba_to_tensor(memoryview(padded.tobytes()), width, height, order="BGRA", row_stride=64, rotate=rotate,
                         crop=crop, size=size, mean=(0.5, 0.25, 0.75), std=(0.2, 0.3, 0.4), layout="NHWC")
    if size is not None and crop is None:
        crop = (9, 9)  # the largest centred square of 9x13 (or 13x9 rotated)
    want = ref_tensor(ref_geometry(rgb / 255.0, rotate, crop, size), (0.5, 0.25, 0.75), (0.2, 0.3, 0.4), "NHWC")
    check(got, want, f"BGRA {width}x{height} row stride 64 rotate {rotate} crop {crop} size {size}")


def test_rgba_shaped_arrays_and_strided_views(rng):
    rgb = rng.integers(0, 256, (9, 13, 3), dtype=np.uint8)
    big = np.zeros((20, 30, 4), np.uint8)
    big[3:12, 5:18] = pack_pixels(rgb, "RGBA", rng)
    view = big[3:12, 5:18]  # not contiguous: a window on a larger bitmap
    got = rgba_to_tensor(view, 13, 9, rotate=270, crop=7, mean=None, std=None)
    check(got, ref_tensor(ref_geometry(rgb / 255.0, 270, (7, 7))), "RGBA (9, 13, 4) view, rotate 270, crop 7")
    flat = rgba_to_tensor(bytearray(rgb.tobytes()), 13, 9, order="rgb", mean=0.5, std=0.5)
    check(flat, ref_tensor(rgb / 255.0, (0.5,) * 3, (0.5,) * 3), "RGB bytearray, scalar mean/std")


# ---- errors --------------------------------------------------------------------------------------------------


NV21_7x5 = bytes(7 * 5 + 2 * 4 * 3)  # 35 bytes of Y, 3 rows of 4 VU pairs


@pytest.mark.parametrize("call,error,match", [
    (lambda: rgba_to_tensor(bytes(100), 7, 5), ValueError,
     r"RGBA buffer is too short for 7x5: expected at least 140 bytes .* got 100"),
    (lambda: rgba_to_tensor(bytes(150), 7, 5, row_stride=40), ValueError, r"expected at least 188 bytes"),
    (lambda: rgba_to_tensor(bytes(140), 7, 5, order="RGBZ"), ValueError,
     r"order must name a pixel byte order, one of RGBA, BGRA, .*; got 'RGBZ'"),
    (lambda: rgba_to_tensor(bytes(140), 7, 5, row_stride=20), ValueError,
     r"row_stride 20 is less than one row \(7 pixels x 4 bytes of RGBA\), 28 bytes"),
    (lambda: rgba_to_tensor(np.zeros((5, 7, 4), np.float32), 7, 5), TypeError,
     r"buffer must hold 8-bit samples \(uint8\), got a float32 array"),
    (lambda: rgba_to_tensor(np.zeros(35, np.int32), 7, 5), TypeError,
     r"got a int32 array; for Android getPixels\(\) ints .* pixels.view\(np.uint8\) with order='BGRA'"),
    (lambda: rgba_to_tensor(np.zeros((5, 7, 3), np.uint8), 7, 5), ValueError,
     r"buffer has shape \(5, 7, 3\), but .* mean \(5, 7, 4\)"),
    (lambda: rgba_to_tensor(np.zeros((5, 7, 4), np.uint8), 7, 5, row_stride=28), ValueError,
     r"row_stride applies to flat buffers"),
    (lambda: rgba_to_tensor(np.zeros((5, 64), np.uint8)[:, :28], 7, 5), ValueError,
     r"buffer is a non-contiguous array of shape \(5, 28\)"),
    (lambda: rgba_to_tensor([0] * 140, 7, 5), TypeError,
     r"buffer must be bytes, bytearray, memoryview or a uint8 NumPy array, got list"),
    (lambda: rgba_to_tensor(memoryview(bytes(280))[::2], 7, 5), ValueError, r"non-contiguous memoryview"),
    (lambda: rgba_to_tensor(bytes(140), 0, 5), ValueError, r"width must be a positive integer, got 0"),
    (lambda: rgba_to_tensor(bytes(140), 7, 5, rotate=45), ValueError,
     r"rotate must be one of 0, 90, 180, 270 \(degrees clockwise\), got 45"),
    (lambda: rgba_to_tensor(bytes(140), 7, 5, rotate=90, crop=(6, 6)), ValueError,
     r"crop 6x6 \(height x width\) is larger than the frame after rotate=90, which is 7x5"),
    (lambda: rgba_to_tensor(bytes(140), 7, 5, crop=(5, 8)), ValueError,
     r"crop 5x8 \(height x width\) is larger than the frame, which is 5x7"),
    (lambda: rgba_to_tensor(bytes(140), 7, 5, crop=(2, 2, 2)), ValueError, r"crop must be an int or \(height, width\)"),
    (lambda: rgba_to_tensor(bytes(140), 7, 5, size=(0, 3)), ValueError,
     r"size height must be a positive integer, got 0"),
    (lambda: rgba_to_tensor(bytes(140), 7, 5, layout="CHW"), ValueError,
     r"layout must name a tensor layout, one of NCHW, NHWC; got 'CHW'"),
    (lambda: rgba_to_tensor(bytes(140), 7, 5, std=(0.2, 0.0, 0.2)), ValueError, r"std must not contain zeros"),
    (lambda: rgba_to_tensor(bytes(140), 7, 5, mean=(0.5, 0.5)), ValueError,
     r"mean must be 3 finite numbers \(R, G, B\) or 1"),
    (lambda: rgba_to_tensor(bytes(140), 7, 5, out=np.zeros((1, 3, 7, 5), np.float32)), ValueError,
     r"out must be a float32 array of shape \(1, 3, 5, 7\) \(NCHW\), got a float32 array of shape \(1, 3, 7, 5\)"),
    (lambda: rgba_to_tensor(bytes(140), 7, 5, out=np.zeros((1, 3, 5, 7))), ValueError,
     r"got a float64 array"),
    (lambda: yuv420_to_tensor(NV21_7x5[:50], 7, 5, format="NV21", range="full"), ValueError,
     r"NV21 frame 7x5 is too short: expected at least 59 bytes \(Y 5 rows x 7, interleaved VU 3 rows x 8\), got 50"),
    (lambda: yuv420_to_tensor(NV21_7x5, 7, 5, format="I420", range="full", uv_row_stride=6), ValueError,
     r"I420 frame 7x5 is too short: expected at least 69 bytes \(Y 5 rows x 7, U and V 3 rows x 6 each\), got 59"),
    (lambda: yuv420_to_tensor(NV21_7x5, 7, 5, format="NV22", range="full"), ValueError,
     r"format must name a YUV 4:2:0 layout, one of I420, YV12, NV12, NV21, YUV_420_888; got 'NV22'"),
    (lambda: yuv420_to_tensor(NV21_7x5, 7, 5, format="NV21", range="limited"), ValueError,
     r"range must name a BT.601 range, one of full, video; got 'limited'"),
    (lambda: yuv420_to_tensor(NV21_7x5, 7, 5, format="NV21"), TypeError, r"range"),
    (lambda: yuv420_to_tensor(NV21_7x5, 7, 5, format="NV21", range="full", uv_pixel_stride=2), ValueError,
     r"uv_pixel_stride applies to format='YUV_420_888' \(three planes\) only"),
    (lambda: yuv420_to_tensor(NV21_7x5, 7, 5, format="NV21", range="full", uv_row_stride=7), ValueError,
     r"uv_row_stride 7 is less than one row of chroma \(4 samples interleaved\), 8 bytes"),
    (lambda: yuv420_to_tensor(NV21_7x5, 7, 5, format="YUV_420_888", range="full"), ValueError,
     r"format='YUV_420_888' takes the three planes \(y, u, v\)"),
    (lambda: yuv420_to_tensor((bytes(35), bytes(12), bytes(12)), 7, 5, format="NV21", range="full"), ValueError,
     r"format='NV21' takes two planes \(y, vu\) or one buffer, got 3 planes; .* use format='YUV_420_888'"),
    (lambda: yuv420_to_tensor((bytes(35), bytes(12)), 7, 5, format="I420", range="full"), ValueError,
     r"format='I420' takes one buffer, got 2 planes"),
    (lambda: yuv420_to_tensor((bytes(35), bytes(12), bytes(10)), 7, 5, format="YUV_420_888", range="full",
                              uv_pixel_stride=2), ValueError,
     r"YUV_420_888 U plane is too short: 3 rows of 4 samples, row stride 7, pixel stride 2 need 21 bytes, got 12"),
    (lambda: yuv420_to_tensor((bytes(34), bytes(8)), 7, 5, format="NV12", range="full"), ValueError,
     r"NV12 Y plane is too short: 5 rows of 7 samples, row stride 7, pixel stride 1 need 35 bytes, got 34"),
    (lambda: yuv420_to_tensor(np.zeros(59, np.uint16), 7, 5, format="NV21", range="full"), TypeError,
     r"frame must hold 8-bit samples \(uint8\), got a uint16 array"),
    (lambda: yuv420_to_tensor(NV21_7x5, 7, 5, format="NV21", range="full", rotate=270, crop=(8, 5)), ValueError,
     r"crop 8x5 \(height x width\) is larger than the frame after rotate=270, which is 7x5"),
])
def test_errors_name_the_problem(call, error, match):
    with pytest.raises(error, match=match):
        call()
