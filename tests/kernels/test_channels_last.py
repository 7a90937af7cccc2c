"""Channels-last images through the kernels that run between convolutions: values are PyTorch's, and a
channels-last input (NCHW shape, NHWC memory, as torch's `channels_last`) gives a channels-last result, while an
NCHW input still gives a C-contiguous one."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from oracle import check, randn  # noqa: E402

from ptlite.backends.numpy import _parallel  # noqa: E402
from ptlite.backends.numpy._layout import channel_broadcast, is_channels_last  # noqa: E402


def channels_last(x: np.ndarray) -> np.ndarray:
    """x (N, C, H, W) with its memory ordered N, H, W, C, made the way a user's tensor would be: by torch."""
    out = torch.from_numpy(np.ascontiguousarray(x)).contiguous(memory_format=torch.channels_last).numpy()
    assert is_channels_last(out), f"test setup: {x.shape} did not become channels-last"
    return out


def assert_layout(what: str, result: np.ndarray, want_channels_last: bool) -> None:
    """A 4-D result is channels-last or C-contiguous as wanted (shapes where both orders coincide: C-contiguous)."""
    if result.ndim != 4:
        return
    n, c, h, w = result.shape
    if c == 1 or h * w == 1:
        assert result.flags.c_contiguous, f"{what}: result {result.shape} strides {result.strides} is not dense"
    elif want_channels_last:
        assert is_channels_last(result), f"{what}: result {result.shape} strides {result.strides} lost channels-last"
    else:
        assert result.flags.c_contiguous, f"{what}: NCHW input gave strides {result.strides}, not C-contiguous"


def check_layouts(key: str, *args, images: tuple[int, ...] = (0,), tol: float = 1e-5) -> None:
    """check(key, *args) with the arguments at `images` given NCHW, then channels-last; every 4-D result must
    be in the layout of the images."""
    for cl in (False, True):
        given = list(args)
        for i in images:
            given[i] = channels_last(given[i]) if cl else np.ascontiguousarray(given[i])
        ours, _ = check(key, *given, tol=tol)
        what = f"{key} ({'channels-last' if cl else 'NCHW'} input)"
        for r in ours if isinstance(ours, (tuple, list)) else [ours]:
            assert_layout(what, r, cl)


# N=2 tells per-sample values from shared ones. LARGE has more than 2 * ELEMENTWISE_GRAIN elements (threaded
# activations) and more than channel_broadcast's minimum (tiled per-channel operands): 6400 pixels of 24 channels
# make 18 rows of 341 pixels and a remainder; LARGE_N2: 8 rows of 512 pixels per image and a remainder.
SHAPES = [(2, 8, 5, 6), (1, 8, 20, 30)]
LARGE = (1, 24, 80, 80)
LARGE_N2 = (2, 16, 64, 70)
GELU_LARGE = (1, 32, 96, 96)  # > gelu's block size


# ----------------------------------------------------------------------------------------------------
# Activations
# ----------------------------------------------------------------------------------------------------

UNARY = [("aten::relu",), ("aten::relu_",), ("aten::relu6",), ("aten::relu6_",), ("aten::hardtanh", -1.0, 1.0),
         ("aten::hardtanh", 0.0, 6.0), ("aten::hardtanh_", 0.0, 6.0), ("aten::clamp", 0.0, 6.0),
         ("aten::clamp", -0.5, None), ("aten::clamp_", None, 1.0), ("aten::clamp_min", 0.25),
         ("aten::hardswish",), ("aten::hardswish_",), ("aten::hardsigmoid",), ("aten::hardsigmoid_",),
         ("aten::silu",), ("aten::silu_",), ("aten::sigmoid",), ("aten::sigmoid_",), ("aten::tanh",),
         ("aten::tanh_",), ("aten::mish",), ("aten::gelu", "none"), ("aten::gelu", "tanh"), ("aten::gelu_", "none"),
         ("aten::leaky_relu", 0.1), ("aten::leaky_relu_", 0.1), ("aten::elu", 1.0, 1.0, 1.0),
         ("aten::softplus", 1.0, 20.0), ("aten::dropout", 0.2, False), ("aten::native_dropout", 0.2, False)]


@pytest.mark.parametrize("call", UNARY, ids=[" ".join(map(str, c)) for c in UNARY])
@pytest.mark.parametrize("shape", SHAPES + [LARGE])
def test_activation_keeps_layout(call, shape, rng):
    key, *args = call
    check_layouts(key, randn(rng, *shape) * 4, *args)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_blocked_path_keeps_layout(approximate, rng):
    check_layouts("aten::gelu", randn(rng, *GELU_LARGE) * 4, approximate)


def test_prelu_per_channel_keeps_layout(rng):
    check_layouts("aten::prelu", randn(rng, 2, 8, 5, 6), randn(rng, 8))


