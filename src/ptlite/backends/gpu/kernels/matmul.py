"""Matrix-product GPU kernels: aten::linear (any leading dims), aten::addmm, aten::matmul of two matrices. Each
invocation computes a 4x4 block of the output in registers, straight from global memory (no workgroup tiles)."""

from __future__ import annotations

import math

from ptlite.ir.graph import Node

from . import ENTRY, OUT, Context, Dispatch, GpuOp, number, prelude, register

BLOCK = 4


def matmul_source(f16: bool, bias: bool) -> str:
    """O[M, N] = alpha * A[M, K] @ B + beta * bias, B read at B[k * sbk + n * sbn], bias at bias[m * sm + n * sn].
    Params: 0 M, 1 K, 2 N, 3 sbk, 4 sbn, 5 sm, 6 sn, 7 alpha (f32), 8 beta (f32), 9 invocations."""
    reads = 3 if bias else 2
    store = "alpha * acc[c]" + (" + beta * f32(X2[row * pu(5u) + col * pu(6u)])" if bias else "")
    return prelude(f16, reads) + ENTRY + f"""    if (i >= pu(9u)) {{ return; }}
    let M = pu(0u);
    let K = pu(1u);
    let N = pu(2u);
    let sbk = pu(3u);
    let sbn = pu(4u);
    let ncb = (N + {BLOCK - 1}u) / {BLOCK}u;
    let row0 = (i / ncb) * {BLOCK}u;
    let col0 = (i % ncb) * {BLOCK}u;
    let r0 = min(row0, M - 1u) * K;
    let r1 = min(row0 + 1u, M - 1u) * K;
    let r2 = min(row0 + 2u, M - 1u) * K;
    let r3 = min(row0 + 3u, M - 1u) * K;
    let c0 = min(col0, N - 1u) * sbn;
    let c1 = min(col0 + 1u, N - 1u) * sbn;
    let c2 = min(col0 + 2u, N - 1u) * sbn;
    let c3 = min(col0 + 3u, N - 1u) * sbn;
    var acc0 = vec4<f32>(0.0);
    var acc1 = vec4<f32>(0.0);
    var acc2 = vec4<f32>(0.0);
    var acc3 = vec4<f32>(0.0);
    for (var k: u32 = 0u; k < K; k = k + 1u) {{
        let kb = k * sbk;
        let b = vec4<f32>(f32(X1[kb + c0]), f32(X1[kb + c1]), f32(X1[kb + c2]), f32(X1[kb + c3]));
        acc0 = fma(vec4<f32>(f32(X0[r0 + k])), b, acc0);
        acc1 = fma(vec4<f32>(f32(X0[r1 + k])), b, acc1);
        acc2 = fma(vec4<f32>(f32(X0[r2 + k])), b, acc2);
        acc3 = fma(vec4<f32>(f32(X0[r3 + k])), b, acc3);
    }}
    let alpha = pf(7u);
    let beta = pf(8u);
    for (var r: u32 = 0u; r < {BLOCK}u; r = r + 1u) {{
        let row = row0 + r;
        var acc = acc0;
        if (r == 1u) {{ acc = acc1; }} else if (r == 2u) {{ acc = acc2; }} else if (r == 3u) {{ acc = acc3; }}
        for (var c: u32 = 0u; c < {BLOCK}u; c = c + 1u) {{
            let col = col0 + c;
            if (row < M && col < N) {{
                O[row * N + col] = T({store});
            }}
        }}
    }}
}}
"""


def _dispatch(f16: bool, m: int, k: int, n: int, sbk: int, sbn: int, bias: tuple[int, int] | None,
              alpha: float = 1.0, beta: float = 1.0) -> Dispatch:
    invocations = math.ceil(m / BLOCK) * math.ceil(n / BLOCK)
    sm, sn = bias or (0, 0)
    bindings = [0, 1, 2, OUT] if bias is not None else [0, 1, OUT]
    return Dispatch(matmul_source(f16, bias is not None), bindings,
                    [m, k, n, sbk, sbn, sm, sn, alpha, beta, invocations], invocations)


def _bias_strides(shape: tuple[int, ...], m: int, n: int) -> tuple[int, int] | None:
    """Strides reading a bias of `shape` broadcast to [m, n], or None if it does not broadcast."""
    if len(shape) > 2 or any(d not in (1, want) for d, want in zip(reversed(shape), (n, m))):
        return None
    padded = (1,) * (2 - len(shape)) + tuple(shape)
    return (0 if padded[0] == 1 else padded[1]), (0 if padded[1] == 1 else 1)


@register("aten::linear")
def linear(node: Node, ctx: Context) -> GpuOp | None:
    x, w, b = node.inputs
    sx, sw = ctx.shape(x), ctx.shape(w)
    if sx is None or sw is None or len(sx) < 1 or len(sw) != 2 or sx[-1] != sw[1] or 0 in sx or 0 in sw:
        return None
    n, k = sw
    m = math.prod(sx[:-1])
    reads = [x, w]
    bias = None
    if ctx.constant(b) is not None:
        sb = ctx.shape(b)
        if sb is None or sb != (n,):
            return None
        reads.append(b)
        bias = (0, 1)
    return GpuOp(reads, (*sx[:-1], n), [_dispatch(ctx.f16, m, k, n, 1, k, bias)])


@register("aten::matmul")
def matmul(node: Node, ctx: Context) -> GpuOp | None:
    a, b = node.inputs
    sa, sb = ctx.shape(a), ctx.shape(b)
    if sa is None or sb is None or len(sa) != 2 or len(sb) != 2 or sa[1] != sb[0] or 0 in sa or 0 in sb:
        return None
    (m, k), n = sa, sb[1]
    return GpuOp([a, b], (m, n), [_dispatch(ctx.f16, m, k, n, n, 1, None)])


@register("aten::addmm")
def addmm(node: Node, ctx: Context) -> GpuOp | None:
    c, a, b, beta, alpha = node.inputs
    sc, sa, sb = ctx.shape(c), ctx.shape(a), ctx.shape(b)
    beta_v, alpha_v = number(ctx.constant(beta)), number(ctx.constant(alpha))
    if None in (sc, sa, sb, beta_v, alpha_v) or len(sa) != 2 or len(sb) != 2 or sa[1] != sb[0] \
            or 0 in sa or 0 in sb:
        return None
    (m, k), n = sa, sb[1]
    strides = _bias_strides(sc, m, n)
    if strides is None:
        return None
    return GpuOp([a, b, c], (m, n), [_dispatch(ctx.f16, m, k, n, n, 1, strides, alpha_v, beta_v)])
