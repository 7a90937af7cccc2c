"""The native kernels against PyTorch, on every instruction set this CPU has, over awkward shapes: channel counts
that are not multiples of the vector width, 1x1 maps, padding larger than half the kernel, strides 2 and 3,
dilation, batch > 1. Tolerance: 1e-4 of the output's largest magnitude (float32 sums of up to ~5,000 products in
another order than PyTorch's; the exp-based activations are within a few ulp, test_math.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import assert_close

from ptlite.ops.layouts import pack_conv2d_weight

ACTIVATIONS = {
    "none": ([], lambda t: t),
    "relu": ([], F.relu),
    "clamp": ([-0.5, 0.75], lambda t: t.clamp(-0.5, 0.75)),
    "hardswish": ([], F.hardswish),
    "silu": ([], F.silu),
    "gelu": ([], F.gelu),
    "gelu_tanh": ([], lambda t: F.gelu(t, approximate="tanh")),
}

def _native_only(monkeypatch) -> None:
    """From here on, a kernel that hands its call to the reference fails the test: the library must take it."""
    from ptlite.backends.native import attention, elementwise, kernels

    def refused(key):
        raise AssertionError(f"{key} went to the reference instead of the library")
    for module in (kernels, elementwise, attention):
        monkeypatch.setattr(module, "_reference", refused)


def _k(key: str):
    """The native kernel of an operator (importing the module it lives in)."""
    from ptlite.backends.native.kernels import kernel_for

    return kernel_for(key)


# (batch, in channels, height, width, out channels, kernel, stride, padding, dilation, depthwise)
CONVOLUTIONS = [
    (1, 3, 17, 19, 13, 3, 2, 1, 1, False),      # an RGB stem, odd sizes, O not a multiple of the tile
    (2, 16, 9, 9, 40, 3, 1, 1, 1, False),       # batch 2
    (1, 64, 7, 7, 70, 1, 1, 0, 1, False),       # 1x1 as GEMM, O = 64 + 6
    (1, 8, 5, 5, 16, 3, 3, 2, 3, False),        # stride 3, dilation 3, padding > half the kernel
    (1, 5, 1, 1, 7, 1, 1, 0, 1, False),         # a 1x1 map
    (1, 7, 6, 6, 9, 5, 1, 4, 1, False),         # padding larger than half the kernel: all-padding outputs
    (3, 33, 10, 10, 17, 2, 2, 0, 1, False),     # even kernel
    (1, 24, 8, 8, 24, 3, 1, 1, 1, True),        # depthwise
    (2, 37, 11, 7, 37, 5, 2, 4, 2, True),       # depthwise: 37 channels, stride 2, dilation 2, padding 4
    (1, 72, 14, 14, 72, 3, 3, 1, 1, True),      # stride 3, 72 = 2 x 32 + 8 channels
    (1, 19, 1, 1, 19, 3, 1, 1, 1, True),        # a 1x1 map
    (1, 40, 14, 14, 40, 5, 1, 2, 1, True),      # depthwise 5x5 (EfficientNet's): the 5x5 interior path
    (2, 19, 9, 12, 19, 5, 2, 2, 1, True),       # 5x5 stride 2, channels off the vector width
    (2, 20, 7, 45, 20, 3, 2, 1, 1, True),       # 3x3 stride 2 over a wide row: 8-, 4- and 1-pixel interior steps
    (1, 16, 5, 31, 16, 3, 1, 0, 1, True),       # no padding: every pixel interior, 29 = 3 x 8 + 4 + 1
    (1, 27, 6, 40, 27, 5, 2, 2, 1, True),       # 5x5 stride 2, wide: every interior step, channels off the width
]


def _name(case) -> str:
    n, c, h, w, o, k, s, p, d, dw = case
    return f"{'dw' if dw else 'conv'}{k}x{k}_n{n}c{c}o{o}_{h}x{w}_s{s}p{p}d{d}"


@pytest.mark.parametrize("case", CONVOLUTIONS, ids=_name)
@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_conv2d_matches_torch(isa, case, activation):
    from ptlite.backends.native.kernels import conv2d_prepacked

    n, c, h, w, o, k, s, p, d, dw = case
    groups = c if dw else 1
    rng = np.random.default_rng(hash(case) % 2**32)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    weight = rng.standard_normal((o, c // groups, k, k)).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    args, act = ACTIVATIONS[activation]
    got = conv2d_prepacked(x, pack_conv2d_weight(weight, groups), bias, (k, k), (s, s), (p, p, p, p), (d, d), groups,
                           activation, args)
    want = act(F.conv2d(torch.from_numpy(x), torch.from_numpy(weight), torch.from_numpy(bias), s, p, d,
                        groups)).numpy()
    assert_close(got, want, what=f"native {isa} conv2d {_name(case)} + {activation}")


# (batch, in channels, height, width, out channels, padding top, bottom, left, right)
WINOGRAD = [
    (1, 16, 20, 20, 16, 1, 1, 1, 1),    # tiles cover the output exactly
    (2, 13, 9, 11, 21, 1, 1, 1, 1),     # batch 2, partial tiles, channels off the vector width, O off the panel
    (1, 64, 30, 30, 80, 1, 1, 1, 1),    # several blocks of tiles and columns
    (1, 5, 3, 3, 7, 2, 2, 2, 2),        # padding 2: a 5x5 output from a 3x3 image
    (1, 17, 7, 5, 33, 0, 0, 0, 0),      # no padding
    (1, 8, 6, 9, 24, 0, 2, 1, 0),       # uneven padding
    (3, 40, 1, 1, 3, 1, 1, 1, 1),       # a 1x1 map
]


@pytest.mark.parametrize("case", WINOGRAD, ids=lambda c: "n{}c{}_{}x{}_o{}_p{}{}{}{}".format(*c))
@pytest.mark.parametrize("activation", ["none", "relu", "hardswish"])
@pytest.mark.parametrize("tile", ["4x4", "2x2"])
def test_winograd_conv2d_matches_torch(isa, case, activation, tile, monkeypatch):
    """Winograd F(4x4, 3x3) and F(2x2, 3x3): the rounding error is larger than the direct convolution's (transforms
    that scale by up to ~10, docs/decisions.md): 1e-4 of the largest output still holds with room."""
    _native_only(monkeypatch)
    from ptlite.backends.native.kernels import conv2d_winograd_2x2, conv2d_winograd_v2
    from ptlite.backends.numpy.winograd import G_2X2, G, pack_winograd_weight

    n, c, h, w, o, *pads = case
    rng = np.random.default_rng(hash(case) % 2**32)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    weight = rng.standard_normal((o, c, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    args, act = ACTIVATIONS[activation]
    kernel, g = (conv2d_winograd_v2, G) if tile == "4x4" else (conv2d_winograd_2x2, G_2X2)
    got = kernel(x, pack_winograd_weight(weight, g), bias, pads, activation, args)
    padded = F.pad(torch.from_numpy(x), (pads[2], pads[3], pads[0], pads[1]))
    want = act(F.conv2d(padded, torch.from_numpy(weight), torch.from_numpy(bias))).numpy()
    assert_close(got, want, what=f"native {isa} Winograd {tile} conv2d {case} + {activation}")


def test_conv2d_writes_a_planned_channels_last_output(isa):
    from ptlite.backends.native.kernels import conv2d_prepacked

    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 8, 6, 6)).astype(np.float32)
    weight = rng.standard_normal((12, 8, 3, 3)).astype(np.float32)
    out = np.empty((1, 6, 6, 12), np.float32).transpose(0, 3, 1, 2)
    got = conv2d_prepacked(x, pack_conv2d_weight(weight, 1), None, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1,
                           out=out)
    assert got is out
    want = F.conv2d(torch.from_numpy(x), torch.from_numpy(weight), padding=1).numpy()
    assert_close(got, want, what=f"native {isa} conv2d into out=")


@pytest.mark.parametrize("rows,k,o", [(1, 1280, 1000), (5, 7, 3), (12, 64, 33), (2, 3, 16)])
def test_linear_matches_torch(isa, rows, k, o):
    from ptlite.backends.native.kernels import linear_prepacked

    rng = np.random.default_rng(rows * 1000 + k)
    x = rng.standard_normal((rows, k)).astype(np.float32)
    weight = rng.standard_normal((o, k)).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32)
    got = linear_prepacked(x, np.ascontiguousarray(weight.T), bias, "relu")
    want = F.relu(F.linear(torch.from_numpy(x), torch.from_numpy(weight), torch.from_numpy(bias))).numpy()
    assert_close(got, want, what=f"native {isa} linear {rows}x{k}->{o}")


@pytest.mark.parametrize("shape,k,s,p,d,ceil", [
    ((1, 64, 112, 112), 3, 2, 1, 1, False),
    ((2, 13, 9, 7), 3, 2, 1, 1, True),
    ((1, 5, 8, 8), 2, 3, 1, 2, True),
    ((1, 17, 1, 1), 1, 1, 0, 1, False),
])
def test_max_pool2d_matches_torch(isa, shape, k, s, p, d, ceil):
    from ptlite.backends.native.kernels import max_pool2d

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    x_cl = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    want = F.max_pool2d(torch.from_numpy(x), k, s, p, d, ceil).numpy()
    for given in (x, x_cl):
        assert_close(max_pool2d(given, [k, k], [s, s], [p, p], [d, d], ceil), want,
                     what=f"native {isa} max_pool2d {shape} k{k} s{s} p{p} d{d} ceil={ceil}")


@pytest.mark.parametrize("channels", [8, 20, 32])
def test_max_pool2d_propagates_nan_as_torch(isa, channels):
    """A NaN in a window makes its maximum NaN, in full vectors of channels, the last overlapping one and the
    scalar tail alike."""
    from ptlite.backends.native.kernels import max_pool2d

    x = np.random.default_rng(1).standard_normal((1, channels, 6, 6)).astype(np.float32)
    x[0, :, 2, 2] = np.nan
    x[0, channels - 1, 4, 5] = np.nan
    want = F.max_pool2d(torch.from_numpy(x), 3, 2, 1).numpy()
    got = max_pool2d(x, [3, 3], [2, 2], [1, 1], [1, 1], False)
    assert np.array_equal(np.isnan(got), np.isnan(want)), \
        f"native {isa} max_pool2d, {channels} channels: NaN at {np.argwhere(np.isnan(got)).tolist()[:6]}, torch " \
        f"at {np.argwhere(np.isnan(want)).tolist()[:6]}"
    assert_close(np.nan_to_num(got), np.nan_to_num(want), what=f"native {isa} max_pool2d with NaN, C={channels}")


@pytest.mark.parametrize("shape", [(1, 1280, 7, 7), (3, 19, 5, 3), (1, 4, 1, 1), (1, 40, 37, 41), (1, 32, 112, 112)])
def test_global_average_pool_matches_torch(isa, shape):
    """(1, 40, 37, 41): two blocks of rows whose means are combined; (1, 32, 112, 112): the blocks on two threads."""
    from ptlite.backends.native.kernels import adaptive_avg_pool2d

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    x_cl = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    want = F.adaptive_avg_pool2d(torch.from_numpy(x), 1).numpy()
    for given in (x, x_cl):
        assert_close(adaptive_avg_pool2d(given, [1, 1]), want, what=f"native {isa} adaptive_avg_pool2d {shape}")


@pytest.mark.parametrize("key,torch_fn,args", [
    ("aten::relu", F.relu, ()),
    ("aten::relu6", F.relu6, ()),
    ("aten::hardtanh", lambda t: F.hardtanh(t, -0.25, 2.0), (-0.25, 2.0)),
    ("aten::hardswish", F.hardswish, ()),
    ("aten::silu", F.silu, ()),
    ("aten::sigmoid", torch.sigmoid, ()),
    ("aten::tanh", torch.tanh, ()),
    ("aten::hardsigmoid", F.hardsigmoid, ()),
    ("aten::gelu", F.gelu, ()),
    ("aten::gelu", lambda t: F.gelu(t, approximate="tanh"), ("tanh",)),
    ("aten::erf", torch.erf, ()),
])
def test_activations_match_torch(isa, key, torch_fn, args, monkeypatch):
    _native_only(monkeypatch)

    x = (np.random.default_rng(0).standard_normal((2, 35, 3, 5)) * 6).astype(np.float32)
    x[0, 0, 0, :3] = [np.nan, np.inf, -np.inf]
    got = _k(key)(x, *args)
    want = torch_fn(torch.from_numpy(x)).numpy()
    # the non-finite inputs against torch in float64: its AVX-512 float32 gelu gives nan for +inf (its float64 and
    # scalar code, inf)
    special = ~np.isfinite(x)
    want[special] = torch_fn(torch.from_numpy(x).double()).numpy()[special]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=f"native {isa} {key}")
    if key == "aten::hardtanh":  # by the schema's keyword names too (a lone max_val is not the lower bound)
        np.testing.assert_allclose(_k(key)(x, max_val=args[1]), F.hardtanh(torch.from_numpy(x), -1.0, args[1]).numpy(),
                                   rtol=1e-6, atol=1e-6, err_msg=f"native {isa} {key} with max_val only")


@pytest.mark.parametrize("key,relu", [("aten::add.Tensor", False), ("aten::_add_relu.Tensor", True)])
def test_add_matches_torch_in_either_layout(isa, key, relu):

    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((2, 21, 5, 3)).astype(np.float32) for _ in range(2))
    want = torch.from_numpy(a) + torch.from_numpy(b)
    want = (F.relu(want) if relu else want).numpy()
    cl = [np.ascontiguousarray(t.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2) for t in (a, b)]
    for x, y in ((a, b), cl, (a, cl[1])):  # the mixed pair goes to the reference
        np.testing.assert_allclose(_k(key)(x, y), want, rtol=1e-6, atol=1e-6, err_msg=f"native {isa} {key}")


def test_other_dtypes_and_grouped_convolutions_go_to_the_reference(lib):
    from ptlite.backends.native.kernels import conv2d_prepacked

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 6, 6))
    weight = rng.standard_normal((8, 4, 3, 3))  # groups=2: not dense, not depthwise
    got = conv2d_prepacked(x.astype(np.float32), pack_conv2d_weight(weight.astype(np.float32), 2), None, (3, 3),
                           (1, 1), (1, 1, 1, 1), (1, 1), 2)
    want = F.conv2d(torch.from_numpy(x), torch.from_numpy(weight), padding=1, groups=2).numpy()
    assert_close(got, want, what="grouped conv2d through the reference")
    w64 = rng.standard_normal((3, 8, 1, 1))
    got64 = conv2d_prepacked(x, pack_conv2d_weight(w64, 1), None, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1)
    assert got64.dtype == np.float64
    assert_close(got64, F.conv2d(torch.from_numpy(x), torch.from_numpy(w64)).numpy(), what="float64 conv2d")


@pytest.mark.parametrize("size,scale,align", [((224, 224), None, False), (None, [2.5, 1.75], False),
                                              ((13, 57), None, True), ((1, 1), None, False), (None, [0.5, 0.5], True)])
def test_upsample_bilinear_matches_torch(isa, size, scale, align, monkeypatch):

    x = np.random.default_rng(3).standard_normal((2, 21, 28, 19)).astype(np.float32)
    x_cl = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    want = F.interpolate(torch.from_numpy(x), size=size, scale_factor=scale, mode="bilinear",
                         align_corners=align).numpy()
    for given in (x, x_cl):  # NCHW goes to the reference (its result stays NCHW)
        got = _k("aten::upsample_bilinear2d.vec")(given, size, align, scale)
        assert_close(got, want, what=f"native {isa} upsample_bilinear2d {size} {scale} align_corners={align}",
                     rtol=2e-6)
        if got.shape[2] * got.shape[3] > 1:
            assert got.transpose(0, 2, 3, 1).flags.c_contiguous == (given is x_cl), "the input's layout is kept"
    _native_only(monkeypatch)  # a channels-last image: the library's
    _k("aten::upsample_bilinear2d.vec")(x_cl, size, align, scale)
    if size is not None:
        assert_close(_k("aten::upsample_bilinear2d")(x_cl, list(size), align), want,
                     what=f"native {isa} upsample_bilinear2d (not .vec) {size}", rtol=2e-6)


@pytest.mark.parametrize("scale_first", [True, False])
@pytest.mark.parametrize("n,c,h,w", [(1, 40, 5, 7), (2, 19, 5, 7), (3, 24, 60, 61)])
def test_mul_by_channel_factors_matches_torch(isa, n, c, h, w, scale_first, monkeypatch):
    """Squeeze-and-excitation's scale * input: (N, C, 1, 1) factors times a channels-last image, either order
    (3x24x60x61: on two threads, a task's rows reaching into the next image)."""

    rng = np.random.default_rng(n * c)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    x_cl = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    s = rng.standard_normal((n, c, 1, 1)).astype(np.float32)
    want = torch.from_numpy(s) * torch.from_numpy(x)
    for image in (x_cl, x):  # NCHW goes to the reference
        got = _k("aten::mul.Tensor")(*((s, image) if scale_first else (image, s)))
        assert_close(got, want.numpy(), what=f"native {isa} mul by factors, n={n} c={c} {image.strides}")
    _native_only(monkeypatch)  # channels-last: the library's
    _k("aten::mul.Tensor")(*((s, x_cl) if scale_first else (x_cl, s)))
    out = np.empty_like(x_cl)
    assert _k("aten::mul.Tensor")(x_cl, s, out=out) is out
    np.testing.assert_allclose(out, want.numpy(), rtol=1e-6)
    same = _k("aten::mul.Tensor")(x_cl, x_cl)
    np.testing.assert_allclose(same, x * x, rtol=1e-6)


@pytest.mark.parametrize("key,relu", [("aten::add_.Tensor", False), ("aten::_add_relu_.Tensor", True)])
def test_in_place_add_writes_its_first_argument(isa, key, relu):

    rng = np.random.default_rng(1)
    a, b = (np.ascontiguousarray(rng.standard_normal((1, 24, 5, 7)).astype(np.float32).transpose(0, 2, 3, 1))
            .transpose(0, 3, 1, 2) for _ in range(2))
    want = torch.from_numpy(np.array(a)) + torch.from_numpy(np.array(b))
    want = (F.relu(want) if relu else want).numpy()
    assert _k(key)(a, b) is a
    np.testing.assert_allclose(a, want, rtol=1e-6, atol=1e-6, err_msg=f"native {isa} {key}")
    same = np.array(b)
    assert _k(key)(same, same) is same  # self + self, in place
    np.testing.assert_allclose(same, (np.maximum(2 * b, 0) if relu else 2 * b), rtol=1e-6, err_msg=key)


@pytest.mark.parametrize("shape", [(3, 7), (2, 4, 12, 12), (1, 1000), (5, 1)])
def test_softmax_matches_torch(isa, shape, monkeypatch):

    x = (np.random.default_rng(len(shape)).standard_normal(shape) * 8).astype(np.float32)
    want = torch.softmax(torch.from_numpy(x), -1).numpy()
    for key, args in (("aten::softmax.int", (-1, None)), ("aten::_softmax", (x.ndim - 1, False))):
        assert_close(_k(key)(x, *args), want, what=f"native {isa} {key} {shape}", rtol=1e-6)
    if x.ndim > 1:  # another axis: the reference
        assert_close(_k("aten::softmax.int")(x, 0, None), torch.softmax(torch.from_numpy(x), 0).numpy(),
                     what=f"native {isa} softmax over axis 0", rtol=1e-6)
    _native_only(monkeypatch)
    for key, args in (("aten::softmax.int", (-1, None)), ("aten::_softmax", (x.ndim - 1, False))):
        _k(key)(x, *args)
    edge = np.array([[-np.inf, -np.inf], [np.nan, 1.0], [np.inf, 1.0], [0.0, -np.inf]], np.float32)
    np.testing.assert_array_equal(np.isnan(_k("aten::softmax.int")(edge, -1, None)),
                                  np.isnan(torch.softmax(torch.from_numpy(edge), -1).numpy()))


@pytest.mark.parametrize("shape,normalized,affine", [((2, 12, 64), (64,), True), ((3, 37), (37,), False),
                                                     ((2, 5, 6, 7), (6, 7), True), ((4, 1), (1,), True)])
def test_layer_norm_matches_torch(isa, shape, normalized, affine, monkeypatch):

    _native_only(monkeypatch)
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) * 3 + 5).astype(np.float32)  # an offset: the variance's two passes matter
    w = rng.standard_normal(normalized).astype(np.float32) if affine else None
    b = rng.standard_normal(normalized).astype(np.float32) if affine else None
    want = F.layer_norm(torch.from_numpy(x), normalized, None if w is None else torch.from_numpy(w),
                        None if b is None else torch.from_numpy(b), 1e-5).numpy()
    got = _k("aten::layer_norm")(x, list(normalized), w, b, 1e-5, True)
    assert_close(got, want, what=f"native {isa} layer_norm {shape} over {normalized}", rtol=1e-5)


