"""fuse_pointwise_depthwise runs a prepacked 1x1 convolution and the depthwise convolution that is its only user as
one ptlite::conv2d_pointwise_depthwise, activations included, and leaves every other pair alone."""

from __future__ import annotations

import numpy as np
from conftest import assert_close
from irbuild import GraphBuilder, ops

from ptlite.backends.numpy.lower.fuse_activations import FuseActivations
from ptlite.backends.numpy.lower.fuse_pointwise_depthwise import FusePointwiseDepthwise
from ptlite.backends.numpy.lower.prepack import Prepack
from ptlite.ir import verify
from ptlite.passes.base import copy_program
from ptlite.passes.dead_code import DeadCode
from ptlite.runtime.module import Module


def block_program(rng, c=4, e=12, kernel=3, stride=2, pw_kernel=1, pw_stride=1, groups=None, extra_user=False,
                  write_input=None, branch=False):
    """x -> conv(c->e, pw_kernel) -> relu6 -> conv(e->e, depthwise kernel) -> hardswish [-> also + pointwise output];
    write_input: where an in-place add writes to x (or to a view of it): "before" the pair, "between" its two
    convolutions, "view" (to a view of x, between), "nested" (inside a branch, between), "after" the pair."""
    b = GraphBuilder("x")

    def write(where):
        if write_input == "nested" and where == "between":
            with b.block() as then:
                then.outputs.append(b.op("aten::add_.Tensor", b.inputs[0], 1.0, 1))
            with b.block() as other:
                other.outputs.append(b.inputs[0])
            b.op("prim::If", b.op("aten::is_floating_point", b.inputs[0], type="bool"), blocks=[then, other])
        elif write_input == "view" and where == "between":
            b.op("aten::add_.Tensor", b.op("aten::view", b.inputs[0], [-1]), 1.0, 1)
        elif write_input == where:
            b.op("aten::add_.Tensor", b.inputs[0], 1.0, 1)

    write("before")
    w1 = b.weight("pw.weight", rng.normal(0, 0.5, (e, c, pw_kernel, pw_kernel)).astype(np.float32))
    b1 = b.weight("pw.bias", rng.normal(0, 0.5, e).astype(np.float32))
    y = b.op("aten::conv2d", b.inputs[0], w1, b1, [pw_stride] * 2, [pw_kernel // 2] * 2, [1, 1], 1)
    y = b.op("aten::hardtanh", y, 0.0, 6.0)
    write("between")
    groups = e if groups is None else groups
    wd = b.weight("dw.weight", rng.normal(0, 0.5, (e, e // groups, kernel, kernel)).astype(np.float32))
    bd = b.weight("dw.bias", rng.normal(0, 0.5, e).astype(np.float32))
    if branch:
        with b.block() as then:
            z = b.op("aten::conv2d", y, wd, bd, [stride] * 2, [kernel // 2] * 2, [1, 1], groups)
            then.outputs.append(b.op("aten::hardswish", z))
        with b.block() as other:
            other.outputs.append(b.op("aten::relu", b.inputs[0]))
        z = b.op("prim::If", b.op("aten::is_floating_point", b.inputs[0], type="bool"), blocks=[then, other])
    else:
        z = b.op("aten::conv2d", y, wd, bd, [stride] * 2, [kernel // 2] * 2, [1, 1], groups)
        z = b.op("aten::hardswish", z)
    write("after")
    if extra_user:
        z = b.op("aten::add.Tensor", z, b.op("aten::max_pool2d", y, [stride] * 2, [stride] * 2, [0, 0], [1, 1],
                                                False), 1)
    program = b.ret(z)
    Prepack()(program)
    FuseActivations()(program)
    DeadCode()(program)
    return program


def test_fused_with_both_activations(rng):
    program = block_program(rng)
    before = copy_program(program)
    assert FusePointwiseDepthwise()(program).modified
    DeadCode()(program)
    verify(program)
    assert ops(program) == ["ptlite::conv2d_pointwise_depthwise"], ops(program)
    node = program.forward.nodes[-1]
    assert node.inputs[3].node.attrs["value"] == "clamp" and node.inputs[11].node.attrs["value"] == "hardswish"
    assert not FusePointwiseDepthwise()(program).modified
    x = rng.normal(size=(2, 4, 11, 9)).astype(np.float32)
    assert_close(Module(program)(x), Module(before)(x), what="fused pointwise + depthwise", rtol=1e-6)


def test_left_alone(rng):
    """Not a 1x1 stride-1 producer, a grouped (not depthwise) consumer, or the expanded tensor used elsewhere."""
    for kwargs in ({"pw_kernel": 3}, {"pw_stride": 2}, {"groups": 3}, {"extra_user": True}):
        program = block_program(rng, **kwargs)
        assert not FusePointwiseDepthwise()(program).modified, kwargs


def test_not_fused_when_the_input_is_written_in_between(rng):
    """The fused node reads x where the depthwise convolution stood: an in-place write to x, or to a view of it, or
    one inside a branch, between the two convolutions keeps them apart."""
    for where in ("between", "view", "nested"):
        program = block_program(rng, write_input=where)
        assert "aten::add_.Tensor" in ops(program) or "prim::If" in ops(program), where
        assert not FusePointwiseDepthwise()(program).modified, (where, ops(program))


def test_fused_when_the_input_is_written_before_or_after(rng):
    """A write to x before the pair (EfficientNet's residual `+=` making the next block's input) or after it does
    not change what either convolution reads: fused, and the result is unchanged."""
    for where in ("before", "after"):
        program = block_program(rng, write_input=where)
        before = copy_program(program)
        assert FusePointwiseDepthwise()(program).modified, where
        DeadCode()(program)
        verify(program)
        assert "ptlite::conv2d_pointwise_depthwise" in ops(program), (where, ops(program))
        x = rng.normal(size=(1, 4, 9, 10)).astype(np.float32)
        assert_close(Module(program)(x.copy()), Module(before)(x.copy()), what=f"fused, x written {where}",
                     rtol=1e-6)


def test_not_fused_across_blocks(rng):
    """A depthwise convolution inside a branch is not fused with the pointwise one outside it (the fused node would
    compute the pointwise part inside the branch, once per iteration in a loop)."""
    program = block_program(rng, branch=True)
    assert "prim::If" in ops(program)
    assert not FusePointwiseDepthwise()(program).modified
