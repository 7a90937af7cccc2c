"""Indexing kernels against PyTorch: advanced indexing, index_put, gather/scatter, embedding, masks, copy_."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from ptlite.ir import registry

RNG = np.random.default_rng(4)

# ----------------------------------------------------------------------------------------------------
# The oracle: run an operator in ptlite and in torch (torch.ops.aten.<name>.<overload>) and compare.
# ----------------------------------------------------------------------------------------------------

def _to_torch(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.array(x, copy=True))
    if isinstance(x, (list, tuple)):
        return [_to_torch(v) for v in x]
    return x


def _copy(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        return np.array(x, copy=True)
    if isinstance(x, (list, tuple)):
        return [_copy(v) for v in x]
    return x


def _torch_op(key: str) -> Any:
    name, _, overload = key.split("::")[1].partition(".")
    return getattr(getattr(torch.ops.aten, name), overload or "default")


def _compare(key: str, ours: Any, ref: Any, tol: float) -> None:
    if isinstance(ref, (tuple, list)):
        assert isinstance(ours, (tuple, list)), f"{key}: {len(ref)} results expected"
        assert len(ours) == len(ref), f"{key}: {len(ours)} results, torch gives {len(ref)}"
        for o, r in zip(ours, ref, strict=True):
            _compare(key, o, r, tol)
        return
    if not isinstance(ref, torch.Tensor):
        assert ours == ref, f"{key}: {ours!r} != torch {ref!r}"
        return
    assert isinstance(ours, np.ndarray), f"{key}: returned {type(ours).__name__}, not an ndarray"
    want = ref.numpy()
    assert ours.dtype == want.dtype, f"{key}: dtype {ours.dtype} != torch {want.dtype}"
    assert ours.shape == want.shape, f"{key}: shape {ours.shape} != torch {want.shape}"
    if want.dtype.kind == "f" and want.size:
        if want.dtype == np.float16:
            tol = max(tol, 1e-3)  # float16 has 11 significant bits: 1e-3 is about one unit in the last place
        finite = np.isfinite(want)
        assert np.array_equal(ours[~finite], want[~finite], equal_nan=True), f"{key}: inf/NaN entries differ"
        diff = np.abs(ours[finite].astype(np.float64) - want[finite]).max(initial=0.0)
        scale = max(1.0, np.abs(want[finite]).max(initial=0.0))
        assert diff <= tol * scale, f"{key}: max |diff| {diff:.3g} > {tol:g} * {scale:.3g}"
    else:
        assert np.array_equal(ours, want), f"{key}: values differ: {ours} != torch {want}"


# torch's "unsafe" view ops alias their input although their schemas do not say so; ptlite does the same.
_ALIASING_DESPITE_SCHEMA = {"aten::_unsafe_view", "aten::unsafe_split.Tensor", "aten::unsafe_chunk",
                            "aten::type_as"}


def check(key: str, *args: Any, tol: float = 1e-5) -> tuple[Any, list]:
    """Run key on args in ptlite and torch, compare the results, and (for in-place ops) the mutated self.

    Returns ptlite's result and the argument copies it ran on.
    """
    ours_args = _copy(list(args))
    ours = registry.get(key).impl(*ours_args)
    op = _torch_op(key)
    pos, kw = [], {}
    for arg, value in zip(registry.get(key).schema.arguments, args, strict=True):
        if arg.kwarg_only:
            kw[arg.name] = _to_torch(value)
        else:
            pos.append(_to_torch(value))
    ref = op(*pos, **kw)
    _compare(key, ours, ref, tol)
    name = key.split("::")[1].split(".")[0]
    if name.endswith("_") and not name.endswith("__"):  # in-place (not a dunder such as __and__)
        _compare(key + " (self after)", ours_args[0], pos[0], tol)
    elif all(r.alias_info is None for r in op._schema.returns) and key not in _ALIASING_DESPITE_SCHEMA:
        for out in ours if isinstance(ours, (tuple, list)) else [ours]:
            for a in ours_args:
                if isinstance(a, np.ndarray) and isinstance(out, np.ndarray):
                    assert not np.shares_memory(out, a), f"{key}: result shares memory with an input"
    return ours, ours_args


def rand(*shape: int, dtype: Any = np.float32, low: float = -3, high: float = 3) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return RNG.random(shape) > 0.5
    if dt.kind in "iu":
        return RNG.integers(int(low), int(high) + 1, shape).astype(dt)
    return RNG.uniform(low, high, shape).astype(dt)


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
    out = registry.get("aten::index_put_").impl(y, [idx(1)], np.zeros(4, np.float32), False)
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
    view = registry.get("aten::slice.Tensor").impl(x, 1, 1, 3, 1)
    registry.get("aten::copy_").impl(view, np.zeros(2, np.float32), False)
    assert not x[:, 1:3].any(), "copy_ into a view writes into its base (slice assignment)"


# The indexing operators that the target models (torchvision CNNs, TransformerEncoder, LSTM/GRU
# classifiers, the small TorchScript modules) use under jit.script, jit.trace, torch.export and
# export + run_decompositions.
TARGET_MODEL_OPS = [
    "aten::embedding",
]


def test_target_model_operators_are_registered() -> None:
    missing = [key for key in TARGET_MODEL_OPS if registry.lookup(key) is None]
    assert not missing, f"operators the target models need are not registered: {missing}"
