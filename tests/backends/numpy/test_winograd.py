"""The winograd pass switches prepacked 3x3 stride-1 dense convolutions on large enough images to Winograd, and
leaves every other convolution (strided, dilated, grouped, few channels, small or unknown image) alone."""

from __future__ import annotations

import numpy as np
from conftest import assert_close
from irbuild import GraphBuilder, ops

from ptlite.backends import reference
from ptlite.backends.numpy.lower.prepack import Prepack
from ptlite.backends.numpy.lower.winograd import MIN_SIZE, Winograd
from ptlite.ir import verify
from ptlite.passes.base import copy_program
from ptlite.passes.dead_code import DeadCode
from ptlite.runtime.interpreter import runner
from ptlite.runtime.module import Module

reference_runner = runner(reference())  # compiles methods on the NumPy reference alone


def conv_program(rng, c=16, o=16, size=MIN_SIZE, stride=1, dilation=1, groups=1, kernel=3, known_shape=True,
                 input_shape=None, dtype=np.float32):
    b = GraphBuilder("x", shapes={"x": input_shape} if input_shape else None)
    w = b.weight("conv.weight", (rng.normal(0, 1, (o, c // groups, kernel, kernel)) / (3 * np.sqrt(c)))
                 .astype(dtype))
    out = (size - 1) // stride + 1
    y = b.op("aten::conv2d", b.inputs[0], w, None, [stride] * 2, [dilation] * 2, [dilation] * 2, groups,
             shape=(1, o, out, out) if known_shape else None)
    program = b.ret(b.op("aten::relu", y))
    Prepack()(program)
    return program


def test_rewritten_where_it_wins(rng):
    program = conv_program(rng)
    before = copy_program(program)
    assert Winograd(reference_runner)(program).modified
    DeadCode()(program)
    verify(program)
    assert ops(program) == ["ptlite::conv2d_winograd_v2", "aten::relu"]
    assert list(program.weights) == ["conv.winograd"] and program.weights["conv.winograd"].shape == (36, 16, 16)
    assert not Winograd(reference_runner)(program).modified
    x = rng.normal(size=(1, 16, MIN_SIZE, MIN_SIZE)).astype(np.float32)
    assert_close(Module(program)(x), Module(before)(x), what="winograd program", rtol=2e-5)


def test_left_alone(rng):
    for kwargs in ({"stride": 2}, {"dilation": 2}, {"groups": 16}, {"c": 8}, {"o": 8}, {"size": MIN_SIZE - 1},
                   {"kernel": 5}, {"known_shape": False}, {"dtype": np.float16}):
        program = conv_program(rng, **kwargs)
        assert not Winograd(reference_runner)(program).modified, kwargs


def test_size_from_a_run_on_zeros_when_inputs_are_static(rng):
    """No shape annotations (TorchScript, .ptl) but static input shapes: the output size comes from one run on
    zeros; an input of any size (or too small an image) leaves the convolution alone."""
    program = conv_program(rng, known_shape=False, input_shape=(1, 16, MIN_SIZE, MIN_SIZE))
    before = copy_program(program)
    assert Winograd(reference_runner)(program).modified
    assert ops(program)[-2:] == ["ptlite::conv2d_winograd_v2", "aten::relu"], ops(program)
    x = rng.normal(size=(1, 16, MIN_SIZE, MIN_SIZE)).astype(np.float32)
    assert_close(Module(program)(x), Module(before)(x), what="winograd from observed shapes", rtol=2e-5)
    for shape in ((1, 16, None, None), (1, 16, MIN_SIZE - 1, MIN_SIZE)):
        program = conv_program(rng, known_shape=False, input_shape=shape)
        assert not Winograd(reference_runner)(program).modified, shape


def test_observed_shapes():
    """Shapes of a run on zeros, for top-level and nested values; none when an input is not static or the run
    fails."""
    from ptlite.backends.numpy.lower.observe import observed_shapes

    b = GraphBuilder("x", shapes={"x": (2, 3)})
    y = b.op("aten::relu", b.inputs[0])
    z = b.op("aten::sum.dim_IntList", y, [1], False, None)
    program = b.ret(z)
    assert observed_shapes(program.forward, program, reference_runner) == {y.id: (2, 3), z.id: (2,)}
    b = GraphBuilder("x", shapes={"x": (2, None)})
    program = b.ret(b.op("aten::relu", b.inputs[0]))
    assert observed_shapes(program.forward, program, reference_runner) == {}
    b = GraphBuilder("x", shapes={"x": (2, 3)})
    program = b.ret(b.op("aten::reshape", b.inputs[0], [4, 4]))  # fails on zeros of that shape
    assert observed_shapes(program.forward, program, reference_runner) == {}


def test_run_on_zeros_made_once_per_graph_across_rounds(rng, monkeypatch):
    """A candidate left alone (here: too small) is still a candidate in the pipeline's next round; the shapes seen
    in the first round's run on zeros answer it, without running the method again."""
    import ptlite.backends.numpy.lower.winograd as pass_module

    calls = []
    real = pass_module.observed_shapes
    monkeypatch.setattr(pass_module, "observed_shapes", lambda g, p, run: calls.append(1) or real(g, p, run))
    program = conv_program(rng, known_shape=False, size=MIN_SIZE - 1, input_shape=(1, 16, MIN_SIZE - 1, MIN_SIZE - 1))
    winograd = Winograd(reference_runner)
    for _ in range(3):
        assert not winograd(program).modified
    assert len(calls) == 1
    # a new graph (a copy, as every optimize_for_mobile call and first-call specialization makes) is observed anew
    assert not winograd(copy_program(program)).modified and len(calls) == 2
