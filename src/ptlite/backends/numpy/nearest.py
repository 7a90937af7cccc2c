"""Nearest-neighbour upsampling of 1-D [N, C, L] and 3-D [N, C, D, H, W] signals, with PyTorch's source indices
(upsample.py's nearest_index, as for 2-D)."""

from __future__ import annotations

import math

import numpy as np

from ptlite.backends.numpy import kernel

from .upsample import nearest_index


def _sizes(input: np.ndarray, rank: int, output_size, scale_factors) -> tuple[list[int], list]:
    """Output sizes of the last `rank` axes and the scales handed to the index arithmetic (None: from sizes)."""
    if input.ndim != rank + 2:
        raise ValueError(f"upsample_nearest{rank}d expects a {rank + 2}-D input, got shape {input.shape}")
    if output_size is not None:
        if len(output_size) != rank:
            raise ValueError(f"upsample_nearest{rank}d: output_size must have {rank} values, got {output_size}")
        return [int(s) for s in output_size], [None] * rank
    if scale_factors is None or len(scale_factors) != rank:
        raise ValueError(f"upsample_nearest{rank}d: give output_size or {rank} scale factors")
    scales = [float(s) for s in scale_factors]
    return [math.floor(n * s) for n, s in zip(input.shape[2:], scales)], scales


def _nearest(x: np.ndarray, sizes: list[int], scales: list) -> np.ndarray:
    for axis, (size, scale) in enumerate(zip(sizes, scales), start=2):
        x = x.take(nearest_index(x.shape[axis], size, scale), axis=axis)
    return x


@kernel("aten::upsample_nearest1d.vec")
def upsample_nearest1d_vec(input, output_size, scale_factors):
    return _nearest(input, *_sizes(input, 1, output_size, scale_factors))


@kernel("aten::upsample_nearest1d")
def upsample_nearest1d(self, output_size, scales=None):
    return _nearest(self, _sizes(self, 1, output_size, None)[0], [scales])


@kernel("aten::upsample_nearest3d.vec")
def upsample_nearest3d_vec(input, output_size, scale_factors):
    return _nearest(input, *_sizes(input, 3, output_size, scale_factors))


@kernel("aten::upsample_nearest3d")
def upsample_nearest3d(self, output_size, scales_d=None, scales_h=None, scales_w=None):
    return _nearest(self, _sizes(self, 3, output_size, None)[0], [scales_d, scales_h, scales_w])
