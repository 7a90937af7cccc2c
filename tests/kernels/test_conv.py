"""Convolution kernels against PyTorch: 1-D/2-D, grouped, depthwise, dilated, 'same', transposed, generic (3-D:
test_conv3d.py)."""

from __future__ import annotations

import pytest
from kernel_backend import kernel as op
from oracle import check, check_schemas, randn

# (N, C, H, W), (O, kh, kw), stride, padding, dilation, groups, bias
CONV2D_CASES = [
    ((1, 16, 9, 9), (8, 1, 1), 1, 0, 1, 1, True),          # pointwise
    ((2, 16, 9, 9), (8, 1, 1), 2, 0, 1, 1, False),         # strided pointwise, batch
    ((1, 8, 8, 8), (16, 1, 1), 1, 0, 1, 4, True),          # grouped pointwise
    ((1, 3, 17, 17), (8, 7, 7), 2, 3, 1, 1, True),         # stem
    ((2, 6, 10, 11), (4, 3, 3), 1, 1, 1, 1, True),         # 3x3, batch
    ((1, 8, 12, 12), (12, 3, 3), 2, 1, 1, 4, True),        # grouped
    ((1, 8, 12, 12), (8, 3, 3), 1, 1, 1, 8, True),         # depthwise
    ((2, 8, 13, 13), (8, 5, 5), 2, 2, 1, 8, False),        # depthwise 5x5 stride 2
    ((1, 4, 9, 9), (8, 3, 3), 1, 1, 1, 4, True),           # depthwise, channel multiplier 2
    ((1, 8, 16, 16), (8, 3, 3), 1, 2, 2, 8, True),         # dilated depthwise
    ((1, 5, 14, 14), (6, 3, 3), 1, 4, 4, 1, True),         # dilated (ASPP-like)
    ((1, 4, 10, 12), (6, 1, 7), (1, 2), (0, 3), 1, 1, True),  # rectangular kernel, per-axis stride
    ((1, 4, 6, 6), (3, 2, 2), 3, 0, 1, 1, False),          # stride > kernel
    ((1, 6, 11, 10), (6, 3, 3), 2, 2, 2, 6, True),         # dilated, strided depthwise
    ((1, 6, 9, 12), (6, 3, 5), (2, 3), (1, 0), 1, 6, True),  # depthwise, per-axis stride and padding
    ((1, 3, 5, 5), (3, 3, 3), 3, 1, 1, 3, True),           # depthwise, stride 3 on a small image
    ((1, 64, 7, 7), (64, 5, 5), 1, 2, 1, 64, True),        # depthwise, channels >= pixels (channels-last path)
    ((2, 96, 8, 9), (96, 3, 3), 2, 1, 1, 96, False),       # same path, strided, batch, no bias
    ((1, 80, 6, 6), (80, 3, 3), 1, 2, 2, 80, True),        # same path, dilated
]


