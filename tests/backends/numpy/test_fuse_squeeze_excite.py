"""fuse_squeeze_excite runs pool -> 1x1 conv -> 1x1 conv -> sigmoid/hardsigmoid -> multiply as one
ptlite::squeeze_excite, and leaves every chain alone whose intermediates are used elsewhere, whose input is written
in between, or that spans blocks."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close
from irbuild import GraphBuilder, ops

from ptlite.backends.numpy.lower.fuse_activations import FuseActivations
from ptlite.backends.numpy.lower.fuse_squeeze_excite import FuseSqueezeExcite
from ptlite.backends.numpy.lower.prepack import Prepack
from ptlite.ir import verify
from ptlite.passes.base import copy_program
from ptlite.passes.dead_code import DeadCode
from ptlite.runtime.module import Module


def se_program(rng, c=8, hidden=3, gate="aten::sigmoid", swapped=False, extra_user=None, write_input=None,
               branch=False, gate_channels=None):
    """x -> adaptive_avg_pool2d -> conv(c->hidden) -> relu -> conv(hidden->c) -> gate -> x * gate.
    extra_user: "pool" / "hidden" / "gate" also returned; write_input: "between" (an add_ to x after the pool),
    "before" (before the pool); branch: the multiplication inside a prim::If."""
    b = GraphBuilder("x")
    x = b.inputs[0]
    if write_input == "before":
        b.op("aten::add_.Tensor", x, 1.0, 1)
    w1 = b.weight("fc1.weight", rng.normal(0, 0.5, (hidden, c, 1, 1)).astype(np.float32))
    b1 = b.weight("fc1.bias", rng.normal(0, 0.5, hidden).astype(np.float32))
    gc = c if gate_channels is None else gate_channels
    w2 = b.weight("fc2.weight", rng.normal(0, 0.5, (gc, hidden, 1, 1)).astype(np.float32))
    b2 = b.weight("fc2.bias", rng.normal(0, 0.5, gc).astype(np.float32))
    p = b.op("aten::adaptive_avg_pool2d", x, [1, 1])
    h = b.op("aten::relu", b.op("aten::conv2d", p, w1, b1, [1, 1], [0, 0], [1, 1], 1))
    s = b.op(gate, b.op("aten::conv2d", h, w2, b2, [1, 1], [0, 0], [1, 1], 1))
    if write_input == "between":
        b.op("aten::add_.Tensor", x, 1.0, 1)
    if branch:
        with b.block() as then:
            then.outputs.append(b.op("aten::mul.Tensor", s, x) if swapped else b.op("aten::mul.Tensor", x, s))
        with b.block() as other:
            other.outputs.append(x)
        y = b.op("prim::If", b.op("aten::is_floating_point", x, type="bool"), blocks=[then, other])
    else:
        y = b.op("aten::mul.Tensor", s, x) if swapped else b.op("aten::mul.Tensor", x, s)
    extra = {"pool": p, "hidden": h, "gate": s}.get(extra_user)
    program = b.ret(y) if extra is None else b.ret(y, extra)
    Prepack()(program)
    FuseActivations()(program)
    DeadCode()(program)
    return program


@pytest.mark.parametrize("gate", ["aten::sigmoid", "aten::hardsigmoid"])
@pytest.mark.parametrize("swapped", [False, True], ids=["x*s", "s*x"])
def test_fused(gate, swapped, rng):
    program = se_program(rng, gate=gate, swapped=swapped)
    before = copy_program(program)
    assert FuseSqueezeExcite()(program).modified
    DeadCode()(program)
    verify(program)
    assert ops(program) == ["ptlite::squeeze_excite"], ops(program)
    assert not FuseSqueezeExcite()(program).modified
    x = rng.normal(size=(2, 8, 5, 7)).astype(np.float32)
    assert_close(Module(program)(x), Module(before)(x), what=f"fused squeeze-excitation ({gate})", rtol=1e-6)


def test_fused_when_the_input_is_written_before(rng):
    program = se_program(rng, write_input="before")
    before = copy_program(program)
    assert FuseSqueezeExcite()(program).modified
    x = rng.normal(size=(1, 8, 4, 4)).astype(np.float32)
    assert_close(Module(program)(x.copy()), Module(before)(x.copy()), what="fused, x written before", rtol=1e-6)


@pytest.mark.parametrize("kwargs", [{"extra_user": "pool"}, {"extra_user": "hidden"}, {"extra_user": "gate"},
                                    {"write_input": "between"}, {"branch": True}, {"gate_channels": 1}],
                         ids=["pool-used-elsewhere", "hidden-used-elsewhere", "gate-used-elsewhere",
                              "input-written-between", "multiply-in-a-branch", "one-channel-gate-broadcast"])
def test_left_alone(kwargs, rng):
    program = se_program(rng, **kwargs)
    assert not FuseSqueezeExcite()(program).modified, ops(program)
