"""Out variants (kernels registered with out=True, which the memory plan calls with `out=` a buffer of its arena):
an `out` of the result's shape, dtype and layout is written and returned, with the value the call without `out`
gives; an `out` of another shape or dtype is left alone and the kernel allocates as usual. NCHW and channels-last
inputs (each giving its own result layout), broadcasting, scalars and every prepacked convolution path."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close
from kernel_backend import kernel as op

from ptlite import ops
from ptlite.backends.numpy._layout import is_channels_last
from ptlite.backends.numpy.packed import pack_panels
from ptlite.backends.numpy.winograd import G_2X2, LAVIN_G, pack_winograd_weight
from ptlite.ops.layouts import pack_conv2d_weight

RNG = np.random.default_rng(0)


def randn(*shape: int) -> np.ndarray:
    return RNG.normal(size=shape).astype(np.float32)


def channels_last(x: np.ndarray) -> np.ndarray:
    """x (N, C, H, W) with its memory ordered N, H, W, C."""
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)


def conv_args(x: np.ndarray, out_channels: int, k: int, stride: int, pad: int, groups: int) -> tuple:
    w = randn(out_channels, x.shape[-3] // groups, k, k)
    return (x, pack_conv2d_weight(w, groups), randn(out_channels), [k, k], [stride, stride], [pad] * 4, [1, 1],
            groups, "relu", [])


IMAGE = randn(2, 8, 10, 10)
Q_IMAGE = RNG.integers(0, 256, IMAGE.shape).astype(np.uint8)  # a quantized image (uint8)


def int8(*shape: int) -> np.ndarray:
    return RNG.integers(-127, 128, shape).astype(np.int8)


def int8_conv_args(out_channels: int, k: int, stride: int, pad: int, groups: int) -> tuple:
    w = int8(out_channels, Q_IMAGE.shape[1] // groups, k, k)
    return (Q_IMAGE, 0.02, 120, pack_conv2d_weight(w, groups), RNG.random(out_channels).astype(np.float32) / 50,
            randn(out_channels), [k, k], [stride, stride], [pad] * 4, [1, 1], groups, 0.2, 60, 60, 255)
BIG = randn(1, 32, 64, 64)  # large enough for the tiled per-channel broadcast and the threaded elementwise path

# (operator, arguments); each runs on its images as given and, for 4-D images, channels-last.
CASES = [
    ("ptlite::conv2d_prepacked", conv_args(IMAGE, 12, 3, 1, 1, 1)),            # im2col + matmul
    ("ptlite::conv2d_prepacked", conv_args(IMAGE, 8, 3, 2, 1, 8)),             # depthwise
    ("ptlite::conv2d_prepacked", conv_args(IMAGE, 12, 1, 1, 0, 4)),            # grouped
    ("ptlite::conv2d_prepacked", conv_args(randn(1, 3, 17, 17), 8, 3, 2, 1, 1)),  # RGB stem (NCHW gather)
    ("ptlite::conv2d_prepacked", conv_args(randn(8, 9, 9), 6, 3, 1, 1, 1)),       # unbatched
    ("ptlite::conv2d_winograd_v2", (IMAGE, pack_winograd_weight(randn(12, 8, 3, 3)), randn(12), [1, 1, 1, 1],
                                    "relu", [])),
    ("ptlite::conv2d_winograd_2x2", (IMAGE, pack_winograd_weight(randn(12, 8, 3, 3), G_2X2), randn(12), [1, 1, 1, 1],
                                     "relu", [])),
    ("ptlite::conv2d_winograd", (IMAGE, pack_winograd_weight(randn(12, 8, 3, 3), LAVIN_G), randn(12), [1, 1, 1, 1],
                                 "relu", [])),
    ("ptlite::linear_prepacked", (randn(2, 5, 16), randn(16, 8), randn(8), "clamp", [0.0, 6.0])),
    ("ptlite::conv2d_packed", (IMAGE, pack_panels(pack_conv2d_weight(randn(20, 8, 3, 3), 1)), randn(20), [3, 3],
                               [1, 1], [1, 1, 1, 1], [1, 1], 20, "relu", [])),
    ("ptlite::conv2d_packed_gated", (IMAGE, randn(2, 8, 1, 1), pack_panels(pack_conv2d_weight(randn(20, 8, 1, 1), 1)),
                                     randn(20), [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 20, "none", [])),
    ("ptlite::linear_packed", (randn(2, 5, 16), pack_panels(randn(16, 24)), randn(24), 24, "clamp", [0.0, 6.0])),
    ("ptlite::conv2d_pointwise_depthwise", (IMAGE, pack_conv2d_weight(randn(16, 8, 1, 1), 1), randn(16), "clamp",
                                            [0.0, 6.0], pack_conv2d_weight(randn(16, 1, 3, 3), 16), randn(16), [3, 3],
                                            [2, 2], [1, 1, 1, 1], [1, 1], "hardswish", [])),
    ("ptlite::conv2d_prepacked", conv_args(IMAGE, 12, 1, 1, 0, 1)),            # pointwise (one product)
    ("ptlite::squeeze_excite", (IMAGE, pack_conv2d_weight(randn(2, 8, 1, 1), 1), randn(2), "silu", [],
                                pack_conv2d_weight(randn(8, 2, 1, 1), 1), randn(8), "none", [], "sigmoid")),
    ("ptlite::squeeze_excite", (BIG, pack_conv2d_weight(randn(8, 32, 1, 1), 1), randn(8), "relu", [],
                                pack_conv2d_weight(randn(32, 8, 1, 1), 1), None, "none", [], "hardsigmoid")),
    ("aten::_add_relu.Tensor", (IMAGE, randn(2, 8, 10, 10), 2)),
    ("aten::_add_relu.Tensor", (BIG, randn(1, 32, 1, 1), 1)),
    ("aten::add.Tensor", (IMAGE, randn(8, 1, 1), 1)),
    ("aten::add.Tensor", (BIG, randn(1, 32, 1, 1), 1)),
    ("aten::add.Tensor", (IMAGE, randn(2, 8, 10, 10), 0.5)),
    ("aten::add.Scalar", (IMAGE, 3.0, 1)),
    ("aten::mul.Tensor", (IMAGE, randn(2, 8, 10, 10))),
    ("aten::mul.Tensor", (BIG, randn(1, 32, 1, 1))),
    ("aten::mul.Scalar", (IMAGE, 0.25)),
    ("aten::relu", (IMAGE,)),
    ("aten::relu", (BIG,)),
    ("aten::hardtanh", (IMAGE, -0.5, 0.5)),
    ("aten::relu6", (IMAGE * 4,)),
    ("aten::hardswish", (IMAGE * 3,)),
    ("aten::hardsigmoid", (IMAGE * 3,)),
    ("aten::sigmoid", (IMAGE,)),
    ("aten::silu", (BIG,)),
    ("aten::tanh", (IMAGE,)),
    ("aten::mish", (IMAGE,)),
    ("aten::max_pool2d", (IMAGE, [3, 3], [2, 2], [1, 1], [1, 1], False)),
    ("aten::max_pool2d", (IMAGE, [2, 2], [2, 2], [0, 0], [1, 1], True)),
    ("aten::max_pool2d", (IMAGE, [1, 1], [1, 1], [0, 0], [1, 1], False)),  # one tap: a copy
    ("aten::adaptive_avg_pool2d", (IMAGE, [1, 1])),
    ("aten::adaptive_avg_pool2d", (IMAGE, [2, 5])),
    ("aten::adaptive_avg_pool2d", (IMAGE, [3, 4])),
    ("aten::_adaptive_avg_pool2d", (IMAGE, [1, 1])),
    ("ptlite::quantize_per_tensor", (IMAGE, 0.02, 120)),
    ("ptlite::dequantize_per_tensor", (Q_IMAGE, 0.02, 120)),
    ("ptlite::conv2d_int8", int8_conv_args(12, 3, 1, 1, 1)),   # dense
    ("ptlite::conv2d_int8", int8_conv_args(8, 3, 2, 1, 8)),    # depthwise
    ("ptlite::conv2d_int8", int8_conv_args(12, 1, 1, 0, 4)),   # grouped
    ("ptlite::linear_int8", (Q_IMAGE.reshape(16, 100), 0.02, 120, int8(100, 6), RNG.random(6).astype(np.float32) / 50,
                             randn(6), 0.1, 30, 30, 255)),
    ("ptlite::add_int8", (Q_IMAGE, 0.02, 120, Q_IMAGE[:, :, ::-1].copy(), 0.03, 100, 0.05, 128)),
    ("ptlite::linear_dynamic_int8", (randn(3, 4, 16), int8(16, 5), RNG.random(5).astype(np.float32) / 50, None)),
]


def same_array(result: np.ndarray, out: np.ndarray) -> bool:
    """result is out, or out seen again (a view of exactly its memory: same start, shape and strides)."""
    return result is out or (isinstance(result, np.ndarray) and result.shape == out.shape
                             and result.strides == out.strides and result.dtype == out.dtype
                             and result.__array_interface__["data"][0] == out.__array_interface__["data"][0])


def layouts(args: tuple) -> list[tuple[str, tuple]]:
    """The arguments as given, and (when the first one is a 4-D image) with that image channels-last."""
    first = args[0]
    if first.ndim != 4 or first.shape[1] == 1:
        return [("as given", args)]
    return [("as given", args), ("channels-last", (channels_last(first), *args[1:]))]


def test_every_out_variant_is_tested():
    declared = {key for key, declared_op in ops.all_ops().items() if declared_op.out and declared_op.family != "user"}
    tested = {key for key, _ in CASES}
    assert not declared - tested, f"out variants without a case in CASES here: add one for {declared - tested}"
    assert not tested - declared, f"cases for kernels without an out variant: {tested - declared}"


@pytest.mark.parametrize("key,args", CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CASES)])
def test_out_of_the_result_shape_is_written_and_returned(key, args):
    impl = op(key)
    for layout, call_args in layouts(args):
        what = f"{key} ({layout} input)"
        expected = impl(*call_args)
        out = np.empty_like(expected)  # the result's layout, as the plan gives it
        assert is_channels_last(out) == is_channels_last(expected)
        result = impl(*call_args, out=out)
        assert same_array(result, out), f"{what}: the out given was not returned"
        assert_close(out, expected, what=what, rtol=1e-6)


@pytest.mark.parametrize("key,args", CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CASES)])
def test_out_of_another_shape_or_dtype_is_ignored(key, args):
    impl = op(key)
    expected = impl(*args)
    for wrong in (np.full((expected.size + 1,), 7, dtype=expected.dtype),
                  np.full(expected.shape, 7, dtype=np.float64)):
        result = impl(*args, out=wrong)
        what = f"{key} given an out of shape {wrong.shape} dtype {wrong.dtype}"
        assert not np.shares_memory(result, wrong), f"{what}: returned it"
        assert (wrong == 7).all(), f"{what}: wrote into it"
        assert_close(result, expected, what=f"{key} with an unusable out", rtol=1e-6)


def test_out_in_another_layout_is_still_correct():
    """An elementwise kernel given an out in another layout than its result's (a stale plan) writes the right
    values; a convolution, which can only write NHWC, allocates instead."""
    x = channels_last(IMAGE)
    out = np.empty(x.shape, dtype=x.dtype)  # C order
    assert op("aten::relu")(x, out=out) is out
    assert_close(out, np.maximum(IMAGE, 0), what="relu into a C-order out of a channels-last input", rtol=0)
    args = conv_args(IMAGE, 12, 3, 1, 1, 1)
    conv = op("ptlite::conv2d_prepacked")
    expected = conv(*args)
    nchw_out = np.empty(expected.shape, dtype=expected.dtype)
    result = conv(*args, out=nchw_out)
    assert not np.shares_memory(result, nchw_out)
    assert_close(result, expected, what="conv2d_prepacked with a C-order out", rtol=0)
