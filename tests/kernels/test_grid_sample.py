"""grid_sampler against PyTorch: every interpolation mode x padding mode x align_corners, odd sizes, grids reaching
past [-1, 1], channels-last input, float64, one-pixel axes, ties, non-finite points."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle import check, check_schemas, randn  # noqa: E402

MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}
COMBINATIONS = list(itertools.product(MODES, PADDINGS, [False, True]))
IDS = [f"{m}-{p}-{'corners' if a else 'centres'}" for m, p, a in COMBINATIONS]


def grid(rng: np.random.Generator, n: int, h: int, w: int, reach: float = 1.6, dtype=np.float32) -> np.ndarray:
    """Points uniform in [-reach, reach]^2: inside the input and up to a few pixels outside it on every side."""
    return rng.uniform(-reach, reach, (n, h, w, 2)).astype(dtype)


@pytest.mark.parametrize("mode,padding,align_corners", COMBINATIONS, ids=IDS)
def test_every_mode(mode, padding, align_corners, rng):
    x = randn(rng, 2, 3, 5, 7)  # odd, non-square
    g = grid(rng, 2, 4, 9)
    check("aten::grid_sampler", x, g, MODES[mode], PADDINGS[padding], align_corners)
    check("aten::grid_sampler_2d", x, g, MODES[mode], PADDINGS[padding], align_corners)


@pytest.mark.parametrize("mode,padding,align_corners", COMBINATIONS, ids=IDS)
def test_far_outside_and_one_channel(mode, padding, align_corners, rng):
    """Points many spans away (reflection folds them several times) on a one-channel input (RAFT's correlation)."""
    x = randn(rng, 3, 1, 6, 11)
    g = grid(rng, 3, 5, 5, reach=7.0)
    check("aten::grid_sampler", x, g, MODES[mode], PADDINGS[padding], align_corners)


@pytest.mark.parametrize("mode,padding,align_corners", COMBINATIONS, ids=IDS)
def test_one_pixel_axes(mode, padding, align_corners, rng):
    """H = 1 (with align_corners the reflection span is empty) and W = 1."""
    for shape in ((1, 2, 1, 6), (1, 2, 5, 1)):
        check("aten::grid_sampler", randn(rng, *shape), grid(rng, 1, 3, 4), MODES[mode], PADDINGS[padding],
              align_corners)


@pytest.mark.parametrize("mode", MODES)
def test_channels_last_input_and_float64(mode, rng):
    x = randn(rng, 2, 4, 9, 8)
    g = grid(rng, 2, 3, 5)
    nhwc = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    ours, _ = check("aten::grid_sampler", nhwc, g, MODES[mode], PADDINGS["reflection"], False)
    assert ours.transpose(0, 2, 3, 1).flags.c_contiguous, "grid_sampler: channels-last in should give channels-last out"
    check("aten::grid_sampler", x.astype(np.float64), g.astype(np.float64), MODES[mode], PADDINGS["zeros"], True)


@pytest.mark.parametrize("align_corners", [False, True])
def test_pixel_centres_and_halfway_points(align_corners, rng):
    """Points exactly on pixels and halfway between them (nearest rounds halves to even, as PyTorch does). Sizes
    whose spans are powers of two keep every coordinate exact, so that the ties are ties on any CPU."""
    h, w = (5, 9) if align_corners else (4, 8)
    x = randn(rng, 1, 2, h, w)
    px = np.arange(-2, 2 * w + 2) / 2  # in pixels: -1, -0.5, 0, 0.5, ..., w
    py = np.arange(-2, 2 * h + 2) / 2
    to_grid = (lambda p, n: 2 * p / (n - 1) - 1) if align_corners else (lambda p, n: (2 * p + 1) / n - 1)
    gx, gy = np.meshgrid(to_grid(px, w), to_grid(py, h))
    g = np.stack([gx, gy], axis=-1)[None].astype(np.float32)
    for mode, padding in itertools.product(MODES.values(), PADDINGS.values()):
        check("aten::grid_sampler", x, g, mode, padding, align_corners)


@pytest.mark.parametrize("mode,padding,align_corners", COMBINATIONS, ids=IDS)
def test_non_finite_points(mode, padding, align_corners, rng):
    """inf and NaN in the grid give what PyTorch gives (NaN, 0 or a clipped border value by the mode)."""
    g = grid(rng, 1, 2, 4)
    g[0, 0, :, 0] = [np.inf, -np.inf, np.nan, 0.5]
    g[0, 1, :, 1] = [np.nan, 0.25, np.inf, -np.inf]
    check("aten::grid_sampler", randn(rng, 1, 2, 4, 5), g, MODES[mode], PADDINGS[padding], align_corners)


def test_schemas_are_torchs():
    check_schemas(["aten::grid_sampler", "aten::grid_sampler_2d"])
