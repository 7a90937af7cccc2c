"""Winograd F(4x4, 3x3) against im2col for the 3x3 stride-1 convolutions of ResNet's stages: time and rounding error.

    python benchmarks/bench_winograd.py [--runs 20] [--threads 1]

Both are ptlite's prepacked kernels on a channels-last input (what the WINOGRAD pass chooses between); the error
is max |result - float64 reference| / max |reference| (and its root mean square, rms, over the output), for
ptlite::conv2d_winograd_v2's points (0, 1, -1, 2, -1/2: what the pass writes) and for Lavin & Gray's (0, 1, -1, 2,
-2: ptlite::conv2d_winograd, older files). The thresholds in ptlite/backends/numpy/lower/winograd.py come from this.
"""

from __future__ import annotations

import argparse

import numpy as np

import ptlite
from ptlite.backends.numpy.prepacked import conv2d_prepacked_nhwc
from ptlite.backends.numpy.winograd import (
    LAVIN_AT2,
    LAVIN_BT2,
    LAVIN_G,
    conv2d_winograd_nhwc,
    pack_winograd_weight,
)
from ptlite.ops.layouts import pack_conv2d_weight
from ptlite.tools.bench import time_calls

LAYERS = [(64, 56), (128, 28), (256, 14), (512, 7)]  # (channels in = out, image side)


def median_ms(fn, runs: int) -> float:
    return float(np.median(time_calls(fn, 1, runs)))


def reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """float64 NHWC convolution, padding 1: the sum over the 9 taps of shifted images times (C, O) matrices."""
    n, h, wd, c = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((n, h, wd, w.shape[0]))
    for i in range(3):
        for j in range(3):
            out += xp[:, i:i + h, j:j + wd] @ w[:, :, i, j].T.astype(np.float64)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    ptlite.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    print(f"{'layer':>16} {'im2col ms':>10} {'winograd ms':>12} {'speed-up':>9} {'im2col err':>11} "
          f"{'winograd err':>13} {'(rms)':>8} {'Lavin err':>10} {'(rms)':>8}")
    for c, side in LAYERS:
        x = rng.standard_normal((1, side, side, c)).astype(np.float32)
        w = (rng.standard_normal((c, c, 3, 3)) * np.sqrt(2 / (9 * c))).astype(np.float32)
        dense, wino, lavin = pack_conv2d_weight(w, 1), pack_winograd_weight(w), pack_winograd_weight(w, LAVIN_G)
        def im2col(x=x, dense=dense):
            return conv2d_prepacked_nhwc(x, dense, None, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1)

        def winograd(x=x, wino=wino):
            return conv2d_winograd_nhwc(x, wino, None, (1, 1, 1, 1))

        def winograd_lavin(x=x, lavin=lavin):
            return conv2d_winograd_nhwc(x, lavin, None, (1, 1, 1, 1), transforms=(LAVIN_BT2, LAVIN_AT2))

        ref = reference(x, w)
        scale = np.abs(ref).max()
        diffs = [f() - ref for f in (im2col, winograd, winograd_lavin)]
        errors = [np.abs(d).max() / scale for d in diffs]
        rms = [np.sqrt(np.mean(d ** 2)) / scale for d in diffs]
        t_im2col, t_wino = median_ms(im2col, args.runs), median_ms(winograd, args.runs)
        print(f"{f'{c} ch {side}x{side}':>16} {t_im2col:>10.2f} {t_wino:>12.2f} {t_im2col / t_wino:>8.2f}x "
              f"{errors[0]:>11.1e} {errors[1]:>13.1e} {rms[1]:>8.1e} {errors[2]:>10.1e} {rms[2]:>8.1e}")


if __name__ == "__main__":
    main()