def test_elementwise_splits_channels_last_arrays_across_threads(rng):
    """The threaded splitter works on flat memory-order views of a channels-last pair (it used to run such
    arrays on one thread)."""
    x = channels_last(randn(rng, *LARGE))
    out = np.empty_like(x)
    pieces = []

    def negate(a, b):
        pieces.append(a.shape)
        np.negative(a, out=b)

    saved = _parallel.num_threads()
    _parallel.set_num_threads(2)
    try:
        _parallel.elementwise(negate, x, out)
    finally:
        _parallel.set_num_threads(saved)
    assert len(pieces) == 2 and all(len(p) == 1 for p in pieces), f"elementwise split {LARGE} into {pieces}"
    assert np.array_equal(out, -x) and is_channels_last(out), "elementwise on channels-last pieces: wrong result"


def test_elementwise_does_not_split_arrays_in_different_orders(rng):
    x = channels_last(randn(rng, *LARGE))
    out = np.empty(x.shape, x.dtype)
    pieces = []
    _parallel.elementwise(lambda a, b: (pieces.append(a.shape), np.negative(a, out=b)), x, out)
    assert pieces == [x.shape] and np.array_equal(out, -x), f"mixed-order elementwise ran on pieces {pieces}"


# ----------------------------------------------------------------------------------------------------
# Binary elementwise ops
# ----------------------------------------------------------------------------------------------------

def _other(rng, kind: str, shape):
    n, c = shape[:2]
    return {"same": lambda: randn(rng, *shape), "(N,C,1,1)": lambda: randn(rng, n, c, 1, 1) + 2,
            "(1,C,1,1)": lambda: randn(rng, 1, c, 1, 1) + 2, "(C,1,1)": lambda: randn(rng, c, 1, 1) + 2,
            "(1,1,1,1)": lambda: randn(rng, 1, 1, 1, 1) + 2, "0-d": lambda: np.array(2.5, np.float32)}[kind]()


OTHERS = ["same", "(N,C,1,1)", "(1,C,1,1)", "(C,1,1)", "(1,1,1,1)", "0-d"]
BINARY = ["aten::add.Tensor", "aten::sub.Tensor", "aten::mul.Tensor", "aten::div.Tensor", "aten::maximum",
          "aten::minimum", "aten::gt.Tensor", "aten::remainder.Tensor"]


@pytest.mark.parametrize("key", BINARY)
@pytest.mark.parametrize("other", OTHERS)
@pytest.mark.parametrize("shape", SHAPES + [LARGE, LARGE_N2])
def test_binary_op_keeps_layout(key, other, shape, rng):
    x, y = randn(rng, *shape), _other(rng, other, shape)
    extra = [1] if key in ("aten::add.Tensor", "aten::sub.Tensor") else []
    image_y = (1,) if other == "same" else ()
    check_layouts(key, x, y, *extra, images=(0,) + image_y)
    check_layouts(key, y, x, *extra, images=(1,) + tuple(i - 1 for i in image_y))  # image second


@pytest.mark.parametrize("shape", SHAPES + [LARGE_N2])
def test_scalar_and_alpha_forms_keep_layout(shape, rng):
    x, y = randn(rng, *shape), randn(rng, 1, shape[1], 1, 1)
    check_layouts("aten::add.Tensor", x, y, 2)
    check_layouts("aten::sub.Tensor", x, y, 0.5)
    check_layouts("aten::rsub.Tensor", x, y, 1)
    check_layouts("aten::add.Scalar", x, 1.5, 1)
    check_layouts("aten::mul.Scalar", x, 3)
    check_layouts("aten::div.Scalar", x, 6)
    ints = rng.integers(-5, 5, shape).astype(np.int32)
    check_layouts("aten::add.Tensor", ints, rng.integers(-5, 5, (shape[1], 1, 1)).astype(np.int32), 1)
    check_layouts("aten::div.Tensor", ints, rng.integers(1, 5, (1, shape[1], 1, 1)).astype(np.int32))


@pytest.mark.parametrize("key", ["aten::add_.Tensor", "aten::mul_.Tensor", "aten::sub_.Tensor",
                                 "aten::div_.Tensor"])
@pytest.mark.parametrize("shape", SHAPES + [LARGE, LARGE_N2])
def test_inplace_binary_op_with_per_channel_operand(key, shape, rng):
    extra = [1] if key in ("aten::add_.Tensor", "aten::sub_.Tensor") else []
    check_layouts(key, randn(rng, *shape), randn(rng, shape[0], shape[1], 1, 1) + 2, *extra)


