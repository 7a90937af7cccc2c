"""Indexing kernels: advanced indexing, index_put, index_select, gather/scatter, embedding, masks, copy_."""

from __future__ import annotations

from typing import Any

import numpy as np

from ptlite.backends.numpy import kernel

from .elementwise import cast, write_into
from .reshape import wrap_dim

_I64 = np.dtype(np.int64)


def _index_key(indices: list[np.ndarray | None]) -> tuple:
    """torch's `Tensor?[] indices` as a NumPy key: None is a full slice, bool/uint8 tensors are masks."""
    key: list[Any] = []
    for index in indices:
        if index is None:
            key.append(slice(None))
        elif index.dtype == np.bool_ or index.dtype == np.uint8:
            key.append(index.astype(np.bool_, copy=False))
        else:
            key.append(index.astype(np.intp, copy=False))
    return tuple(key)


@kernel("aten::index.Tensor",
        "aten::index.Tensor_hacked_twin")
def index(self: np.ndarray, indices: list[np.ndarray | None]) -> np.ndarray:
    out = np.asarray(self[_index_key(indices)])
    return out.copy() if np.may_share_memory(out, self) else out


def _put(self: np.ndarray, indices: list[np.ndarray | None], values: np.ndarray,
         accumulate: bool) -> np.ndarray:
    """Write values at self[indices] (in place; self must be writeable)."""
    key = _index_key(indices)
    values = cast(values, self.dtype)
    if accumulate:
        np.add.at(self, key, values)
    else:
        self[key] = values
    return self


@kernel("aten::index_put_",
        "aten::index_put_.hacked_twin")
def index_put_(self: np.ndarray, indices: list[np.ndarray | None], values: np.ndarray,
               accumulate: bool = False) -> np.ndarray:
    target = self if self.flags.writeable else self.copy()
    return _put(target, indices, values, accumulate)


@kernel("aten::_index_put_impl_")
def index_put_impl_(self: np.ndarray, indices: list[np.ndarray | None], values: np.ndarray,
                    accumulate: bool = False, unsafe: bool = False) -> np.ndarray:
    return index_put_(self, indices, values, accumulate)


@kernel("aten::index_put",
        "aten::index_put.hacked_twin")
def index_put(self: np.ndarray, indices: list[np.ndarray | None], values: np.ndarray,
              accumulate: bool = False) -> np.ndarray:
    return _put(self.copy(), indices, values, accumulate)


@kernel("aten::index_select")
def index_select(self: np.ndarray, dim: int, index: np.ndarray) -> np.ndarray:
    if self.ndim == 0:
        wrap_dim(dim, 0)
        return np.take(self.reshape(1), index.reshape(-1)).reshape(())
    return np.take(self, index.reshape(-1), axis=wrap_dim(dim, self.ndim))


