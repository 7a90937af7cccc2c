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
    (_with(layout=2), "weight holds"),  # Winograd's transformed weight: 36 * 4 * 8 values
    (_with(layout=2, sh=2, ho=3), "Winograd"),
    (_with(layout=2, kh=5, kw=5, pt=2, pb=2, pl=2, pr=2), "Winograd"),
    (_with(layout=2, dh=2, pt=2, pb=2, ho=6), "Winograd"),
    (_with(groups=4, o=4, layout=2), "layout"),
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


# ------------------------------------------------------------------------------------------------ plans

def _plan(lib, steps, lengths, writable):
    """make_plan on steps given as (kind, in0, in1, in2, out, ints, floats) with refs (buf, off, len)."""
    ints, floats = [], []
    for kind, in0, in1, in2, out, params, fl in steps:
        row = [kind, *in0, *in1, *in2, *out, *params]
        ints.append(row + [0] * (lib.STEP_INTS - len(row)))
        floats.append(list(fl))
    return lib.make_plan(np.array(ints, np.int64).tobytes(), np.array(floats, np.float64).tobytes(),
                         np.array(lengths, np.int64).tobytes(), np.array(writable, np.uint8).tobytes())


NONE = (-1, 0, 0)
RELU = (0.0, float("inf"), 0.0)


def _add(a, b, out, images=1):
    return (3, a, b, NONE, out, [0, 1, images], RELU)  # STEP_BINARY, ADD, relu, images


def test_a_valid_plan_runs(lib):
    plan = _plan(lib, [_add((1, 0, 8), (2, 0, 8), (0, 8, 8)), _add((0, 8, 8), (0, 8, 8), (0, 0, 8))],
                 [16, 8, 8], [1, 0, 0])
    arena, a, b = np.zeros(16, np.float32), np.arange(8, dtype=np.float32) - 4, np.ones(8, np.float32)
    lib.run_plan(plan, [arena, a, b])
    np.testing.assert_array_equal(arena[:8], 2 * np.maximum(a + b, 0))
    with pytest.raises(ValueError, match="buffers given"):
        lib.run_plan(plan, [arena, a])
    with pytest.raises(ValueError, match="holds 4 floats"):
        lib.run_plan(plan, [arena, a[:4], b])


