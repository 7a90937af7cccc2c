"""Activation kernels against PyTorch: relu family, hard*, sigmoid, gelu, softmax, elu, clamp, dropout."""

from __future__ import annotations

import math

import numpy as np
import pytest
from kernel_backend import kernel as op
from oracle import check, check_schemas, randn


def wide(rng, *shape):
    """Values over a wide range, with the interesting points (0, +-3, +-6, large) included."""
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    flat = x.reshape(-1)
    special = np.array([0, -3, 3, -6, 6, -40, 40, -100, 100, 1e-3], dtype=np.float32)
    flat[:special.size] = special[:flat.size]
    return x


UNARY = ["aten::relu", "aten::relu6", "aten::hardswish", "aten::hardsigmoid", "aten::sigmoid", "aten::tanh",
         "aten::silu", "aten::mish"]


@pytest.mark.parametrize("key", UNARY)
def test_unary_matches_torch(key, rng):
    check(key, wide(rng, 3, 5, 7))


@pytest.mark.parametrize("key", [k + "_" for k in UNARY])
def test_in_place_variant_writes_self(key, rng):
    x = wide(rng, 4, 6)
    ours, args = check(key, x)
    assert ours is args[0], f"{key}: did not return self"


@pytest.mark.parametrize("key", ["aten::relu", "aten::sigmoid", "aten::hardswish"])
def test_unary_leaves_read_only_input_alone(key, rng):
    x = wide(rng, 10)
    x.flags.writeable = False
    check(key, x)


@pytest.mark.parametrize("min_val,max_val", [(-1, 1), (0.0, 6.0), (-0.5, 2)])
def test_hardtanh_matches_torch(min_val, max_val, rng):
    check("aten::hardtanh", wide(rng, 5, 5), min_val, max_val)
    x = wide(rng, 5, 5)
    ours, args = check("aten::hardtanh_", x, min_val, max_val)
    assert ours is args[0], "aten::hardtanh_: did not return self"


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_matches_torch(approximate, rng):
    check("aten::gelu", wide(rng, 4, 50), approximate)
    x = np.linspace(-12, 12, 2001, dtype=np.float32)
    check("aten::gelu", x, approximate)
    check("aten::gelu_", x.copy(), approximate)


def test_gelu_erf_is_accurate_in_the_tails():
    """Relative accuracy where gelu is tiny (x << 0). PyTorch itself computes x/2 (1 + erf) and cancels
    there, so the reference is x/2 erfc(-x / sqrt 2) in float64 (math.erfc)."""
    x = np.linspace(-9, -2, 300, dtype=np.float32)
    got = op("aten::gelu")(x, "none").astype(np.float64)
    want = np.array([v / 2 * math.erfc(-v / math.sqrt(2)) for v in x.astype(np.float64)])
    rel = np.max(np.abs(got - want) / np.abs(want))
    assert rel < 1e-5, f"aten::gelu relative error in the left tail {rel:.3g}"


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_family_matches_torch(dim, rng):
    x = wide(rng, 3, 4, 5)
    check("aten::softmax.int", x, dim, None)
    check("aten::log_softmax.int", x, dim, None)
    check("aten::_softmax", x, dim, False)
    check("aten::_log_softmax", x, dim, False)


def test_softmax_dtype_argument_and_masked_rows(rng):
    check("aten::softmax.int", wide(rng, 2, 6), -1, 7)  # float64
    x = wide(rng, 3, 4)
    x[1] = -np.inf  # a fully masked row gives NaN in PyTorch too
    x[2, :2] = -np.inf
    check("aten::softmax.int", x, -1, None)
    check("aten::log_softmax.int", x[[0, 2]].copy(), -1, None)


@pytest.mark.parametrize("alpha,scale,input_scale", [(1, 1, 1), (0.5, 2.0, 1.5)])
def test_elu_matches_torch(alpha, scale, input_scale, rng):
    check("aten::elu", wide(rng, 6, 6), alpha, scale, input_scale)
    x = wide(rng, 6, 6)
    ours, args = check("aten::elu_", x, alpha, scale, input_scale)
    assert ours is args[0], "aten::elu_: did not return self"


