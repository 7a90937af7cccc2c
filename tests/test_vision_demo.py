"""`ptlite demo --classify` and `--segment` (issue 19, item 5): the files they write, the device run without torch,
and the segmentation PNG, looked at pixel by pixel."""

from __future__ import annotations

import numpy as np
import pytest

import ptlite
from ptlite.tools import vision_demo
from ptlite.tools.cli import main

pytest.importorskip("torchvision")
Image = pytest.importorskip("PIL.Image")
sklearn_datasets = pytest.importorskip("sklearn.datasets")


def test_classify_reads_preprocessing_and_labels_from_the_file_and_matches_pytorch(tmp_path, capsys):
    code = main(["demo", "--classify", "--out-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "the weights are random" in out and "meaningless" in out, "random weights must be said on screen"
    assert out.count("top-5 the same as PyTorch's") == 2, out  # both sample photographs
    assert "result: ptlite on the device gives PyTorch's outputs" in out, out
    module = ptlite.load(tmp_path / "mobilenet_v2.ptlite")
    assert module.preprocessing.describe() == "size=224,224" and module.labels[:2] == ["tench", "goldfish"]
    assert all(check.passed for check in module.check_bundled())


def test_segment_writes_the_mask_over_the_photo_with_a_legend(tmp_path, capsys):
    photo = sklearn_datasets.load_sample_image("flower.jpg")[11:214, 40:341]  # 203 x 301: odd sizes
    path = tmp_path / "odd.png"
    Image.fromarray(photo).save(path)
    code = main(["demo", "--segment", str(path), "--out-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "100.00 % of the pixels get PyTorch's class" in out, out
    png = np.asarray(Image.open(tmp_path / "odd_segmented.png").convert("RGB"))
    logits = np.load(tmp_path / "device_outputs.npz")["image0"]
    mask = vision_demo.class_mask(logits, 203, 301)
    classes = np.unique(mask)
    legend = vision_demo.LEGEND_ROW * len(classes) + 8
    assert png.shape == (203 + legend, 301, 3), f"PNG is {png.shape[:2]}, expected the photo plus a legend"
    colours = vision_demo.palette(21)
    expected = np.round(photo * (1 - vision_demo.BLEND) + colours[mask] * vision_demo.BLEND)
    diff = np.abs(png[:203].astype(np.int16) - expected.astype(np.int16))
    assert diff.max() <= 1, f"the blended mask differs from photo/2 + colour/2 by up to {diff.max()}"
    for cls in classes:  # each predicted class is drawn where the model puts it, and has a legend swatch
        where = mask == cls
        assert np.abs(png[:203][where].astype(np.int16) - expected[where]).mean() < 0.5, f"class {cls}"
        swatches = png[203:, 8:28].reshape(-1, 3)
        assert (swatches == colours[cls]).all(axis=1).any(), f"class {cls} has no swatch in the legend"
    assert len(classes) > 1, "calibrated random weights should predict several classes"


def test_the_palette_is_distinct_and_the_mask_scales_by_nearest_neighbour():
    colours = vision_demo.palette(21)
    assert len({tuple(c) for c in colours}) == 21 and tuple(colours[0]) == (0, 0, 0)
    logits = np.zeros((1, 3, 2, 2), np.float32)
    logits[0, 1, 0, 1] = logits[0, 2, 1, 0] = 1
    mask = vision_demo.class_mask(logits, 4, 5)
    np.testing.assert_array_equal(mask, [[0, 0, 0, 1, 1]] * 2 + [[2, 2, 2, 0, 0]] * 2)
