"""Convolution GPU kernel: aten::conv2d on NCHW tensors, any groups, stride, padding and dilation (depthwise and
pointwise are its cases). Direct and register-blocked: each invocation computes up to 4 output channels (of one group)
at 4 neighbouring output columns, reading the input and the [Cout, Cin/groups, KH, KW] weight as they are."""

from __future__ import annotations

import math

from ptlite.ir.graph import Node

from . import ENTRY, OUT, Context, Dispatch, GpuOp, ints, prelude, register

OW_BLOCK = 4


def conv_source(f16: bool, co_block: int, bias: bool) -> str:
    """Params: 0 N, 1 Cin, 2 H, 3 W, 4 Cout, 5 OH, 6 OW, 7 KH, 8 KW, 9 sh, 10 sw, 11 ph, 12 pw, 13 dh, 14 dw,
    15 Cin per group, 16 Cout per group, 17 channel blocks per group, 18 column blocks, 19 invocations,
    20 groups."""
    reads = 3 if bias else 2
    cb = co_block
    loads_w = "\n".join(f"                let w{c} = f32(X1[wbase{c} + kk]);" for c in range(cb))
    fmas = "\n".join(f"                acc{c} = fma(vec4<f32>(w{c}), xv, acc{c});" for c in range(cb))
    wbases = "\n".join(f"        let wbase{c} = (min(co0 + {c}u, coend - 1u) * cinpg + ci) * KH * KW;"
                       for c in range(cb))
    accs = "\n".join(f"    var acc{c} = vec4<f32>(0.0);" for c in range(cb))
    stores = []
    for c in range(cb):
        b = f" + f32(X2[co0 + {c}u])" if bias else ""
        stores.append(f"""    if (co0 + {c}u < coend) {{
        let obase = ((n * Cout + co0 + {c}u) * OH + oh) * OW;
        for (var j: u32 = 0u; j < {OW_BLOCK}u; j = j + 1u) {{
            if (ow0 + j < OW) {{ O[obase + ow0 + j] = T(acc{c}[j]{b}); }}
        }}
    }}""")
    return prelude(f16, reads) + ENTRY + f"""    if (i >= pu(19u)) {{ return; }}
    let Cin = pu(1u);
    let H = pu(2u);
    let W = pu(3u);
    let Cout = pu(4u);
    let OH = pu(5u);
    let OW = pu(6u);
    let KH = pu(7u);
    let KW = pu(8u);
    let cinpg = pu(15u);
    let coutpg = pu(16u);
    let bpg = pu(17u);
    let nowb = pu(18u);
    let ow0 = (i % nowb) * {OW_BLOCK}u;
    var t = i / nowb;
    let oh = t % OH;
    t = t / OH;
    let cbk = t % (bpg * pu(20u));
    let n = t / (bpg * pu(20u));
    let g = cbk / bpg;
    let co0 = g * coutpg + (cbk % bpg) * {cb}u;
    let coend = (g + 1u) * coutpg;
    let ih0 = i32(oh * pu(9u)) - pi(11u);
    let iw0 = vec4<i32>(i32(ow0 * pu(10u)) - pi(12u)) + vec4<i32>(0, 1, 2, 3) * i32(pu(10u));
    let dh = i32(pu(13u));
    let dw = i32(pu(14u));
    let Wi = i32(W);
{accs}
    for (var ci: u32 = 0u; ci < cinpg; ci = ci + 1u) {{
        let xplane = (n * Cin + g * cinpg + ci) * H;
{wbases}
        for (var kh: u32 = 0u; kh < KH; kh = kh + 1u) {{
            let ih = ih0 + i32(kh) * dh;
            if (ih < 0 || ih >= i32(H)) {{ continue; }}
            let xrow = (xplane + u32(ih)) * W;
            for (var kw: u32 = 0u; kw < KW; kw = kw + 1u) {{
                let iw = iw0 + vec4<i32>(i32(kw) * dw);
                let inside = (iw >= vec4<i32>(0)) & (iw < vec4<i32>(Wi));
                let cl = vec4<u32>(clamp(iw, vec4<i32>(0), vec4<i32>(Wi - 1)));
                let xv = select(vec4<f32>(0.0), vec4<f32>(f32(X0[xrow + cl.x]), f32(X0[xrow + cl.y]),
                                                          f32(X0[xrow + cl.z]), f32(X0[xrow + cl.w])), inside);
                let kk = kh * KW + kw;
{loads_w}
{fmas}
            }}
        }}
    }}
{chr(10).join(stores)}
}}
"""


def out_size(size: int, k: int, stride: int, pad: int, dilation: int) -> int:
    """Output length of a convolution along one dimension."""
    return (size + 2 * pad - dilation * (k - 1) - 1) // stride + 1


@register("aten::conv2d")
def conv2d(node: Node, ctx: Context) -> GpuOp | None:
    x, w, b, stride, padding, dilation, groups = node.inputs
    sx, sw = ctx.shape(x), ctx.shape(w)
    s, p, d = (ints(ctx.constant(v), 2) for v in (stride, padding, dilation))
    g = ctx.constant(groups)
    if sx is None or sw is None or len(sx) != 4 or len(sw) != 4 or None in (s, p, d) or not isinstance(g, int) \
            or isinstance(g, bool) or g < 1:
        return None
    n, cin, h, wd = sx
    cout, cinpg, kh, kw = sw
    if cin != cinpg * g or cout % g or min(s) < 1 or min(d) < 1 or min(p) < 0 or 0 in sx or 0 in sw:
        return None
    oh, ow = out_size(h, kh, s[0], p[0], d[0]), out_size(wd, kw, s[1], p[1], d[1])
    if oh < 1 or ow < 1:
        return None
    reads = [x, w]
    bias = ctx.constant(b) is not None
    if bias:
        if ctx.shape(b) != (cout,):
            return None
        reads.append(b)
    coutpg = cout // g
    co_block = 4 if coutpg >= 4 else (2 if coutpg >= 2 else 1)
    bpg = math.ceil(coutpg / co_block)
    nowb = math.ceil(ow / OW_BLOCK)
    invocations = n * g * bpg * oh * nowb
    params = [n, cin, h, wd, cout, oh, ow, kh, kw, s[0], s[1], p[0], p[1], d[0], d[1], cinpg, coutpg, bpg, nowb,
              invocations, g]
    bindings = [0, 1, 2, OUT] if bias else [0, 1, OUT]
    return GpuOp(reads, (n, cout, oh, ow), [Dispatch(conv_source(ctx.f16, co_block, bias), bindings, params,
                                                     invocations)])