def test_leaky_relu_softplus_prelu(rng):
    check("aten::leaky_relu", wide(rng, 5, 5), 0.2)
    x = wide(rng, 5, 5)
    ours, args = check("aten::leaky_relu_", x, 0.01)
    assert ours is args[0], "aten::leaky_relu_: did not return self"
    check("aten::softplus", wide(rng, 5, 5), 1, 20)
    check("aten::softplus", wide(rng, 5, 5), 2.0, 5)
    check("aten::prelu", wide(rng, 2, 3, 4), rng.uniform(0, 1, 3).astype(np.float32))
    check("aten::prelu", wide(rng, 2, 3, 4), np.array([0.25], dtype=np.float32))


@pytest.mark.parametrize("lo,hi", [(-1.0, 1.0), (0, None), (None, 0.5), (2, -2)])
def test_clamp_scalar(lo, hi, rng):
    check("aten::clamp", wide(rng, 4, 5), lo, hi)
    x = wide(rng, 4, 5)
    ours, args = check("aten::clamp_", x, lo, hi)
    assert ours is args[0], "aten::clamp_: did not return self"


def test_clamp_promotes_like_torch(rng):
    ints = rng.integers(-5, 5, (3, 4))
    check("aten::clamp", ints, -2, 3)           # stays int64
    check("aten::clamp", ints, -1.5, None)      # int tensor, float bound -> float32
    check("aten::clamp_min", ints, 0.5)
    check("aten::clamp_max", wide(rng, 3, 4), 1)


def test_clamp_tensor_bounds(rng):
    x = wide(rng, 3, 4)
    lo, hi = randn(rng, 4) - 1, randn(rng, 3, 1) + 1
    check("aten::clamp.Tensor", x, lo, hi)
    check("aten::clamp.Tensor", x, None, hi)
    check("aten::clamp_min.Tensor", x, lo)
    check("aten::clamp_max.Tensor", x, hi)
    y = x.copy()
    ours, args = check("aten::clamp_.Tensor", y, lo, None)
    assert ours is args[0], "aten::clamp_.Tensor: did not return self"


def test_clamp_propagates_nan():
    x = np.array([np.nan, 1.0, -9.0], dtype=np.float32)
    check("aten::clamp", x, -1.0, 0.5)
    check("aten::hardtanh", x, -1.0, 1.0)
    check("aten::relu", x)


@pytest.mark.parametrize("key", ["aten::dropout", "aten::feature_dropout", "aten::alpha_dropout",
                                 "aten::feature_alpha_dropout"])
def test_dropout_is_identity_at_inference_and_refuses_training(key, rng):
    x = wide(rng, 3, 4)
    check(key, x, 0.5, False)
    assert op(key + "_")(x, 0.5, False) is x
    with pytest.raises(RuntimeError, match="eval"):
        op(key)(x, 0.5, True)
    with pytest.raises(RuntimeError, match="eval"):
        op(key + "_")(x, 0.1, True)
    assert op(key)(x, 0.0, True) is x  # p = 0 is deterministic even in training


def test_native_dropout_at_inference(rng):
    x = wide(rng, 3, 4)
    check("aten::native_dropout", x, 0.5, False)
    with pytest.raises(RuntimeError, match="eval"):
        op("aten::native_dropout")(x, 0.5, None)


def test_schemas_are_torchs():
    keys = UNARY + [k + "_" for k in UNARY] + [
        "aten::hardtanh", "aten::hardtanh_", "aten::gelu", "aten::gelu_", "aten::softmax.int",
        "aten::_softmax", "aten::log_softmax.int", "aten::_log_softmax", "aten::elu", "aten::elu_",
        "aten::leaky_relu", "aten::leaky_relu_", "aten::softplus", "aten::prelu", "aten::_prelu_kernel",
        "aten::native_dropout"]
    for name in ["clamp", "clamp_", "clamp_min", "clamp_min_", "clamp_max", "clamp_max_"]:
        keys += [f"aten::{name}", f"aten::{name}.Tensor"]
    for name in ["dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"]:
        keys += [f"aten::{name}", f"aten::{name}_"]
    check_schemas(keys)
