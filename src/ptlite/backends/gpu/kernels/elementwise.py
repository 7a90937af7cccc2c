"""Elementwise GPU kernels: add/sub/mul/div of two tensors with NumPy broadcasting (up to rank 6), and the
activations relu, relu6, hardtanh, sigmoid, hardswish, silu."""

from __future__ import annotations

import numpy as np

from ptlite.ir.graph import Node

from . import ENTRY, NOT_CONSTANT, OUT, Context, Dispatch, GpuOp, number, prelude, register

RANK = 6
_BINARY = {"aten::add.Tensor": "a + alpha * b", "aten::sub.Tensor": "a - alpha * b",
           "aten::mul.Tensor": "a * b", "aten::div.Tensor": "a / b"}
_UNARY = {"aten::relu": "max(x, 0.0)", "aten::relu6": "clamp(x, 0.0, 6.0)", "aten::hardtanh": "clamp(x, lo, hi)",
          "aten::sigmoid": "1.0 / (1.0 + exp(-x))", "aten::hardswish": "x * clamp(x + 3.0, 0.0, 6.0) / 6.0",
          "aten::silu": "x / (1.0 + exp(-x))"}


def binary_source(f16: bool, expr: str) -> str:
    """out[i] = expr(a, b, alpha) where a, b are read at their broadcast strides. Params: 0 n, 1 alpha (f32),
    2..7 output dims, 8..13 a's strides, 14..19 b's strides (elements; 0 where broadcast)."""
    return prelude(f16, 2) + ENTRY + f"""    if (i >= pu(0u)) {{ return; }}
    var r = i;
    var ia = 0u;
    var ib = 0u;
    for (var d: i32 = {RANK - 1}; d >= 0; d = d - 1) {{
        let k = u32(d);
        let c = r % pu(2u + k);
        r = r / pu(2u + k);
        ia = ia + c * pu(8u + k);
        ib = ib + c * pu(14u + k);
    }}
    let a = f32(X0[ia]);
    let b = f32(X1[ib]);
    let alpha = pf(1u);
    O[i] = T({expr});
}}
"""


def scalar_source(f16: bool, expr: str) -> str:
    """out[i] = expr(a, b, alpha) with b a number. Params: 0 n, 1 alpha (f32), 2 b (f32)."""
    return prelude(f16, 1) + ENTRY + f"""    if (i >= pu(0u)) {{ return; }}
    let a = f32(X0[i]);
    let b = pf(2u);
    let alpha = pf(1u);
    O[i] = T({expr});
}}
"""


def unary_source(f16: bool, expr: str) -> str:
    """out[i] = expr(x, lo, hi). Params: 0 n, 1 lo (f32), 2 hi (f32)."""
    return prelude(f16, 1) + ENTRY + f"""    if (i >= pu(0u)) {{ return; }}
    let x = f32(X0[i]);
    let lo = pf(1u);
    let hi = pf(2u);
    O[i] = T({expr});
}}
"""


def broadcast_strides(shape: tuple[int, ...], out: tuple[int, ...]) -> list[int]:
    """Element strides of a contiguous tensor of `shape` read at each of `out`'s RANK dims (0 where broadcast)."""
    padded = (1,) * (RANK - len(shape)) + tuple(shape)
    strides = [0] * RANK
    step = 1
    for d in range(RANK - 1, -1, -1):
        strides[d] = 0 if padded[d] == 1 else step
        step *= padded[d]
    return strides


@register(*_BINARY)
def binary(node: Node, ctx: Context) -> GpuOp | None:
    a, b = node.inputs[0], node.inputs[1]
    sa, sb = ctx.shape(a), ctx.shape(b)
    if sa is not None and sb is None and number(ctx.constant(b)) is not None and len(node.inputs) <= 3:
        # a number (a constant 0-d tensor given as a Python number) as the other operand
        alpha = 1.0 if len(node.inputs) < 3 else number(ctx.constant(node.inputs[2]))
        if alpha is None:
            return None
        n = int(np.prod(sa, dtype=np.int64))
        params = [n, alpha, number(ctx.constant(b))]
        return GpuOp([a], sa, [Dispatch(scalar_source(ctx.f16, _BINARY[node.op]), [0, OUT], params, n)])
    if sa is None or sb is None or max(len(sa), len(sb)) > RANK:
        return None
    alpha = 1.0
    if len(node.inputs) > 2:
        alpha = number(ctx.constant(node.inputs[2]))
        if alpha is None:
            return None
    try:
        out = tuple(int(d) for d in np.broadcast_shapes(sa, sb))
    except ValueError:
        return None
    n = int(np.prod(out, dtype=np.int64))
    dims = list((1,) * (RANK - len(out)) + out)
    params = [n, alpha, *dims, *broadcast_strides(sa, out), *broadcast_strides(sb, out)]
    return GpuOp([a, b], out, [Dispatch(binary_source(ctx.f16, _BINARY[node.op]), [0, 1, OUT], params, n)])


@register(*_UNARY)
def unary(node: Node, ctx: Context) -> GpuOp | None:
    x = node.inputs[0]
    shape = ctx.shape(x)
    if shape is None:
        return None
    lo, hi = 0.0, 0.0
    if node.op == "aten::hardtanh":
        lo, hi = number(ctx.constant(node.inputs[1])), number(ctx.constant(node.inputs[2]))
        if lo is None or hi is None:
            return None
    elif len(node.inputs) > 1 and any(ctx.constant(v) is NOT_CONSTANT for v in node.inputs[1:]):
        return None
    n = int(np.prod(shape, dtype=np.int64))
    return GpuOp([x], shape, [Dispatch(unary_source(ctx.f16, _UNARY[node.op]), [0, OUT], [n, lo, hi], n)])