# (batch dims, query length, key length, head size, value size, mask shape or "bool:shape" or "causal", scale)
ATTENTION = [
    ((1, 4), 12, 12, 16, 16, (1, 1, 1, 12), None),      # a padding mask broadcast over heads and queries
    ((2, 3), 7, 19, 16, 24, (3, 7, 19), 0.3),           # keys off the vector width, a mask per head, a scale
    ((), 40, 37, 5, 3, None, None),                     # no batch dimension, sizes off the vector width
    ((5,), 9, 9, 33, 70, "causal", None),               # causal
    ((2, 2), 6, 11, 8, 8, "bool:2,1,6,11", None),       # a bool mask (True: attend), per batch entry
    ((1,), 1, 1, 1, 1, None, None),
]


@pytest.mark.parametrize("case", ATTENTION, ids=lambda c: f"b{c[0]}_l{c[1]}_s{c[2]}_e{c[3]}_ev{c[4]}_{c[5]}")
def test_attention_matches_torch(isa, case, monkeypatch):

    batch, length, keys, e, ev, mask, scale = case
    rng = np.random.default_rng(length * keys)
    q, k = (rng.standard_normal(batch + (n, e)).astype(np.float32) for n in (length, keys))
    v = rng.standard_normal(batch + (keys, ev)).astype(np.float32)
    causal = mask == "causal"
    m = None
    if isinstance(mask, str) and mask.startswith("bool:"):
        m = rng.random(tuple(int(d) for d in mask[5:].split(","))) > 0.3
        m[..., 0, :] = False  # a query that attends to nothing: zeros, as PyTorch's safe softmax gives
    elif isinstance(mask, tuple):
        m = rng.standard_normal(mask).astype(np.float32)
        m[..., -1] = -np.inf
    t = [torch.from_numpy(a) for a in (q, k, v)]
    want = F.scaled_dot_product_attention(*t, attn_mask=None if m is None else torch.from_numpy(m),
                                          is_causal=causal, scale=scale).numpy()
    if m is not None and m.dtype == np.bool_:
        want = np.nan_to_num(want)
    _native_only(monkeypatch)
    got = _k("aten::scaled_dot_product_attention")(q, k, v, m, 0.0, causal, scale, False)
    assert_close(got, want, what=f"native {isa} attention {case}", rtol=1e-5)


