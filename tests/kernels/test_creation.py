"""Creation and conversion kernels against PyTorch: factories, arange/linspace, *_like, new_*, to, fills."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import oracle
import pytest
import torch
from kernel_backend import kernel as op

from ptlite import ops

RNG = np.random.default_rng(3)
rand = functools.partial(oracle.rand, RNG)
# float16 has 11 significant bits: a tolerance of 1e-3 is about one unit in the last place
check = functools.partial(oracle.check, float16_tol=1e-3)


BOOL, U8, I32, I64, F16, F32, F64 = 11, 0, 3, 4, 5, 6, 7  # ScalarType codes


@pytest.mark.parametrize("dtype", [None, BOOL, I32, I64, F64])
def test_zeros_ones_full(dtype: Any) -> None:
    for size in ([2, 3], [0], [], [4]):
        check("aten::zeros", size, dtype, None, None, None)
        check("aten::ones", size, dtype, None, None, None)
        check("aten::full", size, 3, dtype, None, None, None)
    check("aten::full", [2, 2], True, dtype, None, None, None)
    if dtype not in (BOOL, I32, I64):
        check("aten::full", [2, 2], -1.5, dtype, None, None, None)


def test_empty_is_zero_filled() -> None:
    like = rand(3, 2, dtype=np.int32)
    for key, args, dtype, shape in [
            ("aten::empty.memory_format", ([2, 3], None, None, None, None, None), np.float32, (2, 3)),
            ("aten::empty.memory_format", ([4], I64, None, None, None, 0), np.int64, (4,)),
            ("aten::empty_strided", ([2, 3], [3, 1], F64, None, None, None), np.float64, (2, 3)),
            ("aten::empty_permuted", ([2, 3, 4], [0, 2, 1], I32, None, None, None), np.int32, (2, 3, 4)),
            ("aten::empty_like", (like, None, None, None, None, None), np.int32, (3, 2)),
            ("aten::new_empty", (like, [5, 1], None, None, None, None), np.int32, (5, 1))]:
        ours = op(key)(*args)
        assert ours.dtype == dtype and ours.shape == shape, f"{key}: {ours.dtype} {ours.shape}"
        assert not ours.any(), f"{key} must be zero-filled"


def test_full_infers_dtype_from_fill_value() -> None:
    for value in (2, 2.5, True, -7):
        check("aten::full", [3], value, None, None, None, None)


def test_scalar_tensor() -> None:
    for value, dtype in [(3, None), (2.5, None), (True, None), (3, I64), (2.5, F64), (1, BOOL)]:
        check("aten::scalar_tensor", value, dtype, None, None, None)


_ARANGES = [(0, 5, 1), (2, 11, 3), (10, 0, -2), (0, 1, 0.1), (-1.5, 2.25, 0.5), (0, 10.5, 1), (5, 5, 1),
            (0.0, 1.0, 0.3), (1, -3.5, -0.7), (0, 1000, 7), (0.5, 5.9, 1.7), (-3.7, 3, 2.2)]


@pytest.mark.parametrize("start,end,step", _ARANGES)
def test_arange(start: Any, end: Any, step: Any) -> None:
    check("aten::arange.start_step", start, end, step, None, None, None, None)
    for dtype in (F32, F64, I64):
        check("aten::arange.start_step", start, end, step, dtype, None, None, None)
    if step == 1:
        check("aten::arange.start", start, end, None, None, None, None)
        if start == 0:
            check("aten::arange", end, None, None, None, None)
            check("aten::arange", end, F32, None, None, None)


@pytest.mark.parametrize("start,end,steps", [(0, 1, 5), (-2.5, 7.0, 100), (3, -3, 7), (0, 1, 1), (1, 2, 0),
                                             (0, 10, 4), (1e-3, 1.0, 33), (-3.7, 3, 9), (0.5, 5.9, 7)])
def test_linspace(start: Any, end: Any, steps: int) -> None:
    check("aten::linspace", start, end, steps, None, None, None, None)
    check("aten::linspace", start, end, steps, F64, None, None, None)
    check("aten::linspace", start, end, steps, I64, None, None, None)
    s, e = np.asarray(start, np.float32), np.asarray(end, np.float32)
    check("aten::linspace.Tensor_Tensor", s, e, steps, None, None, None, None)
    check("aten::linspace.Tensor_Scalar", s, end, steps, None, None, None, None)
    check("aten::linspace.Scalar_Tensor", start, e, steps, None, None, None, None)


@pytest.mark.parametrize("start,end,steps,base", [(0, 2, 5, 10.0), (-2.5, 3.0, 100, 10.0), (3, -3, 7, 2.0),
                                                  (0, 1, 1, 10.0), (1, 2, 0, 10.0), (-1.5, 1.5, 9, 0.5)])
def test_logspace(start: Any, end: Any, steps: int, base: float) -> None:
    check("aten::logspace", start, end, steps, base, None, None, None, None)
    check("aten::logspace", start, end, steps, base, F64, None, None, None)
    if base == 2.0:
        check("aten::logspace", start, end, steps, base, I64, None, None, None)
    s, e = np.asarray(start, np.float32), np.asarray(end, np.float32)
    check("aten::logspace.Tensor_Tensor", s, e, steps, base, None, None, None, None)
    check("aten::logspace.Tensor_Scalar", s, end, steps, base, None, None, None, None)
    check("aten::logspace.Scalar_Tensor", start, e, steps, base, None, None, None, None)


def test_eye() -> None:
    for n in (0, 1, 4):
        check("aten::eye", n, None, None, None, None)
        check("aten::eye.m", n, 3, I64, None, None, None)
    check("aten::eye", 3, BOOL, None, None, None)


def test_like_and_new() -> None:
    x = rand(2, 3, dtype=np.int32)
    for dtype in (None, F32, BOOL):
        check("aten::zeros_like", x, dtype, None, None, None, None)
        check("aten::ones_like", x, dtype, None, None, None, 0)
        check("aten::full_like", x, 5, dtype, None, None, None, None)
        check("aten::new_zeros", x, [4], dtype, None, None, None)
        check("aten::new_ones", x, [1, 2], dtype, None, None, None)
        check("aten::new_full", x, [3], 7, dtype, None, None, None)
    check("aten::full_like", rand(3), 2.5, None, None, None, None, None)
    check("aten::full_like", rand(3), float("-inf"), None, None, None, None, None)


_CONVERSION_INPUTS = [
    np.array([-2.7, -0.5, 0.0, 0.5, 1.99, 200.4], np.float32),
    rand(2, 3, dtype=np.int64, low=-300, high=300),
    rand(4, dtype=np.bool_),
    rand(3, dtype=np.float16),
]


@pytest.mark.parametrize("x", _CONVERSION_INPUTS)
@pytest.mark.parametrize("dtype", [BOOL, I32, I64, F16, F32, F64])
def test_to_dtype(x: np.ndarray, dtype: int) -> None:
    check("aten::to.dtype", x, dtype, False, False, None)
    check("aten::to.device", x, "cpu", dtype, False, False, None)
    check("aten::to.dtype_layout", x, dtype, None, None, None, False, False, None)
    check("aten::to.prim_Device", x, None, dtype, False, False)
    check("aten::to.prim_dtype", x, dtype, False, False)
    check("aten::_to_copy", x, dtype, None, None, None, False, None)
    other = np.zeros(1, op("aten::zeros")([1], dtype).dtype)
    check("aten::to.other", x, other, False, False, None)
    check("aten::type_as", x, other)


def test_to_aliases_only_without_change_or_copy() -> None:
    x = rand(3)
    assert op("aten::to.dtype")(x, F32, False, False, None) is x
    assert op("aten::to.dtype")(x, F32, False, True, None) is not x
    assert op("aten::to.prim_other")(x, False, False) is x
    assert not np.shares_memory(op("aten::to.prim_other")(x, False, True), x)
    copied = op("aten::_to_copy")(x, None, None, None, None, False, None)
    assert not np.shares_memory(copied, x)
    check("aten::_to_copy", x, None, None, None, None, False, None)


def test_tensor_constructors() -> None:
    for t in (2.5, 3, True):
        key = {float: "float", int: "int", bool: "bool"}[type(t)]
        check(f"aten::tensor.{key}", t, None, None, False)
        check(f"aten::tensor.{key}", t, F64, None, False)
        check(f"aten::as_tensor.{key}", t, None, None)
    check("aten::as_tensor", rand(3), I64, None)
    check("aten::as_tensor", rand(3), None, None)
    for data in ([[1, 2], [3, 4]], [1.5, 2.0], [True, False], [], [[1.0], [2.5]]):
        for dtype in (None, F64):
            ours = op("aten::tensor")(data, dtype, None, False)
            want = torch.tensor(data, dtype=None if dtype is None else torch.float64).numpy()
            assert ours.dtype == want.dtype and np.array_equal(ours, want), f"aten::tensor({data}): {ours}"
            ours = op("aten::as_tensor.list")(data, dtype, None)
            assert ours.dtype == want.dtype and np.array_equal(ours, want), f"aten::as_tensor.list({data})"


def test_tril_triu() -> None:
    for x in (rand(4, 5), rand(2, 3, 3), rand(3, 2, dtype=np.int64)):
        for diagonal in (0, 1, -1, 5, -5):
            check("aten::tril", x, diagonal)
            check("aten::triu", x, diagonal)


def test_fills() -> None:
    x = rand(2, 3)
    check("aten::fill.Scalar", x, 2.5)
    check("aten::fill.Tensor", x, np.asarray(-1.0, np.float32))
    check("aten::fill.Scalar", rand(3, dtype=np.int64), 4)
    ours, args = check("aten::fill_.Scalar", x, 1.5)
    assert ours is args[0]
    check("aten::fill_.Tensor", x, np.asarray(3, np.int64))
    ours, args = check("aten::zero_", x)
    assert ours is args[0]
    x.flags.writeable = False
    assert not op("aten::zero_")(x).any()


# The creation operators that the target models (torchvision CNNs, TransformerEncoder, LSTM/GRU
# classifiers, the small TorchScript modules) use under jit.script, jit.trace, torch.export and
# export + run_decompositions.
TARGET_MODEL_OPS = [
    "aten::_to_copy", "aten::full", "aten::full_like", "aten::scalar_tensor", "aten::to.dtype",
    "aten::zeros", "aten::zeros_like",
]


def test_target_model_operators_are_registered() -> None:
    missing = [key for key in TARGET_MODEL_OPS if ops.lookup(key) is None]
    assert not missing, f"operators the target models need are not registered: {missing}"
