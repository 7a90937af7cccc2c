"""Upsampling kernels against PyTorch: bilinear (align_corners both ways, sizes and scales), nearest."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kernel_backend import kernel as op  # noqa: E402
from oracle import check, check_schemas, randn  # noqa: E402

# Input sizes on both sides of the dense-matmul / gather switch (96), up and down, integer and odd factors.
BILINEAR_SIZES = [((1, 3, 4, 4), [16, 16]), ((2, 2, 8, 10), [31, 17]), ((1, 2, 45, 50), [90, 101]),
                  ((1, 2, 60, 48), [20, 30]), ((1, 2, 100, 120), [70, 250]), ((1, 1, 5, 5), [1, 1])]


@pytest.mark.parametrize("shape,size", BILINEAR_SIZES, ids=[f"{s}->{o}" for s, o in BILINEAR_SIZES])
@pytest.mark.parametrize("align_corners", [False, True])
def test_bilinear_to_output_size(shape, size, align_corners, rng):
    x = randn(rng, *shape)
    check("aten::upsample_bilinear2d.vec", x, size, align_corners, None)
    check("aten::upsample_bilinear2d", x, size, align_corners, None, None)


@pytest.mark.parametrize("scales", [[2.0, 2.0], [1.5, 1.5], [0.5, 0.75], [3.7, 2.3], [2.0]])
@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("hw", [(6, 7), (97, 101)])
def test_bilinear_by_scale_factors(scales, align_corners, hw, rng):
    x = randn(rng, 1, 2, *hw)
    if len(scales) == 1:  # TorchScript may pass one factor for both axes; torch's op wants two
        got = op("aten::upsample_bilinear2d.vec")(x, None, align_corners, scales)
        want = op("aten::upsample_bilinear2d.vec")(x, None, align_corners, scales * 2)
        assert np.array_equal(got, want), "upsample_bilinear2d.vec with one scale factor"
        return
    check("aten::upsample_bilinear2d.vec", x, None, align_corners, scales)
    out = [int(np.floor(n * s)) for n, s in zip(hw, scales, strict=True)]
    check("aten::upsample_bilinear2d", x, out, align_corners, scales[0], scales[1])


def test_bilinear_matches_functional_interpolate(rng):
    x = randn(rng, 1, 4, 9, 9)
    got = op("aten::upsample_bilinear2d.vec")(x, [37, 37], False, None)
    want = torch.nn.functional.interpolate(torch.from_numpy(x), size=(37, 37), mode="bilinear",
                                           align_corners=False).numpy()
    assert np.max(np.abs(got - want)) <= 1e-5 * max(1.0, np.max(np.abs(want))), "bilinear vs F.interpolate"


NEAREST_SIZES = [((1, 3, 4, 5), [8, 10]), ((1, 2, 4, 5), [12, 15]), ((1, 2, 7, 6), [10, 9]),
                 ((1, 2, 9, 8), [4, 3]), ((2, 1, 5, 5), [5, 10])]


@pytest.mark.parametrize("shape,size", NEAREST_SIZES)
def test_nearest_to_output_size(shape, size, rng):
    x = randn(rng, *shape)
    check("aten::upsample_nearest2d.vec", x, size, None)
    check("aten::upsample_nearest2d", x, size, None, None)


@pytest.mark.parametrize("scales", [[2.0, 2.0], [3.0, 1.0], [1.5, 1.5], [0.7, 2.5]])
def test_nearest_by_scale_factors(scales, rng):
    x = randn(rng, 1, 3, 7, 9)
    check("aten::upsample_nearest2d.vec", x, None, scales)
    out = [int(np.floor(n * s)) for n, s in zip((7, 9), scales, strict=True)]
    check("aten::upsample_nearest2d", x, out, scales[0], scales[1])


def test_nearest_keeps_integer_dtype(rng):
    x = rng.integers(0, 100, (1, 2, 3, 4)).astype(np.uint8)
    check("aten::upsample_nearest2d.vec", x, [6, 8], None)


def test_schemas_are_torchs():
    check_schemas(["aten::upsample_bilinear2d.vec", "aten::upsample_bilinear2d",
                   "aten::upsample_nearest2d.vec", "aten::upsample_nearest2d"])
