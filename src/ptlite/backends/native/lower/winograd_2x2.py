"""Winograd F(2x2, 3x3) for the 3x3 convolutions too small for the reference's F(4x4, 3x3) (WINOGRAD_2X2): the
same candidates as the WINOGRAD pass (prepacked, stride 1, undilated, dense, at least MIN_CHANNELS channels each
way), with an output at least MIN_SIZE_2X2 pixels high and wide but under WINOGRAD's MIN_SIZE, become
ptlite::conv2d_winograd_2x2, weight stored transformed (16, C, O).

F(2x2, 3x3) takes 2.25x fewer multiplications than the direct convolution (16 per tile and channel pair instead of
36) for a weight 16/9 of the direct one's; F(4x4)'s is 4x, read once per block of tiles, which a small image has too
few of to share (docs/decisions.md, "Winograd F(2x2, 3x3) on small images", has the measurements). Its transforms
are additions only, so its rounding error is below F(4x4)'s. Runs after WINOGRAD; blocking WINOGRAD blocks it too.
"""

from __future__ import annotations

import numpy as np

from ptlite.backends.numpy.lower.winograd import MIN_SIZE, Winograd
from ptlite.ops import CONV2D_WINOGRAD_2X2

MIN_SIZE_2X2 = 10  # output height and width (pixels) from which F(2x2, 3x3) is used, below MIN_SIZE


class Winograd2x2(Winograd):
    name = "winograd_2x2"

    def variant(self, height: int, width: int) -> tuple[str, np.ndarray, str] | None:
        from ptlite.backends.numpy.winograd import G_2X2

        return (CONV2D_WINOGRAD_2X2, G_2X2, "winograd_2x2") if MIN_SIZE_2X2 <= min(height, width) < MIN_SIZE else None
