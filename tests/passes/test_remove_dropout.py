"""remove_dropout replaces every dropout with train=False by its input."""

from __future__ import annotations

import pytest
from irbuild import GraphBuilder, ops

from ptlite.ir import verify
from ptlite.passes.dead_code import DeadCode
from ptlite.passes.remove_dropout import DROPOUTS, RemoveDropout


def run(program):
    result = RemoveDropout()(program)
    verify(result.program)
    return result


@pytest.mark.parametrize("op", sorted(DROPOUTS - {"aten::native_dropout"}))
def test_inference_dropout_becomes_its_input(op):
    b = GraphBuilder("x")
    x = b.inputs[0]
    h = b.op("aten::relu", x)
    d = b.op(op, h, 0.5, False)
    y = b.op("aten::neg", d)
    program = b.ret(y, d)
    assert run(program).modified
    assert ops(program) == ["aten::relu", "aten::neg"]
    assert program.forward.nodes[-1].inputs == [h] and program.forward.outputs == [y, h]
    DeadCode()(program)
    assert len(program.forward.nodes) == 2  # the p and train constants went with the dropout


def test_uses_inside_nested_blocks_are_rewired():
    b = GraphBuilder("x", "c")
    x, c = b.inputs
    d = b.op("aten::dropout", x, 0.1, False)
    with b.block() as then:
        then.outputs = [b.op("aten::relu", d)]
    with b.block() as other:
        other.outputs = [d]
    program = b.ret(b.op("prim::If", c, blocks=[then, other]))
    assert run(program).modified
    assert then.nodes[-1].inputs == [x] and other.outputs == [x]


def test_training_or_unknown_train_flag_is_kept():
    b = GraphBuilder("x", "train")
    x, train = b.inputs
    a = b.op("aten::dropout", x, 0.5, True)
    c = b.op("aten::dropout", a, 0.5, train)
    program = b.ret(c)
    assert not run(program).modified
    assert ops(program) == ["aten::dropout", "aten::dropout"]


def test_native_dropout_only_when_its_mask_is_unused():
    b = GraphBuilder("x")
    out, mask = b.op("aten::native_dropout", b.inputs[0], 0.5, False, outputs=2)
    program = b.ret(out, mask)
    assert not run(program).modified

    b = GraphBuilder("x")
    out, mask = b.op("aten::native_dropout", b.inputs[0], 0.5, False, outputs=2)
    program = b.ret(b.op("aten::relu", out))
    assert run(program).modified
    assert ops(program) == ["aten::relu"] and program.forward.nodes[-1].inputs == [b.inputs[0]]


def test_no_dropout_is_not_modified():
    b = GraphBuilder("x")
    program = b.ret(b.op("aten::relu", b.inputs[0]))
    assert not run(program).modified
