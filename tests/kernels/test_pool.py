"""Pooling kernels against PyTorch: max (ceil mode, padding, dilation, indices), average, adaptive; 1-D, 2-D and 3-D."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kernel_backend import kernel as op  # noqa: E402
from oracle import check, check_schemas, randn  # noqa: E402

# (N, C, H, W), kernel, stride, padding, dilation, ceil_mode
MAX_CASES = [
    ((1, 3, 16, 16), 3, 2, 1, 1, False),      # resnet stem
    ((2, 4, 15, 15), 3, 2, 0, 1, True),       # squeezenet / googlenet (ceil)
    ((1, 2, 14, 14), 3, 1, 1, 1, True),       # googlenet inception branch
    ((1, 2, 14, 13), 2, 2, 0, 1, False),
    ((1, 2, 11, 12), 3, 2, 1, 2, True),       # dilated, ceil
    ((1, 2, 10, 9), (2, 3), (1, 2), (1, 1), 1, False),
    ((3, 9, 8), 3, 3, 1, 1, True),            # unbatched
]


def _two(v):
    return list(v) if isinstance(v, tuple) else [v, v]


@pytest.mark.parametrize("case", MAX_CASES, ids=[f"max-{i}" for i in range(len(MAX_CASES))])
def test_max_pool2d_matches_torch(case, rng):
    shape, k, s, p, d, ceil = case
    x = randn(rng, *shape)
    check("aten::max_pool2d", x, _two(k), _two(s), _two(p), _two(d), ceil)
    # Integer-valued inputs make ties, which must resolve to the first maximum as in PyTorch.
    ties = rng.integers(-3, 3, shape).astype(np.float32)
    check("aten::max_pool2d_with_indices", ties, _two(k), _two(s), _two(p), _two(d), ceil)
    check("aten::max_pool2d_with_indices", x, _two(k), _two(s), _two(p), _two(d), ceil)


def test_pooling_leaves_read_only_input_alone(rng):
    x = randn(rng, 1, 2, 9, 9)
    x.flags.writeable = False
    check("aten::max_pool2d", x, [2, 2], [2, 2], [0, 0], [1, 1], False)
    check("aten::avg_pool2d", x, [3, 3], [3, 3], [0, 0], False, True, None)
    check("aten::adaptive_avg_pool2d", x, [1, 1])


def test_max_pool2d_default_stride_and_scalar_lists(rng):
    x = randn(rng, 1, 2, 9, 9)
    check("aten::max_pool2d", x, [3], [], [0], [1], False)
    check("aten::max_pool2d_with_indices", x, [2, 2], [], [0, 0], [1, 1], True)


def test_max_pool2d_propagates_nan_and_handles_minus_inf(rng):
    x = randn(rng, 1, 1, 6, 6)
    x[0, 0, 1, 1] = np.nan
    x[0, 0, 4:, 4:] = -np.inf
    check("aten::max_pool2d", x, [2, 2], [2, 2], [0, 0], [1, 1], False)
    check("aten::max_pool2d_with_indices", x[:, :, 2:, 2:].copy(), [3, 3], [2, 2], [1, 1], [1, 1], False)


def test_max_pool1d_matches_torch(rng):
    x = randn(rng, 2, 3, 17)
    check("aten::max_pool1d", x, [3], [2], [1], [1], True)
    check("aten::max_pool1d", x, [4], [], [0], [2], False)


# (N, C, H, W), kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
AVG_CASES = [
    ((1, 4, 8, 8), 2, 2, 0, False, True, None),      # densenet transition
    ((2, 3, 9, 11), 3, 2, 1, False, True, None),
    ((1, 3, 9, 11), 3, 2, 1, False, False, None),
    ((1, 3, 10, 10), 3, 2, 1, True, True, None),
    ((1, 3, 10, 10), 3, 2, 1, True, False, None),
    ((1, 3, 7, 8), (2, 3), (1, 2), (1, 1), True, True, None),
    ((1, 3, 7, 8), 3, 1, 1, False, True, 5),
    ((2, 7, 7), 3, 3, 0, True, True, None),           # unbatched, ceil
]


@pytest.mark.parametrize("case", AVG_CASES, ids=[f"avg-{i}" for i in range(len(AVG_CASES))])
def test_avg_pool2d_matches_torch(case, rng):
    shape, k, s, p, ceil, count_pad, divisor = case
    check("aten::avg_pool2d", randn(rng, *shape), _two(k), _two(s), _two(p), ceil, count_pad, divisor)


def test_avg_pool1d_matches_torch(rng):
    x = randn(rng, 2, 3, 13)
    check("aten::avg_pool1d", x, [3], [2], [1], True, False)
    check("aten::avg_pool1d", x, [4], [], [0], False, True)


@pytest.mark.parametrize("shape,size", [((2, 8, 7, 7), [1, 1]), ((1, 3, 14, 14), [7, 7]),
                                        ((1, 3, 10, 13), [3, 5]), ((1, 2, 5, 6), [7, 8]), ((3, 9, 9), [4, 2]),
                                        ((1, 2, 6, 9), [2, 4])])
def test_adaptive_avg_pool2d_matches_torch(shape, size, rng):
    x = randn(rng, *shape)
    check("aten::adaptive_avg_pool2d", x, size)
    check("aten::_adaptive_avg_pool2d", x, size)


def test_adaptive_avg_pool2d_none_keeps_input_size(rng):
    x = randn(rng, 1, 2, 6, 9)
    got = op("aten::adaptive_avg_pool2d")(x, [None, 4])
    want = torch.nn.functional.adaptive_avg_pool2d(torch.from_numpy(x), (None, 4)).numpy()
    assert got.shape == want.shape and np.allclose(got, want, atol=1e-6), "adaptive_avg_pool2d with None size"


def test_adaptive_avg_pool1d_matches_torch(rng):
    x = randn(rng, 2, 3, 11)
    check("aten::adaptive_avg_pool1d", x, [4])
    check("aten::adaptive_avg_pool1d", x, [1])


@pytest.mark.parametrize("shape,size", [((1, 3, 7, 7), [1, 1]), ((2, 2, 10, 13), [3, 5]),
                                        ((1, 2, 4, 5), [6, 7]), ((2, 8, 8), [4, 4])])
def test_adaptive_max_pool2d_matches_torch(shape, size, rng):
    check("aten::adaptive_max_pool2d", randn(rng, *shape), size)
    check("aten::adaptive_max_pool2d", rng.integers(-2, 2, shape).astype(np.float32), size)


def test_adaptive_max_pool1d_matches_torch(rng):
    check("aten::adaptive_max_pool1d", randn(rng, 2, 3, 11), [4])


# ------------------------------------------------------------------------------------------------ 3-D

def _three(v):
    return list(v) if isinstance(v, tuple) else [v] * 3


# (N, C, D, H, W), kernel, stride, padding, dilation, ceil_mode
MAX3D_CASES = [
    ((1, 3, 8, 16, 16), (1, 3, 3), (1, 2, 2), (0, 1, 1), 1, False),  # a video stem's spatial pooling
    ((2, 2, 7, 9, 9), 3, 2, 1, 1, True),                             # ceil, padding
    ((1, 2, 6, 11, 10), 2, 2, 0, 1, False),
    ((1, 2, 7, 11, 12), 3, 2, 1, (1, 2, 2), True),                   # dilated, ceil
    ((1, 2, 5, 10, 9), (2, 3, 2), (1, 2, 3), (1, 1, 0), 1, True),    # per-axis everything
    ((3, 5, 9, 8), 3, 3, 1, 1, True),                                # unbatched
]


@pytest.mark.parametrize("case", MAX3D_CASES, ids=[f"max3d-{i}" for i in range(len(MAX3D_CASES))])
def test_max_pool3d_matches_torch(case, rng):
    shape, k, s, p, d, ceil = case
    x = randn(rng, *shape)
    check("aten::max_pool3d", x, _three(k), _three(s), _three(p), _three(d), ceil)
    check("aten::max_pool3d_with_indices", x, _three(k), _three(s), _three(p), _three(d), ceil)
    # Integer-valued inputs make ties, which must resolve to the first maximum as in PyTorch.
    ties = rng.integers(-3, 3, shape).astype(np.float32)
    check("aten::max_pool3d_with_indices", ties, _three(k), _three(s), _three(p), _three(d), ceil)


def test_max_pool3d_default_stride_nan_and_minus_inf(rng):
    x = randn(rng, 1, 2, 4, 6, 6)
    check("aten::max_pool3d", x, [2], [], [0], [1], False)
    x[0, 0, 1, 1, 1] = np.nan
    x[0, 1, 2:, 4:, 4:] = -np.inf
    check("aten::max_pool3d", x, [2, 2, 2], [2, 2, 2], [0, 0, 0], [1, 1, 1], False)
    check("aten::max_pool3d_with_indices", x[:, 1:, 1:].copy(), [3, 3, 3], [2, 2, 2], [1, 1, 1], [1, 1, 1], False)


# (N, C, D, H, W), kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
AVG3D_CASES = [
    ((1, 4, 4, 8, 8), 2, 2, 0, False, True, None),
    ((2, 3, 5, 9, 11), 3, 2, 1, False, True, None),
    ((1, 3, 5, 9, 11), 3, 2, 1, False, False, None),
    ((1, 3, 6, 10, 10), 3, 2, 1, True, True, None),                  # ceil: last windows run past the padding
    ((1, 3, 6, 10, 10), 3, 2, 1, True, False, None),
    ((1, 3, 5, 7, 8), (1, 2, 3), (1, 1, 2), (0, 1, 1), True, True, None),
    ((1, 3, 5, 7, 8), 3, 1, 1, False, True, 7),                      # divisor_override
    ((1, 3, 5, 7, 8), (2, 3, 3), 2, (1, 1, 0), True, False, 4),      # divisor_override wins over the rest
    ((2, 5, 7, 7), 3, 3, 0, True, True, None),                       # unbatched, ceil
]


@pytest.mark.parametrize("case", AVG3D_CASES, ids=[f"avg3d-{i}" for i in range(len(AVG3D_CASES))])
def test_avg_pool3d_matches_torch(case, rng):
    shape, k, s, p, ceil, count_pad, divisor = case
    check("aten::avg_pool3d", randn(rng, *shape), _three(k), _three(s), _three(p), ceil, count_pad, divisor)


@pytest.mark.parametrize("shape,size", [((2, 8, 1, 7, 7), [1, 1, 1]),   # r3d's global pooling
                                        ((1, 3, 4, 14, 14), [2, 7, 7]),  # evenly dividing
                                        ((1, 3, 5, 10, 13), [3, 4, 5]),  # windows of different lengths
                                        ((1, 2, 3, 5, 6), [4, 7, 8]),    # larger than the input
                                        ((3, 6, 9, 9), [4, 2, 1]),       # unbatched
                                        ((1, 2, 5, 6, 9), [5, 6, 9])])   # the input size
def test_adaptive_avg_pool3d_matches_torch(shape, size, rng):
    x = randn(rng, *shape)
    check("aten::adaptive_avg_pool3d", x, size)
    check("aten::_adaptive_avg_pool3d", x, size)


def test_adaptive_avg_pool3d_none_keeps_input_size(rng):
    x = randn(rng, 1, 2, 5, 6, 9)
    got = op("aten::adaptive_avg_pool3d")(x, [None, 4, None])
    want = torch.nn.functional.adaptive_avg_pool3d(torch.from_numpy(x), (None, 4, None)).numpy()
    assert got.shape == want.shape and np.allclose(got, want, atol=1e-6), "adaptive_avg_pool3d with None size"


@pytest.mark.parametrize("shape,size", [((1, 3, 4, 7, 7), [1, 1, 1]), ((2, 2, 5, 10, 13), [3, 4, 5]),
                                        ((1, 2, 3, 4, 5), [5, 6, 7]), ((2, 6, 8, 8), [2, 4, 3])])
def test_adaptive_max_pool3d_matches_torch(shape, size, rng):
    check("aten::adaptive_max_pool3d", randn(rng, *shape), size)
    check("aten::adaptive_max_pool3d", rng.integers(-2, 2, shape).astype(np.float32), size)


def test_pool3d_rejects_other_ranks(rng):
    with pytest.raises(ValueError, match="max_pool3d expects a 4-D .* or 5-D"):
        op("aten::max_pool3d")(randn(rng, 2, 6, 6), [2, 2, 2], [], [0, 0, 0], [1, 1, 1], False)
    with pytest.raises(ValueError, match="adaptive_avg_pool3d expects a 4-D .* or 5-D"):
        op("aten::adaptive_avg_pool3d")(randn(rng, 1, 2, 2, 6, 6, 6), [1, 1, 1])


def test_schemas_are_torchs():
    check_schemas(["aten::max_pool2d", "aten::max_pool2d_with_indices", "aten::max_pool1d",
                   "aten::avg_pool2d", "aten::avg_pool1d", "aten::adaptive_avg_pool2d",
                   "aten::_adaptive_avg_pool2d", "aten::adaptive_avg_pool1d", "aten::adaptive_max_pool2d",
                   "aten::adaptive_max_pool1d", "aten::max_pool3d", "aten::max_pool3d_with_indices",
                   "aten::avg_pool3d", "aten::adaptive_avg_pool3d", "aten::_adaptive_avg_pool3d",
                   "aten::adaptive_max_pool3d"])
