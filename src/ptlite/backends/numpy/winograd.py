"""Winograd F(4x4, 3x3) convolution: 3x3, stride 1, dense convolutions on channels-last images with 4x fewer
multiplications than im2col (36 per 4x4 output tile and channel pair instead of 144), at the price of transforms
and a larger rounding error (about 2e-6 to 5e-6 of the largest output instead of im2col's 3e-7 to 5e-7; see
docs/decisions.md). F(2x2, 3x3) (ptlite::conv2d_winograd_2x2) takes 2.25x fewer (16 per 2x2 tile instead of 36)
with a weight 16/9 of the direct one's instead of 4x: the native backend's choice for small images.

Lavin & Gray's F(4x4, 3x3): each 6x6 input tile d becomes V = Bt d B, the filter g becomes U = G g Gt (stored in the
file, packed by the WINOGRAD pass as (36, C, O)), the 36 products are one batched GEMM M = V @ U over all tiles,
and the 4x4 output tile is Y = At M A. Every transform is one matrix product over the whole image, so NumPy runs
it in BLAS in a single pass.

The matrices come from the interpolation points. ptlite::conv2d_winograd_v2 (what the pass writes) uses 0, 1, -1, 2,
-1/2 and infinity, whose rounding error is about 2-3x lower than that of Lavin & Gray's 0, 1, -1, 2, -2 (the
largest error over an output: 2.4-3.1x on ResNet's layers with two BLAS threads, about 2x with one, as BLAS's
summation order changes it; 1.3-1.5x the root mean square: `python benchmarks/bench_winograd.py [--threads N]`
prints both per layer; Barabasz et al. 2020 found points with halves the most accurate for F(4, 3)).
ptlite::conv2d_winograd keeps Lavin & Gray's points for files written before: its weights were transformed with
their G. F(2x2, 3x3) uses the points 0, 1, -1 (and infinity): its Bt and At are additions only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.ops import CONV2D_WINOGRAD, CONV2D_WINOGRAD_2X2, CONV2D_WINOGRAD_V2

from ._fastnp import strided_view
from ._layout import fits_out, from_nhwc, nhwc_view, to_nhwc
from .prepacked import check_activation, finish_rows

# Points 0, 1, -1, 2, -1/2 (and infinity): every entry of Bt and At is exact in float32.
BT = np.array([[1, 3 / 2, -2, -3 / 2, 1, 0],
               [0, -1, -5 / 2, -1 / 2, 1, 0],
               [0, 1, 1 / 2, -5 / 2, 1, 0],
               [0, -1 / 2, -1, 1 / 2, 1, 0],
               [0, 2, -1, -2, 1, 0],
               [0, 1, 3 / 2, -2, -3 / 2, 1]], dtype=np.float32)
G = np.array([[1, 0, 0],
              [-1 / 3, -1 / 3, -1 / 3],
              [1 / 3, -1 / 3, 1 / 3],
              [1 / 15, 2 / 15, 4 / 15],
              [-16 / 15, 8 / 15, -4 / 15],
              [0, 0, 1]], dtype=np.float64)
AT = np.array([[1, 1, 1, 1, 1, 0],
               [0, 1, -1, 2, -1 / 2, 0],
               [0, 1, 1, 4, 1 / 4, 0],
               [0, 1, -1, 8, -1 / 8, 1]], dtype=np.float32)

# Lavin & Gray's points 0, 1, -1, 2, -2: ptlite::conv2d_winograd, for files written before the points above.
LAVIN_BT = np.array([[4, 0, -5, 0, 1, 0],
                     [0, -4, -4, 1, 1, 0],
                     [0, 4, -4, -1, 1, 0],
                     [0, -2, -1, 2, 1, 0],
                     [0, 2, -1, -2, 1, 0],
                     [0, 4, 0, -5, 0, 1]], dtype=np.float32)
LAVIN_G = np.array([[1 / 4, 0, 0],
                    [-1 / 6, -1 / 6, -1 / 6],
                    [-1 / 6, 1 / 6, -1 / 6],
                    [1 / 24, 1 / 12, 1 / 6],
                    [1 / 24, -1 / 12, 1 / 6],
                    [0, 0, 1]], dtype=np.float64)
LAVIN_AT = np.array([[1, 1, 1, 1, 1, 0],
                     [0, 1, -1, 2, -2, 0],
                     [0, 1, 1, 4, 4, 0],
                     [0, 1, -1, 8, -8, 1]], dtype=np.float32)

# F(2x2, 3x3), points 0, 1, -1 (and infinity).
BT_2X2 = np.array([[1, 0, -1, 0],
                   [0, 1, 1, 0],
                   [0, -1, 1, 0],
                   [0, 1, 0, -1]], dtype=np.float32)
G_2X2 = np.array([[1, 0, 0],
                  [1 / 2, 1 / 2, 1 / 2],
                  [1 / 2, -1 / 2, 1 / 2],
                  [0, 0, 1]], dtype=np.float64)
AT_2X2 = np.array([[1, 1, 1, 0],
                   [0, 1, -1, -1]], dtype=np.float32)

# Both sides of each transform at once: (Bt d B) flattened row-major is kron(Bt, Bt) @ (d flattened), so the input
# transform is one matrix product (36 x 36) over every tile and channel instead of two passes over the tiles with
# 6 x 6 products, and the output transform likewise (16 x 36). Entries are exact in float32.
BT2, AT2 = np.kron(BT, BT), np.kron(AT, AT)
LAVIN_BT2, LAVIN_AT2 = np.kron(LAVIN_BT, LAVIN_BT), np.kron(LAVIN_AT, LAVIN_AT)
BT2_2X2, AT2_2X2 = np.kron(BT_2X2, BT_2X2), np.kron(AT_2X2, AT_2X2)


def pack_winograd_weight(weight: np.ndarray, g: np.ndarray = G) -> np.ndarray:
    """(O, C, 3, 3) -> U (a * a, C, O) = G g Gt for every (output, input) channel pair, computed in float64 (`g`:
    G for ptlite::conv2d_winograd_v2, a = 6; LAVIN_G for ptlite::conv2d_winograd; G_2X2 for
    ptlite::conv2d_winograd_2x2, a = 4)."""
    o, c, kh, kw = weight.shape
    if (kh, kw) != (3, 3):
        raise ValueError(f"Winograd needs a 3x3 kernel, got {kh}x{kw}")
    u = np.einsum("ai,ocij,bj->abco", g, weight.astype(np.float64), g)
    return np.ascontiguousarray(u.reshape(len(g) ** 2, c, o).astype(weight.dtype))


def conv2d_winograd_nhwc(xh: np.ndarray, u: np.ndarray, bias: np.ndarray | None, pads: Sequence[int],
                         activation: str = "none", args: Sequence[float] = (),
                         out: np.ndarray | None = None, transforms: tuple[np.ndarray, np.ndarray] = (BT2, AT2)
                         ) -> np.ndarray:
    """3x3 stride-1 convolution of C-contiguous NHWC `xh` by U (a * a, C, O); returns C-contiguous NHWC (`out`
    when it is such an array of the result's shape and dtype). pads: top, bottom, left, right. transforms: the
    (kron(Bt, Bt), kron(At, At)) that go with the G that made U: F(4x4, 3x3)'s (a = 6) or F(2x2, 3x3)'s (a = 4)."""
    check_activation(activation, args)
    n, h, w, c = xh.shape
    positions = transforms[0].shape[0]
    if u.ndim != 3 or u.shape[:2] != (positions, c):
        raise ValueError(f"Winograd conv2d: input with {c} channels does not match the packed weight "
                         f"{tuple(u.shape)} (expected ({positions}, {c}, O))")
    size = round(positions ** 0.5)
    tile = size - 2
    top, bottom, left, right = pads
    ho, wo = h + top + bottom - 2, w + left + right - 2
    if ho <= 0 or wo <= 0:
        raise ValueError(f"convolution output size {(ho, wo)} is not positive (input {(h, w)}, kernel 3x3)")
    o, dtype = u.shape[2], u.dtype
    th, tw = -(-ho // tile), -(-wo // tile)
    tiles = n * th * tw
    # zero-padded input covering every tile (tiles overlap by 2 pixels)
    xp = np.zeros((n, tile * th + 2, tile * tw + 2, c), dtype=dtype)
    rows, cols = min(h, tile * th + 2 - top), min(w, tile * tw + 2 - left)
    xp[:, top:top + rows, left:left + cols] = xh[:, :rows, :cols]
    s_n, s_h, s_w, s_c = xp.strides
    d = strided_view(xp, (size, size, n, th, tw, c), (s_h, s_w, s_n, tile * s_h, tile * s_w, s_c))
    d = np.ascontiguousarray(d).reshape(positions, tiles * c)
    work = np.promote_types(dtype, np.float32)  # float16 is transformed in float32: the transforms scale by ~100
    bt2, at2 = transforms
    v = np.matmul(bt2.astype(work, copy=False), d)  # Bt d B of every tile
    m = np.matmul(v.reshape(positions, tiles, c), u).reshape(positions, tiles * o)
    y = np.matmul(at2.astype(work, copy=False), m)  # At M A -> (tile * tile, tiles * O)
    y = y.reshape(tile, tile, n, th, tw, o).transpose(2, 3, 0, 4, 1, 5)  # (n, th, tile, tw, tile, O)
    fits = fits_out(out, (n, ho, wo, o), dtype) and out.flags.c_contiguous
    result = out if fits else np.empty((n, ho, wo, o), dtype=dtype)
    bias = None if bias is None else np.asarray(bias, dtype=dtype)
    if (ho, wo) == (tile * th, tile * tw):  # the tiles cover the output exactly: gather them with the bias added
        target = result.reshape(y.shape)
        if bias is None:
            np.copyto(target, y)
        else:
            np.add(y, bias, out=target)
        bias = None
    else:  # the last tiles overhang the output
        np.copyto(result, y.reshape(n, tile * th, tile * tw, o)[:, :ho, :wo])
    finish_rows(result.reshape(-1, o), bias, activation, args)
    return result


@kernel(CONV2D_WINOGRAD_V2)
def conv2d_winograd_v2(input, weight, bias, padding, activation="none", activation_args=(), *, out=None):
    """3x3 stride-1 dense convolution by the Winograd-transformed weight (36, C, O) of the points 0, 1, -1, 2, -1/2;
    padding is top, bottom, left, right. Takes (N, C, H, W) or (C, H, W) in any layout; returns channels-last
    (`out` when it is a channels-last array of the result's shape and dtype)."""
    return _conv2d_winograd(input, weight, bias, padding, activation, activation_args, out, (BT2, AT2))


@kernel(CONV2D_WINOGRAD_2X2)
def conv2d_winograd_2x2(input, weight, bias, padding, activation="none", activation_args=(), *, out=None):
    """3x3 stride-1 dense convolution by Winograd F(2x2, 3x3)'s transformed weight (16, C, O), points 0, 1, -1;
    otherwise as ptlite::conv2d_winograd_v2."""
    return _conv2d_winograd(input, weight, bias, padding, activation, activation_args, out, (BT2_2X2, AT2_2X2))


@kernel(CONV2D_WINOGRAD)
def conv2d_winograd(input, weight, bias, padding, activation="none", activation_args=(), *, out=None):
    """As ptlite::conv2d_winograd_v2, with the weight transformed for Lavin & Gray's points 0, 1, -1, 2, -2 (files
    written before v2)."""
    return _conv2d_winograd(input, weight, bias, padding, activation, activation_args, out, (LAVIN_BT2, LAVIN_AT2))


def _conv2d_winograd(input, weight, bias, padding, activation, activation_args, out, transforms):
    unbatched = input.ndim == 3
    x = input[None] if unbatched else input
    if x.ndim != 4:
        raise ValueError(f"conv2d expects a 3-D or 4-D input, got shape {tuple(input.shape)}")
    target = None if out is None or unbatched else nhwc_view(out)
    result = conv2d_winograd_nhwc(to_nhwc(x, weight.dtype), weight, bias, padding, activation, activation_args,
                                  target, transforms)
    if target is not None and result is target:
        return out
    y = from_nhwc(result)
    return y[0] if unbatched else y