def test_where_keeps_layout(rng):
    x, y = randn(rng, 2, 8, 40, 30), randn(rng, 1, 8, 1, 1)
    check_layouts("aten::where.self", x > 0, x, y, images=(0, 1))
    check_layouts("aten::where.ScalarOther", x > 0, x, 0.0, images=(0, 1))


@pytest.mark.parametrize("shape", [LARGE, LARGE_N2])
def test_channel_broadcast_tiles_per_channel_operands(shape, rng):
    x = channels_last(randn(rng, *shape))
    n, c = shape[:2]
    for other in (randn(rng, n, c, 1, 1), randn(rng, c, 1, 1)):
        for a, b in ((x, other), (other, x)):
            ours = channel_broadcast(np.subtract, a, b)
            assert ours is not None and is_channels_last(ours), f"channel_broadcast {a.shape} - {b.shape} declined"
            assert np.array_equal(ours, np.subtract(a, b)), f"channel_broadcast {a.shape} - {b.shape}: wrong values"


def test_channel_broadcast_declines_other_shapes(rng):
    x = channels_last(randn(rng, *LARGE))
    c, h, w = LARGE[1:]
    for other in (randn(rng, 1, c, h, 1), randn(rng, w), randn(rng, 1, 1, 1, 1), randn(rng, 2, c, 1, 1), x):
        assert channel_broadcast(np.add, x, other) is None, f"channel_broadcast took {x.shape} with {other.shape}"
    assert channel_broadcast(np.add, np.ascontiguousarray(x), randn(rng, 1, c, 1, 1)) is None, \
        "channel_broadcast took an NCHW image"
    small = channels_last(randn(rng, 1, 8, 4, 4))
    assert channel_broadcast(np.add, small, randn(rng, 1, 8, 1, 1)) is None, "channel_broadcast took a small image"


# ----------------------------------------------------------------------------------------------------
# Pooling
# ----------------------------------------------------------------------------------------------------

# (N, C, H, W), kernel, stride, padding, dilation, ceil_mode
MAX_CASES = [((1, 8, 16, 16), 3, 2, 1, 1, False), ((2, 4, 15, 15), 3, 2, 0, 1, True),
             ((1, 5, 14, 14), 3, 1, 1, 1, True), ((1, 3, 14, 13), 2, 2, 0, 1, False),
             ((1, 6, 11, 12), 3, 2, 1, 2, True), ((1, 4, 10, 9), (2, 3), (1, 2), (1, 1), 1, False)]


def _two(v):
    return list(v) if isinstance(v, tuple) else [v, v]


@pytest.mark.parametrize("case", MAX_CASES, ids=[f"max-{i}" for i in range(len(MAX_CASES))])
def test_max_pool2d_keeps_layout(case, rng):
    shape, k, s, p, d, ceil = case
    args = (_two(k), _two(s), _two(p), _two(d), ceil)
    check_layouts("aten::max_pool2d", randn(rng, *shape), *args)
    ties = rng.integers(-3, 3, shape).astype(np.float32)  # ties resolve to the first maximum, as in torch
    check_layouts("aten::max_pool2d_with_indices", ties, *args)
    x = randn(rng, *shape)
    x[0, 0, 1, 1] = np.nan
    check_layouts("aten::max_pool2d_with_indices", x, *args)


# (N, C, H, W), kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
AVG_CASES = [((1, 4, 8, 8), 2, 2, 0, False, True, None), ((2, 3, 9, 11), 3, 2, 1, False, True, None),
             ((1, 3, 9, 11), 3, 2, 1, False, False, None), ((1, 3, 10, 10), 3, 2, 1, True, False, None),
             ((1, 3, 7, 8), (2, 3), (1, 2), (1, 1), True, True, None), ((1, 3, 7, 8), 3, 1, 1, False, True, 5)]


@pytest.mark.parametrize("case", AVG_CASES, ids=[f"avg-{i}" for i in range(len(AVG_CASES))])
def test_avg_pool2d_keeps_layout(case, rng):
    shape, k, s, p, ceil, count_pad, divisor = case
    check_layouts("aten::avg_pool2d", randn(rng, *shape), _two(k), _two(s), _two(p), ceil, count_pad, divisor)


@pytest.mark.parametrize("shape,size", [((2, 8, 7, 7), [1, 1]), ((1, 16, 20, 30), [1, 1]), ((1, 3, 14, 14), [7, 7]),
                                        ((2, 3, 10, 13), [3, 5]), ((1, 2, 5, 6), [7, 8]), ((1, 4, 6, 9), [2, 4])])
def test_adaptive_pools_keep_layout(shape, size, rng):
    x = randn(rng, *shape)
    check_layouts("aten::adaptive_avg_pool2d", x, size)
    check_layouts("aten::_adaptive_avg_pool2d", x, size)
    check_layouts("aten::adaptive_max_pool2d", x, size)
    check_layouts("aten::adaptive_max_pool2d", rng.integers(-2, 2, shape).astype(np.float32), size)


