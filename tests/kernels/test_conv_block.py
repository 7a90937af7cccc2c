"""ptlite::conv2d_pointwise_depthwise (a 1x1 convolution feeding a depthwise one, run in row bands) against
PyTorch's two convolutions with their activations: strides, kernel sizes, dilation, asymmetric padding, batches,
images split into many bands (the kernel's overlap rows reused), NCHW and channels-last inputs, out=, 3-D input."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import compare, op, randn, torch

from ptlite.backends.numpy import _derived, conv_block
from ptlite.backends.numpy._layout import is_channels_last
from ptlite.ops.layouts import pack_conv2d_weight

F = torch.nn.functional
ACT = {"none": ([], lambda t: t), "relu": ([], F.relu), "clamp": ([0.0, 6.0], F.relu6),
       "hardswish": ([], F.hardswish), "silu": ([], F.silu)}

# (N, C, H, W), expanded channels E, kernel, stride, (top, bottom, left, right), dilation, pointwise and depthwise
# activations
CASES = [
    ((1, 4, 16, 16), 12, 3, 1, (1, 1, 1, 1), 1, "clamp", "clamp"),      # MobileNetV2 block
    ((2, 4, 15, 13), 12, 3, 2, (1, 1, 1, 1), 1, "clamp", "none"),       # stride 2, odd sizes, batch
    ((1, 6, 17, 17), 18, 5, 2, (2, 2, 2, 2), 1, "silu", "silu"),        # EfficientNet 5x5 stride 2
    ((1, 6, 12, 12), 18, 5, 1, (2, 2, 2, 2), 1, "hardswish", "hardswish"),  # MobileNetV3
    ((1, 4, 14, 14), 8, 3, 1, (2, 2, 2, 2), 2, "relu", "relu"),         # dilated
    ((1, 4, 11, 10), 8, 3, 2, (0, 1, 0, 1), 1, "none", "clamp"),        # TF-style asymmetric "same" padding
    ((1, 4, 3, 3), 8, 5, 1, (2, 2, 2, 2), 1, "none", "none"),           # kernel larger than the image
    ((1, 4, 7, 7), 8, 3, 3, (1, 1, 1, 1), 1, "relu", "none"),           # stride 3
]


def run(x, w1, b1, wd, bd, kernel, stride, pads, dilation, act1, act2, out=None):
    e = w1.shape[0]
    return op("ptlite::conv2d_pointwise_depthwise")(
        x, pack_conv2d_weight(w1, 1), b1, act1, ACT[act1][0], pack_conv2d_weight(wd, e), bd, [kernel, kernel],
        [stride, stride], list(pads), [dilation, dilation], act2, ACT[act2][0], out=out)


def reference(x, w1, b1, wd, bd, stride, pads, dilation, act1, act2):
    t = torch.from_numpy(np.ascontiguousarray(x))
    y = ACT[act1][1](F.conv2d(t, torch.from_numpy(w1), None if b1 is None else torch.from_numpy(b1)))
    top, bottom, left, right = pads
    y = F.pad(y, (left, right, top, bottom))
    y = F.conv2d(y, torch.from_numpy(wd), None if bd is None else torch.from_numpy(bd), stride, 0, dilation,
                 groups=wd.shape[0])
    return ACT[act2][1](y)


@pytest.mark.parametrize("case", CASES, ids=[f"block-{i}" for i in range(len(CASES))])
@pytest.mark.parametrize("band_bytes", [1 << 20, 1], ids=["one-band", "band-per-row"])
def test_matches_torch(case, band_bytes, rng, monkeypatch):
    monkeypatch.setattr(conv_block, "BAND_BYTES", band_bytes)
    shape, e, k, stride, pads, dilation, act1, act2 = case
    x = randn(rng, *shape)
    w1, b1 = randn(rng, e, shape[1], 1, 1) / 2, randn(rng, e)
    wd, bd = randn(rng, e, 1, k, k) / 2, randn(rng, e)
    ref = reference(x, w1, b1, wd, bd, stride, pads, dilation, act1, act2)
    for layout, inp in (("NCHW", x), ("channels-last", np.ascontiguousarray(x.transpose(0, 2, 3, 1))
                                      .transpose(0, 3, 1, 2))):
        ours = run(inp, w1, b1, wd, bd, k, stride, pads, dilation, act1, act2)
        compare(f"ptlite::conv2d_pointwise_depthwise {case} {layout} bands of {band_bytes} bytes", ours, ref)
        assert ours.shape[2] * ours.shape[3] == 1 or is_channels_last(ours), f"{case}: not channels-last"


def test_without_bias_into_out_and_unbatched(rng, monkeypatch):
    monkeypatch.setattr(conv_block, "BAND_BYTES", 1)
    x = randn(rng, 1, 4, 9, 9)
    w1, wd = randn(rng, 8, 4, 1, 1), randn(rng, 8, 1, 3, 3)
    ref = reference(x, w1, None, wd, None, 1, (1, 1, 1, 1), 1, "relu", "none")
    out = np.empty((1, 9, 9, 8), np.float32).transpose(0, 3, 1, 2)  # channels-last
    result = run(x, w1, None, wd, None, 3, 1, (1, 1, 1, 1), 1, "relu", "none", out=out)
    assert result is out
    compare("conv2d_pointwise_depthwise out=", out, ref)
    compare("conv2d_pointwise_depthwise 3-D", run(x[0], w1, None, wd, None, 3, 1, (1, 1, 1, 1), 1, "relu", "none"),
            ref[0])


def test_mismatched_weights_are_refused(rng):
    x = randn(rng, 1, 4, 6, 6)
    with pytest.raises(ValueError, match="does not match the packed weights"):
        run(x, randn(rng, 8, 5, 1, 1), None, randn(rng, 8, 1, 3, 3), None, 3, 1, (1, 1, 1, 1), 1, "none", "none")


@pytest.mark.parametrize("bounds", [(0.0, 6.0), (-1.5, 2.0), (-np.inf, 1.0), (0.5, np.inf), (-np.inf, np.inf)],
                         ids=["relu6", "clamp", "max-only", "min-only", "unbounded"])
@pytest.mark.parametrize("geometry", [((1, 4, 13, 11), 3, 1, (1, 1, 1, 1), 1), ((2, 4, 9, 12), 5, 2, (2, 2, 2, 2), 1),
                                      ((1, 4, 2, 1), 3, 2, (1, 1, 1, 1), 1), ((1, 4, 10, 10), 3, 1, (0, 2, 2, 0), 2)],
                         ids=["3x3", "5x5-stride-2-batch", "tiny-image", "dilated-asymmetric"])
def test_pointwise_clamp_with_its_bias_taken_out(bounds, geometry, rng, monkeypatch):
    """After a relu/clamp the band holds clip(g, lo - b, hi - b) and the depthwise bias rows put b's share back,
    border rows included: one-sided and two-sided bounds, large biases (|b| ~ 20, where the shift's rounding
    shows most), bands of one row, and the cached bias rows not reused for other weights of the same shape."""
    monkeypatch.setattr(conv_block, "BAND_BYTES", 1)
    shape, k, stride, pads, dilation = geometry
    lo, hi = bounds
    e = 8
    x = randn(rng, *shape)
    for scale in (1.0, 20.0, 20.0):  # the third round: new arrays, same shapes, different values
        w1, b1 = randn(rng, e, shape[1], 1, 1) / 2, randn(rng, e) * scale
        wd, bd = randn(rng, e, 1, k, k) / 2, randn(rng, e)
        t = torch.from_numpy(x)
        y = torch.clamp(F.conv2d(t, torch.from_numpy(w1), torch.from_numpy(b1)), lo, hi)
        top, bottom, left, right = pads
        ref = F.conv2d(F.pad(y, (left, right, top, bottom)), torch.from_numpy(wd), torch.from_numpy(bd), stride, 0,
                       dilation, groups=e)
        ours = op("ptlite::conv2d_pointwise_depthwise")(
            x, pack_conv2d_weight(w1, 1), b1, "clamp", [lo, hi], pack_conv2d_weight(wd, e), bd, [k, k],
            [stride, stride], list(pads), [dilation, dilation], "none", [])
        compare(f"conv2d_pointwise_depthwise clamp{bounds} {geometry} |b|~{scale}", ours, ref.numpy())


def test_plans_go_with_their_weights(rng, kernel_backend):
    """A call's plan is kept per depthwise weight and dropped when that weight is collected (a discarded Module's
    plans do not keep its weights, or a memory-mapped file, alive); a strided depthwise weight's taps are copies."""
    if kernel_backend != "numpy":
        pytest.skip("checks the NumPy kernel's own strategy")
    import gc

    x = randn(rng, 1, 4, 10, 10)
    for stride in (1, 2):
        wd = pack_conv2d_weight(randn(rng, 8, 1, 3, 3), 8)
        key = id(wd)
        op("ptlite::conv2d_pointwise_depthwise")(x, pack_conv2d_weight(randn(rng, 8, 4, 1, 1), 1), randn(rng, 8),
                                                 "clamp", [0.0, 6.0], wd, randn(rng, 8), [3, 3], [stride, stride],
                                                 [1, 1, 1, 1], [1, 1], "none", [])
        assert key in _derived._CACHE and _derived._CACHE[key][0]() is wd
        del wd
        gc.collect()
        assert key not in _derived._CACHE, f"stride {stride}: the plan outlived its weight"