BROADCASTS = [((1, 12, 64), (1, 12, 1)), ((2, 3, 4, 5), (5,)), ((3, 1, 7), (1, 4, 1)), ((1, 64), (1, 1)),
              ((4, 1, 9, 1), (1, 3, 1, 17)), ((2, 1, 3, 1, 2, 1, 2), (1, 2, 1, 3, 1, 2, 1))]


@pytest.mark.parametrize("shapes", BROADCASTS, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("key,fn", [("aten::add.Tensor", torch.add), ("aten::sub.Tensor", torch.sub),
                                    ("aten::mul.Tensor", torch.mul), ("aten::div.Tensor", torch.div)],
                         ids=["add", "sub", "mul", "div"])
def test_broadcasting_arithmetic_matches_torch(isa, shapes, key, fn, monkeypatch):

    rng = np.random.default_rng(len(shapes[0]))
    a = rng.standard_normal(shapes[0]).astype(np.float32)
    b = (rng.standard_normal(shapes[1]) + 3).astype(np.float32)  # away from 0: the quotient stays O(1)
    want = fn(torch.from_numpy(a), torch.from_numpy(b)).numpy()
    if len(np.broadcast_shapes(*shapes)) <= 6:
        _native_only(monkeypatch)  # (7 dimensions that do not merge to 6: the reference's)
    for x, y, w in ((a, b, want), (b, a, fn(torch.from_numpy(b), torch.from_numpy(a)).numpy())):
        assert_close(_k(key)(x, y), w, what=f"native {isa} {key} {x.shape} by {y.shape}", rtol=1e-6)


@pytest.mark.parametrize("dims,keepdim", [([1], False), ([2, 3], True), ([0, 1], False), (None, False), ([-1], True),
                                          ([], False)])
@pytest.mark.parametrize("key", ["aten::sum.dim_IntList", "aten::mean.dim"])
def test_reductions_match_torch(isa, dims, keepdim, key, monkeypatch):

    x = np.random.default_rng(3).standard_normal((2, 5, 6, 7)).astype(np.float32)
    t = torch.from_numpy(x)
    fn = torch.sum if key.startswith("aten::sum") else torch.mean
    want = (fn(t) if not dims else fn(t, dims, keepdim=keepdim)).numpy()
    _native_only(monkeypatch)
    assert_close(_k(key)(x, dims, keepdim), want, what=f"native {isa} {key} over {dims}", rtol=1e-5)
    image = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)  # channels-last memory
    assert_close(_k(key)(image, [2, 3], keepdim), fn(t, [2, 3], keepdim=keepdim).numpy(),
                 what=f"native {isa} {key} over a channels-last image's H, W", rtol=1e-5)


