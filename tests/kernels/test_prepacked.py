"""Prepacked convolution / linear kernels and aten::_add_relu against PyTorch: every packed layout (groups 1,
depthwise, grouped), strides, padding, dilation, fused activations, NCHW and channels-last inputs, and the
channels-last layout of the result."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check, compare, op, randn, torch

from ptlite.backends.numpy._layout import is_channels_last
from ptlite.ops.layouts import pack_conv2d_weight

F = torch.nn.functional

# (N, C, H, W), (O, kh, kw), stride, padding, dilation, groups
CASES = [
    ((1, 16, 9, 9), (8, 1, 1), 1, 0, 1, 1),          # pointwise
    ((2, 16, 9, 9), (8, 1, 1), 2, 0, 1, 1),          # strided pointwise, batch
    ((1, 3, 17, 17), (8, 7, 7), 2, 3, 1, 1),         # stem
    ((1, 3, 32, 32), (16, 3, 3), 2, 1, 1, 1),        # mobilenet stem
    ((2, 6, 10, 11), (4, 3, 3), 1, 1, 1, 1),         # 3x3, batch, odd sizes
    ((1, 8, 12, 12), (12, 3, 3), 2, 1, 1, 4),        # grouped
    ((1, 8, 12, 12), (16, 1, 1), 1, 0, 1, 4),        # grouped pointwise
    ((1, 8, 12, 12), (8, 3, 3), 1, 1, 1, 8),         # depthwise
    ((2, 8, 13, 13), (8, 5, 5), 2, 2, 1, 8),         # depthwise 5x5 stride 2, odd size
    ((1, 8, 14, 14), (8, 3, 3), 2, 1, 1, 8),         # depthwise stride 2, even size
    ((1, 4, 9, 9), (8, 3, 3), 1, 1, 1, 4),           # channel multiplier 2 (grouped layout)
    ((1, 8, 16, 16), (8, 3, 3), 1, 2, 2, 8),         # dilated depthwise
    ((1, 6, 11, 10), (6, 3, 3), 2, 2, 2, 6),         # dilated, strided depthwise
    ((1, 6, 9, 12), (6, 3, 5), (2, 3), (1, 0), 1, 6),  # depthwise, per-axis stride and padding
    ((1, 3, 5, 5), (3, 3, 3), 3, 1, 1, 3),           # depthwise, stride 3 on a small image
    ((1, 5, 4, 4), (5, 3, 3), 1, 0, 1, 5),           # depthwise without padding
    ((1, 7, 3, 3), (7, 5, 5), 1, 1, 1, 7),           # depthwise kernel larger than image + padding
    ((1, 5, 14, 14), (6, 3, 3), 1, 4, 4, 1),         # dilated (ASPP-like)
    ((1, 4, 10, 12), (6, 1, 7), (1, 2), (0, 3), 1, 1),  # rectangular kernel, per-axis stride
    ((1, 4, 6, 6), (3, 2, 2), 3, 0, 1, 1),           # stride > kernel
    ((1, 8, 9, 9), (6, 3, 3), 1, 6, 6, 1),           # atrous, most taps in the padding: one GEMM per tap
    ((2, 8, 7, 7), (4, 3, 3), 1, 12, 12, 1),         # atrous, only the centre tap reaches the image (ASPP)
    ((1, 8, 11, 9), (4, 3, 3), 2, 6, 6, 1),          # atrous and strided, per-tap path
]

ACTIVATIONS = [("none", [], lambda t: t), ("relu", [], F.relu), ("clamp", [0.0, 6.0], F.relu6),
               ("clamp", [-1.0, 1.0], F.hardtanh), ("clamp", [-0.5, float("inf")], lambda t: t.clamp(min=-0.5)),
               ("hardswish", [], F.hardswish), ("silu", [], F.silu)]


def pair(v):
    return list(v) if isinstance(v, tuple) else [v, v]


def prepacked_conv(x, w, b, stride, padding, dilation, groups, activation="none", args=()):
    kh, kw = w.shape[2:]
    ph, pw = pair(padding)
    return op("ptlite::conv2d_prepacked")(x, pack_conv2d_weight(w, groups), b, [kh, kw], pair(stride),
                                          [ph, ph, pw, pw], pair(dilation), groups, activation, list(args))


def torch_conv(x, w, b, stride, padding, dilation, groups):
    return F.conv2d(torch.from_numpy(np.ascontiguousarray(x)), torch.from_numpy(w),
                    None if b is None else torch.from_numpy(b), pair(stride), pair(padding), pair(dilation), groups)


@pytest.mark.parametrize("case", CASES, ids=[f"conv-{i}" for i in range(len(CASES))])
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_prepacked_matches_torch(case, bias, rng):
    shape, (o, kh, kw), stride, padding, dilation, groups = case
    x = randn(rng, *shape)
    w = randn(rng, o, shape[1] // groups, kh, kw)
    b = randn(rng, o) if bias else None
    ref = torch_conv(x, w, b, stride, padding, dilation, groups)
    for layout, inp in (("NCHW", x), ("channels-last", np.ascontiguousarray(x.transpose(0, 2, 3, 1))
                                      .transpose(0, 3, 1, 2))):
        ours = prepacked_conv(inp, w, b, stride, padding, dilation, groups)
        compare(f"ptlite::conv2d_prepacked {case} {layout}", ours, ref)
        trivial = ours.shape[1] == 1 or ours.shape[2] * ours.shape[3] == 1  # both layouts coincide
        assert trivial or is_channels_last(ours), f"{case}: the result is not channels-last"


@pytest.mark.parametrize("activation,args,torch_fn", ACTIVATIONS, ids=[a[0] + str(a[1]) for a in ACTIVATIONS])
@pytest.mark.parametrize("case", [CASES[0], CASES[3], CASES[7], CASES[9], CASES[5]],
                         ids=["pointwise", "stem", "depthwise", "depthwise-s2", "grouped"])
def test_conv2d_prepacked_fused_activation(activation, args, torch_fn, case, rng):
    shape, (o, kh, kw), stride, padding, dilation, groups = case
    x, w, b = randn(rng, *shape), randn(rng, o, shape[1] // groups, kh, kw), randn(rng, o)
    ref = torch_fn(torch_conv(x, w, b, stride, padding, dilation, groups))
    ours = prepacked_conv(x, w, b, stride, padding, dilation, groups, activation, args)
    compare(f"ptlite::conv2d_prepacked + {activation}{args} {case}", ours, ref)


def test_conv2d_prepacked_large_image_uses_threads_correctly(rng):
    # big enough for the row split across threads, and activations in pieces, in every path
    for groups, o in ((1, 24), (32, 32)):
        x, w, b = randn(rng, 1, 32, 64, 64), randn(rng, o, 32 // groups, 3, 3), randn(rng, o)
        for activation, fn in (("clamp", F.relu6), ("silu", F.silu), ("hardswish", F.hardswish)):
            ours = prepacked_conv(x, w, b, 1, 1, 1, groups, activation, [0.0, 6.0] if activation == "clamp" else [])
            compare(f"ptlite::conv2d_prepacked 64x64 groups={groups} + {activation}", ours,
                    fn(torch_conv(x, w, b, 1, 1, 1, groups)))


def test_conv2d_prepacked_unbatched(rng):
    x, w, b = randn(rng, 3, 8, 8), randn(rng, 5, 3, 3, 3), randn(rng, 5)
    ours = prepacked_conv(x, w, b, 2, 1, 1, 1)
    compare("ptlite::conv2d_prepacked unbatched", ours, torch_conv(x[None], w, b, 2, 1, 1, 1)[0])


def test_conv2d_prepacked_rejects_mismatched_weight(rng):
    x, w = randn(rng, 1, 4, 8, 8), randn(rng, 6, 5, 3, 3)
    with pytest.raises(ValueError, match="does not match the packed weight"):
        op("ptlite::conv2d_prepacked")(x, pack_conv2d_weight(w, 1), None, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1)
    with pytest.raises(ValueError, match="unknown fused activation 'mish'"):
        prepacked_conv(x, randn(rng, 6, 4, 3, 3), None, 1, 1, 1, 1, "mish")


@pytest.mark.parametrize("activation,args,torch_fn", ACTIVATIONS, ids=[a[0] + str(a[1]) for a in ACTIVATIONS])
@pytest.mark.parametrize("shape", [(4, 16), (2, 3, 16), (16,)])
def test_linear_prepacked_matches_torch(activation, args, torch_fn, shape, rng):
    x, w, b = randn(rng, *shape), randn(rng, 10, 16), randn(rng, 10)
    ref = torch_fn(F.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)))
    ours = op("ptlite::linear_prepacked")(x, np.ascontiguousarray(w.T), b, activation, args)
    compare(f"ptlite::linear_prepacked + {activation} {shape}", ours, ref)
    compare("ptlite::linear_prepacked without bias",
            op("ptlite::linear_prepacked")(x, np.ascontiguousarray(w.T), None),
            F.linear(torch.from_numpy(x), torch.from_numpy(w)))


@pytest.mark.parametrize("alpha", [1, 2.5])
def test_add_relu_matches_torch(alpha, rng):
    a, b = randn(rng, 2, 3, 4, 5), randn(rng, 3, 1, 5)
    check("aten::_add_relu.Tensor", a, b, alpha)
    ai, bi = rng.integers(-5, 5, (3, 4)), rng.integers(-5, 5, (3, 4))
    check("aten::_add_relu.Tensor", ai, bi, 1)


def test_add_relu_keeps_channels_last(rng):
    a = np.ascontiguousarray(randn(rng, 1, 8, 5, 5).transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    out = op("aten::_add_relu.Tensor")(a, a.copy(order="K"))
    assert is_channels_last(out)


def test_add_relu_in_place_matches_torch(rng):
    a, b = randn(rng, 2, 3, 4, 5), randn(rng, 3, 1, 5)
    check("aten::_add_relu_.Tensor", a, b, 2)


def test_atrous_convolution_on_a_small_map_runs_per_tap(rng, kernel_backend, monkeypatch):
    if kernel_backend != "numpy":
        pytest.skip("checks the NumPy kernel's own strategy")
    from ptlite.backends.numpy import prepacked

    calls = []
    real = prepacked._conv_by_taps
    monkeypatch.setattr(prepacked, "_conv_by_taps", lambda *a: calls.append(len(a[2])) or real(*a))
    x, w = randn(rng, 1, 16, 14, 14), randn(rng, 8, 16, 3, 3)
    compare("ptlite::conv2d_prepacked dilation 24 on 14x14", prepacked_conv(x, w, None, 1, 24, 24, 1),
            torch_conv(x, w, None, 1, 24, 24, 1))
    assert calls == [1], "DeepLab's ASPP case: only the centre tap reaches the image, one GEMM"
    prepacked_conv(randn(rng, 1, 16, 14, 14), w, None, 1, 1, 1, 1)
    assert calls == [1], "an ordinary 3x3 convolution keeps im2col"


@pytest.mark.parametrize("activation,args,torch_fn", ACTIVATIONS, ids=[a[0] + str(a[1]) for a in ACTIVATIONS])
def test_pointwise_fast_path_matches_torch(activation, args, torch_fn, rng):
    """1x1 convolutions of channels-last images and of 1x1-pixel maps (squeeze-and-excitation) take a shorter path:
    small and large outputs, a pixel map with odd strides, out= channels-last (written and returned) and C-order
    (not a layout the kernel writes: a new array), float16."""
    def channels_last(a):
        return np.ascontiguousarray(a.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)

    w, b = randn(rng, 24, 40, 1, 1), randn(rng, 24)
    inputs = {"channels-last 9x9": channels_last(randn(rng, 2, 40, 9, 9)),
              "channels-last 64x48 (blocks)": channels_last(randn(rng, 1, 40, 64, 48)),
              "1x1 map": randn(rng, 3, 40, 1, 1),
              "1x1 map, strided": randn(rng, 3, 80, 1, 2)[:, ::2, :, :1]}
    for what, x in inputs.items():
        ref = torch_fn(torch_conv(x, w, b, 1, 0, 1, 1))
        ours = prepacked_conv(x, w, b, 1, 0, 1, 1, activation, args)
        compare(f"ptlite::conv2d_prepacked 1x1 + {activation}{args}, {what}", ours, ref)
        compare(f"ptlite::conv2d_prepacked 1x1 without bias, {what}",
                prepacked_conv(x, w, None, 1, 0, 1, 1), torch_conv(x, w, None, 1, 0, 1, 1))
    x = inputs["channels-last 9x9"]
    ref = torch_fn(torch_conv(x, w, b, 1, 0, 1, 1))
    packed = pack_conv2d_weight(w, 1)
    call = op("ptlite::conv2d_prepacked")
    out = np.empty((2, 9, 9, 24), np.float32).transpose(0, 3, 1, 2)
    assert call(x, packed, b, [1, 1], [1, 1], [0] * 4, [1, 1], 1, activation, list(args), out=out) is out
    compare(f"ptlite::conv2d_prepacked 1x1 + {activation} into out=", out, ref)
    c_order = np.empty((2, 24, 9, 9), np.float32)
    compare(f"ptlite::conv2d_prepacked 1x1 + {activation} with a C-order out=",
            call(x, packed, b, [1, 1], [1, 1], [0] * 4, [1, 1], 1, activation, list(args), out=c_order), ref)
    half = call(x.astype(np.float16), packed.astype(np.float16), b.astype(np.float16), [1, 1], [1, 1], [0] * 4,
                [1, 1], 1, activation, list(args))
    assert half.dtype == np.float16
    compare(f"ptlite::conv2d_prepacked 1x1 + {activation} float16", half.astype(np.float32), ref, tol=2e-2)
    with pytest.raises(ValueError, match="does not match the packed weight"):
        call(channels_last(randn(rng, 1, 39, 4, 4)), packed, b, [1, 1], [1, 1], [0] * 4, [1, 1], 1)
