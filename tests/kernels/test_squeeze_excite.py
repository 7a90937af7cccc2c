"""ptlite::squeeze_excite against torchvision's SqueezeExcitation (sigmoid gate, relu/silu inside) and MobileNetV3's
(hardsigmoid gate): NCHW and channels-last inputs, few and many channels (the two multiply paths), batches,
out=, and its errors."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import compare, op, randn, torch

from ptlite.backends.numpy._layout import is_channels_last
from ptlite.ops.layouts import pack_conv2d_weight

F = torch.nn.functional
ACT = {"relu": F.relu, "silu": F.silu, "none": lambda t: t}
GATE = {"sigmoid": torch.sigmoid, "hardsigmoid": F.hardsigmoid}


def reference(x, w1, b1, act1, w2, b2, gate):
    t = torch.from_numpy(np.ascontiguousarray(x))
    s = F.adaptive_avg_pool2d(t, 1)
    s = GATE[gate](F.conv2d(ACT[act1](F.conv2d(s, torch.from_numpy(w1), torch.from_numpy(b1))),
                            torch.from_numpy(w2), None if b2 is None else torch.from_numpy(b2)))
    return t * s


@pytest.mark.parametrize("shape", [(1, 16, 9, 7), (2, 300, 5, 6), (1, 32, 1, 1)], ids=["few", "many", "1x1"])
@pytest.mark.parametrize("act1,gate", [("silu", "sigmoid"), ("relu", "hardsigmoid"), ("none", "sigmoid")])
def test_matches_torch(shape, act1, gate, rng):
    c = shape[1]
    w1, b1 = randn(rng, c // 4, c, 1, 1), randn(rng, c // 4)
    w2, b2 = randn(rng, c, c // 4, 1, 1), randn(rng, c)
    x = randn(rng, *shape) * 2
    ref = reference(x, w1, b1, act1, w2, b2, gate)
    se = op("ptlite::squeeze_excite")
    for layout, inp in (("NCHW", x), ("channels-last", np.ascontiguousarray(x.transpose(0, 2, 3, 1))
                                      .transpose(0, 3, 1, 2))):
        ours = se(inp, pack_conv2d_weight(w1, 1), b1, act1, [], pack_conv2d_weight(w2, 1), b2, "none", [], gate)
        compare(f"ptlite::squeeze_excite {shape} {act1}/{gate} {layout}", ours, ref)
        assert layout == "NCHW" or shape[2] * shape[3] == 1 or is_channels_last(ours), "layout not kept"
    out = np.empty(shape[:1] + shape[2:] + shape[1:2], np.float32).transpose(0, 3, 1, 2)
    channels_last = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    got = se(channels_last, pack_conv2d_weight(w1, 1), b1, act1, [], pack_conv2d_weight(w2, 1), None, "none", [],
             gate, out=out)
    assert got is out
    compare(f"ptlite::squeeze_excite {shape} without b2, into out=", out, reference(x, w1, b1, act1, w2, None, gate))


def test_errors_name_the_problem(rng):
    x = randn(rng, 1, 8, 4, 4)
    w1, w2 = pack_conv2d_weight(randn(rng, 2, 8, 1, 1), 1), pack_conv2d_weight(randn(rng, 8, 2, 1, 1), 1)
    se = op("ptlite::squeeze_excite")
    with pytest.raises(ValueError, match="unknown squeeze-and-excitation gate 'tanh'"):
        se(x, w1, None, "relu", [], w2, None, "none", [], "tanh")
    with pytest.raises(ValueError, match="input with 6 channels does not match the packed weights"):
        se(randn(rng, 1, 6, 4, 4), w1, None, "relu", [], w2, None, "none", [], "sigmoid")
    with pytest.raises(ValueError, match="expects a 3-D .* or 4-D"):
        se(randn(rng, 8, 4), w1, None, "relu", [], w2, None, "none", [], "sigmoid")
    with pytest.raises(ValueError, match="has no pixels to average over"):
        se(randn(rng, 1, 8, 0, 4), w1, None, "relu", [], w2, None, "none", [], "sigmoid")


def test_unbatched_input(rng):
    """(C, H, W) as the convolutions take it: the result, and out= of that rank, as for a batch of one."""
    x = randn(rng, 8, 5, 6)
    w1, b1, w2, b2 = randn(rng, 2, 8, 1, 1), randn(rng, 2), randn(rng, 8, 2, 1, 1), randn(rng, 8)
    args = (pack_conv2d_weight(w1, 1), b1, "relu", [], pack_conv2d_weight(w2, 1), b2, "none", [], "hardsigmoid")
    ref = reference(x[None], w1, b1, "relu", w2, b2, "hardsigmoid")[0]
    compare("ptlite::squeeze_excite unbatched", op("ptlite::squeeze_excite")(x, *args), ref)
    out = np.empty_like(x)
    assert op("ptlite::squeeze_excite")(x, *args, out=out) is out
    compare("ptlite::squeeze_excite unbatched into out=", out, ref)
