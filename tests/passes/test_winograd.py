"""The winograd pass switches prepacked 3x3 stride-1 dense convolutions on large enough images to Winograd, and
leaves every other convolution (strided, dilated, grouped, few channels, small or unknown image) alone."""

from __future__ import annotations

import numpy as np
from conftest import assert_close
from irbuild import GraphBuilder, ops

from ptlite.ir import verify
from ptlite.passes.base import copy_program
from ptlite.passes.dead_code import DeadCode
from ptlite.passes.prepack import Prepack
from ptlite.passes.winograd import MIN_SIZE, Winograd
from ptlite.runtime.module import Module


def conv_program(rng, c=16, o=16, size=MIN_SIZE, stride=1, dilation=1, groups=1, kernel=3, known_shape=True):
    b = GraphBuilder("x")
    w = b.weight("conv.weight", (rng.normal(0, 1, (o, c // groups, kernel, kernel)) / (3 * np.sqrt(c)))
                 .astype(np.float32))
    out = (size - 1) // stride + 1
    y = b.op("aten::conv2d", b.inputs[0], w, None, [stride] * 2, [dilation] * 2, [dilation] * 2, groups,
             shape=(1, o, out, out) if known_shape else None)
    program = b.ret(b.op("aten::relu", y))
    Prepack()(program)
    return program


def test_rewritten_where_it_wins(rng):
    program = conv_program(rng)
    before = copy_program(program)
    assert Winograd()(program).modified
    DeadCode()(program)
    verify(program)
    assert ops(program) == ["ptlite::conv2d_winograd", "aten::relu"]
    assert list(program.weights) == ["conv.winograd"] and program.weights["conv.winograd"].shape == (36, 16, 16)
    assert not Winograd()(program).modified
    x = rng.normal(size=(1, 16, MIN_SIZE, MIN_SIZE)).astype(np.float32)
    assert_close(Module(program)(x), Module(before)(x), what="winograd program", rtol=2e-5)


def test_left_alone(rng):
    for kwargs in ({"stride": 2}, {"dilation": 2}, {"groups": 16}, {"c": 8}, {"o": 8}, {"size": MIN_SIZE - 1},
                   {"kernel": 5}, {"known_shape": False}):
        program = conv_program(rng, **kwargs)
        assert not Winograd()(program).modified, kwargs
