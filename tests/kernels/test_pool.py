"""Pooling kernels against PyTorch: max (ceil mode, padding, dilation, indices), average, adaptive."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from ptlite.ir.registry import get  # noqa: E402
from ptlite.ir.schema import parse_schema  # noqa: E402


def _torch_op(key: str):
    name, _, overload = key.split("::")[1].partition(".")
    return getattr(getattr(torch.ops.aten, name), overload or "default")


def _to_torch(a):
    if isinstance(a, np.ndarray):
        return torch.from_numpy(np.array(a))
    if isinstance(a, list) and a and isinstance(a[0], np.ndarray):
        return [_to_torch(t) for t in a]
    return a


def check(key: str, *args, tol: float = 1e-5):
    """Run ptlite's kernel and PyTorch's operator on the same arguments and compare every output:
    max |diff| <= tol * max(1, max |reference|), same shape and dtype."""
    schema = get(key).schema
    pos = [_to_torch(a) for a, s in zip(args, schema.arguments, strict=False) if not s.kwarg_only]
    kw = {s.name: _to_torch(a) for a, s in zip(args, schema.arguments, strict=False) if s.kwarg_only}
    ours = get(key).impl(*args)  # after copying the inputs for torch: in-place kernels write into args
    ref = _torch_op(key)(*pos, **kw)
    ours_all = ours if isinstance(ours, tuple) else (ours,)
    ref_all = tuple(ref) if isinstance(ref, (tuple, list)) else (ref,)
    assert len(ours_all) == len(ref_all), f"{key}: {len(ours_all)} outputs, torch has {len(ref_all)}"
    for i, (got, want) in enumerate(zip(ours_all, ref_all, strict=True)):
        what = f"{key} output {i} for input shapes {[np.shape(a) for a in args if isinstance(a, np.ndarray)]}"
        want = want.numpy()
        assert isinstance(got, np.ndarray), f"{what}: returned {type(got).__name__}, not an ndarray"
        assert got.shape == want.shape, f"{what}: shape {got.shape} != torch {want.shape}"
        assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != torch {want.dtype}"
        if want.dtype.kind in "biu":
            assert np.array_equal(got, want), f"{what}: {int(np.sum(got != want))} elements differ"
            continue
        assert np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: NaNs differ from torch's"
        if not want.size:
            continue
        got, want = np.atleast_1d(got), np.atleast_1d(want)
        with np.errstate(invalid="ignore"):
            delta = np.abs(got.astype(np.float64) - want)
        delta[(got == want) | np.isnan(want)] = 0
        diff = float(delta.max())
        scale = max(1.0, float(np.max(np.abs(np.where(np.isfinite(want), want, 0)))))
        assert diff <= tol * scale, f"{what}: max |diff| {diff:.3g} > {tol:g} * {scale:.3g}"
    return ours


def check_schemas(keys):
    for key in keys:
        theirs = parse_schema(str(_torch_op(key)._schema))
        assert get(key).schema == theirs, f"{key}: schema differs from torch's {theirs}"


def randn(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


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
    got = get("aten::adaptive_avg_pool2d").impl(x, [None, 4])
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


def test_schemas_are_torchs():
    check_schemas(["aten::max_pool2d", "aten::max_pool2d_with_indices", "aten::max_pool1d",
                   "aten::avg_pool2d", "aten::avg_pool1d", "aten::adaptive_avg_pool2d",
                   "aten::_adaptive_avg_pool2d", "aten::adaptive_avg_pool1d", "aten::adaptive_max_pool2d",
                   "aten::adaptive_max_pool1d"])
