"""A squeeze-and-excitation block as one kernel (EfficientNet's and MobileNetV3's channel attention):

    y = x * gate(conv2(act1(conv1(mean over H, W of x))))

where conv1 and conv2 are prepacked 1x1 convolutions ((C, C1) and (C1, C) weights) with their fused activations,
and gate is sigmoid or hardsigmoid. The `FUSE_SQUEEZE_EXCITE` pass makes it from the five operators torchvision's
SqueezeExcitation becomes; one node instead of five saves four operators' dispatch and layout handling (tens of
microseconds each, as much as the work on the small maps of these blocks), and the per-channel values never
become (N, C, 1, 1) tensors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.ops import SQUEEZE_EXCITE

from ._fastnp import tile_row
from ._layout import fits_out, nhwc_view
from ._sums import fast_sum
from .prepacked import BLOCK, apply_activation, check_activation

GATES = ("sigmoid", "hardsigmoid")


def _gate(g: np.ndarray, gate: str) -> None:
    """sigmoid or hardsigmoid of g, in place (as aten::sigmoid / aten::hardsigmoid compute them)."""
    if gate == "sigmoid":
        with np.errstate(over="ignore"):  # exp overflow for very negative g: the right limit, 0
            np.negative(g, out=g)
            np.exp(g, out=g)
        np.add(g, g.dtype.type(1), out=g)
        np.reciprocal(g, out=g)
    else:  # relu6(g + 3) / 6
        np.add(g, g.dtype.type(3), out=g)
        np.clip(g, g.dtype.type(0), g.dtype.type(6), out=g)
        np.divide(g, g.dtype.type(6), out=g)


@kernel(SQUEEZE_EXCITE)
def squeeze_excite(input: np.ndarray, w1: np.ndarray, b1: np.ndarray | None, act1: str, act1_args: Sequence[float],
                   w2: np.ndarray, b2: np.ndarray | None, act2: str, act2_args: Sequence[float], gate: str, *,
                   out: np.ndarray | None = None) -> np.ndarray:
    """x * gate(act2(act1(mean(x) @ w1 + b1) @ w2 + b2)) for x (N, C, H, W) in any layout, with prepacked 1x1
    weights w1 (C, C1) and w2 (C1, C); the result in x's layout (into `out` when it has its shape and dtype)."""
    check_activation(act1, act1_args)
    check_activation(act2, act2_args)
    if gate not in GATES:
        raise ValueError(f"unknown squeeze-and-excitation gate {gate!r}; expected one of {', '.join(GATES)}")
    if input.ndim == 3:  # unbatched (C, H, W), as the convolutions take it
        target = None if out is None or out.ndim != 3 else out[None]
        result = squeeze_excite(input[None], w1, b1, act1, act1_args, w2, b2, act2, act2_args, gate, out=target)
        return out if target is not None and result is target else result[0]
    if input.ndim != 4:
        raise ValueError(f"squeeze_excite expects a 3-D (C, H, W) or 4-D (N, C, H, W) input, got shape "
                         f"{tuple(input.shape)}")
    n, c, h, w = input.shape
    if h * w == 0:
        raise ValueError(f"squeeze_excite: the input {tuple(input.shape)} has no pixels to average over")
    if w1.ndim != 2 or w2.ndim != 2 or w1.shape[0] != c or w2.shape != (w1.shape[1], c):
        raise ValueError(f"squeeze_excite: input with {c} channels does not match the packed weights "
                         f"{tuple(w1.shape)} and {tuple(w2.shape)}")
    dtype = np.result_type(input.dtype, w1.dtype, w2.dtype)
    x = input if input.dtype == dtype else input.astype(dtype)
    pooled = fast_sum(x, (2, 3), keepdims=False).reshape(n, c)
    pooled = np.true_divide(pooled, dtype.type(h * w), dtype=dtype)
    hidden = pooled @ w1
    if b1 is not None:
        hidden += b1
    apply_activation(hidden, act1, act1_args)
    g = hidden @ w2
    if b2 is not None:
        g += b2
    apply_activation(g, act2, act2_args)
    _gate(g, gate)
    if out is None or not fits_out(out, x.shape, dtype):
        out = np.empty_like(x)  # x's layout
    xv, ov = nhwc_view(x), nhwc_view(out)
    if xv is None or ov is None:
        np.multiply(x, g[:, :, None, None], out=out)
    elif c >= _WIDE:  # channels-last: scale each pixel's channel row
        np.multiply(xv.reshape(n, h * w, c), g[:, None, :], out=ov.reshape(n, h * w, c))
    else:  # few channels: broadcasting a short row makes NumPy's inner loop short; flat blocks by a tiled row
        step = min(h * w, max(1, BLOCK // c))
        for i in range(n):
            tiled = tile_row(g[i], step)
            flat_x, flat_out = xv[i].reshape(-1), ov[i].reshape(-1)
            for a in range(0, flat_x.size, tiled.size):
                b = min(a + tiled.size, flat_x.size)
                np.multiply(flat_x[a:b], tiled[:b - a], out=flat_out[a:b])
    return out


# Channels from which broadcasting the gate row over the pixels is as fast as tiling it (measured: 1.5x slower at
# 32 channels, 1.2x at 144, even at 240, faster beyond).
_WIDE = 256
