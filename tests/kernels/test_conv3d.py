"""3-D convolution kernels against PyTorch: video-network shapes (r3d's 3x3x3, r(2+1)d's 1x3x3 / 3x1x1 pairs, mc3's
mixed ones), grouped, depthwise, dilated, strided per axis, 'same', unbatched, transposed, and the generic
operators (aten::convolution / _convolution) with 5-D inputs; also im2col done a slab of frames at a time."""

from __future__ import annotations

import pytest
from kernel_backend import kernel as op
from oracle import check, check_schemas, randn

# (N, C, D, H, W), (O, kd, kh, kw), stride, padding, dilation, groups, bias
CONV3D_CASES = [
    ((1, 3, 5, 17, 17), (8, 3, 7, 7), (1, 2, 2), (1, 3, 3), 1, 1, False),      # r3d / mc3 stem
    ((1, 3, 4, 15, 15), (6, 1, 7, 7), (1, 2, 2), (0, 3, 3), 1, 1, True),       # r(2+1)d stem, spatial part
    ((2, 6, 4, 8, 8), (8, 3, 1, 1), 1, (1, 0, 0), 1, 1, True),                 # r(2+1)d temporal part, batch
    ((1, 8, 5, 9, 9), (8, 3, 3, 3), 1, 1, 1, 1, True),                         # 3x3x3 residual block
    ((1, 8, 5, 9, 9), (12, 3, 3, 3), 2, 1, 1, 1, False),                       # downsampling 3x3x3
    ((1, 8, 5, 9, 9), (12, 1, 3, 3), (1, 2, 2), (0, 1, 1), 1, 1, True),        # mc3's 1x3x3 (no temporal)
    ((1, 8, 5, 9, 9), (12, 1, 1, 1), 2, 0, 1, 1, False),                       # 1x1x1 shortcut, stride 2
    ((1, 8, 5, 9, 9), (12, 1, 1, 1), 1, 0, 1, 4, True),                        # grouped pointwise
    ((2, 8, 4, 7, 7), (12, 3, 3, 3), (2, 1, 2), (1, 0, 1), 1, 4, True),        # grouped, per-axis stride/padding
    ((1, 6, 5, 8, 8), (6, 3, 3, 3), 1, 1, 1, 6, True),                         # depthwise
    ((1, 4, 5, 8, 8), (8, 3, 3, 3), 1, 1, 1, 4, False),                        # depthwise, channel multiplier 2
    ((1, 4, 7, 10, 10), (5, 3, 3, 3), 1, (2, 2, 1), (2, 2, 1), 1, True),       # dilated per axis
    ((1, 4, 6, 9, 11), (5, 2, 4, 3), (3, 2, 1), (0, 2, 1), (1, 1, 2), 1, True),  # uneven everything
    ((1, 2, 3, 4, 4), (3, 2, 2, 2), 3, 0, 1, 1, True),                         # stride > kernel
]


def _three(v) -> list[int]:
    return list(v) if isinstance(v, tuple) else [v] * 3