@pytest.mark.parametrize("k,s,p,ceil,include,divisor", [(2, 2, 0, False, True, None), (3, 2, 1, False, True, None),
                                                        (3, 2, 1, True, False, None), (3, 1, 1, False, True, 4),
                                                        (5, 3, 2, True, True, None)])
def test_avg_pool2d_matches_torch(isa, k, s, p, ceil, include, divisor, monkeypatch):
    from ptlite.backends.native.kernels import avg_pool2d

    x = np.random.default_rng(k * 7 + s).standard_normal((2, 19, 13, 11)).astype(np.float32)
    want = F.avg_pool2d(torch.from_numpy(x), k, s, p, ceil, include, divisor).numpy()
    image = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)  # channels-last, as in a network
    _native_only(monkeypatch)
    assert_close(avg_pool2d(image, [k, k], [s, s], [p, p], ceil, include, divisor), want,
                 what=f"native {isa} avg_pool2d k{k} s{s} p{p} ceil={ceil} include_pad={include} divisor={divisor}",
                 rtol=1e-5)


@pytest.mark.parametrize("sa,sb,transposed", [
    ((2, 3, 7, 5), (2, 3, 5, 9), False),      # two batch dimensions, n under one panel
    ((4, 13, 33), (33, 40), False),           # one matrix for every entry (a weight), n = 2 panels + 8
    ((5, 17), (17, 1), False),                # one column
    ((1, 1, 8), (8, 3), False),               # one row: the matrix-vector path
    ((2, 4, 9, 16), (2, 4, 16, 9), True),     # attention's q @ k^T: b a transposed view, read as it is
    ((3, 20, 6), (1, 6, 37), False),          # b's batch of one, broadcast
])
def test_matmul_matches_torch(isa, sa, sb, transposed, monkeypatch):
    _native_only(monkeypatch)
    rng = np.random.default_rng(len(sa) * 100 + sb[-1])
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    if transposed:
        b = np.ascontiguousarray(np.swapaxes(b, -1, -2)).swapaxes(-1, -2)
    want = torch.matmul(torch.from_numpy(a), torch.from_numpy(np.ascontiguousarray(b))).numpy()
    assert_close(_k("aten::matmul")(a, b), want, what=f"native {isa} matmul {sa} @ {sb}")
    if len(sa) == len(sb) == 2:
        assert_close(_k("aten::mm")(a, b), want, what=f"native {isa} mm {sa} @ {sb}")


