"""Elementwise kernels against PyTorch: values, dtypes (type promotion), shapes, in-place behaviour."""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np
import oracle
import pytest
import torch
from kernel_backend import kernel as op

from ptlite import ops
from ptlite.backends.numpy.elementwise import result_type

RNG = np.random.default_rng(0)
rand = functools.partial(oracle.rand, RNG)
# float16 has 11 significant bits: a tolerance of 1e-3 is about one unit in the last place
check = functools.partial(oracle.check, float16_tol=1e-3)


# ----------------------------------------------------------------------------------------------------
# Type promotion
# ----------------------------------------------------------------------------------------------------

_PROMOTION_OPERANDS = [
    rand(2, 3), rand(2, 3, dtype=np.float16), rand(2, 3, dtype=np.float64), rand(2, 3, dtype=np.int64),
    rand(2, 3, dtype=np.int32), rand(2, 3, dtype=np.uint8, low=0), rand(2, 3, dtype=np.int8),
    rand(3, dtype=np.bool_),
    np.asarray(1.5, np.float64), np.asarray(2, np.int64), np.asarray(True), np.asarray(1.5, np.float16),
    np.asarray(3, np.int16), 2.5, 3, True,
]


@pytest.mark.parametrize("a,b", list(itertools.product(_PROMOTION_OPERANDS, repeat=2)))
def test_result_type_matches_torch(a: Any, b: Any) -> None:
    if not isinstance(a, np.ndarray) and not isinstance(b, np.ndarray):
        pytest.skip("torch.result_type needs a tensor")
    want = torch.result_type(oracle.to_torch(a), oracle.to_torch(b))
    got = result_type(a, b)
    assert str(got) == str(want).replace("torch.", ""), f"result_type({a!r}, {b!r}) = {got}, torch: {want}"


# ----------------------------------------------------------------------------------------------------
# Arithmetic
# ----------------------------------------------------------------------------------------------------

_ARITH_PAIRS = [
    (rand(2, 3, 4), rand(3, 4)),
    (rand(2, 3), rand(2, 3, dtype=np.int64)),
    (rand(2, 3, dtype=np.int64), rand(3, dtype=np.int32)),
    (rand(4, dtype=np.int32), np.asarray(1.25, np.float64)),
    (rand(4, dtype=np.float16), rand(4)),
    (np.asarray(2.0, np.float32), np.asarray(3, np.int64)),
    (rand(1, 3, 1), rand(2, 1, 5)),
]
_TENSOR_SCALAR = [(rand(2, 3), 2.5), (rand(2, 3), 3), (rand(2, 3, dtype=np.int64), 2.5),
                  (rand(2, 3, dtype=np.int64), 3), (rand(3, dtype=np.bool_), 2),
                  (rand(2, dtype=np.int32), True),
                  (rand(3, dtype=np.float16), 1.1), (rand(3, dtype=np.uint8, low=0, high=200), 100)]


@pytest.mark.parametrize("a,b", _ARITH_PAIRS)
@pytest.mark.parametrize("op", ["add.Tensor", "sub.Tensor", "mul.Tensor", "rsub.Tensor", "minimum",
                                "maximum"])
def test_binary_tensor(op: str, a: np.ndarray, b: np.ndarray) -> None:
    check(f"aten::{op}", a, b, *([1] if op.startswith(("add", "sub", "rsub")) else []))


@pytest.mark.parametrize("a,b", _TENSOR_SCALAR)
@pytest.mark.parametrize("op", ["add.Scalar", "sub.Scalar", "mul.Scalar", "rsub.Scalar", "add.Tensor",
                                "mul.Tensor"])
def test_binary_scalar(op: str, a: np.ndarray, b: Any) -> None:
    if (a.dtype == np.bool_ or isinstance(b, bool)) and op.startswith(("sub", "rsub")):
        pytest.skip("torch refuses bool subtraction")
    check(f"aten::{op}", a, b, *([1] if op.startswith(("add", "sub", "rsub")) else []))


