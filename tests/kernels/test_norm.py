"""Normalization kernels against PyTorch: batch norm (eval and batch stats), layer, group, instance norm."""

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


def _bn_params(rng, c):
    return randn(rng, c), randn(rng, c), randn(rng, c), rng.uniform(0.5, 2, c).astype(np.float32)


@pytest.mark.parametrize("shape", [(2, 5, 6, 7), (3, 5), (2, 5, 9), (5, 4, 4)])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_inference_uses_running_stats(shape, affine, rng):
    c = shape[1]
    w, b, mean, var = _bn_params(rng, c)
    x = randn(rng, *shape) * 3 + 1
    if not affine:
        w = b = None
    check("aten::batch_norm", x, w, b, mean, var, False, 0.1, 1e-5, True)
    check("aten::_native_batch_norm_legit_no_training", x, w, b, mean, var, 0.1, 1e-3)
    check("aten::native_batch_norm", x, w, b, mean, var, False, 0.1, 1e-5)


def test_batch_norm_training_uses_batch_stats(rng):
    w, b, mean, var = _bn_params(rng, 4)
    x = randn(rng, 3, 4, 5, 5) * 2 + 0.5
    check("aten::batch_norm", x, w, b, mean.copy(), var.copy(), True, 0.1, 1e-5, True)
    check("aten::batch_norm", x, w, b, None, None, True, 0.1, 1e-5, True)
    check("aten::native_batch_norm", x, w, b, None, None, True, 0.1, 1e-5)
    check("aten::_native_batch_norm_legit.no_stats", x, w, b, True, 0.1, 1e-5)
    check("aten::_native_batch_norm_legit.no_stats", x, None, None, True, 0.1, 1e-5)


def test_batch_norm_does_not_write_read_only_inputs(rng):
    w, b, mean, var = _bn_params(rng, 3)
    x = randn(rng, 1, 3, 4, 4)
    for a in (x, w, b, mean, var):
        a.flags.writeable = False
    check("aten::batch_norm", x, w, b, mean, var, False, 0.1, 1e-5, True)


@pytest.mark.parametrize("shape,normalized", [((2, 5, 32), [32]), ((4, 6), [6]), ((2, 3, 4, 5), [4, 5])])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_matches_torch(shape, normalized, affine, rng):
    x = randn(rng, *shape) * 2 + 3
    w, b = (randn(rng, *normalized), randn(rng, *normalized)) if affine else (None, None)
    check("aten::layer_norm", x, normalized, w, b, 1e-5, True)
    check("aten::native_layer_norm", x, normalized, w, b, 1e-6)


@pytest.mark.parametrize("shape,groups", [((2, 6, 5, 5), 3), ((1, 8, 10), 8), ((2, 4, 3, 3), 1)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm_matches_torch(shape, groups, affine, rng):
    x = randn(rng, *shape) + 2
    c = shape[1]
    w, b = (randn(rng, c), randn(rng, c)) if affine else (None, None)
    check("aten::group_norm", x, groups, w, b, 1e-5, True)
    hw = int(np.prod(shape[2:]))
    check("aten::native_group_norm", x, w, b, shape[0], c, hw, groups, 1e-5)


@pytest.mark.parametrize("use_input_stats", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_instance_norm_matches_torch(use_input_stats, affine, rng):
    x = randn(rng, 2, 3, 6, 5) * 2 - 1
    w, b, mean, var = _bn_params(rng, 3)
    if not affine:
        w = b = None
    check("aten::instance_norm", x, w, b, mean, var, use_input_stats, 0.1, 1e-5, True)
    check("aten::instance_norm", x, w, b, None, None, True, 0.1, 1e-5, True)


def test_schemas_are_torchs():
    check_schemas(["aten::batch_norm", "aten::_native_batch_norm_legit_no_training",
                   "aten::native_batch_norm", "aten::_native_batch_norm_legit",
                   "aten::_native_batch_norm_legit.no_stats", "aten::layer_norm",
                   "aten::native_layer_norm",
                   "aten::group_norm", "aten::native_group_norm", "aten::instance_norm"])