@pytest.mark.parametrize("steps,lengths,writable,message", [
    ([_add((1, 0, 8), (2, 0, 8), (0, 12, 8))], [16, 8, 8], [1, 0, 0], "outside its buffer"),
    ([_add((1, -8, 8), (2, 0, 8), (0, 0, 8))], [16, 8, 8], [1, 0, 0], "outside its buffer"),
    ([_add((1, 0, 8), (5, 0, 8), (0, 0, 8))], [16, 8, 8], [1, 0, 0], "outside its buffer"),
    ([_add((1, 0, 8), (2, 0, 8), (0, 2**62, 8))], [16, 8, 8], [1, 0, 0], "outside its buffer"),
    ([_add((1, 0, 8), (2, 0, 8), (1, 0, 8))], [16, 8, 8], [1, 0, 0], "read-only"),
    ([_add((0, 0, 8), (2, 0, 8), (0, 4, 8))], [16, 8, 8], [1, 0, 0], "partly overlaps"),
    ([_add((1, 0, 8), (2, 0, 3), (0, 0, 8))], [16, 8, 8], [1, 0, 0], "lengths do not match"),
    ([_add((1, 0, 8), (2, 0, 8), (0, 0, 8), images=0)], [16, 8, 8], [1, 0, 0], "lengths do not match"),
    ([_add((1, 0, 8), (2, 0, 2), (0, 0, 8), images=3)], [16, 8, 8], [1, 0, 0], "lengths do not match"),
    ([_add((1, 0, 8), (2, 0, 4), (0, 0, 8), images=2)], [16, 8, 8], [1, 0, 0], None),  # a row per image
    ([(6, (1, 0, 8), NONE, NONE, (0, 0, 16), [1, 2, 2, 2, 4, 2], (0, 0, 0))], [16, 8, 8], [1, 0, 0], "table"),
    ([(6, (1, 0, 8), (2, 0, 7), NONE, (0, 0, 16), [1, 2, 2, 2, 2, 2], (0, 0, 0))], [16, 8, 8], [1, 0, 0],
     "table"),
    ([(6, (1, 0, 8), (2, 0, 20), NONE, (0, 0, 8), [1, 2, 2, 2, 3, 2], (0, 0, 0))], [16, 8, 20], [1, 0, 0],
     "output holds"),
    ([(6, (1, 0, 8), (2, 0, 20), NONE, (0, 0, 12), [1, 2, 2, 2, 3, 2], (0, 0, 0))], [16, 8, 20], [1, 0, 0], None),
    ([(99, (1, 0, 8), NONE, NONE, (0, 0, 8), [], (0, 0, 0))], [16, 8, 8], [1, 0, 0], "unknown step kind"),
    # rows (7): softmax / layer norm of 2 x 4, a weight of the wrong length, rows past the input
    ([(7, (1, 0, 8), NONE, NONE, (0, 0, 8), [0, 2, 4], (0, 0, 0))], [16, 8, 8], [1, 0, 0], None),
    ([(7, (1, 0, 8), (2, 0, 3), NONE, (0, 0, 8), [1, 2, 4], (1e-5, 0, 0))], [16, 8, 8], [1, 0, 0], "scale and shift"),
    ([(7, (1, 0, 8), NONE, NONE, (0, 0, 12), [0, 3, 4], (0, 0, 0))], [16, 8, 8], [1, 0, 0], "do not fit"),
    # copy (8): a transpose of 2 x 4, one whose strides reach past its input, one that overlaps its output
    ([(8, (1, 0, 8), NONE, NONE, (0, 0, 8), [2, 4, 2, 1, 1, 1, 1, 1, 4, 0, 0, 0, 0], (0, 0, 0))], [16, 8, 8],
     [1, 0, 0], None),
    ([(8, (1, 0, 8), NONE, NONE, (0, 0, 8), [2, 4, 2, 1, 1, 1, 1, 1, 5, 0, 0, 0, 0], (0, 0, 0))], [16, 8, 8],
     [1, 0, 0], "copy: reads"),
    ([(8, (0, 0, 8), NONE, NONE, (0, 4, 8), [1, 8, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0], (0, 0, 0))], [16, 8, 8],
     [1, 0, 0], "overlaps"),
    # attention (9): q, k, v (1, 1, 2, 4) with a mask (2, 2); a mask stride past it; a mask outside its buffer
    ([(9, (1, 0, 8), (1, 0, 8), (1, 0, 8), (0, 0, 8), [1, 1, 2, 2, 4, 4, 0, 0, 0, 2, 1, 2, 0, 4], (0.5, 0, 0))],
     [16, 8, 4], [1, 0, 0], None),
    ([(9, (1, 0, 8), (1, 0, 8), (1, 0, 8), (0, 0, 8), [1, 1, 2, 2, 4, 4, 0, 0, 0, 3, 1, 2, 0, 4], (0.5, 0, 0))],
     [16, 8, 4], [1, 0, 0], "mask reaches"),
    ([(9, (1, 0, 8), (1, 0, 8), (1, 0, 8), (0, 0, 8), [1, 1, 2, 2, 4, 4, 0, 0, 0, 2, 1, 2, 2, 4], (0.5, 0, 0))],
     [16, 8, 4], [1, 0, 0], "mask outside"),
    ([(9, (1, 0, 8), (1, 0, 8), (1, 0, 8), (0, 0, 8), [1, 1, 2, 3, 4, 4, 0, 0, 0, 0, 0, -1, 0, 0], (0.5, 0, 0))],
     [16, 8, 4], [1, 0, 0], "shorter than"),
    # broadcast (10): (2, 4) + a row of 4; a stride past the row; an overlap. reduce (11): (2, 4) summed; too long
    ([(10, (1, 0, 8), (2, 0, 4), NONE, (0, 0, 8), [0, 0, 2, 2, 4, 1, 1, 1, 1, 4, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0],
       (0, float("inf"), 0))], [16, 8, 4], [1, 0, 0], None),
    ([(10, (1, 0, 8), (2, 0, 4), NONE, (0, 0, 8), [0, 0, 2, 2, 4, 1, 1, 1, 1, 4, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0],
       (0, float("inf"), 0))], [16, 8, 4], [1, 0, 0], "reads past"),
    ([(10, (0, 0, 8), (2, 0, 4), NONE, (0, 4, 8), [0, 0, 2, 2, 4, 1, 1, 1, 1, 4, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0],
       (0, float("inf"), 0))], [16, 8, 4], [1, 0, 0], "overlaps"),
    ([(11, (1, 0, 8), NONE, NONE, (0, 0, 4), [1, 2, 4], (1.0, 0, 0))], [16, 8, 4], [1, 0, 0], None),
    ([(11, (1, 0, 8), NONE, NONE, (0, 0, 4), [1, 3, 4], (1.0, 0, 0))], [16, 8, 4], [1, 0, 0], "do not fit"),
    # rnn (12): a one-layer Elman RNN of 2 steps (weights 12 floats, h0 2); short weights; a c0 for a non-LSTM
    ([(12, (1, 0, 4), (2, 0, 12), (3, 0, 2), (0, 0, 4), [2, 2, 1, 2, 2, 1, 1, 0, -1, 0, 0], (0, 0, 0))],
     [16, 4, 12, 2], [1, 0, 0, 0], None),
    ([(12, (1, 0, 4), (2, 0, 11), (3, 0, 2), (0, 0, 4), [2, 2, 1, 2, 2, 1, 1, 0, -1, 0, 0], (0, 0, 0))],
     [16, 4, 12, 2], [1, 0, 0, 0], "do not fit"),
    ([(12, (1, 0, 4), (2, 0, 12), (3, 0, 2), (0, 0, 4), [2, 2, 1, 2, 2, 1, 1, 0, 3, 0, 2], (0, 0, 0))],
     [16, 4, 12, 2], [1, 0, 0, 0], "do not fit"),
    # slice (13): rows of 4 into rows of 6 at offset 2; a slice past its rows; rows past the output
    ([(13, (1, 0, 8), NONE, NONE, (0, 0, 12), [2, 4, 6, 2], (0, 0, 0))], [16, 8, 8], [1, 0, 0], None),
    ([(13, (1, 0, 8), NONE, NONE, (0, 0, 12), [2, 4, 6, 3], (0, 0, 0))], [16, 8, 8], [1, 0, 0], "does not fit"),
    ([(13, (1, 0, 8), NONE, NONE, (0, 0, 12), [2, 4, 7, 2], (0, 0, 0))], [16, 8, 8], [1, 0, 0], "do not fit"),
    # pad (15): (2, 4) -> (3, 6) shifted by (1, 1); output longer than its buffer; an input longer than its buffer
    ([(15, (1, 0, 8), NONE, NONE, (0, 0, 18), [2, 2, 4, 1, 1, 1, 1, 3, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0], (0, 0, 0))],
     [32, 8, 8], [1, 0, 0], None),
    ([(15, (1, 0, 8), NONE, NONE, (0, 0, 18), [2, 2, 4, 1, 1, 1, 1, 4, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0], (0, 0, 0))],
     [32, 8, 8], [1, 0, 0], "do not fit"),
    ([(15, (1, 0, 8), NONE, NONE, (0, 0, 18), [2, 3, 4, 1, 1, 1, 1, 3, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0], (0, 0, 0))],
     [32, 8, 8], [1, 0, 0], "do not fit"),
    ([(15, (1, 0, 8), NONE, NONE, (0, 0, 18), [7, 2, 4, 1, 1, 1, 1, 3, 6, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0], (0, 0, 0))],
     [32, 8, 8], [1, 0, 0], "dimensions"),
    ([(15, (1, 0, 8), NONE, NONE, (0, 0, 18), [2, 2, 4, 1, 1, 1, 1, 3, 6, 1, 1, 1, 1, 2**40, 1, 0, 0, 0, 0],
       (0, 0, 0))], [32, 8, 8], [1, 0, 0], "invalid sizes"),
    # matmul (14): (2, 4) @ (4, 2); b read transposed; b's strides past it; a batch stride past a; an overlap
    ([(14, (1, 0, 8), (2, 0, 8), NONE, (0, 0, 4), [1, 2, 4, 2, 8, 4, 0, 2, 1], (0, 0, 0))], [16, 8, 8], [1, 0, 0],
     None),
    ([(14, (1, 0, 8), (2, 0, 8), NONE, (0, 0, 4), [1, 2, 4, 2, 8, 4, 0, 1, 4], (0, 0, 0))], [16, 8, 8], [1, 0, 0],
     None),
    ([(14, (1, 0, 8), (2, 0, 8), NONE, (0, 0, 4), [1, 2, 4, 2, 8, 4, 0, 2, 5], (0, 0, 0))], [16, 8, 8], [1, 0, 0],
     "shorter than"),
    ([(14, (1, 0, 8), (2, 0, 8), NONE, (0, 0, 8), [2, 2, 4, 2, 5, 4, 0, 2, 1], (0, 0, 0))], [16, 8, 8], [1, 0, 0],
     "shorter than"),
    ([(14, (1, 0, 8), (2, 0, 8), NONE, (0, 0, 4), [1, 2, 4, 2, 8, 4, 0, -2, 1], (0, 0, 0))], [16, 8, 8], [1, 0, 0],
     "too large"),
    ([(14, (0, 0, 8), (2, 0, 8), NONE, (0, 4, 4), [1, 2, 4, 2, 8, 4, 0, 2, 1], (0, 0, 0))], [16, 8, 8], [1, 0, 0],
     "overlaps"),
    ([(1, (1, 0, 8), (2, 0, 8), NONE, (0, 0, 16), [1, 2, 2, 2, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2, 3, 1, 0, 0],
       (0, 0, 0))], [16, 8, 8], [1, 0, 0], "output size"),
    ([(1, (1, 0, 8), (2, 0, 8), NONE, (0, 0, 16), [1, 2, 2, 2, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2, 2, 1, 0, 0],
       (0, 0, 0))], [16, 8, 8], [1, 0, 0], None),  # a valid 1x1 convolution, for contrast
    ([(1, (1, 0, 8), (2, 0, 8), NONE, (0, 0, 16), [1, 2, 2, 2, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2, 2, 1, 0, 0, 1],
       (0, 0, 0))], [16, 8, 8], [1, 0, 0], "NCHW"),  # an NCHW input for a 1x1 convolution: it copies no rows
    ([(1, (1, 0, 18), (2, 0, 36), NONE, (0, 0, 4), [1, 3, 3, 2, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 2, 2, 1, 0, 0, 2],
       (0, 0, 0))], [16, 18, 36], [1, 0, 0], "NCHW"),  # a planar flag of 2
    ([(1, (1, 0, 18), (2, 0, 36), NONE, (0, 0, 4), [1, 3, 3, 2, 1, 2, 2, 1, 1, 0, 0, 0, 0, 1, 1, 2, 2, 1, 0, 0, 1],
       (0, 0, 0))], [16, 18, 36], [1, 0, 0], None),  # NCHW for a 2x2 convolution of 2 channels
    # a 1x1 convolution (weight in panels) adding a residual: valid; of the wrong length; outside its buffer; over
    # part of the output; the output itself (an addition in place); with row-major weights; a malformed "none"
    *[([(1, (1, 0, 8), (2, 0, 32), NONE, (0, 0, 16), [1, 2, 2, 2, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2, 2, 1, layout, 1,
                                                      0, *res], RELU)], [48, 8, 32, 16], [1, 0, 0, 0], message)
      for layout, res, message in [
          (1, (3, 0, 16), None), (1, (3, 0, 8), "not the size"), (1, (3, 8, 16), "outside its buffer"),
          (1, (0, 8, 16), "overlaps part of its output"), (1, (0, 0, 16), None),
          (0, (3, 0, 16), "weight in panels"), (1, (-1, 4, 0), "bad residual")]],
    # the same convolution scaling its input by channel factors (images x channels: 2): valid; too long; outside its
    # buffer; over the output (valid: read before it is written); with row-major weights; a malformed "none"
    *[([(1, (1, 0, 8), (2, 0, 32), NONE, (0, 0, 16), [1, 2, 2, 2, 4, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 2, 2, 1, layout, 1,
                                                      0, -1, 0, 0, *scale], RELU)], [48, 8, 32, 2], [1, 0, 0, 0],
       message)
      for layout, scale, message in [
          (1, (3, 0, 2), None), (1, (3, 0, 3), "input scale is not"), (1, (3, 1, 2), "outside its buffer"),
          (1, (0, 0, 2), None), (0, (3, 0, 2), "1x1 stride-1"), (1, (-1, 4, 0), "bad input scale")]],
    # int8 steps, their uint8 operands 4 bytes a float. GEMM (16): 2 x 4 bytes by a packed 4 x 16 weight (64 bytes),
    # a table of 16 offsets and 16 multipliers: valid; a short weight; a table of odd length; one too short; an
    # output over its input
    *[([(16, x, (2, 0, w), (3, 0, t), out, [2, 4, 16, 4, 0, 0, 255, 0, *[0] * 15], (0, 0, 0))], [16, 2, 16, 32],
        [1, 0, 0, 0], message)
      for x, w, t, out, message in [
          ((1, 0, 2), 16, 32, (0, 0, 8), None), ((1, 0, 2), 15, 32, (0, 0, 8), "shorter than"),
          ((1, 0, 2), 16, 31, (0, 0, 8), "odd length"), ((1, 0, 2), 16, 30, (0, 0, 8), "shorter than"),
          ((0, 0, 2), 16, 32, (0, 1, 8), "overlaps")]],
    # depthwise (17): 1 x 2 x 2 x 4 bytes, 1x1 taps (4 int32), a table of 4 + 4: valid; short taps; a short output
    *[([(17, (1, 0, 4), (2, 0, taps), (3, 0, 8), (0, 0, out), [1, 2, 2, 4, 1, 1, 1, 1, 1, 1, 0, 0, 2, 2, 0, 0, 0, 255],
         (0, 0, 0))], [16, 4, 4, 8], [1, 0, 0, 0], message)
      for taps, out, message in [(4, 4, None), (3, 4, "shorter than"), (4, 3, "shorter than")]],
    # elementwise (18): an addition of 8 bytes; in place; with no second operand; a quantization of 8 floats; one
    # given a second operand; one into too few bytes; a dequantization over its own bytes
    ([(18, (1, 0, 2), (2, 0, 2), NONE, (0, 0, 2), [0, 8, 1, 1, 0, 0, 0, 0, 255], (1, 1, 1))], [16, 2, 2],
     [1, 0, 0], None),
    ([(18, (0, 0, 2), (2, 0, 2), NONE, (0, 0, 2), [0, 8, 1, 1, 0, 0, 0, 0, 255], (1, 1, 1))], [16, 2, 2],
     [1, 0, 0], None),
    ([(18, (1, 0, 2), NONE, NONE, (0, 0, 2), [0, 8, 1, 1, 0, 0, 0, 0, 255], (1, 1, 1))], [16, 2, 2],
     [1, 0, 0], "do not match its operation"),
    ([(18, (1, 0, 8), NONE, NONE, (0, 0, 2), [1, 8, 1, 1, 0, 0, 0, 0, 255], (1, 1, 1))], [16, 8], [1, 0], None),
    ([(18, (1, 0, 8), (1, 0, 8), NONE, (0, 0, 2), [1, 8, 1, 1, 0, 0, 0, 0, 255], (1, 1, 1))], [16, 8], [1, 0],
     "do not match its operation"),
    ([(18, (1, 0, 8), NONE, NONE, (0, 0, 1), [1, 8, 1, 1, 0, 0, 0, 0, 255], (1, 1, 1))], [16, 8], [1, 0],
     "shorter than"),
    ([(18, (0, 0, 2), NONE, NONE, (0, 0, 8), [3, 8, 1, 1, 0, 0, 0, 0, 255], (1, 1, 1))], [16], [1], "overlaps"),
    # max pooling of uint8 (19): 1 x 4 x 4 x 1 bytes to 2 x 2; average pooling is not taken; a short input
    *[([(19, (1, 0, x), NONE, NONE, (0, 0, 1), [1, 4, 4, 1, 2, 2, 2, 2, 0, 0, 1, 1, 2, 2, kind], (0, 0, 0))],
        [16, 4], [1, 0], message)
      for x, kind, message in [(4, 0, None), (4, 1, "max pooling only"), (3, 0, "input")]],
])
def test_a_hostile_plan_is_refused(lib, steps, lengths, writable, message):
    if message is None:
        _plan(lib, steps, lengths, writable)
        return
    with pytest.raises(ValueError, match=message):
        _plan(lib, steps, lengths, writable)