def test_python_scalars_in_tensor_overloads() -> None:
    """torch.export graphs pass Python numbers to Tensor overloads: they promote as Python scalars."""
    x = rand(2, 3)
    ours = op("aten::mul.Tensor")(x, 0.5)
    assert ours.dtype == np.float32
    ours = op("aten::mul.Tensor")(rand(3, dtype=np.int64), 0.5)
    assert ours.dtype == np.float32, "int64 tensor times a Python float is float32 (the default dtype)"


@pytest.mark.parametrize("op", ["add.Tensor", "sub.Tensor", "rsub.Tensor"])
@pytest.mark.parametrize("alpha", [2, 0.5, -1])
def test_alpha(op: str, alpha: Any) -> None:
    check(f"aten::{op}", rand(3, 4), rand(4), alpha)
    if not isinstance(alpha, float):
        check(f"aten::{op}", rand(3, dtype=np.int64), rand(3, dtype=np.int64), alpha)


def test_bool_arithmetic() -> None:
    a, b = rand(6, dtype=np.bool_), rand(6, dtype=np.bool_)
    check("aten::add.Tensor", a, b, 1)
    check("aten::mul.Tensor", a, b)
    check("aten::div.Tensor", a.astype(np.int64) + 1, b)
    check("aten::add.Scalar", a, 1.5, 1)


_DIV_INPUTS = [
    (rand(3, 4), rand(4, low=0.5, high=3)),
    (np.array([7, -7, 7, -7, 6, 0], np.int64), np.array([2, 2, -2, -2, 3, 5], np.int64)),
    (np.array([7.5, -7.5, 1e-3, -0.0], np.float32), np.array([2.0, 2.0, -3.0, 1.0], np.float32)),
    (np.array([5, -5, 9], np.int32), np.asarray(2.0, np.float64)),
]


@pytest.mark.parametrize("a,b", _DIV_INPUTS)
def test_div(a: np.ndarray, b: np.ndarray) -> None:
    check("aten::div.Tensor", a, b)
    check("aten::true_divide.Tensor", a, b)
    for mode in (None, "trunc", "floor"):
        check("aten::div.Tensor_mode", a, b, mode)
    check("aten::floor_divide", a, b)
    check("aten::remainder.Tensor", a, b)
    check("aten::fmod.Tensor", a, b)


@pytest.mark.parametrize("a,s", [(np.array([7, -7, 3], np.int64), 2), (np.array([7, -7, 3], np.int64), 2.5),
                                 (rand(5), -1.5), (rand(5), 3)])
def test_div_scalar(a: np.ndarray, s: Any) -> None:
    check("aten::div.Scalar", a, s)
    for mode in (None, "trunc", "floor"):
        check("aten::div.Scalar_mode", a, s, mode)
    check("aten::floor_divide.Scalar", a, s)
    check("aten::remainder.Scalar", a, s)
    check("aten::fmod.Scalar", a, s)
    check("aten::remainder.Scalar_Tensor", s, np.where(a == 0, 1, a))


def test_float_division_by_zero() -> None:
    check("aten::div.Tensor", np.array([1.0, -1.0, 0.0], np.float32), np.zeros(3, np.float32))


@pytest.mark.parametrize("op,extra", [("add_.Tensor", [1]), ("add_.Tensor", [2]), ("sub_.Tensor", [1]),
                                      ("mul_.Tensor", []), ("div_.Tensor", []),
                                      ("div_.Tensor_mode", ["floor"]), ("div_.Tensor_mode", ["trunc"])])
def test_inplace_tensor(op: str, extra: list) -> None:
    ours, args = check(f"aten::{op}", rand(3, 4), rand(4, low=0.5), *extra)
    assert ours is args[0], f"aten::{op} must return self"
    check(f"aten::{op}", rand(3, 4), np.asarray(2, np.int64), *extra)


@pytest.mark.parametrize("op,extra", [("add_.Scalar", [1]), ("sub_.Scalar", [3]), ("mul_.Scalar", []),
                                      ("div_.Scalar", []), ("div_.Scalar_mode", ["floor"])])
