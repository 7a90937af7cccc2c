"""The weight layouts of ptlite's prepacked operators (ops/prepacked.py) and int8 operators (ops/quantized.py):
a convolution weight (O, C/groups, kh, kw) as the kernels read it. Used wherever such operators are made (the
lowering, quantization, the front ends), so it sits with the operators' declarations; NumPy is imported only
here, when a layout is made.
"""

from __future__ import annotations

import numpy as np


def pack_conv2d_weight(weight: np.ndarray, groups: int) -> np.ndarray:
    """(O, C/groups, kh, kw) -> the layout ptlite::conv2d_prepacked consumes for these groups."""
    o, cg, kh, kw = weight.shape
    if groups == 1:
        packed = weight.transpose(2, 3, 1, 0).reshape(kh * kw * cg, o)
    elif cg == 1 and o == groups:  # depthwise
        packed = weight.reshape(o, kh * kw).T
    else:
        og = o // groups
        packed = weight.reshape(groups, og, cg, kh, kw).transpose(0, 3, 4, 2, 1).reshape(groups, kh * kw * cg, og)
    return np.ascontiguousarray(packed)


def unpack_dense_conv2d_weight(packed: np.ndarray, kernel: tuple[int, int]) -> np.ndarray:
    """The inverse of pack_conv2d_weight for groups == 1: (kh*kw*C, O) -> (O, C, kh, kw), a view."""
    kh, kw = kernel
    return packed.reshape(kh, kw, packed.shape[0] // (kh * kw), packed.shape[1]).transpose(3, 2, 0, 1)