def test_an_int8_plan_runs_the_kernels(lib):
    """A plan of int8 steps (quantize, a pointwise GEMM, an in-place addition, dequantize) over uint8 bytes in a
    float32 arena gives what the kernels called one by one give."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(8 * 4).astype(np.float32)  # 8 rows of 4
    weight = rng.integers(-127, 128, (4, 16), dtype=np.int8)
    from ptlite.backends.native.quantized import pack

    packed, colsum = pack(weight)
    offsets = (rng.integers(-500, 500, 16) - 3 * colsum).astype(np.int32)
    multipliers = np.full(16, 0.004, np.float32)
    table = np.concatenate([offsets.view(np.float32), multipliers])
    want_q = np.empty(32, np.uint8)
    lib.qelementwise(1, x, None, want_q, (32, 1, 1, 0, 0, 3, 0, 255), (1.0, 1.0, 1 / 0.05))
    want_y = np.empty((8, 16), np.uint8)
    lib.qgemm(want_q.reshape(8, 4), packed, offsets, multipliers, want_y, (8, 4, 16, 4, 7, 0, 255))
    lib.qelementwise(0, want_y.reshape(-1), want_y.reshape(-1), want_y.reshape(-1), (128, 1, 1, 7, 7, 9, 0, 255),
                     (0.1, 0.1, 1 / 0.3))
    want = np.empty(128, np.float32)
    lib.qelementwise(3, want_y.reshape(-1), None, want, (128, 1, 1, 9, 0, 0, 0, 255), (0.3, 1.0, 1.0))
    steps = [(18, (1, 0, 32), NONE, NONE, (0, 0, 8), [1, 32, 1, 1, 0, 0, 3, 0, 255], (1.0, 1.0, 1 / 0.05)),
             (16, (0, 0, 8), (2, 0, packed.size // 4), (3, 0, 32), (0, 16, 32),
              [8, 4, 16, 4, 7, 0, 255, 0, *[0] * 15], (0, 0, 0)),
             (18, (0, 16, 32), (0, 16, 32), NONE, (0, 16, 32), [0, 128, 1, 1, 7, 7, 9, 0, 255], (0.1, 0.1, 1 / 0.3)),
             (18, (0, 16, 32), NONE, NONE, (4, 0, 128), [3, 128, 1, 1, 9, 0, 0, 0, 255], (0.3, 1.0, 1.0))]
    plan = _plan(lib, steps, [48, 32, packed.size // 4, 32, 128], [1, 0, 0, 0, 1])
    arena, y = np.zeros(48, np.float32), np.zeros(128, np.float32)
    lib.run_plan(plan, [arena, x, packed.view(np.float32), table, y])
    np.testing.assert_array_equal(arena[16:48].view(np.uint8), want_y.reshape(-1))
    np.testing.assert_array_equal(y, want)


def test_resize_geometry_and_table_are_checked(lib):
    x, y = np.zeros(2 * 3 * 4, np.float32), np.zeros(4 * 6 * 4, np.float32)
    table = np.zeros(4 * (4 + 6), np.float32)
    lib.resize(x, table, y, (1, 2, 3, 4, 4, 6))
    with pytest.raises(ValueError, match="table"):
        lib.resize(x, table[:-1], y, (1, 2, 3, 4, 4, 6))
    with pytest.raises(ValueError, match="output holds"):
        lib.resize(x, table, y[:-1], (1, 2, 3, 4, 4, 6))
    with pytest.raises(ValueError, match="input holds"):
        lib.resize(x[:-1], table, y, (1, 2, 3, 4, 4, 6))
    with pytest.raises(ValueError, match="out of range"):
        lib.resize(x, table, y, (1, 2, 3, 4, 0, 6))
    with pytest.raises(ValueError, match="overlaps"):
        lib.resize(y[:24], table, y, (1, 2, 3, 4, 4, 6))
    # hostile indices (past the image, negative, NaN) are clamped into it, never read outside
    hostile = np.array([1e9, np.nan, 0.25, 0.75, -5, 2**31, 0.5, 0.5] * 5, np.float32)
    lib.resize(x + 1, hostile, y, (1, 2, 3, 4, 4, 6))
    np.testing.assert_array_equal(y, 1.0)


def test_softmax_and_layer_norm_sizes_are_checked(lib):
    x, y = np.zeros(12, np.float32), np.zeros(12, np.float32)
    lib.softmax(x, y, 3, 4)
    lib.layer_norm(x, np.ones(4, np.float32), None, y, 3, 4, 1e-5)
    lib.softmax(x, x, 3, 4)  # in place
    with pytest.raises(ValueError, match="rows"):
        lib.softmax(x, y, 4, 4)
    with pytest.raises(ValueError, match="weight and bias"):
        lib.layer_norm(x, np.ones(3, np.float32), None, y, 3, 4, 1e-5)
    with pytest.raises(ValueError, match="bad sizes"):
        lib.softmax(x, y, 0, 4)
    with pytest.raises(ValueError, match="bad sizes"):
        lib.layer_norm(x, None, None, y, 3, 4, float("nan"))
    with pytest.raises(ValueError, match="overlaps"):
        base = np.zeros(13, np.float32)
        lib.softmax(base[:12], base[1:], 3, 4)


def test_a_plan_holds_its_read_only_buffers(lib):
    """hold_buffer keeps a weight in the plan (a run then passes None there); only read-only buffers of the plan's
    length are taken."""
    plan = _plan(lib, [_add((1, 0, 8), (2, 0, 8), (0, 0, 8))], [16, 8, 8], [1, 0, 0])
    arena, a, b = np.zeros(16, np.float32), np.arange(8, dtype=np.float32) - 4, np.ones(8, np.float32)
    lib.hold_buffer(plan, 2, b)
    lib.run_plan(plan, [arena, a, None])
    np.testing.assert_array_equal(arena[:8], np.maximum(a + b, 0))
    with pytest.raises(ValueError, match="not a read-only buffer"):
        lib.hold_buffer(plan, 0, arena)
    with pytest.raises(ValueError, match="not a read-only buffer"):
        lib.hold_buffer(plan, 3, b)
    with pytest.raises(ValueError, match="the plan needs 8"):
        lib.hold_buffer(plan, 1, b[:4])
    with pytest.raises(ValueError, match="buffer 1 must be"):
        lib.run_plan(plan, [arena, None, None])  # not held: the run must give it