def test_inplace_scalar(op: str, extra: list) -> None:
    ours, args = check(f"aten::{op}", rand(3, 4), 1.5, *extra)
    assert ours is args[0], f"aten::{op} must return self"
    if op != "div_.Scalar":
        check(f"aten::{op}", rand(3, dtype=np.int64), 2, *extra)


def test_inplace_integer_self_refuses_float_result() -> None:
    with pytest.raises(TypeError):
        op("aten::add_.Scalar")(rand(3, dtype=np.int64), 1.5, 1)


def test_inplace_on_read_only_self_returns_new_array() -> None:
    x = rand(3, 4)
    x.flags.writeable = False
    out = op("aten::add_.Tensor")(x, np.ones(4, np.float32), 1)
    np.testing.assert_allclose(out, x + 1)
    out = op("aten::masked_fill_.Scalar")(x, x > 0, 0.0)
    np.testing.assert_allclose(out, np.where(x > 0, 0, x))


# ----------------------------------------------------------------------------------------------------
# pow
# ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("exponent", [2, 0.5, 1, -1, 3, 2.5, -2, 0])
def test_pow_tensor_scalar(exponent: Any) -> None:
    check("aten::pow.Tensor_Scalar", rand(3, 4, low=0.1, high=3), exponent)
    if isinstance(exponent, int) and exponent >= 0:
        check("aten::pow.Tensor_Scalar", rand(5, dtype=np.int64, low=-4, high=4), exponent)
    check("aten::pow.Tensor_Scalar", rand(5, dtype=np.int32, low=1, high=4), exponent + 0.5)


def test_pow_other_overloads() -> None:
    check("aten::pow.Tensor_Tensor", rand(3, 4, low=0.1), rand(4))
    check("aten::pow.Tensor_Tensor", rand(4, dtype=np.int64, low=0, high=5),
          rand(4, dtype=np.int64, low=0, high=4))
    check("aten::pow.Tensor_Tensor", rand(4, low=0.5), rand(4, dtype=np.int64, low=0, high=3))
    check("aten::pow.Scalar", 2, rand(4, dtype=np.int64, low=0, high=5))
    check("aten::pow.Scalar", 2.0, rand(4, dtype=np.int64, low=0, high=5))
    check("aten::pow.Scalar", 1.5, rand(3, 2))
    check("aten::pow_.Scalar", rand(3, 2, low=0.1), 2)
    check("aten::pow_.Tensor", rand(3, 2, low=0.1), rand(2))


# ----------------------------------------------------------------------------------------------------
# Comparison, logic, bitwise
# ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_comparisons(op: str) -> None:
    a = rand(3, 4, dtype=np.int64)
    check(f"aten::{op}.Tensor", a, rand(4, dtype=np.int64))
    check(f"aten::{op}.Tensor", a.astype(np.float32), rand(4, dtype=np.int64))
    check(f"aten::{op}.Tensor", a, np.asarray(0.5, np.float64))
    check(f"aten::{op}.Scalar", a, 1)
    check(f"aten::{op}.Scalar", a, 0.5)
    check(f"aten::{op}.Scalar", rand(5), 0)
    check(f"aten::{op}.Scalar", rand(5, dtype=np.bool_), True)


def test_equal() -> None:
    a = rand(3, 4)
    check("aten::equal", a, a.copy())
    check("aten::equal", a, a + 1)
    check("aten::equal", a, a[:1])


@pytest.mark.parametrize("op", ["logical_and", "logical_or", "logical_xor"])
def test_logical_binary(op: str) -> None:
    check(f"aten::{op}", rand(3, 4, dtype=np.bool_), rand(4, dtype=np.bool_))
    check(f"aten::{op}", rand(3, 4, dtype=np.int64, low=-1, high=1), rand(4))