def test_plans_follow_weights_changed_in_place(rng):
    """Weights a caller can still write (an in-memory program's arrays) are checked against a copy at every call:
    changing them in place changes the result, as it does for the unfused kernels."""
    x = randn(rng, 1, 4, 9, 9)
    w1, b1, wd, bd = randn(rng, 8, 4, 1, 1), randn(rng, 8), randn(rng, 8, 1, 3, 3), randn(rng, 8)
    packed_w1, packed_wd = pack_conv2d_weight(w1, 1), pack_conv2d_weight(wd, 8)

    def run_fused():
        return op("ptlite::conv2d_pointwise_depthwise")(x, packed_w1, b1, "clamp", [0.0, 6.0], packed_wd, bd, [3, 3],
                                                        [1, 1], [1, 1, 1, 1], [1, 1], "none", [])

    run_fused()
    b1 += 1.5  # in place: the shifted bounds and the depthwise bias rows depend on it
    packed_wd *= 0.5  # and the taps on this
    bd -= 2.0
    wd *= 0.5
    compare("conv2d_pointwise_depthwise after its weights changed in place", run_fused(),
            reference(x, w1, b1, wd, bd, 1, (1, 1, 1, 1), 1, "clamp", "none"))


def test_float16_with_a_large_pointwise_bias_stays_accurate(rng):
    """float16 keeps the plain bias-then-clamp path: shifting by a bias of -40 would sum values around 40 times the
    taps at half precision (steps of 0.125) where the clamped ones stay within 6 (measured: 0.12 vs 0.014)."""
    e = 8
    x = np.abs(randn(rng, 1, 4, 12, 12))
    w1 = np.full((e, 4, 1, 1), 10.0, np.float32)
    b1 = np.full(e, -40.0, np.float32)  # g + b around 0..6: inside relu6's range
    wd, bd = np.full((e, 1, 3, 3), 0.5, np.float32), np.zeros(e, np.float32)
    ref = reference(x, w1, b1, wd, bd, 1, (1, 1, 1, 1), 1, "clamp", "none").numpy()
    ours = op("ptlite::conv2d_pointwise_depthwise")(
        x.astype(np.float16), pack_conv2d_weight(w1, 1).astype(np.float16), b1.astype(np.float16), "clamp",
        [0.0, 6.0], pack_conv2d_weight(wd, e).astype(np.float16), bd.astype(np.float16), [3, 3], [1, 1],
        [1, 1, 1, 1], [1, 1], "none", [])
    error = float(np.max(np.abs(ours.astype(np.float32) - ref)))
    assert error < 0.05, f"conv2d_pointwise_depthwise float16 with bias -40: max |diff| {error:.3f} (plain path ~0.014)"
