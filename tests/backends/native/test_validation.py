"""The library validates every geometry against the buffers it is given before any kernel runs: hostile values
(what a crafted file could hand it) are a ValueError naming the problem, never an out-of-bounds access. CI runs these
under AddressSanitizer and UndefinedBehaviorSanitizer too."""

from __future__ import annotations

import numpy as np
import pytest

BIG = 2**40

# (n, h, w, c, o, kh, kw, sh, sw, pt, pb, pl, pr, dh, dw, ho, wo, groups, layout) of a valid 3x3 convolution
GOOD = (1, 6, 6, 4, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6, 6, 1, 0)


def _conv(lib, geometry, x_len=6 * 6 * 4, w_len=9 * 4 * 8, b_len=8, y_len=6 * 6 * 8, act=(0, 0.0, 0.0)):
    x, w, y = np.zeros(x_len, np.float32), np.zeros(w_len, np.float32), np.zeros(y_len, np.float32)
    b = None if b_len is None else np.zeros(b_len, np.float32)
    lib.conv2d(x, w, b, y, geometry, *act)


def _with(**changes):
    names = "n h w c o kh kw sh sw pt pb pl pr dh dw ho wo groups layout".split()
    return tuple(changes.get(k, v) for k, v in zip(names, GOOD))


def test_a_valid_geometry_runs(lib):
    _conv(lib, GOOD)


@pytest.mark.parametrize("geometry,message", [
    (_with(ho=7), "output size"),
    (_with(wo=BIG), "output size"),
    (_with(c=5), "input holds"),
    (_with(o=9, ), "weight holds"),
    (_with(n=2), "input holds"),
    (_with(kh=0), "kernel"),
    (_with(sh=-1), "kernel"),
    (_with(pt=-1), "padding"),
    (_with(pl=BIG), "padding"),
    (_with(dh=2**30, kh=4), "kernel"),
    (_with(h=2**31, w=2**31, c=2**31, ho=2**31 + 1), "overflow|holds|out of range|output size"),
    (_with(groups=2), "groups"),
    (_with(groups=3), "groups"),
    (_with(layout=7), "layout"),
    (_with(layout=1), "weight holds"),  # panels of 16 columns: 8 outputs need 9 * 4 * 16 values
    (_with(groups=4, o=4, layout=1), "layout"),  # depthwise weights have one layout
    (_with(n=0), "out of range"),
])
def test_a_hostile_convolution_geometry_is_refused(lib, geometry, message):
    with pytest.raises(ValueError, match=message):
        _conv(lib, geometry)


def test_short_buffers_are_refused(lib):
    with pytest.raises(ValueError, match="bias holds"):
        _conv(lib, GOOD, b_len=7)
    with pytest.raises(ValueError, match="output holds"):
        _conv(lib, GOOD, y_len=6 * 6 * 8 - 1)
    with pytest.raises(ValueError, match="activation"):
        _conv(lib, GOOD, act=(99, 0.0, 0.0))


def test_overlapping_and_non_float_buffers_are_refused(lib):
    x = np.zeros(6 * 6 * 4 + 6 * 6 * 8, np.float32)
    w = np.zeros(9 * 4 * 8, np.float32)
    with pytest.raises(ValueError, match="overlaps"):
        lib.conv2d(x, w, None, x[10:], GOOD, 0, 0.0, 0.0)
    with pytest.raises(ValueError, match="C-contiguous"):
        lib.conv2d(x[::2], w, None, np.zeros(400, np.float32), GOOD, 0, 0.0, 0.0)
    with pytest.raises(ValueError, match="writable"):
        ro = np.zeros(6 * 6 * 8, np.float32)
        ro.flags.writeable = False
        lib.conv2d(x, w, None, ro, GOOD, 0, 0.0, 0.0)
    with pytest.raises(ValueError, match="float32"):
        lib.binary(0, np.zeros(3, np.uint8), np.zeros(3, np.uint8), np.zeros(3, np.uint8), 0, 0.0, 0.0)


@pytest.mark.parametrize("geometry,message", [
    ((1, 8, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1, 4, 4), None),
    ((1, 8, 8, 4, 3, 3, 2, 2, 2, 1, 1, 1, 4, 4), "padding"),
    ((1, 8, 8, 4, 3, 3, 2, 2, 1, 1, 1, 1, 9, 4), "outside"),
    ((1, 8, 8, 4, 3, 3, 0, 2, 1, 1, 1, 1, 4, 4), "out of range"),
    ((1, 8, 8, 5, 3, 3, 2, 2, 1, 1, 1, 1, 4, 4), "input holds"),
])
def test_pooling_geometry_is_checked(lib, geometry, message):
    x, y = np.zeros(8 * 8 * 4, np.float32), np.zeros(4 * 4 * 4, np.float32)
    if message is None:
        lib.pool2d(x, y, geometry, lib.POOL_MAX, 0.0)
    else:
        with pytest.raises(ValueError, match=message):
            lib.pool2d(x, y, geometry, lib.POOL_MAX, 0.0)


def test_elementwise_lengths_are_checked(lib):
    a, y = np.zeros(12, np.float32), np.zeros(12, np.float32)
    with pytest.raises(ValueError, match="divide"):
        lib.binary(lib.ADD, a, np.zeros(5, np.float32), y, 0, 0.0, 0.0)
    with pytest.raises(ValueError, match="differ"):
        lib.binary(lib.ADD, np.zeros(11, np.float32), a, y, 0, 0.0, 0.0)
    base = np.zeros(13, np.float32)
    with pytest.raises(ValueError, match="overlap"):
        lib.binary(lib.ADD, base[:12], a, base[1:], 0, 0.0, 0.0)
    with pytest.raises(ValueError, match="sizes"):
        lib.mean_rows(a, np.zeros(4, np.float32), 1, 4, 4)
    with pytest.raises(ValueError, match="unknown"):
        lib.binary(7, a, a, y, 0, 0.0, 0.0)