def test_logical_not_and_bitwise_not() -> None:
    for x in (rand(5, dtype=np.bool_), rand(5, dtype=np.int64), rand(5)):
        check("aten::logical_not", x)
    for x in (rand(5, dtype=np.bool_), rand(5, dtype=np.int64), rand(5, dtype=np.uint8, low=0, high=255)):
        check("aten::bitwise_not", x)


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor", "__and__", "__or__", "__xor__"])
def test_bitwise(name: str) -> None:
    check(f"aten::{name}.Tensor", rand(3, 4, dtype=np.bool_), rand(4, dtype=np.bool_))
    check(f"aten::{name}.Tensor", rand(3, 4, dtype=np.int64, low=0, high=100),
          rand(4, dtype=np.int32, high=50))
    check(f"aten::{name}.Scalar", rand(4, dtype=np.int64, low=0, high=100), 6)
    check(f"aten::{name}.Scalar", rand(4, dtype=np.bool_), True)
    if name.startswith("bitwise"):
        check(f"aten::{name}.Scalar_Tensor", 5, rand(4, dtype=np.int64, low=0, high=100))


# ----------------------------------------------------------------------------------------------------
# where, masked_fill
# ----------------------------------------------------------------------------------------------------

def test_where() -> None:
    cond = rand(3, 4, dtype=np.bool_)
    check("aten::where.self", cond, rand(3, 4), rand(4))
    check("aten::where.self", cond, rand(4, dtype=np.int64), rand(3, 1))
    check("aten::where.self", cond, rand(4, dtype=np.int64), np.asarray(0.5, np.float64))
    check("aten::where.ScalarOther", cond, rand(3, 4), 0.0)
    check("aten::where.ScalarOther", cond, rand(3, 4, dtype=np.int64), 1.5)
    check("aten::where.ScalarSelf", cond, 2, rand(4, dtype=np.int32))
    check("aten::where.Scalar", cond, 1, 0.5)
    check("aten::where.Scalar", cond, 1, 0)
    check("aten::where", cond)


@pytest.mark.parametrize("value", [float("-inf"), 0.0, 3, True])
def test_masked_fill(value: Any) -> None:
    x, mask = rand(2, 3, 4), rand(3, 4, dtype=np.bool_)
    check("aten::masked_fill.Scalar", x, mask, value)
    check("aten::masked_fill.Scalar", x[:1, :1], rand(2, 3, 4, dtype=np.bool_), value)
    check("aten::masked_fill.Tensor", x, mask, np.asarray(value, np.float32))
    if np.isfinite(value):
        check("aten::masked_fill.Scalar", rand(3, 4, dtype=np.int64), mask, value)
    ours, args = check("aten::masked_fill_.Scalar", x, mask, value)
    assert ours is args[0]
    check("aten::masked_fill_.Tensor", x, mask, np.asarray(value, np.float32))


# ----------------------------------------------------------------------------------------------------
# Unary
# ----------------------------------------------------------------------------------------------------

_FLOAT_UNARY = {  # op: (low, high) of a valid input range
    "exp": (-5, 5), "log": (0.01, 10), "sqrt": (0, 10), "rsqrt": (0.01, 10), "reciprocal": (0.1, 5),
    "erf": (-4, 4), "sin": (-6, 6), "cos": (-6, 6), "log2": (0.01, 10), "log10": (0.01, 10),
    "log1p": (-0.9, 5), "expm1": (-3, 3),
}


@pytest.mark.parametrize("op", sorted(_FLOAT_UNARY))
def test_float_unary(op: str) -> None:
    low, high = _FLOAT_UNARY[op]
    check(f"aten::{op}", rand(4, 5, low=low, high=high))
    check(f"aten::{op}", rand(6, dtype=np.int64, low=max(low, 1), high=high))
    check(f"aten::{op}", np.asarray(low + 0.5, np.float32))
    ours, args = check(f"aten::{op}_", rand(4, 5, low=low, high=high))
    assert ours is args[0]


