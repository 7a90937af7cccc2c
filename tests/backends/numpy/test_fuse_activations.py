"""fuse_activations folds relu / relu6 / hardtanh / clamp / hardswish / silu into the prepacked convolution or linear
layer feeding them, and leaves activations alone when the producer's output has other users."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import assert_close
from irbuild import GraphBuilder, ops

from ptlite.backends.numpy.lower.fuse_activations import FuseActivations
from ptlite.backends.numpy.lower.prepack import Prepack
from ptlite.ir import verify
from ptlite.passes.base import constant_value, copy_program
from ptlite.passes.dead_code import DeadCode
from ptlite.runtime.module import Module

CASES = [
    (("aten::relu",), "relu", []),
    (("aten::relu_",), "relu", []),
    (("aten::relu6",), "clamp", [0.0, 6.0]),
    (("aten::hardtanh", -2.0, 2.5), "clamp", [-2.0, 2.5]),
    (("aten::hardtanh_", 0.0, 6.0), "clamp", [0.0, 6.0]),
    (("aten::clamp", 0.5, None), "clamp", [0.5, math.inf]),
    (("aten::clamp", None, 1), "clamp", [-math.inf, 1.0]),
    (("aten::hardswish",), "hardswish", []),
    (("aten::silu_",), "silu", []),
]


def conv_program(rng, activation, producer="conv"):
    b = GraphBuilder("x")
    if producer == "conv":
        w = b.weight("conv.weight", rng.normal(0, 0.5, (6, 4, 3, 3)).astype(np.float32))
        y = b.op("aten::conv2d", b.inputs[0], w, None, [1, 1], [1, 1], [1, 1], 1)
    else:
        y = b.op("aten::linear", b.inputs[0], b.weight("fc.weight", rng.normal(0, 1, (6, 5)).astype(np.float32)),
                 None)
    op, *args = activation
    program = b.ret(b.op(op, y, *args))
    Prepack()(program)
    return program


@pytest.mark.parametrize("activation,name,args", CASES, ids=[c[0][0] + str(c[0][1:]) for c in CASES])
@pytest.mark.parametrize("producer", ["conv", "linear"])
def test_fused(rng, activation, name, args, producer):
    program = conv_program(rng, activation, producer)
    before = copy_program(program)
    assert FuseActivations()(program).modified
    DeadCode()(program)
    verify(program)
    fused = program.forward.nodes[-1]
    assert ops(program) == [fused.op] and fused.op.startswith("ptlite::")
    assert constant_value(fused.inputs[-2]) == name and constant_value(fused.inputs[-1]) == args
    assert not FuseActivations()(program).modified
    x = rng.normal(0, 2, size=(1, 4, 7, 7) if producer == "conv" else (3, 5)).astype(np.float32)
    assert_close(Module(program)(x), Module(before)(x), what=f"{producer} + {activation[0]} fused", rtol=1e-5)


def test_not_fused(rng):
    # the producer's output is used elsewhere too
    b = GraphBuilder("x")
    w = b.weight("conv.weight", rng.normal(0, 0.5, (6, 4, 3, 3)).astype(np.float32))
    y = b.op("aten::conv2d", b.inputs[0], w, None, [1, 1], [1, 1], [1, 1], 1)
    program = b.ret(b.op("aten::relu", y), y)
    Prepack()(program)
    assert not FuseActivations()(program).modified
    # bounds that are not constants, an activation of an aten producer, a second activation after a fused one
    b = GraphBuilder("x", "lo")
    y = b.op("aten::conv2d", b.inputs[0], w, None, [1, 1], [1, 1], [1, 1], 1)
    program = b.ret(b.op("aten::clamp", y, b.op("aten::item", b.inputs[1], type="float"), None),
                    b.op("aten::relu", b.op("aten::sigmoid", y)))
    Prepack()(program)
    assert not FuseActivations()(program).modified
    program = conv_program(rng, ("aten::relu",))
    last = program.forward.nodes[-1]
    program.forward.nodes.append(type(last)("aten::relu6", [last.outputs[0]], [type(last.outputs[0])()]))
    program.forward.outputs = [program.forward.nodes[-1].outputs[0]]
    assert FuseActivations()(program).modified
    assert ops(program)[-1] == "aten::relu6"  # the first activation is fused; the producer then has one already
