"""GATE_CONVOLUTIONS on hand-built graphs: the multiply and the 1x1 convolution become one node only where the
convolution can read the multiply's operands where the multiply did (same block, nothing writing them in between)."""

from __future__ import annotations

import numpy as np
from irbuild import GraphBuilder, ops

from ptlite.backends.native.lower.gate_convolutions import GateConvolutions
from ptlite.backends.numpy.packed import pack_panels
from ptlite.ir.graph import Value

IMAGE, GATE = (1, 16, 8, 8), (1, 16, 1, 1)


def _typed(v: Value, shape: tuple) -> Value:
    v.dtype, v.shape = "float32", shape
    return v


def _gated_conv_program(between=None, in_block: bool = False):
    """y * s, then (optionally) `between(builder, y, s)`, then a 1x1 convolution of the product (inside a prim::If's
    block with in_block)."""
    b = GraphBuilder("y", "s", "flag")
    y, s, flag = b.inputs
    _typed(y, IMAGE), _typed(s, GATE)
    flag.type, flag.dtype = "bool", None
    g = _typed(b.op("aten::mul.Tensor", y, s), IMAGE)
    if between is not None:
        between(b, y, s)
    weight = b.weight("w", pack_panels(np.ones((16, 16), np.float32)))

    def conv():
        return _typed(b.op("ptlite::conv2d_packed", g, weight, None, [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 16, "none",
                           []), IMAGE)
    if not in_block:
        return b.ret(conv(), y)
    with b.block() as then:
        then.outputs = [conv()]
    with b.block() as other:
        other.outputs = [y]  # (the product has one reader: the convolution inside the block)
    out = _typed(b.op("prim::If", flag, blocks=[then, other]), IMAGE)
    return b.ret(out, y)


def test_the_multiply_and_the_convolution_become_one_node():
    program = _gated_conv_program()
    assert GateConvolutions().run(program.forward, program)
    assert ops(program) == ["ptlite::conv2d_packed_gated"]
    node = next(n for n in program.forward.nodes if n.op == "ptlite::conv2d_packed_gated")
    assert [v.name for v in node.inputs[:2]] == ["y", "s"]


def test_not_past_a_write_to_the_image_or_the_factors():
    for written in ("y", "s"):
        def write(b, y, s, written=written):
            b.op("aten::add_.Tensor", y if written == "y" else s, 1.0, 1)
        program = _gated_conv_program(write)
        assert not GateConvolutions().run(program.forward, program), f"{written} written in between"
        assert ops(program) == ["aten::mul.Tensor", "aten::add_.Tensor", "ptlite::conv2d_packed"], written


def test_not_into_another_block():
    program = _gated_conv_program(in_block=True)
    assert not GateConvolutions().run(program.forward, program)
    assert "ptlite::conv2d_packed_gated" not in ops(program)


def test_not_with_constant_factors():
    """The executor's steps take no constant gate: the multiply (a node of its own) and the convolution (a step) stay
    as they are."""
    b = GraphBuilder("y")
    y = _typed(b.inputs[0], IMAGE)
    s = b.weight("gamma", np.full(GATE, 0.5, np.float32))
    g = _typed(b.op("aten::mul.Tensor", y, s), IMAGE)
    weight = b.weight("w", pack_panels(np.ones((16, 16), np.float32)))
    program = b.ret(_typed(b.op("ptlite::conv2d_packed", g, weight, None, [1, 1], [1, 1], [0, 0, 0, 0], [1, 1], 16,
                                "none", []), IMAGE))
    assert not GateConvolutions().run(program.forward, program)
    assert ops(program) == ["aten::mul.Tensor", "ptlite::conv2d_packed"]
