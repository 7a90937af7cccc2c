"""Indexing kernels against PyTorch: advanced indexing, index_put, gather/scatter, embedding, masks, copy_."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import oracle
import pytest
import torch
from kernel_backend import kernel as op

from ptlite import ops

RNG = np.random.default_rng(4)
rand = functools.partial(oracle.rand, RNG)
# float16 has 11 significant bits: a tolerance of 1e-3 is about one unit in the last place
check = functools.partial(oracle.check, float16_tol=1e-3)


def idx(*values: Any) -> np.ndarray:
    return np.array(values, np.int64)


_INDEX_CASES = [
    [idx(0, 2, -1)],
    [None, idx(1, 0)],
    [idx(0, 1), idx(2, 3)],
    [idx(0, 1), None, idx(2, 3)],  # advanced indices split by a slice: their dims go first
    [None, idx([0, 1], [1, 2]), idx(0)],
    [rand(4, dtype=np.bool_)],
    [None, rand(5, dtype=np.bool_)],
    [rand(4, 5, dtype=np.bool_)],
    [np.asarray(2, np.int64)],
    [None, None, np.array([1, 3], np.int32)],
]


@pytest.mark.parametrize("indices", _INDEX_CASES)
def test_index(indices: list) -> None:
    x = rand(4, 5, 6)
    check("aten::index.Tensor", x, indices)
    if all(i is not None for i in indices):
        check("aten::index.Tensor_hacked_twin", x, indices)


@pytest.mark.parametrize("indices", _INDEX_CASES[:8])
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put(indices: list, accumulate: bool) -> None:
    x = rand(4, 5, 6)
    ints = [i for i in indices if i is not None and i.dtype != np.bool_]
    if accumulate and ints:  # repeat every position: accumulate must add each value
        doubled = iter(np.stack([b, b]) for b in np.broadcast_arrays(*ints))
        indices = [i if i is None or i.dtype == np.bool_ else next(doubled) for i in indices]
    key = tuple(slice(None) if i is None else torch.from_numpy(i) for i in indices)
    shape = torch.from_numpy(x)[key].shape
    values = rand(*shape)
    check("aten::index_put", x, indices, values, accumulate)
    ours, args = check("aten::index_put_", x, indices, values, accumulate)
    assert ours is args[0]
    check("aten::index_put_", x, indices, np.asarray(1.5, np.float32), accumulate)
    check("aten::_index_put_impl_", x, indices, values, accumulate, False)


def test_index_put_dtype_and_read_only() -> None:
    x = rand(3, 4, dtype=np.int64)
    check("aten::index_put_", x, [idx(0, 2)], np.asarray(7, np.int64), False)
    y = rand(3, 4)
    y.flags.writeable = False
    out = op("aten::index_put_")(y, [idx(1)], np.zeros(4, np.float32), False)
    assert not out[1].any() and np.array_equal(out[0], y[0])


def test_index_select_and_take() -> None:
    x = rand(4, 5, 6)
    for dim in (0, 1, -1):
        check("aten::index_select", x, dim, idx(0, 3, 3, 1))
    check("aten::index_select", x, 1, np.asarray(2, np.int64))
    check("aten::index_select", x, 2, np.array([], np.int64))
    check("aten::index_select", np.asarray(1.5, np.float32), 0, idx(0))
    check("aten::take", x, idx([0, 5], [119, -1]))


@pytest.mark.parametrize("padding_idx", [-1, 0, 3])
def test_embedding(padding_idx: int) -> None:
    weight = rand(10, 4)
    check("aten::embedding", weight, idx([1, 2, 3], [3, 0, 9]), padding_idx, False, False)
    check("aten::embedding", weight, np.asarray(3, np.int64), padding_idx, False, False)
    check("aten::embedding", weight, np.array([7, 3], np.int32), padding_idx, False, False)


def test_gather() -> None:
    x = rand(4, 5, 6)
    for dim in (0, 1, 2, -1):
        size = x.shape[dim]
        index = RNG.integers(0, size, (4, 5, 6)).astype(np.int64)
        check("aten::gather", x, dim, index, False)
        check("aten::gather", x, dim, index[:2, :3, :1], False)  # index smaller than self in every dim
    check("aten::gather", np.asarray(2.0, np.float32), 0, np.asarray(0, np.int64), False)


def _unique_index(shape: tuple, dim: int, size: int) -> np.ndarray:
    """A scatter index without repeated targets along dim (so the result does not depend on write order)."""
    perm = np.argsort(RNG.random((*shape[:dim], size, *shape[dim + 1:])), axis=dim)
    return np.take(perm, np.arange(shape[dim]), axis=dim).astype(np.int64)


def test_scatter() -> None:
    x = rand(4, 5, 6)
    for dim in (0, 1, 2):
        shape = [3, 4, 5]
        index = _unique_index(tuple(shape), dim, x.shape[dim])
        src = rand(4, 5, 6)
        check("aten::scatter.src", x, dim, index, src)
        check("aten::scatter.value", x, dim, index, 2.5)
        check("aten::scatter_.src", x, dim, index, src)
        check("aten::scatter_.value", x, dim, index, -1.0)
        repeated = RNG.integers(0, x.shape[dim], shape).astype(np.int64)
        check("aten::scatter_add", x, dim, repeated, src)
        check("aten::scatter_add_", x, dim, repeated, src)
        check("aten::scatter.reduce", x, dim, repeated, src, "add")
        check("aten::scatter.reduce", x, dim, repeated, src, "multiply")
        check("aten::scatter.value_reduce", x, dim, repeated, 1.5, "multiply")


def test_index_fill() -> None:
    x = rand(4, 5)
    check("aten::index_fill.int_Scalar", x, 1, idx(0, 3), -1.0)
    check("aten::index_fill.int_Scalar", x, -2, idx(2), 7)
    check("aten::index_fill.int_Tensor", x, 0, idx(1, 1), np.asarray(0.5, np.float32))


def test_masks() -> None:
    x = rand(3, 4)
    check("aten::masked_select", x, x > 0)
    check("aten::masked_select", x, rand(4, dtype=np.bool_))
    check("aten::masked_select", x[:1], rand(3, 4, dtype=np.bool_))
    mask = rand(3, 4, dtype=np.bool_)
    check("aten::masked_scatter", x, mask, rand(12))
    check("aten::masked_scatter", x, rand(4, dtype=np.bool_), rand(3, 5))
    for t in (x, rand(2, 3, dtype=np.int64, low=-1, high=1), rand(5, dtype=np.bool_),
              np.zeros((0, 2), np.float32)):
        check("aten::nonzero", t)
        check("aten::where", t)


def test_copy() -> None:
    x = rand(3, 4)
    ours, args = check("aten::copy_", x, rand(4, dtype=np.int64), False)
    assert ours is args[0]
    check("aten::copy_", rand(3, 4, dtype=np.int32), rand(3, 4), False)
    check("aten::copy", x, rand(3, 1), False)
    view = op("aten::slice.Tensor")(x, 1, 1, 3, 1)
    op("aten::copy_")(view, np.zeros(2, np.float32), False)
    assert not x[:, 1:3].any(), "copy_ into a view writes into its base (slice assignment)"


# The indexing operators that the target models (torchvision CNNs, TransformerEncoder, LSTM/GRU
# classifiers, the small TorchScript modules) use under jit.script, jit.trace, torch.export and
# export + run_decompositions.
TARGET_MODEL_OPS = [
    "aten::embedding",
]


def test_target_model_operators_are_registered() -> None:
    missing = [key for key in TARGET_MODEL_OPS if ops.lookup(key) is None]
    assert not missing, f"operators the target models need are not registered: {missing}"
