"""grid_sampler against PyTorch: every interpolation mode x padding mode x align_corners, odd sizes, grids reaching
past [-1, 1], channels-last input, float64, one-pixel axes, ties, non-finite points; the same for 5-D volumes
(grid_sampler_3d: trilinear and nearest), and the errors for bicubic volumes and mismatched ranks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle import check, check_schemas, op, randn  # noqa: E402

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


# ------------------------------------------------------------------------------------------------ 5-D volumes
VOLUME_COMBINATIONS = list(itertools.product(["bilinear", "nearest"], PADDINGS, [False, True]))
VOLUME_IDS = [f"{m}-{p}-{'corners' if a else 'centres'}" for m, p, a in VOLUME_COMBINATIONS]


def volume_grid(rng: np.random.Generator, n: int, d: int, h: int, w: int, reach: float = 1.6,
                dtype=np.float32) -> np.ndarray:
    """(x, y, z) points uniform in [-reach, reach]^3, some exactly on the border (-1 and 1) and at the centre."""
    g = rng.uniform(-reach, reach, (n, d, h, w, 3)).astype(dtype)
    g[0, 0, 0, :3] = [[-1, -1, -1], [1, 1, 1], [0, 0, 0]][:min(w, 3)]
    if h > 1:
        g[0, 0, 1, 0] = [1, -1, 1]
    return g


@pytest.mark.parametrize("mode,padding,align_corners", VOLUME_COMBINATIONS, ids=VOLUME_IDS)
def test_volume_every_mode(mode, padding, align_corners, rng):
    """D, H, W = 3, 5, 4 with three channels and one, points inside, outside and on the border."""
    for channels in (3, 1):
        x = randn(rng, 2, channels, 3, 5, 4)
        g = volume_grid(rng, 2, 4, 3, 5)
        check("aten::grid_sampler", x, g, MODES[mode], PADDINGS[padding], align_corners, tol=1e-6)


@pytest.mark.parametrize("mode,padding,align_corners", VOLUME_COMBINATIONS, ids=VOLUME_IDS)
def test_volume_far_outside_float64_and_one_voxel_axes(mode, padding, align_corners, rng):
    """Points many spans away (reflection folds them several times), float64, and D, H or W of one voxel (with
    align_corners the reflection span is empty)."""
    check("aten::grid_sampler", randn(rng, 1, 2, 5, 3, 7), volume_grid(rng, 1, 3, 4, 5, reach=7.0), MODES[mode],
          PADDINGS[padding], align_corners, tol=1e-6)
    x64 = randn(rng, 2, 3, 3, 5, 4).astype(np.float64)
    check("aten::grid_sampler", x64, volume_grid(rng, 2, 2, 3, 4, dtype=np.float64), MODES[mode], PADDINGS[padding],
          align_corners, tol=1e-6)
    for shape in ((1, 2, 1, 4, 5), (1, 2, 3, 1, 5), (1, 2, 3, 4, 1), (1, 1, 1, 1, 1)):
        check("aten::grid_sampler", randn(rng, *shape), volume_grid(rng, 1, 2, 3, 4), MODES[mode], PADDINGS[padding],
              align_corners, tol=1e-6)


@pytest.mark.parametrize("align_corners", [False, True])
def test_volume_voxel_centres_and_halfway_points(align_corners, rng):
    """Points exactly on voxels, halfway between them and on the faces (nearest rounds halves to even, as PyTorch
    does), with spans that are powers of two so that every coordinate is exact."""
    d, h, w = (3, 5, 9) if align_corners else (2, 4, 8)
    x = randn(rng, 1, 3, d, h, w)
    to_grid = (lambda p, n: 2 * p / (n - 1) - 1) if align_corners else (lambda p, n: (2 * p + 1) / n - 1)
    axes = [to_grid(np.arange(-2, 2 * n + 2) / 2, n) for n in (w, h, d)]  # -1, -0.5, 0, ..., n pixels
    gz, gy, gx = np.meshgrid(axes[2], axes[1], axes[0], indexing="ij")
    g = np.stack([gx, gy, gz], axis=-1)[None].astype(np.float32)
    for mode, padding in itertools.product((0, 1), PADDINGS.values()):
        check("aten::grid_sampler", x, g, mode, padding, align_corners, tol=1e-6)


@pytest.mark.parametrize("mode,padding,align_corners", VOLUME_COMBINATIONS, ids=VOLUME_IDS)
def test_volume_non_finite_points(mode, padding, align_corners, rng):
    """inf and NaN in the grid give what PyTorch's scalar 3-D kernel gives (0 with zeros padding; the last voxel
    along that axis with border and reflection, whose clipping turns NaN into size - 1)."""
    g = volume_grid(rng, 1, 2, 2, 4)
    g[0, 0, 0] = [[np.inf, 0.1, 0.2], [-np.inf, 0.3, -0.4], [np.nan, 0.5, 0.5], [0.5, 0.2, np.nan]]
    g[0, 1, 1] = [[0.1, np.nan, np.inf], [0.25, -np.inf, 0.0], [np.inf, np.inf, np.inf], [np.nan, np.nan, -0.9]]
    check("aten::grid_sampler", randn(rng, 1, 2, 3, 4, 5), g, MODES[mode], PADDINGS[padding], align_corners, tol=1e-6)


def test_volume_bicubic_is_refused_as_torch_refuses_it(rng):
    x, g = randn(rng, 1, 2, 3, 4, 5), volume_grid(rng, 1, 2, 2, 2)
    with pytest.raises(RuntimeError, match="bicubic"):
        torch.grid_sampler(torch.from_numpy(x), torch.from_numpy(g), MODES["bicubic"], 0, False)
    with pytest.raises(ValueError, match="bicubic interpolation only supports 4-D input"):
        op("aten::grid_sampler")(x, g, MODES["bicubic"], 0, False)


def test_other_ranks_and_mismatched_grids_are_refused(rng):
    sample, sample_2d = op("aten::grid_sampler"), op("aten::grid_sampler_2d")
    volume, image = randn(rng, 1, 2, 3, 4, 5), randn(rng, 1, 2, 4, 5)
    for x, g in ((randn(rng, 2, 4, 5), grid(rng, 1, 2, 2)[0]),  # 3-D input
                 (volume, randn(rng, 1, 2, 2, 2, 2)),  # a volume at (x, y) points
                 (image, randn(rng, 1, 2, 2, 3)),  # an image at (x, y, z) points
                 (volume, grid(rng, 1, 2, 2)),  # a 4-D grid for a volume
                 (randn(rng, 1, 1, 2, 2, 2, 2), randn(rng, 1, 2, 2, 2, 2, 4))):  # 6-D
        with pytest.raises(ValueError, match="grid_sampler: ptlite samples 4-D input .* or 5-D input"):
            sample(x, g, 0, 0, False)
    with pytest.raises(ValueError, match="grid_sampler: ptlite samples 4-D input at a 4-D grid"):
        sample_2d(volume, volume_grid(rng, 1, 2, 2, 2), 0, 0, False)  # grid_sampler_2d stays 2-D
    with pytest.raises(ValueError, match="different batch sizes"):
        sample(volume, volume_grid(rng, 2, 2, 2, 2), 0, 0, False)
    with pytest.raises(ValueError, match="empty spatial dimensions"):
        sample(randn(rng, 1, 2, 0, 4, 5), volume_grid(rng, 1, 2, 2, 2), 0, 0, False)


def test_schemas_are_torchs():
    check_schemas(["aten::grid_sampler", "aten::grid_sampler_2d"])