@pytest.mark.parametrize("case", CONV3D_CASES, ids=[f"conv3d-{i}" for i in range(len(CONV3D_CASES))])
def test_conv3d_matches_torch(case, rng):
    shape, (o, kd, kh, kw), stride, padding, dilation, groups, has_bias = case
    x = randn(rng, *shape)
    w = randn(rng, o, shape[1] // groups, kd, kh, kw)
    b = randn(rng, o) if has_bias else None
    check("aten::conv3d", x, w, b, _three(stride), _three(padding), _three(dilation), groups)


def test_conv3d_unbatched_short_lists_and_strided_input(rng):
    check("aten::conv3d", randn(rng, 3, 4, 6, 6), randn(rng, 5, 3, 3, 3, 3), randn(rng, 5), [2], [1], [1], 1)
    x = randn(rng, 1, 6, 7, 4, 5).transpose(0, 2, 1, 3, 4)  # (1, 7, 6, 4, 5), not contiguous
    x.flags.writeable = False
    check("aten::conv3d", x, randn(rng, 4, 7, 3, 3, 3), None, [1, 1, 1], [1, 1, 1], [1, 1, 1], 1)


@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("kernel,dilation", [((3, 3, 3), 1), ((2, 4, 3), 1), ((3, 2, 3), 2)])
def test_conv3d_string_padding(padding, kernel, dilation, rng):
    x, w = randn(rng, 1, 4, 7, 9, 8), randn(rng, 6, 2, *kernel)
    check("aten::conv3d.padding", x, w, randn(rng, 6), [1, 1, 1], padding, [dilation] * 3, 2)


def test_conv3d_in_slabs_of_frames(rng, monkeypatch):
    """A budget of columns smaller than one image's makes im2col run a few output frames at a time."""
    from ptlite.backends.numpy import conv

    monkeypatch.setattr(conv, "_COLUMNS_BUDGET", 2 * 8 * 27 * 6 * 6)  # two output frames of 8 channels
    x, w = randn(rng, 2, 8, 7, 6, 6), randn(rng, 5, 8, 3, 3, 3)
    check("aten::conv3d", x, w, randn(rng, 5), [1, 1, 1], [1, 1, 1], [1, 1, 1], 1)  # slabs of 2, 2, 2, 1
    check("aten::conv3d", x, randn(rng, 6, 4, 3, 3, 3), None, [2, 1, 1], [1, 1, 1], [1, 1, 1], 2)


# (N, C, D, H, W), out channels, kernel, stride, padding, output_padding, groups, dilation
TRANSPOSED_CASES = [
    ((1, 4, 3, 4, 4), 3, (2, 2, 2), 2, 0, 0, 1, 1),
    ((2, 4, 3, 4, 5), 6, (3, 3, 2), (1, 2, 2), (1, 1, 0), (0, 1, 1), 2, 1),
    ((1, 6, 2, 3, 3), 3, (3, 3, 3), 2, 1, 1, 3, (1, 2, 1)),
]


@pytest.mark.parametrize("case", TRANSPOSED_CASES, ids=[f"tconv3d-{i}" for i in range(len(TRANSPOSED_CASES))])
def test_conv_transpose3d_matches_torch(case, rng):
    shape, o, kernel, stride, padding, output_padding, groups, dilation = case
    x, w = randn(rng, *shape), randn(rng, shape[1], o // groups, *kernel)
    check("aten::conv_transpose3d.input", x, w, randn(rng, o), _three(stride), _three(padding),
          _three(output_padding), groups, _three(dilation))


@pytest.mark.parametrize("transposed", [False, True])
def test_generic_convolution_with_5d_input(transposed, rng):
    """What trace (aten::_convolution) and decomposed graphs (aten::convolution) record for Conv3d."""
    x = randn(rng, 1, 4, 4, 6, 6)
    w = randn(rng, 4, 3, 3, 3, 3) if transposed else randn(rng, 6, 2, 3, 3, 3)
    args = (x, w, randn(rng, 3 if transposed else 6), [2, 1, 2], [1, 1, 1], [1, 1, 1], transposed,
            [1, 0, 1] if transposed else [0, 0, 0], 1 if transposed else 2)
    check("aten::convolution", *args)
    check("aten::_convolution", *args, False, False, True, True)
    check("aten::_convolution.deprecated", *args, False, False, True)
    check("aten::_convolution_mode", x, randn(rng, 6, 2, 3, 1, 3), None, [1, 1, 1], "same", [1, 1, 1], 2)


def test_convolution_of_more_than_3_spatial_axes_is_reported_unsupported(rng):
    with pytest.raises(NotImplementedError, match="1-D, 2-D and 3-D convolutions, not 4-D"):
        op("aten::convolution")(randn(rng, 1, 2, 2, 2, 2, 2), randn(rng, 2, 2, 1, 1, 1, 1), None, [1], [0], [1],
                                False, [0], 1)


def test_conv3d_channel_mismatch_is_named(rng):
    with pytest.raises(ValueError, match="conv3d: input has 4 channels"):
        op("aten::conv3d")(randn(rng, 1, 4, 3, 3, 3), randn(rng, 2, 3, 1, 1, 1), None, [1], [0], [1], 1)


def test_schemas_are_torchs():
    check_schemas(["aten::conv3d", "aten::conv3d.padding", "aten::conv_transpose3d.input"])
