"""fuse_add_relu turns add + relu into aten::_add_relu when the relu is the sum's only user."""

from __future__ import annotations

import numpy as np
from conftest import assert_close
from irbuild import GraphBuilder, ops

from ptlite.ir import verify
from ptlite.passes.base import copy_program
from ptlite.passes.fuse_add_relu import FuseAddRelu
from ptlite.runtime.module import Module


def test_add_relu_fused(rng):
    for relu in ("aten::relu", "aten::relu_"):
        b = GraphBuilder("a", "b")
        program = b.ret(b.op(relu, b.op("aten::add.Tensor", b.inputs[0], b.inputs[1], 2)))
        before = copy_program(program)
        assert FuseAddRelu()(program).modified
        verify(program)
        assert ops(program) == ["aten::_add_relu.Tensor"]
        assert not FuseAddRelu()(program).modified
        x, y = rng.normal(size=(2, 3, 4, 4)).astype(np.float32), rng.normal(size=(3, 1, 1)).astype(np.float32)
        assert_close(Module(program)(x, y), Module(before)(x, y), what=f"add + {relu} fused", rtol=1e-6)


def test_not_fused_when_the_sum_is_used_elsewhere():
    b = GraphBuilder("a", "b")
    s = b.op("aten::add.Tensor", b.inputs[0], b.inputs[1], 1)
    program = b.ret(b.op("aten::relu", s), s)
    assert not FuseAddRelu()(program).modified
    b = GraphBuilder("a", "b")
    program = b.ret(b.op("aten::relu", b.op("aten::sub.Tensor", b.inputs[0], b.inputs[1], 1)))
    assert not FuseAddRelu()(program).modified


def test_in_place_add_fused_only_with_in_place_relu(rng):
    b = GraphBuilder("a", "b")
    program = b.ret(b.op("aten::relu_", b.op("aten::add_.Tensor", b.inputs[0], b.inputs[1], 1)))
    x, y = rng.normal(size=(2, 3, 4, 4)).astype(np.float32), rng.normal(size=(3, 1, 1)).astype(np.float32)
    expected = Module(copy_program(program))(x.copy(), y)
    assert FuseAddRelu()(program).modified
    assert ops(program) == ["aten::_add_relu_.Tensor"]
    assert_close(Module(program)(x.copy(), y), expected, what="add_ + relu_ fused", rtol=1e-6)
    b = GraphBuilder("a", "b")
    program = b.ret(b.op("aten::relu", b.op("aten::add_.Tensor", b.inputs[0], b.inputs[1], 1)))
    assert not FuseAddRelu()(program).modified  # `a` holds the sum, not its relu: keep both
