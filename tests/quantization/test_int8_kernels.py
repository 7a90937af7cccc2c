"""The reference's int8 kernels (backends/numpy/quantized.py) against PyTorch's quantized operators: every uint8
output within one quantization step of torch's (x86 and qnnpack engines: they round biases and ties differently,
by one step at most), dynamic linear within a few of the product's steps; and the exactness bound the kernels'
float arithmetic rests on, checked at its edge. With the x86 engine, convolution and linear inputs are 7-bit (as
PyTorch's x86 qconfig makes them, reduce_range): fbgemm without AVX-512 VNNI multiplies with vpmaddubsw, which
saturates a pair of uint8 x int8 products at int16, so full-range inputs are not computed exactly there; qnnpack
is exact and takes the full 8-bit range."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ptlite.backends.numpy.quantized import (
    FLOAT32_EXACT,
    add_int8,
    conv2d_int8,
    dequantize_per_tensor,
    embedding_int8,
    exact_dtype,
    linear_dynamic_int8,
    linear_int8,
    quantize_per_tensor,
)
from ptlite.errors import KernelArgumentError
from ptlite.ops.layouts import pack_conv2d_weight

# torch warns that its quantized tensors are deprecated; they are still its quantized reference
pytestmark = pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor:UserWarning")

ENGINES = [e for e in ("x86", "qnnpack") if e in torch.backends.quantized.supported_engines]


@pytest.fixture(params=ENGINES)
def engine(request):
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = request.param
    yield request.param
    torch.backends.quantized.engine = previous


def _steps_apart(ours: np.ndarray, theirs: torch.Tensor, what: str) -> None:
    theirs = theirs.int_repr().numpy() if theirs.is_quantized else theirs.numpy()
    assert ours.shape == theirs.shape, f"{what}: shape {ours.shape} != torch's {theirs.shape}"
    diff = np.abs(ours.astype(np.int32) - theirs.astype(np.int32))
    assert diff.max() <= 1, f"{what}: {int((diff > 1).sum())} outputs more than one step from torch's " \
                            f"(largest {diff.max()} steps)"
    assert (diff == 0).mean() > 0.95, f"{what}: only {(diff == 0).mean():.1%} of outputs equal torch's"


def _q_input(rng, shape, scale=0.05, zero_point=100, engine=None):
    x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32) * 2)
    if engine == "x86":
        # 7 bits (reduce_range: twice the step, half the zero point, 0..127): fbgemm on AVX2 (vpmaddubsw) saturates
        # a pair of products at int16 (255 x 127 x 2 > 32767); 7-bit inputs stay under it (127 x 128 x 2 = 32512)
        scale, zero_point = scale * 2, zero_point // 2
        x = x.clamp(-zero_point * scale, (127 - zero_point) * scale)
    q = torch.quantize_per_tensor(x, scale, zero_point, torch.quint8)
    assert engine != "x86" or int(q.int_repr().max()) <= 127
    return q


def _q_weight(rng, shape, per_channel=True):
    w = torch.from_numpy(rng.standard_normal(shape).astype(np.float32) * 0.2)
    if per_channel:
        scales = w.abs().reshape(shape[0], -1).amax(1) / 127
        return torch.quantize_per_channel(w, scales.double(), torch.zeros(shape[0], dtype=torch.long), 0, torch.qint8)
    return torch.quantize_per_tensor(w, float(w.abs().max()) / 127, 0, torch.qint8)


def _weight_scales(qw: torch.Tensor) -> np.ndarray:
    if qw.qscheme() == torch.per_tensor_affine:
        return np.full(qw.shape[0], qw.q_scale(), np.float32)
    return qw.q_per_channel_scales().numpy().astype(np.float32)


CONVS = [  # (in, out, kernel, stride, padding, groups, size)
    (8, 16, 3, 1, 1, 1, 9),
    (6, 10, 3, 2, 1, 1, 11),
    (16, 16, 3, 1, 1, 16, 8),  # depthwise
    (16, 16, 3, 2, 1, 16, 9),  # depthwise, stride 2
    (8, 12, 3, 1, 0, 4, 7),  # grouped
    (24, 32, 1, 1, 0, 1, 6),  # pointwise
]


@pytest.mark.parametrize("relu", [False, True], ids=["plain", "relu"])
@pytest.mark.parametrize("conv", CONVS, ids=lambda c: "c{}o{}k{}s{}p{}g{}".format(*c[:6]))
def test_conv2d_int8_matches_torch(engine, conv, relu):
    rng = np.random.default_rng(1)
    c, o, k, s, p, g, size = conv
    qx = _q_input(rng, (2, c, size, size), engine=engine)
    qw = _q_weight(rng, (o, c // g, k, k), per_channel=engine != "qnnpack" or g == 1)
    bias = torch.from_numpy(rng.standard_normal(o).astype(np.float32))
    packed = torch.ops.quantized.conv2d_prepack(qw, bias, [s, s], [p, p], [1, 1], g)
    out_scale, out_zp = 0.08, 90
    op = torch.ops.quantized.conv2d_relu if relu else torch.ops.quantized.conv2d
    want = op(qx, packed, out_scale, out_zp)
    ours = conv2d_int8(qx.int_repr().numpy(), qx.q_scale(), qx.q_zero_point(),
                       pack_conv2d_weight(qw.int_repr().numpy(), g), _weight_scales(qw), bias.numpy(), [k, k],
                       [s, s], [p, p, p, p], [1, 1], g, out_scale, out_zp, out_zp if relu else 0, 255)
    _steps_apart(np.ascontiguousarray(ours), want, f"conv2d_int8 {conv} {engine} relu={relu}")


@pytest.mark.parametrize("relu", [False, True], ids=["plain", "relu"])
def test_linear_int8_matches_torch(engine, relu):
    rng = np.random.default_rng(2)
    qx = _q_input(rng, (3, 5, 64), zero_point=30, engine=engine)
    qw = _q_weight(rng, (40, 64), per_channel=engine != "qnnpack")
    bias = torch.from_numpy(rng.standard_normal(40).astype(np.float32))
    packed = torch.ops.quantized.linear_prepack(qw, bias)
    op = torch.ops.quantized.linear_relu if relu else torch.ops.quantized.linear
    want = op(qx, packed, 0.1, 70)
    ours = linear_int8(qx.int_repr().numpy(), qx.q_scale(), qx.q_zero_point(), np.ascontiguousarray(
        qw.int_repr().numpy().T), _weight_scales(qw), bias.numpy(), 0.1, 70, 70 if relu else 0, 255)
    _steps_apart(ours, want, f"linear_int8 {engine} relu={relu}")


@pytest.mark.parametrize("relu", [False, True], ids=["plain", "relu"])
def test_add_int8_matches_torch(engine, relu):
    rng = np.random.default_rng(3)
    qa = _q_input(rng, (2, 8, 5, 5), 0.04, 120)
    qb = _q_input(rng, (2, 8, 5, 5), 0.07, 60)
    want = (torch.ops.quantized.add_relu if relu else torch.ops.quantized.add)(qa, qb, 0.09, 80)
    ours = add_int8(qa.int_repr().numpy(), qa.q_scale(), qa.q_zero_point(), qb.int_repr().numpy(), qb.q_scale(),
                    qb.q_zero_point(), 0.09, 80, 80 if relu else 0, 255)
    _steps_apart(ours, want, f"add_int8 {engine} relu={relu}")


def test_quantize_and_dequantize_match_torch():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((4, 3, 7, 7)).astype(np.float32) * 3
    want = torch.quantize_per_tensor(torch.from_numpy(x), 0.03, 128, torch.quint8)
    q = quantize_per_tensor(x, 0.03, 128)
    _steps_apart(q, want, "quantize_per_tensor")
    np.testing.assert_array_equal(dequantize_per_tensor(want.int_repr().numpy(), 0.03, 128),
                                  want.dequantize().numpy(), err_msg="dequantize_per_tensor")
    channels_last = x.transpose(0, 2, 3, 1).copy().transpose(0, 3, 1, 2)
    assert quantize_per_tensor(channels_last, 0.03, 128).transpose(0, 2, 3, 1).flags.c_contiguous, \
        "quantize_per_tensor: a channels-last input's result is not channels-last"


def test_linear_dynamic_int8_within_its_rounding_and_closer_than_torch():
    """Each row (token) is quantized on its own range: every output is within the bound its input's rounding allows
    (half a step of the row, times the sum of the weights' magnitudes) of the product with the dequantized weights,
    and no further from it than torch's dynamic linear (one range for the whole input) is."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 96)).astype(np.float32)
    x[2] *= 8  # a row with a wider range: per row, it coarsens only itself
    qw = _q_weight(rng, (48, 96), per_channel=False)
    bias = rng.standard_normal(48).astype(np.float32)
    w_scales = _weight_scales(qw)
    ours = linear_dynamic_int8(x, np.ascontiguousarray(qw.int_repr().numpy().T), w_scales, bias)
    exact = x.astype(np.float64) @ qw.dequantize().numpy().T.astype(np.float64) + bias
    row_step = (np.maximum(x.max(1), 0) - np.minimum(x.min(1), 0)) / 255
    bound = 0.5 * row_step[:, None] * (np.abs(qw.int_repr().numpy()).sum(1) * w_scales)[None, :] + 1e-5
    excess = np.abs(ours - exact) - bound
    assert excess.max() <= 0, f"linear_dynamic_int8: {int((excess > 0).sum())} outputs past their rounding bound"
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = ENGINES[-1]
    try:
        packed = torch.ops.quantized.linear_prepack(qw, torch.from_numpy(bias))
        theirs = torch.ops.quantized.linear_dynamic(torch.from_numpy(x), packed, False).numpy()
    finally:
        torch.backends.quantized.engine = previous
    ours_error, torch_error = np.abs(ours - exact).max(), np.abs(theirs - exact).max()
    assert ours_error <= torch_error, f"linear_dynamic_int8: max |error| {ours_error:.3g}, torch's {torch_error:.3g}"


def test_float32_is_exact_up_to_the_bound():
    """At the bound's edge (K = 514 products of 255 x -128, the largest a uint8 input and an int8 weight make),
    float32 sums are exact in any order; one product more takes float64, and there float32 would be wrong."""
    k_max = (FLOAT32_EXACT - 1) // (255 * 128)
    assert k_max == 514
    x = np.full((3, k_max), 255, np.uint8)
    x[1, ::2] = 0  # mixed signs once the zero point is off
    w = np.full((k_max, 4), -128, np.int8)
    w[::3, 1] = 127
    exact = (x.astype(np.int64)) @ w.astype(np.int64)
    assert exact_dtype(k_max, 0, w) == np.float32
    np.testing.assert_array_equal((x.astype(np.float32) @ w.astype(np.float32)).astype(np.int64), exact)
    for order in (np.arange(k_max), np.arange(k_max)[::-1], np.random.default_rng(6).permutation(k_max)):
        sums = np.cumsum((x[0].astype(np.float32) * w[:, 0].astype(np.float32))[order], dtype=np.float32)
        assert sums[-1] == exact[0, 0], "a float32 running sum under the bound was inexact"
    assert exact_dtype(k_max + 1, 0, np.full((k_max + 1, 1), -128, np.int8)) == np.float64
    # past the bound float32 loses: 1 + 2**24 is not a float32, so a sum that reaches 2**24 and adds 1 is rounded
    big = np.array([FLOAT32_EXACT, 1], np.float32)
    assert int(big.sum(dtype=np.float32)) != FLOAT32_EXACT + 1
    # and the kernel, given a reduction past the bound, is still exact (float64)
    k = 4 * k_max
    xq = np.random.default_rng(7).integers(0, 256, (2, k)).astype(np.uint8)
    wq = np.random.default_rng(8).integers(-128, 128, (k, 3)).astype(np.int8)
    ones = np.ones(3, np.float32)
    acc = linear_int8(xq, 1.0, 0, wq, ones, None, 1.0, 0, 0, 255)  # saturates: check the float path, not uint8
    exact = xq.astype(np.int64) @ wq.astype(np.int64)
    np.testing.assert_array_equal(acc, np.clip(exact, 0, 255))
    # a scale that keeps it in range: the exact sum, requantized
    acc = linear_int8(xq, 1.0, 0, wq, ones / 65536, None, 1.0, 128, 0, 255)
    np.testing.assert_array_equal(acc, np.clip(np.rint(exact.astype(np.float32) / 65536) + 128, 0, 255))


def test_embedding_int8_is_the_dequantized_rows():
    rng = np.random.default_rng(9)
    table = rng.integers(-127, 128, (50, 8)).astype(np.int8)
    scales = rng.random(50).astype(np.float32)
    indices = np.array([[0, 49, 7], [7, 3, 3]])
    np.testing.assert_array_equal(embedding_int8(table, scales, indices),
                                  (table.astype(np.float32) * scales[:, None])[indices])
    with pytest.raises(KernelArgumentError, match="index 50 is out of range for a table of 50 rows"):
        embedding_int8(table, scales, np.array([1, 50]))


@pytest.mark.parametrize("call, message", [
    (lambda: conv2d_int8(np.zeros((1, 2, 3, 3), np.float32), 0.1, 0, np.zeros((2, 2), np.int8),
                         np.ones(2, np.float32), None, [1, 1], [1, 1], [0] * 4, [1, 1], 1, 0.1, 0), "float32 tensor"),
    (lambda: linear_int8(np.zeros((1, 2), np.uint8), 0.0, 0, np.zeros((2, 2), np.int8), np.ones(2, np.float32),
                         None, 0.1, 0), "scale is 0.0"),
    (lambda: linear_int8(np.zeros((1, 2), np.uint8), 0.1, 300, np.zeros((2, 2), np.int8), np.ones(2, np.float32),
                         None, 0.1, 0), "zero point is 300"),
    (lambda: linear_int8(np.zeros((1, 2), np.uint8), 0.1, 0, np.zeros((2, 2), np.float32), np.ones(2, np.float32),
                         None, 0.1, 0), "takes int8 weights"),
    (lambda: linear_int8(np.zeros((1, 3), np.uint8), 0.1, 0, np.zeros((2, 2), np.int8), np.ones(2, np.float32),
                         None, 0.1, 0), "weight expects 2"),
    (lambda: add_int8(np.zeros((2, 3), np.uint8), 0.1, 0, np.zeros((4,), np.uint8), 0.1, 0, 0.1, 0),
     "do not broadcast"),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises(KernelArgumentError, match=message):
        call()
