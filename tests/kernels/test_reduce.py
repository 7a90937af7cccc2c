"""Reduction kernels against PyTorch: sum/mean/prod, extrema and indices, all/any, var/std, norm, cumsum."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import oracle
import pytest
from kernel_backend import kernel as op

from ptlite import ops

RNG = np.random.default_rng(1)
rand = functools.partial(oracle.rand, RNG)
# float16 has 11 significant bits: a tolerance of 1e-3 is about one unit in the last place
check = functools.partial(oracle.check, float16_tol=1e-3)


F64, I64, F32 = 7, 4, 6  # ScalarType codes
DIMS = [[1], [0, 2], [-1], [], None]


@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_sum_dim(dim: Any, keepdim: bool, dtype: Any) -> None:
    x = rand(2, 3, 4, dtype=dtype)
    check("aten::sum.dim_IntList", x, dim, keepdim, None)
    check("aten::sum.dim_IntList", x, dim, keepdim, F64)
    if dtype is not np.float32:
        check("aten::sum.dim_IntList", x, dim, keepdim, I64)


def test_sum_all() -> None:
    for x in (rand(3, 4), rand(5, dtype=np.int64), rand(4, dtype=np.bool_), np.asarray(2.5, np.float32)):
        check("aten::sum", x, None)
    check("aten::sum", rand(3, 4, dtype=np.int32), F32)
    check("aten::sum.dim_IntList", np.asarray(2.5, np.float32), [0], True, None)


def test_sum_of_many_float32_stays_accurate() -> None:
    check("aten::sum.dim_IntList", rand(8, 100000), [1], False, None)
    check("aten::sum", rand(1000, 1000) + 1, None)


@pytest.mark.parametrize("shape,dim", [((2, 32, 16, 16), [2, 3]), ((64, 128), [0]), ((1, 64, 8, 8), [1, 2]),
                                       ((1, 64, 8, 8), [1]), ((4, 64, 32), [0, 1]), ((4, 64, 32), [0, 2]),
                                       ((4, 64, 32), [1])])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_large(shape: tuple, dim: list, keepdim: bool) -> None:
    """Sizes that take the BLAS path (and some that cannot: non-adjacent axes, kept axes on both sides)."""
    x = rand(*shape)
    check("aten::sum.dim_IntList", x, dim, keepdim, None)
    check("aten::mean.dim", x, dim, keepdim, None)
    check("aten::mean.dim", x.astype(np.float64), dim, keepdim, None)
    check("aten::mean.dim", np.swapaxes(x, 0, 1), dim, keepdim, None)


@pytest.mark.parametrize("dim", DIMS)
@pytest.mark.parametrize("keepdim", [False, True])
def test_mean(dim: Any, keepdim: bool) -> None:
    x = rand(2, 3, 4)
    check("aten::mean.dim", x, dim, keepdim, None)
    check("aten::mean.dim", rand(2, 3, 4, dtype=np.int64), dim, keepdim, F32)


def test_mean_all_and_nchw() -> None:
    check("aten::mean", rand(3, 4), None)
    check("aten::mean", rand(3, 4, dtype=np.int64), F64)
    check("aten::mean.dim", rand(2, 8, 7, 7), [2, 3], True, None)
    check("aten::mean.dim", rand(2, 8, 7, 7), [-1, -2], False, None)
    with pytest.raises(TypeError):
        op("aten::mean")(rand(3, dtype=np.int64), None)


def test_prod() -> None:
    check("aten::prod", rand(6, low=0.5, high=1.5), None)
    check("aten::prod", rand(6, dtype=np.int32, low=-3, high=3), None)
    check("aten::prod", rand(6, dtype=np.bool_), None)
    for dim in (0, 1, -1):
        check("aten::prod.dim_int", rand(3, 4, low=0.5, high=1.5), dim, False, None)
        check("aten::prod.dim_int", rand(3, 4, dtype=np.int64), dim, True, None)
        check("aten::prod.dim_int", rand(3, 4, dtype=np.int64), dim, True, F64)


@pytest.mark.parametrize("x", [rand(3, 4, 5), rand(3, 4, 5, dtype=np.int64, low=-2, high=2),
                               np.array([[1.0, np.nan, 3.0], [2.0, 2.0, 1.0]], np.float32),
                               rand(2, 3, dtype=np.bool_)])
def test_extrema(x: np.ndarray) -> None:
    check("aten::max", x)
    check("aten::min", x)
    for dim in range(-x.ndim, x.ndim):
        for keepdim in (False, True):
            check("aten::max.dim", x, dim, keepdim)
            check("aten::min.dim", x, dim, keepdim)
            check("aten::amax", x, [dim], keepdim)
            check("aten::amin", x, [dim], keepdim)
    check("aten::amax", x, [], False)
    check("aten::amin", x, [0, 1], True)
    check("aten::max.other", x, x[..., :1])
    check("aten::min.other", x, x[..., :1])


@pytest.mark.parametrize("x", [rand(3, 4, 5), rand(3, 4, dtype=np.int64, low=-1, high=1),
                               np.array([[1.0, np.nan, 3.0], [2.0, 5.0, 5.0]], np.float32)])
def test_argmax_argmin(x: np.ndarray) -> None:
    for dim in [None, *range(-x.ndim, x.ndim)]:
        for keepdim in (False, True):
            check("aten::argmax", x, dim, keepdim)
            check("aten::argmin", x, dim, keepdim)


def test_zero_dim_extrema() -> None:
    x = np.asarray(1.5, np.float32)
    check("aten::max.dim", x, 0, False)
    check("aten::argmax", x, 0, True)
    check("aten::argmax", x, None, False)
    check("aten::cumsum", x, 0, None)


@pytest.mark.parametrize("x", [rand(3, 4, dtype=np.bool_), rand(3, 4, dtype=np.int64, low=0, high=2),
                               rand(3, 4, dtype=np.uint8, low=0, high=1), rand(3, 4)])
def test_all_any(x: np.ndarray) -> None:
    check("aten::all", x)
    check("aten::any", x)
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            check("aten::all.dim", x, dim, keepdim)
            check("aten::any.dim", x, dim, keepdim)
    for dims in ([0, 1], None, [1]):
        check("aten::all.dims", x, dims, False)
        check("aten::any.dims", x, dims, True)


@pytest.mark.parametrize("dim", [[1], [0, 2], None])
@pytest.mark.parametrize("keepdim", [False, True])
def test_var_std(dim: Any, keepdim: bool) -> None:
    x = rand(3, 4, 5)
    for unbiased in (True, False):
        check("aten::var.dim", x, dim, unbiased, keepdim)
        check("aten::std.dim", x, dim, unbiased, keepdim)
        check("aten::var_mean.dim", x, dim, unbiased, keepdim)
        check("aten::std_mean.dim", x, dim, unbiased, keepdim)
    for correction in (None, 0, 2, 1.5):
        check("aten::var.correction", x, dim, correction, keepdim)
        check("aten::std.correction", x, dim, correction, keepdim)
        check("aten::var_mean.correction", x, dim, correction, keepdim)
        check("aten::std_mean.correction", x, dim, correction, keepdim)


def test_var_std_all() -> None:
    x = rand(4, 6) + 100  # an offset that a one-pass formula would lose precision on
    for unbiased in (True, False):
        for key in ("aten::var", "aten::std", "aten::var_mean", "aten::std_mean"):
            check(key, x, unbiased)


@pytest.mark.parametrize("p", [2, 1, 3, 0.5, 0, float("inf"), float("-inf"), None])
def test_norm(p: Any) -> None:
    x = rand(3, 4, 5)
    x[0, 0, 0] = 0
    if p is not None:
        check("aten::norm.Scalar", x, p, tol=1e-5)
    for dim in ([1], [0, 2], [-1]):
        for keepdim in (False, True):
            check("aten::norm.ScalarOpt_dim", x, p, dim, keepdim)
    check("aten::norm.ScalarOpt_dim_dtype", x, p, [1], False, F64)
    check("aten::norm.ScalarOpt_dtype", x, p, F64)
    if p is not None:
        for dim in ([1], [0, 2], None):
            check("aten::linalg_vector_norm", x, p, dim, True, None)
        check("aten::linalg_vector_norm", x, p, [-1], False, F64)


def test_logsumexp() -> None:
    x = rand(3, 4, 5, low=-20, high=20)
    for dim in ([1], [0, 2], [-1]):
        for keepdim in (False, True):
            check("aten::logsumexp", x, dim, keepdim)
    y = np.array([[-np.inf, -np.inf], [0.0, -np.inf], [np.inf, 1.0]], np.float32)
    check("aten::logsumexp", y, [1], False)
    check("aten::logsumexp", rand(3, 4, dtype=np.int64), [1], False)


@pytest.mark.parametrize("op", ["cumsum", "cumprod"])
def test_cumulative(op: str) -> None:
    for x in (rand(3, 4, low=0.5, high=1.5), rand(3, 4, dtype=np.int32), rand(3, 4, dtype=np.bool_)):
        for dim in (0, 1, -1):
            check(f"aten::{op}", x, dim, None)
        check(f"aten::{op}", x, 1, F64)


def test_reductions_return_arrays_not_scalars() -> None:
    x = rand(3, 4)
    for key, args in [("aten::sum", (x, None)), ("aten::mean", (x, None)), ("aten::max", (x,)),
                      ("aten::all", (x,)), ("aten::argmax", (x, None, False)), ("aten::var", (x, True)),
                      ("aten::norm.Scalar", (x, 2)), ("aten::prod", (x, None))]:
        out = op(key)(*args)
        assert isinstance(out, np.ndarray) and out.shape == (), f"{key} returned {type(out).__name__}"


# The reduce operators that the target models (torchvision CNNs, TransformerEncoder, LSTM/GRU
# classifiers, the small TorchScript modules) use under jit.script, jit.trace, torch.export and
# export + run_decompositions.
TARGET_MODEL_OPS = [
    "aten::any.dim", "aten::mean.dim", "aten::sum", "aten::sum.dim_IntList",
]


def test_target_model_operators_are_registered() -> None:
    missing = [key for key in TARGET_MODEL_OPS if ops.lookup(key) is None]
    assert not missing, f"operators the target models need are not registered: {missing}"
