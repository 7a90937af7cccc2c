"""Shape kernels against PyTorch: views, joins and splits, select/slice/narrow, expand/repeat, flips, pads."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import oracle
import pytest
from kernel_backend import kernel as op

from ptlite import ops

RNG = np.random.default_rng(2)
rand = functools.partial(oracle.rand, RNG)
# float16 has 11 significant bits: a tolerance of 1e-3 is about one unit in the last place
check = functools.partial(oracle.check, float16_tol=1e-3)


def shares(key: str, *args: Any) -> bool:
    out = op(key)(*args)
    return np.shares_memory(out, args[0])


def test_view_reshape() -> None:
    x = rand(2, 3, 4)
    for size in ([6, 4], [-1], [4, -1, 3], [2, 1, 3, 1, 4]):
        check("aten::view", x, size)
        check("aten::reshape", x, size)
        check("aten::_unsafe_view", x, size)
    check("aten::reshape", np.transpose(x, (2, 0, 1)), [4, 6])
    check("aten::reshape", np.asarray(1.0, np.float32), [1, 1])
    check("aten::_reshape_alias", x, [6, 4], [4, 1])
    check("aten::view_as", x, rand(4, 6))
    check("aten::reshape_as", x, rand(24))
    check("aten::view.dtype", x, 3)  # float32 -> int32 bits
    assert shares("aten::view", x, [6, 4]), "view must not copy"


@pytest.mark.parametrize("start,end", [(0, -1), (1, -1), (1, 2), (0, 0), (-2, -1), (2, 2)])
def test_flatten(start: int, end: int) -> None:
    check("aten::flatten.using_ints", rand(2, 3, 4), start, end)


def test_flatten_zero_dim_and_unflatten() -> None:
    check("aten::flatten.using_ints", np.asarray(3.0, np.float32), 0, -1)
    check("aten::unflatten.int", rand(2, 12), 1, [3, 4])
    check("aten::unflatten.int", rand(2, 12), -1, [-1, 2])
    check("aten::unflatten.int", rand(12, 2), 0, [2, 2, 3])


def test_squeeze_unsqueeze() -> None:
    x = rand(1, 3, 1, 4)
    check("aten::squeeze", x)
    for dim in (0, 1, 2, -1, -4):
        check("aten::squeeze.dim", x, dim)
    check("aten::squeeze.dims", x, [0, 2])
    check("aten::squeeze.dims", x, [0, 1, -2])
    check("aten::squeeze.dims", x, [])
    check("aten::squeeze.dim", np.asarray(2.0, np.float32), 0)
    check("aten::squeeze", np.asarray(2.0, np.float32))
    for dim in (0, 2, 4, -1, -5):
        check("aten::unsqueeze", x, dim)
    check("aten::unsqueeze", np.asarray(2.0, np.float32), -1)


def test_permute_transpose() -> None:
    x = rand(2, 3, 4)
    for dims in ([2, 0, 1], [0, 1, 2], [-1, -3, -2]):
        check("aten::permute", x, dims)
    for d0, d1 in [(0, 1), (-1, 0), (1, 1)]:
        check("aten::transpose.int", x, d0, d1)
        check("aten::swapaxes", x, d0, d1)
    check("aten::transpose.int", np.asarray(2.0, np.float32), 0, -1)
    check("aten::numpy_T", x)
    check("aten::movedim.int", x, 0, -1)
    check("aten::movedim.intlist", x, [0, 1], [2, 0])
    assert shares("aten::permute", x, [2, 0, 1])


def test_aliases_and_copies() -> None:
    x = np.transpose(rand(3, 4))
    out = check("aten::contiguous", x, 0)[0]
    assert out.flags.c_contiguous
    y = rand(3, 4)
    assert op("aten::contiguous")(y, 0) is y, "contiguous of a contiguous array is a no-op"
    check("aten::clone", x, None)
    check("aten::clone", y, 0)
    check("aten::lift_fresh_copy", y)
    for key in ("aten::detach", "aten::alias", "aten::lift_fresh", "aten::detach_"):
        check(key, y)


def test_cat_stack() -> None:
    a, b = rand(2, 3), rand(4, 3, dtype=np.int64)
    check("aten::cat", [a, b], 0)
    check("aten::cat", [a, a, a], -1)
    check("aten::cat", [rand(2, 1, 4), rand(2, 3, 4, dtype=np.float16)], 1)
    check("aten::cat", [rand(2, 3), np.zeros(0, np.float32), rand(1, 3)], 0)  # 1-d empties are skipped
    check("aten::cat", [rand(3, dtype=np.bool_), rand(2, dtype=np.bool_)], 0)
    check("aten::cat", [rand(2, 2)], 1)
    check("aten::concat", [a, a], 1)
    for dim in (0, 1, 2, -1, -3):
        check("aten::stack", [a, a, rand(2, 3, dtype=np.int32)], dim)
    check("aten::hstack", [a, a])
    check("aten::vstack", [rand(3), rand(3)])


def test_split_family() -> None:
    x = rand(7, 4)
    for size in (1, 2, 3, 7, 10):
        check("aten::split.Tensor", x, size, 0)
        check("aten::unsafe_split.Tensor", x, size, 0)
    check("aten::split.Tensor", x, 3, -1)
    check("aten::split.Tensor", np.zeros((0, 2), np.float32), 2, 0)
    check("aten::split.sizes", x, [2, 5], 0)
    check("aten::split", x, [1, 3], 1)
    check("aten::split_with_sizes", x, [0, 4, 3], 0)
    for chunks in (1, 2, 3, 4, 7, 9):
        check("aten::chunk", x, chunks, 0)
        check("aten::unsafe_chunk", x, chunks, 0)
    check("aten::chunk", rand(2, 6), 2, 1)
    check("aten::chunk", np.zeros(0, np.float32), 3, 0)
    for sections in (1, 3, 5, 9):
        check("aten::tensor_split.sections", x, sections, 0)
    check("aten::tensor_split.indices", x, [1, 5], 0)
    check("aten::tensor_split.indices", x, [3, 2, 10], 0)
    check("aten::tensor_split.tensor_indices_or_sections", x, np.asarray(3, np.int64), 0)
    check("aten::tensor_split.tensor_indices_or_sections", x, np.array([2, 4], np.int64), 1)
    for dim in (0, 1, -1):
        check("aten::unbind.int", x, dim)
    check("aten::unbind.int", rand(3), 0)
    assert all(np.shares_memory(p, x) for p in op("aten::chunk")(x, 2, 0))


def test_select_slice_narrow() -> None:
    x = rand(4, 5, 6)
    for dim, index in [(0, 0), (1, -1), (-1, 3), (2, -6)]:
        check("aten::select.int", x, dim, index)
    check("aten::select.int", rand(5), 0, 2)
    big = 9223372036854775807
    for dim, start, end, step in [(0, None, None, 1), (1, 1, None, 1), (2, None, -1, 2), (1, -3, big, 1),
                                  (0, 2, 1, 1), (2, -100, 100, 3), (-1, 0, big, 4), (1, 5, 10, 1)]:
        check("aten::slice.Tensor", x, dim, start, end, step)
    for dim, start, length in [(0, 1, 2), (2, -3, 2), (1, 0, 5), (1, 5, 0)]:
        check("aten::narrow", x, dim, start, length)
    check("aten::narrow.Tensor", x, 1, np.asarray(2, np.int64), 3)
    assert shares("aten::slice.Tensor", x, 1, 1, 3, 1) and shares("aten::select.int", x, 0, 1)
    assert isinstance(op("aten::select.int")(rand(5), 0, 2), np.ndarray)


def test_expand_repeat() -> None:
    x = rand(3, 1)
    check("aten::expand", x, [3, 4], False)
    check("aten::expand", x, [2, -1, 5], False)
    check("aten::expand", np.asarray(1.0, np.float32), [2, 2], False)
    check("aten::expand_as", x, rand(2, 3, 4))
    check("aten::broadcast_to", x, [2, 3, 4])
    check("aten::broadcast_tensors", [x, rand(4), rand(2, 1, 1)])
    for repeats in ([2, 3], [1, 1], [2, 1, 3]):
        check("aten::repeat", x, repeats)
        check("aten::tile", x, repeats)
    check("aten::tile", rand(2, 3), [2])
    check("aten::repeat_interleave.self_int", rand(2, 3), 2, None, None)
    check("aten::repeat_interleave.self_int", rand(2, 3), 3, 1, None)
    check("aten::repeat_interleave.self_Tensor", rand(2, 3), np.array([1, 0, 2], np.int64), 1, None)
    check("aten::repeat_interleave.self_Tensor", rand(2, 3), np.asarray(2, np.int64), -2, None)
    check("aten::repeat_interleave.Tensor", np.array([2, 0, 3], np.int64), None)


def test_flip_roll() -> None:
    x = rand(3, 4, 5)
    for dims in ([0], [1, 2], [-1], [0, 1, 2], []):
        check("aten::flip", x, dims)
    check("aten::roll", x, [2], [])
    check("aten::roll", x, [-1], [1])
    check("aten::roll", x, [1, 7], [0, 2])
    check("aten::roll", x, [3, -2], [-1, 0])


def test_shuffles() -> None:
    x = rand(2, 12, 3, 5)
    for groups in (1, 2, 3, 4):
        check("aten::channel_shuffle", x, groups)
        check("aten::native_channel_shuffle", x, groups)
    check("aten::channel_shuffle", rand(2, 6, 5), 3)
    check("aten::pixel_shuffle", x, 2)
    check("aten::pixel_shuffle", rand(3, 2, 18, 2, 3), 3)
    check("aten::pixel_unshuffle", rand(2, 3, 4, 6), 2)
    check("aten::pixel_unshuffle", rand(3, 2, 6, 6), 3)


@pytest.mark.parametrize("pad", [[1, 2], [1, 1, 2, 0], [0, 0, 0, 0, 1, 1], [-1, 2], [2, -3, -1, 1], [-1, -1]])
def test_constant_pad(pad: list[int]) -> None:
    check("aten::constant_pad_nd", rand(2, 3, 4), pad, 0)
    check("aten::constant_pad_nd", rand(2, 3, 4), pad, -1.5)
    check("aten::constant_pad_nd", rand(2, 3, 4, dtype=np.int64), pad, 7)
    check("aten::pad", rand(2, 3, 4), pad, "constant", None)
    check("aten::pad", rand(2, 3, 4), pad, "constant", 2.0)


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_pad_modes(mode: str) -> None:
    check("aten::pad", rand(2, 3, 5), [2, 1], mode, None)
    check("aten::pad", rand(1, 2, 4, 5), [1, 2, 3, 0], mode, None)


# The shape operators that the target models (torchvision CNNs, TransformerEncoder, LSTM/GRU
# classifiers, the small TorchScript modules) use under jit.script, jit.trace, torch.export and
# export + run_decompositions.
TARGET_MODEL_OPS = [
    "aten::cat", "aten::chunk", "aten::clone", "aten::contiguous", "aten::expand",
    "aten::flatten.using_ints", "aten::flip", "aten::permute", "aten::reshape", "aten::select.int",
    "aten::slice.Tensor", "aten::split.sizes", "aten::split_with_sizes", "aten::squeeze.dim",
    "aten::squeeze.dims", "aten::transpose.int", "aten::unflatten.int", "aten::unsqueeze", "aten::view",
]


def test_target_model_operators_are_registered() -> None:
    missing = [key for key in TARGET_MODEL_OPS if ops.lookup(key) is None]
    assert not missing, f"operators the target models need are not registered: {missing}"
