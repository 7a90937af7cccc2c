"""Normalization kernels against PyTorch: batch norm (eval and batch stats), layer, group, instance norm."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check, check_schemas, randn


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


@pytest.mark.parametrize("shape,normalized", [((2, 5, 32), [32]), ((4, 6), [6]), ((2, 3, 4, 5), [4, 5]),
                                              ((0, 5, 8), [8]), ((2, 0, 8), [8])])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_matches_torch(shape, normalized, affine, rng):
    x = randn(rng, *shape) * 2 + 3
    w, b = (randn(rng, *normalized), randn(rng, *normalized)) if affine else (None, None)
    check("aten::layer_norm", x, normalized, w, b, 1e-5, True)
    check("aten::native_layer_norm", x, normalized, w, b, 1e-6)


@pytest.mark.parametrize("shape,groups", [((2, 6, 5, 5), 3), ((1, 8, 10), 8), ((2, 4, 3, 3), 1), ((0, 6, 4), 3)])
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