@pytest.mark.parametrize("case", CONV2D_CASES, ids=[f"conv2d-{i}" for i in range(len(CONV2D_CASES))])
def test_conv2d_matches_torch(case, rng):
    shape, (o, kh, kw), stride, padding, dilation, groups, has_bias = case
    x = randn(rng, *shape)
    w = randn(rng, o, shape[1] // groups, kh, kw)
    b = randn(rng, o) if has_bias else None
    st = list(stride) if isinstance(stride, tuple) else [stride] * 2
    pd = list(padding) if isinstance(padding, tuple) else [padding] * 2
    check("aten::conv2d", x, w, b, st, pd, [dilation] * 2, groups)


def test_conv2d_on_read_only_strided_input(rng):
    x = randn(rng, 1, 6, 8, 10).transpose(0, 1, 3, 2)  # non-contiguous
    x.flags.writeable = False
    w = randn(rng, 6, 1, 3, 3)
    w.flags.writeable = False
    check("aten::conv2d", x, w, None, [1, 1], [1, 1], [1, 1], 6)
    check("aten::conv2d", x, randn(rng, 4, 6, 3, 3), None, [1, 1], [1, 1], [1, 1], 1)
    check("aten::conv2d", x, randn(rng, 4, 6, 1, 1), None, [1, 1], [0, 0], [1, 1], 1)


def test_conv2d_unbatched_and_short_lists(rng):
    x, w = randn(rng, 3, 8, 8), randn(rng, 5, 3, 3, 3)
    check("aten::conv2d", x, w, randn(rng, 5), [2], [1], [1], 1)


@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("kernel,dilation", [((3, 3), 1), ((4, 2), 1), ((4, 5), 2)])
def test_conv2d_string_padding(padding, kernel, dilation, rng):
    x, w = randn(rng, 1, 4, 11, 9), randn(rng, 6, 4, *kernel)
    check("aten::conv2d.padding", x, w, randn(rng, 6), [1, 1], padding, [dilation] * 2, 1)


def test_depthwise_same_padding_with_even_kernel(rng):
    x, w = randn(rng, 2, 5, 8, 7), randn(rng, 5, 1, 4, 2)
    check("aten::conv2d.padding", x, w, None, [1, 1], "same", [1, 1], 5)


@pytest.mark.parametrize("padding", ["same", "valid"])
def test_convolution_mode_from_traced_string_padding(padding, rng):
    check("aten::_convolution_mode", randn(rng, 1, 4, 9, 8), randn(rng, 6, 2, 4, 3), randn(rng, 6), [1, 1],
          padding, [2, 1], 2)
    check("aten::_convolution_mode", randn(rng, 2, 3, 12), randn(rng, 5, 3, 4), None, [1], padding, [1], 1)


def test_conv2d_same_padding_rejects_stride(rng):
    with pytest.raises(ValueError, match="same"):
        op("aten::conv2d.padding")(randn(rng, 1, 2, 5, 5), randn(rng, 2, 2, 3, 3), None, [2, 2],
                                         "same", [1, 1], 1)


@pytest.mark.parametrize("stride,padding,dilation,groups",
                         [(1, 0, 1, 1), (2, 3, 1, 1), (1, 2, 2, 3), (1, 1, 1, 6)])
def test_conv1d_matches_torch(stride, padding, dilation, groups, rng):
    x, w = randn(rng, 2, 6, 23), randn(rng, 9 if groups != 6 else 6, 6 // groups, 5)
    check("aten::conv1d", x, w, randn(rng, w.shape[0]), [stride], [padding], [dilation], groups)


def test_conv1d_same_padding(rng):
    x, w = randn(rng, 1, 3, 10), randn(rng, 4, 3, 4)
    check("aten::conv1d.padding", x, w, None, [1], "same", [1], 1)


# (N, C, H, W), out channels, kernel, stride, padding, output_padding, groups, dilation
TRANSPOSED_CASES = [
    ((1, 4, 5, 5), 3, 3, 1, 0, 0, 1, 1),
    ((2, 4, 5, 6), 6, 4, 2, 1, 0, 1, 1),
    ((1, 4, 5, 5), 4, 3, 2, 1, 1, 2, 1),
    ((1, 6, 4, 4), 3, 3, 3, 2, 2, 3, 2),
]


@pytest.mark.parametrize("case", TRANSPOSED_CASES, ids=[f"tconv-{i}" for i in range(len(TRANSPOSED_CASES))])
def test_conv_transpose2d_matches_torch(case, rng):
    shape, o, k, stride, padding, output_padding, groups, dilation = case
    x, w = randn(rng, *shape), randn(rng, shape[1], o // groups, k, k)
    check("aten::conv_transpose2d.input", x, w, randn(rng, o), [stride] * 2, [padding] * 2,
          [output_padding] * 2, groups, [dilation] * 2)


def test_conv_transpose1d_matches_torch(rng):
    x, w = randn(rng, 2, 4, 7), randn(rng, 4, 5, 3)
    check("aten::conv_transpose1d", x, w, randn(rng, 5), [2], [1], [1], 1, [1])


@pytest.mark.parametrize("transposed", [False, True])
def test_convolution_generic_forms(transposed, rng):
    x = randn(rng, 1, 4, 7, 7)
    w = randn(rng, 4, 3, 3, 3) if transposed else randn(rng, 6, 2, 3, 3)
    groups = 1 if transposed else 2
    args = (x, w, randn(rng, w.shape[1] if transposed else 6), [2, 2], [1, 1], [1, 1], transposed, [1, 1] if
            transposed else [0, 0], groups)
    check("aten::convolution", *args)
    check("aten::_convolution", *args, False, False, True, True)
    check("aten::_convolution.deprecated", *args, False, False, True)


def test_convolution_1d_through_generic_op(rng):
    x, w = randn(rng, 2, 3, 12), randn(rng, 5, 3, 3)
    check("aten::_convolution", x, w, None, [1], [1], [1], False, [0], 1, False, False, True, True)


def test_schemas_are_torchs():
    check_schemas(["aten::conv2d", "aten::conv2d.padding", "aten::conv1d", "aten::conv1d.padding",
                   "aten::conv_transpose2d.input", "aten::conv_transpose1d", "aten::convolution",
                   "aten::_convolution", "aten::_convolution.deprecated", "aten::_convolution_mode"])
