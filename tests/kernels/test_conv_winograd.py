"""Winograd F(4x4, 3x3) and F(2x2, 3x3) convolution against PyTorch (float64 reference): sizes that are and are not
multiples of the tile, padding, batches, fused activations, channels-last inputs; and its rounding error stays
small. Every operator: ptlite::conv2d_winograd_v2 (points 0, 1, -1, 2, -1/2, what the WINOGRAD pass writes for large
images), ptlite::conv2d_winograd (Lavin & Gray's points, in files written before) and ptlite::conv2d_winograd_2x2
(F(2x2, 3x3), the native lowering's for smaller images)."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import compare, op, randn, torch

from ptlite.backends.numpy._layout import is_channels_last
from ptlite.backends.numpy.winograd import AT, AT_2X2, BT, BT_2X2, G_2X2, LAVIN_G, G, pack_winograd_weight

F = torch.nn.functional

# operator -> how its weight is packed
VARIANTS = {"ptlite::conv2d_winograd_v2": lambda w: pack_winograd_weight(w),
            "ptlite::conv2d_winograd": lambda w: pack_winograd_weight(w, LAVIN_G),
            "ptlite::conv2d_winograd_2x2": lambda w: pack_winograd_weight(w, G_2X2)}


def reference(x, w, b, padding):
    ref = F.conv2d(torch.from_numpy(np.ascontiguousarray(x)).double(), torch.from_numpy(w).double(),
                   None if b is None else torch.from_numpy(b).double(), 1, padding)
    return ref


@pytest.mark.parametrize("shape,o,padding", [
    ((1, 16, 56, 56), 24, 1), ((2, 8, 9, 13), 4, 1), ((1, 4, 5, 5), 4, 0), ((1, 6, 3, 3), 5, 1),
    ((1, 3, 8, 8), 2, (2, 0)), ((1, 32, 28, 28), 32, 1)])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("name", VARIANTS)
def test_winograd_matches_torch(name, shape, o, padding, bias, rng):
    x = randn(rng, *shape)
    w = (rng.standard_normal((o, shape[1], 3, 3)) * np.sqrt(2 / (9 * shape[1]))).astype(np.float32)
    b = randn(rng, o) if bias else None
    ph, pw = padding if isinstance(padding, tuple) else (padding, padding)
    ref = reference(x, w, b, (ph, pw))
    for layout, inp in (("NCHW", x), ("channels-last", np.ascontiguousarray(x.transpose(0, 2, 3, 1))
                                      .transpose(0, 3, 1, 2))):
        ours = op(name)(inp, VARIANTS[name](w), b, [ph, ph, pw, pw])
        compare(f"{name} {shape} -> {o} {layout}", ours, ref.float(), tol=2e-5)
        assert ours.shape[2] * ours.shape[3] == 1 or is_channels_last(ours)


def test_winograd_fused_activation_and_rounding_error(rng):
    x = randn(rng, 1, 64, 56, 56)
    w = (rng.standard_normal((64, 64, 3, 3)) * np.sqrt(2 / 576)).astype(np.float32)
    b = randn(rng, 64)
    ref = reference(x, w, b, 1)
    ours = op("ptlite::conv2d_winograd_v2")(x, pack_winograd_weight(w), b, [1, 1, 1, 1], "clamp", [0.0, 6.0])
    compare("ptlite::conv2d_winograd_v2 + relu6", ours, F.relu6(ref).float(), tol=2e-5)
    errors = {}
    for name, pack in VARIANTS.items():
        plain = op(name)(x, pack(w), b, [1, 1, 1, 1])
        errors[name] = float(np.abs(plain - ref.numpy()).max() / np.abs(ref.numpy()).max())
        assert errors[name] < 2e-5, f"{name} rounding error {errors[name]:.2e} relative to the largest output"
    # the reason for v2's points: a lower rounding error than Lavin & Gray's (1.5-3.5x in benchmarks/bench_winograd.py)
    assert errors["ptlite::conv2d_winograd_v2"] < 0.8 * errors["ptlite::conv2d_winograd"], errors
    # F(2x2, 3x3)'s transforms scale little: its error is below F(4x4)'s
    assert errors["ptlite::conv2d_winograd_2x2"] < errors["ptlite::conv2d_winograd_v2"], errors


@pytest.mark.parametrize("bt,g,at", [(BT, G, AT), (BT_2X2, G_2X2, AT_2X2)], ids=["4x4", "2x2"])
def test_winograd_matrices_are_exact(bt, g, at):
    # Bt, G and At compute an m-wide correlation of an (m + 2)-wide input with a 3-tap filter exactly: every (input,
    # filter) basis pair in float64 gives the correlation to rounding
    size, tile = len(bt), len(at)
    for i in range(size):
        for k in range(3):
            d, f = np.eye(size)[i], np.eye(3)[k]
            y = at.astype(np.float64) @ ((g @ f) * (bt.astype(np.float64) @ d))
            want = [f[j] if 0 <= (j := i - t) < 3 else 0.0 for t in range(tile)]
            assert np.abs(y - want).max() < 1e-12, (i, k, y, want)


def test_winograd_rejects_mismatched_weight(rng):
    with pytest.raises(ValueError, match="does not match the packed weight"):
        op("ptlite::conv2d_winograd_v2")(randn(rng, 1, 4, 8, 8), np.zeros((36, 5, 4), np.float32), None, [1, 1, 1, 1])
    with pytest.raises(ValueError, match="expected \\(36, 4, O\\)"):  # an F(2x2) weight given to F(4x4)
        op("ptlite::conv2d_winograd_v2")(randn(rng, 1, 4, 8, 8), np.zeros((16, 4, 4), np.float32), None, [1, 1, 1, 1])
    with pytest.raises(ValueError, match="expected \\(16, 4, O\\)"):  # an F(4x4) weight given to F(2x2)
        op("ptlite::conv2d_winograd_2x2")(randn(rng, 1, 4, 8, 8), np.zeros((36, 4, 4), np.float32), None,
                                          [1, 1, 1, 1])
    with pytest.raises(ValueError, match="needs a 3x3 kernel"):
        pack_winograd_weight(np.zeros((4, 4, 5, 5), np.float32))


def test_winograd_float16_is_transformed_in_float32(rng):
    # The transforms scale values by up to ~100 (input) and ~360 (output): done in float16 they cost 1.3e-2 here.
    # In float32 what is left is the transformed weight's own float16 rounding, amplified by the output transform
    # (~4e-3), which is why the WINOGRAD pass leaves float16 convolutions to im2col.
    x = randn(rng, 1, 32, 28, 28)
    w = (rng.standard_normal((32, 32, 3, 3)) * np.sqrt(2 / 288)).astype(np.float32)
    x16, w16 = x.astype(np.float16), w.astype(np.float16)
    ref = reference(x16.astype(np.float32), w16.astype(np.float32), None, 1).numpy()
    ours = op("ptlite::conv2d_winograd_v2")(x16, pack_winograd_weight(w16), None, [1, 1, 1, 1])
    assert ours.dtype == np.float16
    error = float(np.abs(ours.astype(np.float64) - ref).max() / np.abs(ref).max())
    assert error < 6e-3, f"float16 Winograd error {error:.2e} relative to the largest output (float16 eps 9.8e-4)"
