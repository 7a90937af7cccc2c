"""Shape GPU kernels: aten::flatten / view / reshape share their input's buffer (contiguous tensors only live on
the device), aten::cat copies each input into its slice of the output."""

from __future__ import annotations

import math

from ptlite.ir.graph import Node

from . import ENTRY, OUT, Context, Dispatch, GpuOp, ints, prelude, register


def copy_source(f16: bool) -> str:
    """O[o * out_row + offset + r] = X0[o * in_row + r]. Params: 0 elements, 1 in_row, 2 out_row, 3 offset."""
    return prelude(f16, 1) + ENTRY + """    if (i >= pu(0u)) { return; }
    let o = i / pu(1u);
    let r = i % pu(1u);
    O[o * pu(2u) + pu(3u) + r] = X0[i];
}
"""


def _view_shape(shape: tuple[int, ...], want: tuple[int, ...]) -> tuple[int, ...] | None:
    """`want` with its one -1 resolved against `shape`'s size, or None where it does not fit."""
    size = math.prod(shape)
    if want.count(-1) > 1 or any(d < -1 for d in want):
        return None
    if -1 in want:
        rest = math.prod(d for d in want if d != -1)
        if rest == 0 or size % rest:
            return None
        want = tuple(size // rest if d == -1 else d for d in want)
    return want if math.prod(want) == size else None


@register("aten::view", "aten::reshape")
def reshape(node: Node, ctx: Context) -> GpuOp | None:
    x, size = node.inputs
    shape = ctx.shape(x)
    want = ctx.constant(size)
    if shape is None or not isinstance(want, (list, tuple)) or ints(want, len(want)) is None and want:
        return None
    out = _view_shape(shape, tuple(want))
    return None if out is None else GpuOp([x], out, alias=0)


@register("aten::flatten.using_ints")
def flatten(node: Node, ctx: Context) -> GpuOp | None:
    x, start, end = node.inputs
    shape = ctx.shape(x)
    a, b = ctx.constant(start), ctx.constant(end)
    if shape is None or not isinstance(a, int) or not isinstance(b, int):
        return None
    if not shape:
        return GpuOp([x], (1,), alias=0)
    rank = len(shape)
    a, b = a + rank if a < 0 else a, b + rank if b < 0 else b
    if not 0 <= a <= b < rank:
        return None
    return GpuOp([x], (*shape[:a], math.prod(shape[a:b + 1]), *shape[b + 1:]), alias=0)


@register("aten::cat")
def cat(node: Node, ctx: Context) -> GpuOp | None:
    tensors, dim = node.inputs
    parts = ctx.tensor_list(tensors)
    d = ctx.constant(dim)
    if not parts or not isinstance(d, int) or isinstance(d, bool):
        return None
    shapes = [ctx.shape(v) for v in parts]
    if any(s is None for s in shapes) or len({len(s) for s in shapes}) != 1 or not shapes[0]:
        return None
    rank = len(shapes[0])
    d = d + rank if d < 0 else d
    if not 0 <= d < rank or any(s[:d] + s[d + 1:] != shapes[0][:d] + shapes[0][d + 1:] for s in shapes):
        return None
    total = sum(s[d] for s in shapes)
    out = (*shapes[0][:d], total, *shapes[0][d + 1:])
    inner = math.prod(shapes[0][d + 1:])
    dispatches, offset = [], 0
    for j, s in enumerate(shapes):
        n = math.prod(s)
        if n:
            dispatches.append(Dispatch(copy_source(ctx.f16), [j, OUT], [n, s[d] * inner, total * inner, offset], n))
        offset += s[d] * inner
    return GpuOp(parts, out, dispatches)