def test_matmul_leaves_what_it_does_not_take_to_the_reference(isa):
    rng = np.random.default_rng(1)
    for sa, sb in (((7,), (7, 4)), ((3, 5), (5,)), ((1, 4, 6), (3, 6, 2)), ((2, 0, 3), (3, 4))):
        a, b = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
        want = torch.matmul(torch.from_numpy(a), torch.from_numpy(b)).numpy()
        np.testing.assert_allclose(_k("aten::matmul")(a, b), want, rtol=1e-5, atol=1e-5,
                                   err_msg=f"native {isa} matmul {sa} @ {sb}")


@pytest.mark.parametrize("shape,pad,value,channels_last", [
    ((2, 3, 5, 7), (1, 2, 3, 0), 0.0, False),            # an image's width and height
    ((2, 3, 5, 7), (1, 2, 3, 0), -1.5, True),            # the same on channels-last memory, another value
    ((2, 3, 5, 7), (0, 0, 0, 0, 2, 1), 0.25, True),      # its channels (a middle dimension of NHWC memory)
    ((4, 9), (-2, 3), 7.0, False),                       # a negative amount crops
    ((3, 4, 6), (2, -1, 0, 2, 1, 1), 0.0, False),        # every dimension, cropping one side
    ((5,), (3, 3), 2, False),                            # 1-D, an integer value
])
def test_constant_pad_matches_torch(isa, shape, pad, value, channels_last, monkeypatch):
    _native_only(monkeypatch)
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    if channels_last:
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    want = F.pad(torch.from_numpy(np.ascontiguousarray(x)), pad, value=value).numpy()
    got = _k("aten::constant_pad_nd")(x, list(pad), value)
    np.testing.assert_array_equal(got, want, err_msg=f"native {isa} constant_pad_nd {shape} {pad}")
    if channels_last:
        assert got.transpose(0, 2, 3, 1).flags.c_contiguous, "a channels-last image stays channels-last"
