"""The view operators (reshape, transpose, select, expand, ...) as strided views of a C-contiguous tensor: what the
executor needs to run them inside a region, either as an alias of the input's memory (the view is contiguous
itself: no step) or as a strided copy (a transpose or a broadcast written out: one step).

`strided_view(op, shape, args)` computes the view from the operator's constant arguments alone, as the reference's
kernels would make it (ptlite.backends.numpy.reshape and .shape); it never touches data.
"""

from __future__ import annotations

import math
from typing import Any

# A view of contiguous storage: (shape, strides in elements, offset in elements).
View = tuple[tuple[int, ...], tuple[int, ...], int]

RESHAPES = ("aten::view", "aten::reshape", "aten::_unsafe_view", "aten::_reshape_alias")
OPS = frozenset((*RESHAPES, "aten::flatten.using_ints", "aten::unflatten.int", "aten::squeeze", "aten::squeeze.dim",
                 "aten::squeeze.dims", "aten::unsqueeze", "aten::permute", "aten::transpose.int", "aten::t",
                 "aten::numpy_T", "aten::contiguous", "aten::select.int", "aten::slice.Tensor", "aten::narrow",
                 "aten::expand"))


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The strides (in elements) of a C-contiguous tensor of this shape."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))


def is_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Whether a view with these strides is C-contiguous (dimensions of size 1 have any stride)."""
    return all(s == r for d, s, r in zip(shape, strides, row_major(shape)) if d != 1)


def _dim(d: Any, ndim: int) -> int | None:
    if type(d) is not int or not -max(ndim, 1) <= d < max(ndim, 1):
        return None
    return d + ndim if d < 0 else d


def _ints(value: Any) -> list[int] | None:
    if not isinstance(value, (list, tuple)) or not all(type(i) is int for i in value):
        return None
    return list(value)


def _resolve(sizes: list[int], count: int) -> tuple[int, ...] | None:
    """A reshape's sizes with its one -1 filled in, if they hold `count` elements."""
    if sizes.count(-1) > 1 or any(s < -1 for s in sizes):
        return None
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        if known == 0 or count % known:
            return None
        sizes = [count // known if s == -1 else s for s in sizes]
    return tuple(sizes) if math.prod(sizes) == count else None


def strided_view(op: str, shape: tuple[int, ...], args: list[Any], strides: tuple[int, ...] | None = None) \
        -> View | None:
    """The view `op` makes of a tensor of `shape` laid out at `strides` (default: C-contiguous) with these constant
    arguments (after the tensor), or None where the arguments are not constants this understands (the node then
    runs on its kernel). A reshape of a tensor that is not C-contiguous is a copy of it in its logical order: its
    strides come back as None."""
    ndim, count = len(shape), math.prod(shape)
    dense = strides is None or is_contiguous(shape, strides)
    strides = row_major(shape) if strides is None else strides

    def reshaped(out: tuple[int, ...]) -> View:
        return out, (row_major(out) if dense else None), 0

    if op in RESHAPES or op == "aten::contiguous":
        if op == "aten::contiguous":
            return reshaped(shape)
        sizes = _ints(args[0]) if args else None
        out = _resolve(sizes, count) if sizes is not None else None
        return reshaped(out) if out is not None else None
    if op == "aten::flatten.using_ints":
        if ndim == 0:
            return (1,), (1,), 0
        start, end = (_dim(a, ndim) for a in (args + [0, -1][len(args):])[:2])
        if start is None or end is None or start > end:
            return None
        return reshaped(shape[:start] + (math.prod(shape[start:end + 1]),) + shape[end + 1:])
    if op == "aten::unflatten.int":
        d = _dim(args[0], ndim) if len(args) == 2 else None
        sizes = _ints(args[1]) if d is not None else None
        inner = _resolve(sizes, shape[d]) if sizes else None
        if inner is None:
            return None
        return reshaped(shape[:d] + inner + shape[d + 1:])
    if op in ("aten::squeeze", "aten::squeeze.dim", "aten::squeeze.dims"):
        if op == "aten::squeeze":
            dims = set(range(ndim))
        else:
            listed = [args[0]] if op == "aten::squeeze.dim" and args else (_ints(args[0]) if args else None)
            dims = {_dim(d, ndim) for d in listed} if listed is not None else {None}
            if None in dims:
                return None
        keep = [i for i in range(ndim) if not (i in dims and shape[i] == 1)]
        return tuple(shape[i] for i in keep), tuple(strides[i] for i in keep), 0
    if op == "aten::unsqueeze":
        d = _dim(args[0], ndim + 1) if args else None
        if d is None:
            return None
        return shape[:d] + (1,) + shape[d:], strides[:d] + (1,) + strides[d:], 0
    if op in ("aten::permute", "aten::transpose.int", "aten::t", "aten::numpy_T"):
        if op == "aten::permute":
            order = [_dim(d, ndim) for d in (_ints(args[0]) or [None])] if args else [None]
        elif op == "aten::transpose.int":
            a, b = (_dim(d, ndim) for d in args[:2]) if len(args) >= 2 else (None, None)
            order = list(range(ndim))
            if a is None or b is None:
                return None
            order[a], order[b] = order[b], order[a]
        else:
            if op == "aten::t" and ndim > 2:
                return None
            order = list(reversed(range(ndim)))
        if None in order or sorted(order) != list(range(ndim)):
            return None
        return tuple(shape[i] for i in order), tuple(strides[i] for i in order), 0
    if op == "aten::select.int":
        d = _dim(args[0], ndim) if len(args) == 2 and ndim else None
        index = args[1] if d is not None else None
        if type(index) is not int or not -shape[d] <= index < shape[d]:
            return None
        index %= shape[d]
        return shape[:d] + shape[d + 1:], strides[:d] + strides[d + 1:], index * strides[d]
    if op in ("aten::slice.Tensor", "aten::narrow"):
        return _slice(op, shape, strides, args)
    if op == "aten::expand":
        sizes = _ints(args[0]) if args else None
        lead = len(sizes) - ndim if sizes is not None else -1
        if lead < 0:
            return None
        out, out_strides = [], []
        for i, s in enumerate(sizes):
            have = shape[i - lead] if i >= lead else None
            if s == -1 and have is not None:
                s = have
            if s < 0 or (have is not None and have != 1 and have != s):
                return None
            out.append(s)
            out_strides.append(strides[i - lead] if have is not None and have == s else 0)
        return tuple(out), tuple(out_strides), 0
    return None


def _slice(op: str, shape: tuple[int, ...], strides: tuple[int, ...], args: list[Any]) -> View | None:
    ndim = len(shape)
    if op == "aten::narrow":
        if len(args) != 3 or not all(type(a) is int for a in args):
            return None
        d = _dim(args[0], ndim)
        if d is None:
            return None
        start = args[1] + shape[d] if args[1] < 0 else args[1]
        if start < 0 or args[2] < 0 or start + args[2] > shape[d]:
            return None
        begin, length, step = start, args[2], 1
    else:
        dim, start, end, step = (args + [0, None, None, 1][len(args):])[:4]
        d = _dim(dim, ndim)
        if d is None or type(step) is not int or step < 1 or not all(v is None or type(v) is int
                                                                    for v in (start, end)):
            return None
        begin, stop, _ = slice(start, end, step).indices(shape[d])
        length = max(0, -(-(stop - begin) // step))
    if length == 0:
        return None
    out = shape[:d] + (length,) + shape[d + 1:]
    return out, strides[:d] + (strides[d] * step,) + strides[d + 1:], begin * strides[d]


def merge_dims(shape: tuple[int, ...], strides: list[tuple[int, ...]], max_dims: int) \
        -> tuple[list[int], list[list[int]]] | None:
    """A strided iteration over `shape` (C order), each operand read at its own strides, as at most max_dims
    dimensions: size-1 dimensions dropped, and neighbours merged where every operand steps through them as through
    one. None if it needs more."""
    dims = [(d, [s[i] for s in strides]) for i, d in enumerate(shape) if d != 1] or [(1, [1] * len(strides))]
    merged = [dims[0]]
    for d, ss in dims[1:]:
        pd, ps = merged[-1]
        if all(p == s * d for p, s in zip(ps, ss)):
            merged[-1] = (pd * d, ss)
        else:
            merged.append((d, ss))
    if len(merged) > max_dims:
        return None
    return [d for d, _ in merged], [[ss[k] for _, ss in merged] for k in range(len(strides))]


def broadcast_strides(shape: tuple[int, ...], target: tuple[int, ...]) -> tuple[int, ...] | None:
    """The strides (in elements) at which a C-contiguous tensor of `shape` is read broadcast to `target` (0 along
    the dimensions it is repeated), or None if it does not broadcast to it."""
    if len(shape) > len(target):
        return None
    own = row_major(shape)
    lead = len(target) - len(shape)
    out = [0] * lead
    for d, s, t in zip(shape, own, target[lead:]):
        if d != t and d != 1:
            return None
        out.append(s if d == t and d != 1 else 0)
    return tuple(out)


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape two tensors broadcast to, or None."""
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return tuple(out)


def reduced(shape: tuple[int, ...], dims: Any, keepdim: Any) -> tuple[tuple[int, int, int], tuple[int, ...]] | None:
    """A sum or mean over `dims` (a list; empty or None: all) as (outer, r, inner) of a C-contiguous tensor, and the
    result's shape; None where the dimensions are not one contiguous run (or not understood)."""
    ndim = len(shape)
    if type(keepdim) is not bool or ndim == 0:
        return None
    listed = list(range(ndim)) if dims is None or dims == [] else _ints(dims)
    picked = sorted({_dim(d, ndim) for d in listed}) if listed is not None else [None]
    if None in picked or picked != list(range(picked[0], picked[-1] + 1)):
        return None
    lo, hi = picked[0], picked[-1] + 1
    out = shape[:lo] + ((1,) * (hi - lo) if keepdim else ()) + shape[hi:]
    return (math.prod(shape[:lo]), math.prod(shape[lo:hi]), math.prod(shape[hi:])), out