# ----------------------------------------------------------------------------------------------------
# Upsampling, normalization, concatenation, spatial mean
# ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("shape,size", [((2, 3, 5, 7), [10, 14]), ((1, 4, 8, 6), [5, 9]), ((1, 4, 1, 6), [3, 4]),
                                        ((1, 3, 100, 98), [120, 50])])  # long axes: gathers, not products
def test_bilinear_keeps_layout(shape, size, align_corners, rng):
    x = randn(rng, *shape)
    check_layouts("aten::upsample_bilinear2d.vec", x, size, align_corners, None)
    check_layouts("aten::upsample_bilinear2d", x, size, align_corners, None, None)


def test_bilinear_scale_factors_keep_layout(rng):
    x = randn(rng, 1, 4, 6, 7)
    check_layouts("aten::upsample_bilinear2d.vec", x, None, False, [2.0, 1.5])


@pytest.mark.parametrize("shape,size", [((2, 3, 5, 7), [10, 14]), ((1, 4, 8, 6), [5, 9]), ((1, 4, 3, 3), [9, 6])])
def test_nearest_keeps_layout(shape, size, rng):
    x = randn(rng, *shape)
    check_layouts("aten::upsample_nearest2d.vec", x, size, None)
    check_layouts("aten::upsample_nearest2d", x, size, None, None)
    check_layouts("aten::upsample_nearest2d.vec", x, None, [2.0, 2.0])


@pytest.mark.parametrize("shape", [(2, 8, 20, 30), LARGE_N2])
def test_batch_norm_keeps_layout(shape, rng):
    x, c = randn(rng, *shape), shape[1]
    w, b, mean, var = randn(rng, c), randn(rng, c), randn(rng, c), np.abs(randn(rng, c)) + 0.5
    check_layouts("aten::batch_norm", x, w, b, mean, var, False, 0.1, 1e-5, True)
    check_layouts("aten::batch_norm", x, None, None, mean, var, False, 0.1, 1e-5, True)
    check_layouts("aten::_native_batch_norm_legit_no_training", x, w, b, mean, var, 0.1, 1e-3)
    check_layouts("aten::native_batch_norm", x, w, b, None, None, True, 0.1, 1e-5)  # batch statistics


def test_group_and_layer_norm_stay_correct_on_channels_last(rng):
    x = channels_last(randn(rng, 2, 8, 5, 6))
    check("aten::group_norm", x, 4, randn(rng, 8), randn(rng, 8), 1e-5, True)
    check("aten::native_group_norm", x, randn(rng, 8), randn(rng, 8), 2, 8, 30, 2, 1e-5)
    check("aten::layer_norm", x, [5, 6], randn(rng, 5, 6), randn(rng, 5, 6), 1e-5, True)
    check("aten::layer_norm", x, [8, 5, 6], None, None, 1e-5, True)
    check("aten::instance_norm", x, None, None, None, None, True, 0.1, 1e-5, True)


def test_cat_of_channels_last_images_along_channels(rng):
    a, b, one = randn(rng, 2, 3, 5, 6), randn(rng, 2, 8, 5, 6), randn(rng, 2, 1, 5, 6)
    for dim in (1, -3, 0):
        ours = check("aten::cat", [a, b if dim else a, one if dim else a], dim)[0]
        assert ours.flags.c_contiguous, f"aten::cat dim={dim} of NCHW images: strides {ours.strides}"
        # one channel: both orders at once, as torch makes it
        single = torch.from_numpy(one).contiguous(memory_format=torch.channels_last).numpy()
        given = [channels_last(a), channels_last(b), single] if dim else [channels_last(a)] * 2
        ours = check("aten::cat", given, dim)[0]
        assert is_channels_last(ours), f"aten::cat dim={dim} of channels-last images: strides {ours.strides}"


@pytest.mark.parametrize("dims", [[2, 3], [-1, -2], [3, 2]])
@pytest.mark.parametrize("keepdim", [True, False])
@pytest.mark.parametrize("shape", [(1, 16, 20, 30), (2, 8, 7, 7)])
def test_spatial_mean_of_channels_last(dims, keepdim, shape, rng):
    x = randn(rng, *shape)
    check_layouts("aten::mean.dim", x, dims, keepdim, None)
    check_layouts("aten::sum.dim_IntList", x, dims, keepdim, None)


def test_other_reductions_of_channels_last(rng):
    x = randn(rng, 2, 8, 5, 6)
    for dims in ([1], [0, 2], [1, 2, 3], None):
        check_layouts("aten::mean.dim", x, dims, True, None)
        check_layouts("aten::sum.dim_IntList", x, dims, False, None)
