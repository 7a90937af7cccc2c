"""Convolution and linear layers on panel-packed weights (ops/packed.py, the native backend's layout) against
PyTorch: the dense cases of test_prepacked.py (strides, padding, dilation, rectangular kernels, atrous, batches),
output channel counts that do not fill the last panel, every fused activation, NCHW and channels-last inputs."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import compare, op, randn, torch
from test_prepacked import ACTIVATIONS, CASES, pair, torch_conv

from ptlite.backends.numpy.packed import pack_panels, unpack_panels
from ptlite.ops.layouts import pack_conv2d_weight

F = torch.nn.functional

DENSE = [case for case in CASES if case[5] == 1] + [
    ((1, 16, 7, 7), (40, 3, 3), 1, 1, 1, 1),       # 40 outputs: a panel and a half
    ((2, 24, 5, 5), (17, 1, 1), 1, 0, 1, 1),       # 17 outputs: one column in the second panel
    ((1, 32, 4, 4), (64, 3, 3), 1, 1, 1, 1),       # whole panels
]


def packed_conv(x, w, b, stride, padding, dilation, activation="none", args=()):
    kh, kw = w.shape[2:]
    ph, pw = pair(padding)
    return op("ptlite::conv2d_packed")(x, pack_panels(pack_conv2d_weight(w, 1)), b, [kh, kw], pair(stride),
                                       [ph, ph, pw, pw], pair(dilation), w.shape[0], activation, list(args))


@pytest.mark.parametrize("case", DENSE, ids=[f"{c[0]}-{c[1]}-s{c[2]}-p{c[3]}-d{c[4]}" for c in DENSE])
def test_conv2d_packed_matches_torch(case, rng):
    shape, (o, kh, kw), stride, padding, dilation, _ = case
    x = randn(rng, *shape)
    w, b = randn(rng, o, shape[1], kh, kw), randn(rng, o)
    expected = torch_conv(x, w, b, stride, padding, dilation, 1)
    compare(f"conv2d_packed {case}", packed_conv(x, w, b, stride, padding, dilation), expected, tol=1e-4)
    channels_last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    compare(f"conv2d_packed {case}, channels-last input",
            packed_conv(channels_last, w, None, stride, padding, dilation),
            torch_conv(x, w, None, stride, padding, dilation, 1), tol=1e-4)


@pytest.mark.parametrize("activation,args,torch_fn", ACTIVATIONS, ids=[a[0] + str(a[1]) for a in ACTIVATIONS])
def test_conv2d_packed_fuses_activations(activation, args, torch_fn, rng):
    x, w, b = randn(rng, 1, 8, 9, 9), randn(rng, 20, 8, 3, 3), randn(rng, 20)
    expected = torch_fn(torch_conv(x, w, b, 1, 1, 1, 1))
    compare(f"conv2d_packed + {activation}{args}", packed_conv(x, w, b, 1, 1, 1, activation, args), expected,
            tol=1e-4)


GATED = [((2, 24, 6, 7), (24, 1, 1), 0, (2, 24, 1, 1)),  # per-image factors (squeeze-and-excitation)
         ((3, 16, 5, 5), (40, 3, 3), 1, (1, 16, 1, 1)),  # one set of factors for every image; 3x3 padded
         ((1, 8, 4, 9), (17, 1, 1), 0, (1, 8, 1, 1)),
         ((1, 8, 4, 5), (16, 1, 1), 0, (3, 8, 1, 1))]  # one image, three sets of factors: three results


@pytest.mark.parametrize("case", GATED, ids=[f"{c[0]}-{c[1]}-gate{c[3]}" for c in GATED])
def test_conv2d_packed_gated_is_the_convolution_of_the_product(case, rng):
    shape, (o, kh, kw), padding, gate_shape = case
    x, gate, w, b = randn(rng, *shape), randn(rng, *gate_shape), randn(rng, o, shape[1], kh, kw), randn(rng, o)
    expected = torch_conv(x * gate, w, b, 1, padding, 1, 1)
    weight = pack_panels(pack_conv2d_weight(w, 1))
    for layout, image in (("NCHW", x), ("channels-last", np.ascontiguousarray(x.transpose(0, 2, 3, 1))
                                                        .transpose(0, 3, 1, 2))):
        got = op("ptlite::conv2d_packed_gated")(image, gate, weight, b, [kh, kw], [1, 1], [padding] * 4, [1, 1], o)
        compare(f"conv2d_packed_gated {case}, {layout} input", got, expected, tol=1e-4)


def test_conv2d_packed_gated_names_a_gate_of_the_wrong_shape(rng):
    x, weight = randn(rng, 2, 8, 5, 5), pack_panels(pack_conv2d_weight(randn(rng, 16, 8, 1, 1), 1))
    for gate in (randn(rng, 2, 4, 1, 1), randn(rng, 3, 8, 1, 1), randn(rng, 2, 8, 5, 5), randn(rng, 8)):
        with pytest.raises(ValueError, match=r"gate must be \(N, C, 1, 1\) factors .*\(2, 8, 5, 5\)"):
            op("ptlite::conv2d_packed_gated")(x, gate, weight, None, [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 16)


@pytest.mark.parametrize("shape,o", [((1, 1280), 1000), ((3, 5, 24), 17), ((2, 16), 16), ((1, 7), 33)])
def test_linear_packed_matches_torch(shape, o, rng):
    x, w, b = randn(rng, *shape), randn(rng, o, shape[-1]), randn(rng, o)
    expected = F.relu(F.linear(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b))).numpy()
    got = op("ptlite::linear_packed")(x, pack_panels(np.ascontiguousarray(w.T)), b, o, "relu", [])
    compare(f"linear_packed {shape} -> {o}", got, expected, tol=1e-4)


def test_panels_round_trip_and_refuse_a_wrong_channel_count(rng):
    matrix = randn(rng, 27, 40)
    panels = pack_panels(matrix)
    assert panels.shape == (3, 27, 16) and not panels[2, :, 8:].any()
    np.testing.assert_array_equal(unpack_panels(panels, 40), matrix)
    for wrong in (0, 32, 49):
        with pytest.raises(ValueError, match="cannot hold"):
            unpack_panels(panels, wrong)
