"""Image pre-processing without torch: resize the shorter side, center crop, scale, normalize (ImageNet)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from ptlite.preprocess.image import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    center_crop,
    is_image_path,
    load_image,
    normalize,
    preprocess_image,
    require_pillow,
    resize_shorter_side,
)

Image = pytest.importorskip("PIL.Image")


def random_image(height: int, width: int, seed: int = 0, mode: str = "RGB") -> Image.Image:
    channels = {"RGB": 3, "RGBA": 4}[mode]
    pixels = (np.random.default_rng(seed).random((height, width, channels)) * 255).astype(np.uint8)
    return Image.fromarray(pixels, mode)


def test_solid_color_becomes_the_normalized_constant():
    image = Image.new("RGB", (50, 80), (255, 0, 128))
    chw = preprocess_image(image, 32)
    assert chw.shape == (3, 32, 32) and chw.dtype == np.float32
    for c, value in enumerate((255, 0, 128)):
        want = (value / 255 - IMAGENET_MEAN[c]) / IMAGENET_STD[c]
        assert np.abs(chw[c] - want).max() <= 1e-6, f"channel {c}: {chw[c, 0, 0]} != {want}"


def test_resize_keeps_aspect_ratio_of_the_shorter_side():
    assert resize_shorter_side(random_image(300, 400), 256).size == (341, 256)  # PIL: (width, height)
    assert resize_shorter_side(random_image(500, 333), 256).size == (256, 384)
    assert resize_shorter_side(random_image(10, 10), 7).size == (7, 7)


def test_center_crop_takes_the_middle():
    pixels = np.arange(10 * 12, dtype=np.uint8).reshape(10, 12)  # each pixel's value is its index
    crop = np.asarray(center_crop(Image.fromarray(pixels), 4, 6))
    assert crop.shape == (4, 6)
    np.testing.assert_array_equal(crop, pixels[3:7, 3:9])
    with pytest.raises(ValueError, match="cannot crop"):
        center_crop(Image.fromarray(pixels), 11, 6)


def test_non_square_crop_and_unnormalized_range():
    chw = preprocess_image(random_image(60, 90), (24, 40), normalized=False)
    assert chw.shape == (3, 24, 40)
    assert 0.0 <= chw.min() and chw.max() <= 1.0


def test_channels_follow_the_model():
    gray = preprocess_image(random_image(40, 40), 16, channels=1)
    assert gray.shape == (1, 16, 16)
    rgba = preprocess_image(random_image(40, 40, mode="RGBA"), 16, channels=4, normalized=False)
    assert rgba.shape == (4, 16, 16)
    with pytest.raises(ValueError, match="1, 3 or 4 channels"):
        preprocess_image(random_image(40, 40), 16, channels=2)


def test_matches_torchvision_imagenet_transform():
    transforms = pytest.importorskip("torchvision.transforms")
    pipeline = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(),
                                   transforms.Normalize(IMAGENET_MEAN, IMAGENET_STD)])
    for seed, (height, width) in enumerate([(300, 400), (500, 333), (257, 259), (100, 80)]):
        image = random_image(height, width, seed)
        want = pipeline(image).numpy()
        got = preprocess_image(image, 224)
        diff = np.abs(got - want).max()
        assert diff <= 1e-5, f"{height}x{width}: max |diff| {diff} against torchvision"


def test_load_image_reads_png_and_jpeg(tmp_path):
    ys, xs = np.mgrid[0:30, 0:50]
    smooth = np.stack([xs * 5, ys * 8, (xs + ys) * 3], axis=-1).astype(np.uint8)  # JPEG keeps gradients well
    image = Image.fromarray(smooth)
    image.save(tmp_path / "a.png")
    image.save(tmp_path / "a.jpg", quality=95)
    png = load_image(tmp_path / "a.png", 24)
    np.testing.assert_allclose(png, preprocess_image(image, 24), atol=1e-6)
    jpg = load_image(tmp_path / "a.jpg", 24)
    assert jpg.shape == (3, 24, 24) and np.abs(jpg - png).mean() < 0.05  # lossy, but the same picture


def test_load_image_rejects_a_file_that_is_not_an_image(tmp_path):
    path = tmp_path / "fake.png"
    path.write_text("not really a png")
    with pytest.raises(ValueError, match="not an image"):
        load_image(path)


@pytest.mark.parametrize("suffix", ["png", "jpg"])
def test_load_image_names_a_damaged_file(tmp_path, suffix):
    """Pillow opens a truncated file (the header is intact) and fails while decoding it, with an OSError."""
    path = tmp_path / f"cut.{suffix}"
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(path)
    path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 3])
    with pytest.raises(ValueError, match=rf"cut\.{suffix}: the image cannot be decoded \(.*\); the file is truncated"):
        load_image(path)


def test_load_image_names_the_file_in_every_error(tmp_path):
    path = tmp_path / "rgb.png"
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(path)
    with pytest.raises(ValueError, match=rf"^{path}: images have 1, 3 or 4 channels; the model wants 2"):
        load_image(path, 4, channels=2)


def test_bad_arguments_are_value_errors():
    with pytest.raises(ValueError, match="positive"):
        preprocess_image(random_image(20, 20), 0)
    with pytest.raises(ValueError, match="at least the crop size"):
        preprocess_image(random_image(20, 20), 16, resize=8)
    with pytest.raises(ValueError, match="std must not contain zeros"):
        normalize(np.zeros((3, 2, 2), np.float32), (0, 0, 0), (1, 0, 1))
    with pytest.raises(ValueError, match="1 or 3 values"):
        normalize(np.zeros((3, 2, 2), np.float32), (0, 0), (1, 1))


def test_is_image_path():
    assert is_image_path("photo.JPG") and is_image_path("a/b.png")
    assert not is_image_path("x.npy") and not is_image_path("model.ptlite")


def test_missing_pillow_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # makes `from PIL import Image` raise ImportError
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    with pytest.raises(ImportError, match="pip install pillow"):
        require_pillow()
