"""Reshaping kernels: view, reshape, flatten, unflatten, squeeze, unsqueeze, permute, transpose, movedim, and the
aliases and copies (contiguous, clone, detach, alias).

Ops that PyTorch documents as views return NumPy views where NumPy can; every other op returns fresh memory,
so that a later in-place op on its result never writes into an input.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.ir.dtypes import to_numpy


def wrap_dim(dim: int, ndim: int) -> int:
    """A dim argument as a non-negative axis (a 0-d tensor accepts dims 0 and -1)."""
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(f"dimension {dim} out of range for a tensor with {ndim} dimension(s)")
    return dim % rank


# ----------------------------------------------------------------------------------------------------
# Reshaping
# ----------------------------------------------------------------------------------------------------

@kernel("aten::view",
        "aten::reshape",
        "aten::_unsafe_view")
def view(self: np.ndarray, size: list[int]) -> np.ndarray:
    return self.reshape(size)


@kernel("aten::_reshape_alias")
def reshape_alias(self: np.ndarray, size: list[int], stride: list[int]) -> np.ndarray:
    return self.reshape(size)


@kernel("aten::view.dtype")
def view_dtype(self: np.ndarray, dtype: int) -> np.ndarray:
    return self.view(to_numpy(dtype))


@kernel("aten::view_as",
        "aten::reshape_as")
def view_as(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return self.reshape(other.shape)


@kernel("aten::flatten.using_ints")
def flatten(self: np.ndarray, start_dim: int = 0, end_dim: int = -1) -> np.ndarray:
    if self.ndim == 0:
        return self.reshape(1)
    start, end = wrap_dim(start_dim, self.ndim), wrap_dim(end_dim, self.ndim)
    if start > end:
        raise ValueError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = self.shape
    return self.reshape(shape[:start] + (math.prod(shape[start:end + 1]),) + shape[end + 1:])


@kernel("aten::unflatten.int")
def unflatten(self: np.ndarray, dim: int, sizes: list[int]) -> np.ndarray:
    d = wrap_dim(dim, self.ndim)
    sizes = list(sizes)
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        sizes[sizes.index(-1)] = self.shape[d] // known if known else 0
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])


@kernel("aten::squeeze")
def squeeze(self: np.ndarray) -> np.ndarray:
    return np.squeeze(self)


@kernel("aten::squeeze.dim")
def squeeze_dim(self: np.ndarray, dim: int) -> np.ndarray:
    return squeeze_dims(self, [dim])


@kernel("aten::squeeze.dims")
def squeeze_dims(self: np.ndarray, dim: list[int]) -> np.ndarray:
    dims = {wrap_dim(d, self.ndim) for d in ([dim] if isinstance(dim, int) else dim)}
    if self.ndim == 0:
        return self[...]
    return np.squeeze(self, axis=tuple(d for d in sorted(dims) if self.shape[d] == 1))


@kernel("aten::unsqueeze")
def unsqueeze(self: np.ndarray, dim: int) -> np.ndarray:
    return np.expand_dims(self, wrap_dim(dim, self.ndim + 1))


@kernel("aten::permute")
def permute(self: np.ndarray, dims: list[int]) -> np.ndarray:
    return np.transpose(self, [wrap_dim(d, self.ndim) for d in dims]) if self.ndim else self[...]


@kernel("aten::transpose.int",
        "aten::swapaxes")
def transpose(self: np.ndarray, dim0: int, dim1: int) -> np.ndarray:
    if self.ndim == 0:
        wrap_dim(dim0, 0), wrap_dim(dim1, 0)
        return self[...]
    return np.swapaxes(self, wrap_dim(dim0, self.ndim), wrap_dim(dim1, self.ndim))


@kernel("aten::numpy_T")
def numpy_t(self: np.ndarray) -> np.ndarray:
    return self.T


@kernel("aten::movedim.int",
        "aten::movedim.intlist")
def movedim(self: np.ndarray, source: Any, destination: Any) -> np.ndarray:
    return np.moveaxis(self, source, destination)


# ----------------------------------------------------------------------------------------------------
# Aliases and copies
# ----------------------------------------------------------------------------------------------------

@kernel("aten::contiguous")
def contiguous(self: np.ndarray, memory_format: int = 0) -> np.ndarray:
    return np.ascontiguousarray(self)


@kernel("aten::clone")
def clone(self: np.ndarray, memory_format: int | None = None) -> np.ndarray:
    return np.array(self, copy=True)


@kernel("aten::lift_fresh_copy")
def lift_fresh_copy(self: np.ndarray) -> np.ndarray:
    return np.array(self, copy=True)


@kernel("aten::detach",
        "aten::detach_",
        "aten::alias",
        "aten::lift_fresh")
def alias(self: np.ndarray) -> np.ndarray:
    return self
