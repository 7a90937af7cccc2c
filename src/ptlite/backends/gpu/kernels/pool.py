"""Pooling GPU kernels: aten::max_pool2d (stride, padding, dilation, ceil_mode) and aten::adaptive_avg_pool2d, on
NCHW tensors, one output element per invocation."""

from __future__ import annotations

import math

from ptlite.ir.graph import Node

from . import ENTRY, OUT, Context, Dispatch, GpuOp, ints, prelude, register


def max_pool_source(f16: bool) -> str:
    """Params: 0 outputs, 1 H, 2 W, 3 OH, 4 OW, 5 KH, 6 KW, 7 sh, 8 sw, 9 ph, 10 pw, 11 dh, 12 dw."""
    return prelude(f16, 1) + ENTRY + """    if (i >= pu(0u)) { return; }
    let H = i32(pu(1u));
    let W = i32(pu(2u));
    let OH = pu(3u);
    let OW = pu(4u);
    let ow = i % OW;
    let oh = (i / OW) % OH;
    let plane = (i / (OW * OH)) * u32(H * W);
    let ih0 = i32(oh * pu(7u)) - pi(9u);
    let iw0 = i32(ow * pu(8u)) - pi(10u);
    var m = -3.4028234e38;
    for (var kh: i32 = 0; kh < i32(pu(5u)); kh = kh + 1) {
        let ih = ih0 + kh * pi(11u);
        if (ih < 0 || ih >= H) { continue; }
        for (var kw: i32 = 0; kw < i32(pu(6u)); kw = kw + 1) {
            let iw = iw0 + kw * pi(12u);
            if (iw < 0 || iw >= W) { continue; }
            m = max(m, f32(X0[plane + u32(ih * W + iw)]));
        }
    }
    O[i] = T(m);
}
"""


def adaptive_avg_source(f16: bool) -> str:
    """Params: 0 outputs, 1 H, 2 W, 3 OH, 4 OW (PyTorch's windows: [floor(o*H/OH), ceil((o+1)*H/OH)))."""
    return prelude(f16, 1) + ENTRY + """    if (i >= pu(0u)) { return; }
    let H = pu(1u);
    let W = pu(2u);
    let OH = pu(3u);
    let OW = pu(4u);
    let ow = i % OW;
    let oh = (i / OW) % OH;
    let plane = (i / (OW * OH)) * H * W;
    let h0 = (oh * H) / OH;
    let h1 = ((oh + 1u) * H + OH - 1u) / OH;
    let w0 = (ow * W) / OW;
    let w1 = ((ow + 1u) * W + OW - 1u) / OW;
    var s = 0.0;
    for (var h: u32 = h0; h < h1; h = h + 1u) {
        for (var w: u32 = w0; w < w1; w = w + 1u) {
            s = s + f32(X0[plane + h * W + w]);
        }
    }
    O[i] = T(s / f32((h1 - h0) * (w1 - w0)));
}
"""


def pool_out_size(size: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    """PyTorch's pooling output length (a last window starting in the right padding is dropped)."""
    span = size + 2 * p - d * (k - 1) - 1
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


@register("aten::max_pool2d")
def max_pool2d(node: Node, ctx: Context) -> GpuOp | None:
    x, kernel, stride, padding, dilation, ceil_mode = node.inputs
    shape = ctx.shape(x)
    k = ints(ctx.constant(kernel), 2)
    s_raw = ctx.constant(stride)
    s = k if s_raw in ([], ()) else ints(s_raw, 2)
    p, d = ints(ctx.constant(padding), 2), ints(ctx.constant(dilation), 2)
    ceil = ctx.constant(ceil_mode)
    if shape is None or len(shape) not in (3, 4) or None in (k, s, p, d) or not isinstance(ceil, bool) \
            or min(k) < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0 or p[0] * 2 > k[0] or p[1] * 2 > k[1]:
        return None
    h, w = shape[-2:]
    oh, ow = (pool_out_size(h, k[0], s[0], p[0], d[0], ceil), pool_out_size(w, k[1], s[1], p[1], d[1], ceil))
    if oh < 1 or ow < 1 or 0 in shape:
        return None
    out = (*shape[:-2], oh, ow)
    n = math.prod(out)
    params = [n, h, w, oh, ow, k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1]]
    return GpuOp([x], out, [Dispatch(max_pool_source(ctx.f16), [0, OUT], params, n)])


@register("aten::adaptive_avg_pool2d")
def adaptive_avg_pool2d(node: Node, ctx: Context) -> GpuOp | None:
    x, size = node.inputs
    shape = ctx.shape(x)
    o = ints(ctx.constant(size), 2)
    if shape is None or len(shape) not in (3, 4) or o is None or min(o) < 1 or 0 in shape:
        return None
    h, w = shape[-2:]
    out = (*shape[:-2], o[0], o[1])
    n = math.prod(out)
    return GpuOp([x], out, [Dispatch(adaptive_avg_source(ctx.f16), [0, OUT], [n, h, w, o[0], o[1]], n)])
