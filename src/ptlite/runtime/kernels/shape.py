"""Shape kernels: views (reshape, permute, squeeze, slice, expand, ...), join and split, flip, pad.

Ops that PyTorch documents as views return NumPy views where NumPy can; every other op returns fresh memory,
so that a later in-place op on its result never writes into an input.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ptlite.ir.dtypes import to_numpy
from ptlite.ir.registry import kernel

from .elementwise import promote_types


def wrap_dim(dim: int, ndim: int) -> int:
    """A dim argument as a non-negative axis (a 0-d tensor accepts dims 0 and -1)."""
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(f"dimension {dim} out of range for a tensor with {ndim} dimension(s)")
    return dim % rank


def _along(dim: int, index: Any) -> tuple:
    """An indexing key applying `index` along axis `dim` (the trailing Ellipsis keeps 0-d results arrays)."""
    return (slice(None),) * dim + (index, Ellipsis)


# ----------------------------------------------------------------------------------------------------
# Reshaping
# ----------------------------------------------------------------------------------------------------

@kernel("aten::view(Tensor(a) self, SymInt[] size) -> Tensor(a)",
        "aten::reshape(Tensor(a) self, SymInt[] shape) -> Tensor(a)",
        "aten::_unsafe_view(Tensor self, SymInt[] size) -> Tensor")
def view(self: np.ndarray, size: list[int]) -> np.ndarray:
    return self.reshape(size)


@kernel("aten::_reshape_alias(Tensor(a) self, SymInt[] size, SymInt[] stride) -> Tensor(a)")
def reshape_alias(self: np.ndarray, size: list[int], stride: list[int]) -> np.ndarray:
    return self.reshape(size)


@kernel("aten::view.dtype(Tensor(a) self, ScalarType dtype) -> Tensor(a)")
def view_dtype(self: np.ndarray, dtype: int) -> np.ndarray:
    return self.view(to_numpy(dtype))


@kernel("aten::view_as(Tensor(a) self, Tensor other) -> Tensor(a)",
        "aten::reshape_as(Tensor(a) self, Tensor other) -> Tensor(a)")
def view_as(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return self.reshape(other.shape)


@kernel("aten::flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)")
def flatten(self: np.ndarray, start_dim: int = 0, end_dim: int = -1) -> np.ndarray:
    if self.ndim == 0:
        return self.reshape(1)
    start, end = wrap_dim(start_dim, self.ndim), wrap_dim(end_dim, self.ndim)
    if start > end:
        raise ValueError("flatten() has invalid args: start_dim cannot come after end_dim")
    shape = self.shape
    return self.reshape(shape[:start] + (math.prod(shape[start:end + 1]),) + shape[end + 1:])


@kernel("aten::unflatten.int(Tensor(a) self, int dim, SymInt[] sizes) -> Tensor(a)")
def unflatten(self: np.ndarray, dim: int, sizes: list[int]) -> np.ndarray:
    d = wrap_dim(dim, self.ndim)
    sizes = list(sizes)
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        sizes[sizes.index(-1)] = self.shape[d] // known if known else 0
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])


@kernel("aten::squeeze(Tensor(a) self) -> Tensor(a)")
def squeeze(self: np.ndarray) -> np.ndarray:
    return np.squeeze(self)


@kernel("aten::squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)")
def squeeze_dim(self: np.ndarray, dim: int) -> np.ndarray:
    return squeeze_dims(self, [dim])


@kernel("aten::squeeze.dims(Tensor(a) self, int[] dim) -> Tensor(a)")
def squeeze_dims(self: np.ndarray, dim: list[int]) -> np.ndarray:
    dims = {wrap_dim(d, self.ndim) for d in ([dim] if isinstance(dim, int) else dim)}
    if self.ndim == 0:
        return self[...]
    return np.squeeze(self, axis=tuple(d for d in sorted(dims) if self.shape[d] == 1))


@kernel("aten::unsqueeze(Tensor(a) self, int dim) -> Tensor(a)")
def unsqueeze(self: np.ndarray, dim: int) -> np.ndarray:
    return np.expand_dims(self, wrap_dim(dim, self.ndim + 1))


@kernel("aten::permute(Tensor(a) self, int[] dims) -> Tensor(a)")
def permute(self: np.ndarray, dims: list[int]) -> np.ndarray:
    return np.transpose(self, [wrap_dim(d, self.ndim) for d in dims]) if self.ndim else self[...]


@kernel("aten::transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)",
        "aten::swapaxes(Tensor(a) self, int axis0, int axis1) -> Tensor(a)")
def transpose(self: np.ndarray, dim0: int, dim1: int) -> np.ndarray:
    if self.ndim == 0:
        wrap_dim(dim0, 0), wrap_dim(dim1, 0)
        return self[...]
    return np.swapaxes(self, wrap_dim(dim0, self.ndim), wrap_dim(dim1, self.ndim))


@kernel("aten::numpy_T(Tensor(a) self) -> Tensor(a)")
def numpy_t(self: np.ndarray) -> np.ndarray:
    return self.T


@kernel("aten::movedim.int(Tensor(a) self, int source, int destination) -> Tensor(a)",
        "aten::movedim.intlist(Tensor(a) self, int[] source, int[] destination) -> Tensor(a)")
def movedim(self: np.ndarray, source: Any, destination: Any) -> np.ndarray:
    return np.moveaxis(self, source, destination)


# ----------------------------------------------------------------------------------------------------
# Aliases and copies
# ----------------------------------------------------------------------------------------------------

@kernel("aten::contiguous(Tensor(a) self, *, MemoryFormat memory_format=0) -> Tensor(a)")
def contiguous(self: np.ndarray, memory_format: int = 0) -> np.ndarray:
    return np.ascontiguousarray(self)


@kernel("aten::clone(Tensor self, *, MemoryFormat? memory_format=None) -> Tensor")
def clone(self: np.ndarray, memory_format: int | None = None) -> np.ndarray:
    return np.array(self, copy=True)


@kernel("aten::lift_fresh_copy(Tensor self) -> Tensor")
def lift_fresh_copy(self: np.ndarray) -> np.ndarray:
    return np.array(self, copy=True)


@kernel("aten::detach(Tensor(a) self) -> Tensor(a)",
        "aten::detach_(Tensor(a!) self) -> Tensor(a!)",
        "aten::alias(Tensor(a) self) -> Tensor(a)",
        "aten::lift_fresh(Tensor(a) self) -> Tensor(a)")
def alias(self: np.ndarray) -> np.ndarray:
    return self


# ----------------------------------------------------------------------------------------------------
# Joining
# ----------------------------------------------------------------------------------------------------

def _common_dtype(tensors: list[np.ndarray]) -> np.dtype:
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = promote_types(dt, t.dtype)
    return dt


@kernel("aten::cat(Tensor[] tensors, int dim=0) -> Tensor",
        "aten::concat(Tensor[] tensors, int dim=0) -> Tensor")
def cat(tensors: list[np.ndarray], dim: int = 0) -> np.ndarray:
    # torch (for backward compatibility) skips 1-d empty tensors whatever the other tensors' shapes.
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    if not kept:
        return np.array(tensors[0], dtype=_common_dtype(tensors), copy=True)
    axis = wrap_dim(dim, kept[0].ndim)
    return np.concatenate(kept, axis=axis, dtype=_common_dtype(tensors), casting="unsafe")


@kernel("aten::stack(Tensor[] tensors, int dim=0) -> Tensor")
def stack(tensors: list[np.ndarray], dim: int = 0) -> np.ndarray:
    axis = wrap_dim(dim, tensors[0].ndim + 1)
    return np.stack(tensors, axis=axis, dtype=_common_dtype(tensors), casting="unsafe")


@kernel("aten::hstack(Tensor[] tensors) -> Tensor")
def hstack(tensors: list[np.ndarray]) -> np.ndarray:
    return np.hstack(tensors, dtype=_common_dtype(tensors), casting="unsafe")


@kernel("aten::vstack(Tensor[] tensors) -> Tensor")
def vstack(tensors: list[np.ndarray]) -> np.ndarray:
    return np.vstack(tensors, dtype=_common_dtype(tensors), casting="unsafe")


# ----------------------------------------------------------------------------------------------------
# Splitting (results are views)
# ----------------------------------------------------------------------------------------------------

def _pieces(self: np.ndarray, dim: int, sizes: list[int]) -> list[np.ndarray]:
    axis = wrap_dim(dim, self.ndim)
    if sum(sizes) != self.shape[axis]:
        raise ValueError(f"split sizes {list(sizes)} do not add up to {self.shape[axis]} (dimension {dim})")
    out, start = [], 0
    for size in sizes:
        out.append(self[_along(axis, slice(start, start + size))])
        start += size
    return out


@kernel("aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]",
        "aten::unsafe_split.Tensor(Tensor self, SymInt split_size, int dim=0) -> Tensor[]")
def split(self: np.ndarray, split_size: int, dim: int = 0) -> list[np.ndarray]:
    length = self.shape[wrap_dim(dim, self.ndim)]
    if split_size == 0:
        return _pieces(self, dim, [0] if length == 0 else [length])
    full, rest = divmod(length, split_size)
    return _pieces(self, dim, [split_size] * full + ([rest] if rest or not full else []))


@kernel("aten::split.sizes(Tensor(a -> *) self, SymInt[] split_size, int dim=0) -> Tensor(a)[]",
        "aten::split(Tensor(a -> *) self, int[] split_sizes, int dim=0) -> Tensor(a)[]",
        "aten::split_with_sizes(Tensor(a -> *) self, SymInt[] split_sizes, int dim=0) -> Tensor(a)[]")
def split_with_sizes(self: np.ndarray, split_sizes: list[int], dim: int = 0) -> list[np.ndarray]:
    return _pieces(self, dim, list(split_sizes))


@kernel("aten::chunk(Tensor(a -> *) self, int chunks, int dim=0) -> Tensor(a)[]",
        "aten::unsafe_chunk(Tensor self, int chunks, int dim=0) -> Tensor[]")
def chunk(self: np.ndarray, chunks: int, dim: int = 0) -> list[np.ndarray]:
    if chunks <= 0:
        raise ValueError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    length = self.shape[wrap_dim(dim, self.ndim)]
    if length == 0:
        return _pieces(self, dim, [0] * chunks)
    return split(self, -(-length // chunks), dim)


@kernel("aten::tensor_split.sections(Tensor(a -> *) self, SymInt sections, int dim=0) -> Tensor(a)[]")
def tensor_split_sections(self: np.ndarray, sections: int, dim: int = 0) -> list[np.ndarray]:
    length = self.shape[wrap_dim(dim, self.ndim)]
    small, extra = divmod(length, sections)
    return _pieces(self, dim, [small + 1] * extra + [small] * (sections - extra))


@kernel("aten::tensor_split.indices(Tensor(a -> *) self, SymInt[] indices, int dim=0) -> Tensor(a)[]")
def tensor_split_indices(self: np.ndarray, indices: list[int], dim: int = 0) -> list[np.ndarray]:
    axis = wrap_dim(dim, self.ndim)
    bounds = [0, *indices, self.shape[axis]]
    return [self[_along(axis, slice(a, max(a, b)))] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


@kernel("aten::tensor_split.tensor_indices_or_sections(Tensor(a -> *) self, "
        "Tensor tensor_indices_or_sections, int dim=0) -> Tensor(a)[]")
def tensor_split_tensor(self: np.ndarray, tensor_indices_or_sections: np.ndarray,
                        dim: int = 0) -> list[np.ndarray]:
    spec = tensor_indices_or_sections
    if spec.ndim == 0:
        return tensor_split_sections(self, int(spec), dim)
    return tensor_split_indices(self, [int(i) for i in spec], dim)


@kernel("aten::unbind.int(Tensor(a -> *) self, int dim=0) -> Tensor(a)[]")
def unbind(self: np.ndarray, dim: int = 0) -> list[np.ndarray]:
    axis = wrap_dim(dim, self.ndim)
    return [self[_along(axis, i)] for i in range(self.shape[axis])]


# ----------------------------------------------------------------------------------------------------
# Indexing views: select, slice, narrow
# ----------------------------------------------------------------------------------------------------

@kernel("aten::select.int(Tensor(a) self, int dim, SymInt index) -> Tensor(a)")
def select(self: np.ndarray, dim: int, index: int) -> np.ndarray:
    axis = wrap_dim(dim, self.ndim)
    size = self.shape[axis]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for size {self.shape} at dimension {dim}")
    return self[_along(axis, index)]


@kernel("aten::slice.Tensor(Tensor(a) self, int dim=0, SymInt? start=None, SymInt? end=None, SymInt step=1) "
        "-> Tensor(a)")
def slice_(self: np.ndarray, dim: int = 0, start: int | None = None, end: int | None = None,
           step: int = 1) -> np.ndarray:
    if step <= 0:
        raise ValueError("slice step must be positive")
    return self[_along(wrap_dim(dim, self.ndim), slice(start, end, step))]


@kernel("aten::narrow(Tensor(a) self, int dim, SymInt start, SymInt length) -> Tensor(a)",
        "aten::narrow.Tensor(Tensor(a) self, int dim, Tensor start, SymInt length) -> Tensor(a)")
def narrow(self: np.ndarray, dim: int, start: Any, length: int) -> np.ndarray:
    axis = wrap_dim(dim, self.ndim)
    start = int(start)
    if start < 0:
        start += self.shape[axis]
    if start < 0 or length < 0 or start + length > self.shape[axis]:
        raise IndexError(f"narrow(): start {start} + length {length} exceeds dimension size "
                         f"{self.shape[axis]}")
    return self[_along(axis, slice(start, start + length))]


# ----------------------------------------------------------------------------------------------------
# Broadcasting and repetition
# ----------------------------------------------------------------------------------------------------

def _expanded_shape(shape: tuple[int, ...], size: list[int]) -> tuple[int, ...]:
    lead = len(size) - len(shape)
    if lead < 0:
        raise ValueError(f"expand: the number of sizes ({len(size)}) must be at least the tensor's dims")
    return tuple(shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(size))


@kernel("aten::expand(Tensor(a) self, SymInt[] size, *, bool implicit=False) -> Tensor(a)")
def expand(self: np.ndarray, size: list[int], implicit: bool = False) -> np.ndarray:
    return np.broadcast_to(self, _expanded_shape(self.shape, list(size)))


@kernel("aten::broadcast_to(Tensor(a) self, SymInt[] size) -> Tensor(a)")
def broadcast_to(self: np.ndarray, size: list[int]) -> np.ndarray:
    return expand(self, size)


@kernel("aten::expand_as(Tensor(a) self, Tensor other) -> Tensor(a)")
def expand_as(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return np.broadcast_to(self, other.shape)


@kernel("aten::broadcast_tensors(Tensor[] tensors) -> Tensor[]")
def broadcast_tensors(tensors: list[np.ndarray]) -> list[np.ndarray]:
    return list(np.broadcast_arrays(*tensors))


@kernel("aten::repeat(Tensor self, SymInt[] repeats) -> Tensor")
def repeat(self: np.ndarray, repeats: list[int]) -> np.ndarray:
    if len(repeats) < self.ndim:
        raise ValueError("repeat: the number of repeats can not be smaller than the tensor's dims")
    return np.tile(self, repeats)


@kernel("aten::tile(Tensor self, SymInt[] dims) -> Tensor")
def tile(self: np.ndarray, dims: list[int]) -> np.ndarray:
    return np.tile(self, dims)


@kernel("aten::repeat_interleave.self_int(Tensor self, SymInt repeats, int? dim=None, *, "
        "SymInt? output_size=None) -> Tensor",
        "aten::repeat_interleave.self_Tensor(Tensor self, Tensor repeats, int? dim=None, *, "
        "SymInt? output_size=None) -> Tensor")
def repeat_interleave(self: np.ndarray, repeats: Any, dim: int | None = None,
                      output_size: int | None = None) -> np.ndarray:
    if isinstance(repeats, np.ndarray) and repeats.ndim == 0:
        repeats = int(repeats)
    if dim is None:
        return np.repeat(self.reshape(-1), repeats)
    return np.repeat(self, repeats, axis=wrap_dim(dim, self.ndim))


@kernel("aten::repeat_interleave.Tensor(Tensor repeats, *, SymInt? output_size=None) -> Tensor")
def repeat_interleave_indices(repeats: np.ndarray, output_size: int | None = None) -> np.ndarray:
    return np.repeat(np.arange(repeats.shape[0], dtype=repeats.dtype), repeats)


# ----------------------------------------------------------------------------------------------------
# Reordering: flip, roll, channel/pixel shuffles
# ----------------------------------------------------------------------------------------------------

@kernel("aten::flip(Tensor self, int[] dims) -> Tensor")
def flip(self: np.ndarray, dims: list[int]) -> np.ndarray:
    axes = tuple(wrap_dim(d, self.ndim) for d in dims)
    return np.flip(self, axes).copy() if self.ndim else self.copy()


@kernel("aten::roll(Tensor self, SymInt[1] shifts, int[1] dims=[]) -> Tensor")
def roll(self: np.ndarray, shifts: list[int], dims: list[int] = ()) -> np.ndarray:
    if isinstance(shifts, int):
        shifts = [shifts]
    if isinstance(dims, int):
        dims = [dims]
    if not dims:
        return np.roll(self.reshape(-1), shifts[0]).reshape(self.shape)
    return np.roll(self, list(shifts), axis=[wrap_dim(d, self.ndim) for d in dims])


def _fresh(x: np.ndarray) -> np.ndarray:
    """A C-ordered copy (one copy, even when x is already contiguous)."""
    return np.array(x, order="C", copy=True)


@kernel("aten::channel_shuffle(Tensor self, SymInt groups) -> Tensor",
        "aten::native_channel_shuffle(Tensor self, SymInt groups) -> Tensor")
def channel_shuffle(self: np.ndarray, groups: int) -> np.ndarray:
    n, c, *rest = self.shape
    grouped = self.reshape(n, groups, c // groups, *rest)
    return _fresh(np.swapaxes(grouped, 1, 2)).reshape(self.shape)


@kernel("aten::pixel_shuffle(Tensor self, int upscale_factor) -> Tensor")
def pixel_shuffle(self: np.ndarray, upscale_factor: int) -> np.ndarray:
    r = upscale_factor
    *batch, c, h, w = self.shape
    k = len(batch)
    x = self.reshape(*batch, c // (r * r), r, r, h, w)
    x = np.transpose(x, [*range(k), k, k + 3, k + 1, k + 4, k + 2])
    return _fresh(x).reshape(*batch, c // (r * r), h * r, w * r)


@kernel("aten::pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor")
def pixel_unshuffle(self: np.ndarray, downscale_factor: int) -> np.ndarray:
    r = downscale_factor
    *batch, c, h, w = self.shape
    k = len(batch)
    x = self.reshape(*batch, c, h // r, r, w // r, r)
    x = np.transpose(x, [*range(k), k, k + 2, k + 4, k + 1, k + 3])
    return _fresh(x).reshape(*batch, c * r * r, h // r, w // r)


# ----------------------------------------------------------------------------------------------------
# Padding
# ----------------------------------------------------------------------------------------------------

@kernel("aten::constant_pad_nd(Tensor self, SymInt[] pad, Scalar value=0) -> Tensor")
def constant_pad_nd(self: np.ndarray, pad: list[int], value: Any = 0) -> np.ndarray:
    """Pad (or, for negative amounts, crop) the last len(pad)/2 dims; pad lists the last dim first."""
    if len(pad) % 2 or len(pad) // 2 > self.ndim:
        raise ValueError(f"padding length {len(pad)} must be even and at most twice the tensor's dims")
    shape = list(self.shape)
    src: list[slice] = [slice(None)] * self.ndim
    dst: list[slice] = [slice(None)] * self.ndim
    for i in range(len(pad) // 2):
        d = self.ndim - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        shape[d] = self.shape[d] + before + after
        if shape[d] < 0:
            raise ValueError(f"padding {pad} makes dimension {d} negative")
        src[d] = slice(max(-before, 0), self.shape[d] - max(-after, 0))
        kept = max(src[d].stop - src[d].start, 0)
        dst[d] = slice(max(before, 0), max(before, 0) + kept)
    out = np.full(shape, value, dtype=self.dtype) if value else np.zeros(shape, dtype=self.dtype)
    out[tuple(dst)] = self[tuple(src)]
    return out


_NUMPY_PAD_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@kernel("aten::pad(Tensor self, SymInt[] pad, str mode=\"constant\", float? value=None) -> Tensor")
def pad(self: np.ndarray, pad: list[int], mode: str = "constant", value: float | None = None) -> np.ndarray:
    if mode == "constant":
        return constant_pad_nd(self, pad, 0 if value is None else value)
    if mode not in _NUMPY_PAD_MODE:
        raise ValueError(f"unsupported padding mode {mode!r}")
    if any(p < 0 for p in pad):
        raise ValueError(f"negative padding is only supported in constant mode, got {pad}")
    widths = [(0, 0)] * self.ndim
    for i in range(len(pad) // 2):
        widths[self.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    return np.pad(self, widths, mode=_NUMPY_PAD_MODE[mode])
