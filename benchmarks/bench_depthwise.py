"""Depthwise convolution: one np.einsum over a padded copy (what ptlite runs) against a multiply and an add per
kernel tap (its earlier kernel, kept for atrous convolutions), on MobileNetV2 / EfficientNet-B0 layer shapes.

    python benchmarks/bench_depthwise.py [--runs 30]

Both are ptlite's kernels on a channels-last input, without bias or activation; one thread does all the work
(neither calls BLAS). Prints the median time of each and their ratio.
"""

from __future__ import annotations

import argparse
from functools import partial

import numpy as np

from ptlite.backends.numpy.prepacked import _conv_depthwise_einsum, _conv_depthwise_taps
from ptlite.tools.bench import time_calls

# (image side, channels, kernel, stride): MobileNetV2's and EfficientNet-B0's depthwise layers
LAYERS = [(112, 32, 3, 1), (112, 96, 3, 2), (56, 144, 3, 1), (56, 144, 5, 2), (28, 192, 3, 1), (28, 240, 5, 1),
          (14, 576, 3, 1), (14, 672, 5, 1), (7, 960, 3, 1)]


def median_ms(runs: int, fn, *args) -> float:
    return float(np.median(time_calls(partial(fn, *args), 1, runs)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'layer':<24} {'per tap (ms)':>12} {'einsum (ms)':>12} {'ratio':>6}")
    for side, c, k, s in LAYERS:
        x = rng.standard_normal((1, side, side, c), dtype=np.float32)
        w = rng.standard_normal((k * k, c), dtype=np.float32)
        pad = k // 2
        out_side = (side + 2 * pad - k) // s + 1
        geometry = ((pad,) * 4, (k, k), (s, s), (1, 1), (out_side, out_side))
        a, b = np.empty((1, out_side, out_side, c), np.float32), np.empty((1, out_side, out_side, c), np.float32)
        taps = median_ms(args.runs, _conv_depthwise_taps, x, w, None, *geometry, a, "none", ())
        einsum = median_ms(args.runs, _conv_depthwise_einsum, x, w, *geometry, b)
        assert np.allclose(a, b, rtol=1e-5, atol=1e-4 * float(np.abs(a).max()))
        print(f"{f'{side}x{side}x{c} {k}x{k}/{s}':<24} {taps:>12.3f} {einsum:>12.3f} {taps / einsum:>6.2f}")


if __name__ == "__main__":
    main()
