"""Shape kernels: join and split, select/slice/narrow, expand and repeat, flip and roll, shuffles, pad (reshaping
is in reshape.py).

Ops that PyTorch documents as views return NumPy views where NumPy can; every other op returns fresh memory,
so that a later in-place op on its result never writes into an input.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ptlite.backends.numpy import kernel

from .elementwise import promote_types
from .reshape import wrap_dim


def _along(dim: int, index: Any) -> tuple:
    """An indexing key applying `index` along axis `dim` (the trailing Ellipsis keeps 0-d results arrays)."""
    return (slice(None),) * dim + (index, Ellipsis)


# ----------------------------------------------------------------------------------------------------
# Joining
# ----------------------------------------------------------------------------------------------------

def _common_dtype(tensors: list[np.ndarray]) -> np.dtype:
    dt = tensors[0].dtype
    for t in tensors[1:]:
        dt = promote_types(dt, t.dtype)
    return dt


@kernel("aten::cat",
        "aten::concat")
def cat(tensors: list[np.ndarray], dim: int = 0) -> np.ndarray:
    # torch (for backward compatibility) skips 1-d empty tensors whatever the other tensors' shapes.
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    if not kept:
        return np.array(tensors[0], dtype=_common_dtype(tensors), copy=True)
    axis = wrap_dim(dim, kept[0].ndim)
    return np.concatenate(kept, axis=axis, dtype=_common_dtype(tensors), casting="unsafe")


@kernel("aten::stack")
def stack(tensors: list[np.ndarray], dim: int = 0) -> np.ndarray:
    axis = wrap_dim(dim, tensors[0].ndim + 1)
    return np.stack(tensors, axis=axis, dtype=_common_dtype(tensors), casting="unsafe")


@kernel("aten::hstack")
def hstack(tensors: list[np.ndarray]) -> np.ndarray:
    return np.hstack(tensors, dtype=_common_dtype(tensors), casting="unsafe")


@kernel("aten::vstack")
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


@kernel("aten::split.Tensor",
        "aten::unsafe_split.Tensor")
def split(self: np.ndarray, split_size: int, dim: int = 0) -> list[np.ndarray]:
    length = self.shape[wrap_dim(dim, self.ndim)]
    if split_size == 0:
        return _pieces(self, dim, [0] if length == 0 else [length])
    full, rest = divmod(length, split_size)
    return _pieces(self, dim, [split_size] * full + ([rest] if rest or not full else []))


@kernel("aten::split.sizes",
        "aten::split",
        "aten::split_with_sizes")
def split_with_sizes(self: np.ndarray, split_sizes: list[int], dim: int = 0) -> list[np.ndarray]:
    return _pieces(self, dim, list(split_sizes))


@kernel("aten::chunk",
        "aten::unsafe_chunk")
def chunk(self: np.ndarray, chunks: int, dim: int = 0) -> list[np.ndarray]:
    if chunks <= 0:
        raise ValueError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    length = self.shape[wrap_dim(dim, self.ndim)]
    if length == 0:
        return _pieces(self, dim, [0] * chunks)
    return split(self, -(-length // chunks), dim)


@kernel("aten::tensor_split.sections")
def tensor_split_sections(self: np.ndarray, sections: int, dim: int = 0) -> list[np.ndarray]:
    length = self.shape[wrap_dim(dim, self.ndim)]
    small, extra = divmod(length, sections)
    return _pieces(self, dim, [small + 1] * extra + [small] * (sections - extra))


@kernel("aten::tensor_split.indices")
def tensor_split_indices(self: np.ndarray, indices: list[int], dim: int = 0) -> list[np.ndarray]:
    axis = wrap_dim(dim, self.ndim)
    bounds = [0, *indices, self.shape[axis]]
    return [self[_along(axis, slice(a, max(a, b)))] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


@kernel("aten::tensor_split.tensor_indices_or_sections")
def tensor_split_tensor(self: np.ndarray, tensor_indices_or_sections: np.ndarray,
                        dim: int = 0) -> list[np.ndarray]:
    spec = tensor_indices_or_sections
    if spec.ndim == 0:
        return tensor_split_sections(self, int(spec), dim)
    return tensor_split_indices(self, [int(i) for i in spec], dim)


@kernel("aten::unbind.int")
def unbind(self: np.ndarray, dim: int = 0) -> list[np.ndarray]:
    axis = wrap_dim(dim, self.ndim)
    return [self[_along(axis, i)] for i in range(self.shape[axis])]


# ----------------------------------------------------------------------------------------------------
# Indexing views: select, slice, narrow
# ----------------------------------------------------------------------------------------------------

@kernel("aten::select.int")
def select(self: np.ndarray, dim: int, index: int) -> np.ndarray:
    axis = wrap_dim(dim, self.ndim)
    size = self.shape[axis]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for size {self.shape} at dimension {dim}")
    return self[_along(axis, index)]


@kernel("aten::slice.Tensor")
def slice_(self: np.ndarray, dim: int = 0, start: int | None = None, end: int | None = None,
           step: int = 1) -> np.ndarray:
    if step <= 0:
        raise ValueError("slice step must be positive")
    return self[_along(wrap_dim(dim, self.ndim), slice(start, end, step))]


@kernel("aten::narrow",
        "aten::narrow.Tensor")
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


@kernel("aten::expand")
def expand(self: np.ndarray, size: list[int], implicit: bool = False) -> np.ndarray:
    return np.broadcast_to(self, _expanded_shape(self.shape, list(size)))


@kernel("aten::broadcast_to")
def broadcast_to(self: np.ndarray, size: list[int]) -> np.ndarray:
    return expand(self, size)


@kernel("aten::expand_as")
def expand_as(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return np.broadcast_to(self, other.shape)


@kernel("aten::broadcast_tensors")
def broadcast_tensors(tensors: list[np.ndarray]) -> list[np.ndarray]:
    return list(np.broadcast_arrays(*tensors))


@kernel("aten::meshgrid")
def meshgrid(tensors: list[np.ndarray]) -> list[np.ndarray]:
    return meshgrid_indexing(tensors, "ij")


@kernel("aten::meshgrid.indexing")
def meshgrid_indexing(tensors: list[np.ndarray], indexing: str) -> list[np.ndarray]:
    """Grids from 0-d or 1-d tensors of one dtype: "ij" indexes them by the tensors' order, "xy" swaps the first
    two axes (as NumPy's meshgrid). Copies, not views: the result may be written in place."""
    if indexing not in ("ij", "xy"):
        raise ValueError(f'meshgrid: indexing must be "ij" or "xy", got "{indexing}"')
    if not tensors:
        raise ValueError("meshgrid expects a non-empty list of tensors")
    if any(t.ndim > 1 for t in tensors) or len({t.dtype for t in tensors}) > 1:
        raise ValueError("meshgrid expects 0-d or 1-d tensors of one dtype, got "
                         + ", ".join(f"{t.dtype} of shape {t.shape}" for t in tensors))
    return [np.array(g) for g in np.meshgrid(*[t.reshape(-1) for t in tensors], indexing=indexing)]


@kernel("aten::repeat")
def repeat(self: np.ndarray, repeats: list[int]) -> np.ndarray:
    if len(repeats) < self.ndim:
        raise ValueError("repeat: the number of repeats can not be smaller than the tensor's dims")
    return np.tile(self, repeats)


@kernel("aten::tile")
def tile(self: np.ndarray, dims: list[int]) -> np.ndarray:
    return np.tile(self, dims)


@kernel("aten::repeat_interleave.self_int",
        "aten::repeat_interleave.self_Tensor")
def repeat_interleave(self: np.ndarray, repeats: Any, dim: int | None = None,
                      output_size: int | None = None) -> np.ndarray:
    if isinstance(repeats, np.ndarray) and repeats.ndim == 0:
        repeats = int(repeats)
    if dim is None:
        return np.repeat(self.reshape(-1), repeats)
    return np.repeat(self, repeats, axis=wrap_dim(dim, self.ndim))


@kernel("aten::repeat_interleave.Tensor")
def repeat_interleave_indices(repeats: np.ndarray, output_size: int | None = None) -> np.ndarray:
    return np.repeat(np.arange(repeats.shape[0], dtype=repeats.dtype), repeats)


# ----------------------------------------------------------------------------------------------------
# Reordering: flip, roll, channel/pixel shuffles
# ----------------------------------------------------------------------------------------------------

@kernel("aten::flip")
def flip(self: np.ndarray, dims: list[int]) -> np.ndarray:
    axes = tuple(wrap_dim(d, self.ndim) for d in dims)
    return np.flip(self, axes).copy() if self.ndim else self.copy()


@kernel("aten::roll")
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


@kernel("aten::channel_shuffle",
        "aten::native_channel_shuffle")
def channel_shuffle(self: np.ndarray, groups: int) -> np.ndarray:
    n, c, *rest = self.shape
    grouped = self.reshape(n, groups, c // groups, *rest)
    return _fresh(np.swapaxes(grouped, 1, 2)).reshape(self.shape)


@kernel("aten::pixel_shuffle")
def pixel_shuffle(self: np.ndarray, upscale_factor: int) -> np.ndarray:
    r = upscale_factor
    *batch, c, h, w = self.shape
    k = len(batch)
    x = self.reshape(*batch, c // (r * r), r, r, h, w)
    x = np.transpose(x, [*range(k), k, k + 3, k + 1, k + 4, k + 2])
    return _fresh(x).reshape(*batch, c // (r * r), h * r, w * r)


@kernel("aten::pixel_unshuffle")
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

@kernel("aten::constant_pad_nd")
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


@kernel("aten::pad")
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