def test_erf_dense_range() -> None:
    x = np.linspace(-7, 7, 20001).astype(np.float32)
    check("aten::erf", x)
    check("aten::erf", np.array([0.0, -0.0, 1e-8, -1e-30, np.inf, -np.inf, np.nan], np.float32))


def test_log_and_sqrt_out_of_domain() -> None:
    check("aten::log", np.array([0.0, -1.0, 1.0], np.float32))
    check("aten::sqrt", np.array([-1.0, 4.0], np.float32))
    check("aten::rsqrt", np.array([0.0, 4.0], np.float32))


@pytest.mark.parametrize("op", ["neg", "abs", "sign", "floor", "ceil", "round", "trunc"])
def test_same_type_unary(op: str) -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -3.7, 0.0], np.float32)
    check(f"aten::{op}", x)
    check(f"aten::{op}", rand(3, 4, dtype=np.int64))
    check(f"aten::{op}", rand(3, dtype=np.float16))
    check(f"aten::{op}", np.asarray(-1.5, np.float32))
    check(f"aten::{op}_", rand(3, 4))


def test_sign_of_nan_and_bool() -> None:
    check("aten::sign", np.array([np.nan, -np.inf, 0.0, 3.0], np.float32))
    check("aten::sign", rand(4, dtype=np.bool_))


def test_round_decimals() -> None:
    x = rand(20, low=-100, high=100)
    for decimals in (0, 1, 2, -1):
        check("aten::round.decimals", x, decimals)


def test_square_and_classification() -> None:
    check("aten::square", rand(3, 4))
    check("aten::square", rand(3, 4, dtype=np.int64))
    check("aten::square", rand(3, dtype=np.bool_))
    x = np.array([np.nan, np.inf, -np.inf, 1.0], np.float32)
    for name in ("isnan", "isinf", "isfinite"):
        check(f"aten::{name}", x)
        check(f"aten::{name}", rand(3, dtype=np.int64))


def test_minimum_maximum_nan_and_fmin_fmax() -> None:
    a = np.array([np.nan, 1.0, 2.0, np.nan], np.float32)
    b = np.array([0.0, np.nan, 1.0, np.nan], np.float32)
    for name in ("minimum", "maximum", "fmin", "fmax"):
        check(f"aten::{name}", a, b)


def test_zero_dim_results_are_arrays() -> None:
    out = op("aten::add.Tensor")(np.asarray(1.0, np.float32), np.asarray(2.0, np.float32), 1)
    assert isinstance(out, np.ndarray) and out.shape == ()
    out = op("aten::exp")(np.asarray(1.0, np.float32))
    assert isinstance(out, np.ndarray) and out.shape == ()


def test_read_only_inputs_are_not_written() -> None:
    x = rand(3, 4)
    x.flags.writeable = False
    for key, args in [("aten::add.Tensor", (x, x, 1)), ("aten::exp", (x,)),
                      ("aten::where.self", (x > 0, x, x)), ("aten::masked_fill.Scalar", (x, x > 0, 1.0)),
                      ("aten::pow.Tensor_Scalar", (x, 1))]:
        out = op(key)(*args)
        assert out.flags.writeable, f"{key} returned a read-only array"


# The elementwise operators that the target models (torchvision CNNs, TransformerEncoder, LSTM/GRU
# classifiers, the small TorchScript modules) use under jit.script, jit.trace, torch.export and
# export + run_decompositions.
TARGET_MODEL_OPS = [
    "aten::add.Tensor", "aten::add_.Tensor", "aten::bitwise_not", "aten::div.Tensor", "aten::eq.Scalar",
    "aten::floor_divide", "aten::gt.Scalar", "aten::logical_not", "aten::masked_fill.Scalar",
    "aten::masked_fill_.Scalar", "aten::mul.Scalar", "aten::mul.Tensor", "aten::neg", "aten::sub.Tensor",
    "aten::where.self",
]


def test_target_model_operators_are_registered() -> None:
    missing = [key for key in TARGET_MODEL_OPS if ops.lookup(key) is None]
    assert not missing, f"operators the target models need are not registered: {missing}"