@kernel("aten::embedding")
def embedding(weight: np.ndarray, indices: np.ndarray, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> np.ndarray:
    """Rows of weight. padding_idx only matters for gradients, so the forward pass ignores it."""
    return np.take(weight, indices, axis=0)


@kernel("aten::take")
def take(self: np.ndarray, index: np.ndarray) -> np.ndarray:
    return np.asarray(np.take(self.reshape(-1), index))


# ----------------------------------------------------------------------------------------------------
# gather / scatter: index has self's rank and may be smaller than self in every dim
# ----------------------------------------------------------------------------------------------------

def _region(shape: tuple[int, ...], index: np.ndarray) -> tuple[slice, ...]:
    """The leading corner of an array of `shape` that an index of index.shape addresses."""
    return tuple(slice(0, n) for n in index.shape) if index.ndim == len(shape) else (Ellipsis,)


def _scatter_key(index: np.ndarray, axis: int) -> tuple:
    """Fancy-index key sending element i of index to position (i with dim `axis` replaced by index[i])."""
    key = list(np.indices(index.shape, sparse=True))
    key[axis] = index
    return tuple(key)


@kernel("aten::gather")
def gather(self: np.ndarray, dim: int, index: np.ndarray, sparse_grad: bool = False) -> np.ndarray:
    if self.ndim == 0:
        wrap_dim(dim, 0)
        return np.broadcast_to(self, index.shape).copy()
    axis = wrap_dim(dim, self.ndim)
    region = list(_region(self.shape, index))
    region[axis] = slice(None)
    return np.take_along_axis(self[tuple(region)], index.astype(np.intp, copy=False), axis=axis)


def _scatter(self: np.ndarray, dim: int, index: np.ndarray, src: Any, reduce: str | None) -> np.ndarray:
    out = self.copy()
    if out.ndim == 0:
        wrap_dim(dim, 0)
        view, index = out.reshape(1), index.reshape(-1)
        axis = 0
    else:
        axis = wrap_dim(dim, out.ndim)
        view = out  # writes through the fancy key land in out
    key = _scatter_key(index.astype(np.intp, copy=False), axis)
    values = cast(src, out.dtype)
    if isinstance(values, np.ndarray) and values.ndim:
        values = values[_region(values.shape, index)]
    if reduce is None:
        view[key] = values
    elif reduce in ("add", "sum"):
        np.add.at(view, key, values)
    elif reduce in ("multiply", "prod"):
        np.multiply.at(view, key, values)
    else:
        raise ValueError(f"scatter: unsupported reduce {reduce!r}")
    return out


@kernel("aten::scatter.src",
        "aten::scatter.value")
def scatter(self: np.ndarray, dim: int, index: np.ndarray, src: Any) -> np.ndarray:
    return _scatter(self, dim, index, src, None)


@kernel("aten::scatter.reduce",
        "aten::scatter.value_reduce")
def scatter_reduce(self: np.ndarray, dim: int, index: np.ndarray, src: Any, reduce: str) -> np.ndarray:
    return _scatter(self, dim, index, src, reduce)


@kernel("aten::scatter_add")
def scatter_add(self: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> np.ndarray:
    return _scatter(self, dim, index, src, "add")


@kernel("aten::scatter_.src",
        "aten::scatter_.value")
def scatter_(self: np.ndarray, dim: int, index: np.ndarray, src: Any) -> np.ndarray:
    return write_into(self, _scatter(self, dim, index, src, None))


@kernel("aten::scatter_add_")
def scatter_add_(self: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray) -> np.ndarray:
    return write_into(self, _scatter(self, dim, index, src, "add"))


@kernel("aten::index_fill.int_Scalar",
        "aten::index_fill.int_Tensor")
def index_fill(self: np.ndarray, dim: int, index: np.ndarray, value: Any) -> np.ndarray:
    out = self.copy()
    if out.ndim == 0:
        return np.asarray(cast(value, out.dtype)).copy() if index.size else out
    axis = wrap_dim(dim, out.ndim)
    out[(slice(None),) * axis + (index.reshape(-1),)] = cast(value, out.dtype)
    return out


# ----------------------------------------------------------------------------------------------------
# Masks
# ----------------------------------------------------------------------------------------------------

@kernel("aten::masked_select")
def masked_select(self: np.ndarray, mask: np.ndarray) -> np.ndarray:
    values, keep = np.broadcast_arrays(self, mask)
    return values[keep.astype(np.bool_, copy=False)]


@kernel("aten::masked_scatter")
def masked_scatter(self: np.ndarray, mask: np.ndarray, source: np.ndarray) -> np.ndarray:
    out_shape = np.broadcast_shapes(self.shape, mask.shape)
    out = np.broadcast_to(self, out_shape).copy()
    keep = np.broadcast_to(mask, out_shape).astype(np.bool_, copy=False)
    out[keep] = source.reshape(-1)[:int(np.count_nonzero(keep))]
    return out


@kernel("aten::nonzero")
def nonzero(self: np.ndarray) -> np.ndarray:
    return np.argwhere(self).astype(_I64, copy=False)


# ----------------------------------------------------------------------------------------------------
# copy
# ----------------------------------------------------------------------------------------------------

@kernel("aten::copy_")
def copy_(self: np.ndarray, src: np.ndarray, non_blocking: bool = False) -> np.ndarray:
    """Copy src (broadcast, converted to self's dtype) into self. Any dtype conversion is allowed here."""
    if not self.flags.writeable:
        return copy(self, src)
    np.copyto(self, src, casting="unsafe")
    return self


@kernel("aten::copy")
def copy(self: np.ndarray, src: np.ndarray, non_blocking: bool = False) -> np.ndarray:
    out = np.empty(self.shape, self.dtype)
    np.copyto(out, src, casting="unsafe")
    return out
