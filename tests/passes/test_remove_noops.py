"""remove_noops makes the users of a node that returns its input unchanged read the input instead: views and casts
that change nothing always, copies only when no in-place write could tell the copy from the original."""

from __future__ import annotations

import numpy as np
import pytest
from irbuild import GraphBuilder, ops

from ptlite.ir import verify
from ptlite.passes.remove_noops import RemoveNoops

STATIC = {"x": (2, 3, 4)}


def run(program):
    result = RemoveNoops()(program)
    verify(result.program)
    return result


def single(op, *args, shapes=STATIC, **kwargs):
    """y = neg(op(x, *args)); return y -- the program and its op node."""
    b = GraphBuilder("x", "other", shapes=shapes)
    x, other = b.inputs
    args = [other if a == "other" else a for a in args]
    node_out = b.op(op, x, *args, **kwargs)
    program = b.ret(b.op("aten::neg", node_out))
    return program, x


NOOPS = [
    ("aten::detach",),
    ("aten::alias",),
    ("aten::contiguous", 0),
    ("aten::contiguous", 2),  # channels_last: the same values
    ("aten::clone", None),
    ("aten::view", [2, 3, 4]),
    ("aten::reshape", [2, -1, 4]),
    ("aten::flatten.using_ints", 1, 1),
    ("aten::flatten.using_ints", -1, -1),
    ("aten::expand", [-1, 3, -1], False),
    ("aten::reshape_as", "other"),
    ("aten::expand_as", "other"),
    ("aten::to.dtype", 6, False, False, None),
    ("aten::to.dtype_layout", 6, 0, "cpu", None, False, False, None),
    ("aten::to.device", "cpu", 6, False, False, None),
    ("aten::to.prim_Device", None, None, False, False),
    ("aten::to.prim_dtype", None, False, False),
    ("aten::to.other", "other", False, False, None),
    ("aten::type_as", "other"),
    ("aten::_to_copy", 6, None, None, None, False, None),
]


@pytest.mark.parametrize("case", NOOPS, ids=lambda c: f"{c[0]}{c[1:]}")
def test_noop_becomes_its_input(case):
    program, x = single(*case, shapes={"x": (2, 3, 4), "other": (2, 3, 4)})
    assert run(program).modified
    assert ops(program) == ["aten::neg"] and program.forward.nodes[-1].inputs == [x]
    assert not run(program).modified


NOT_NOOPS = [
    ("aten::view", [6, 4]),
    ("aten::reshape", [-1]),
    ("aten::flatten.using_ints", 1, 2),
    ("aten::expand", [5, 2, 3, 4], False),
    ("aten::reshape_as", "other"),  # other's shape is unknown
    ("aten::to.dtype", 7, False, False, None),  # float64
    ("aten::to.device", "cuda", 6, False, False, None),
    ("aten::to.dtype_layout", 6, 1, None, None, False, False, None),  # another layout
]
UNKNOWN_DTYPE = [  # (case, the input whose dtype is unknown)
    (("aten::to.dtype", 6, False, False, None), 0),
    (("aten::type_as", "other"), 1),
    (("aten::to.other", "other", False, False, None), 0),
]


@pytest.mark.parametrize("case", NOT_NOOPS, ids=lambda c: f"{c[0]}{c[1:]}")
def test_real_changes_stay(case):
    program, _ = single(*case)
    assert not run(program).modified
    assert ops(program) == [case[0], "aten::neg"]


@pytest.mark.parametrize("case, unknown", UNKNOWN_DTYPE, ids=lambda c: str(c))
def test_casts_of_unknown_dtype_stay(case, unknown):
    program, _ = single(*case)
    program.forward.inputs[unknown].dtype = program.forward.input_specs[unknown].dtype = None
    assert not run(program).modified
    assert ops(program) == [case[0], "aten::neg"]


def test_shape_ops_need_a_static_shape():
    program, _ = single("aten::view", [2, 3, 4], shapes={"x": (None, 3, 4)})
    assert not run(program).modified


def test_uses_in_nested_blocks_and_method_outputs_are_rewired():
    b = GraphBuilder("x", "c")
    x, c = b.inputs
    d = b.op("aten::detach", x)
    with b.block() as then:
        then.outputs = [b.op("aten::relu", d)]
    with b.block() as other:
        other.outputs = [d]
    program = b.ret(b.op("prim::If", c, blocks=[then, other]), d)
    assert run(program).modified
    assert then.nodes[-1].inputs == [x] and other.outputs == [x] and program.forward.outputs[1] is x


@pytest.mark.parametrize("copy_op", ["aten::clone", "aten::contiguous"])
def test_copy_written_in_place_stays(copy_op):
    b = GraphBuilder("x")
    y = b.op(copy_op, b.inputs[0], None if copy_op == "aten::clone" else 0)
    b.op("aten::relu_", y)  # without the copy this would write the caller's input
    program = b.ret(y)
    assert not run(program).modified


def test_copy_of_a_tensor_written_later_stays():
    b = GraphBuilder("x")
    t = b.op("aten::mul.Scalar", b.inputs[0], 2.0)
    snapshot = b.op("aten::clone", t, None)
    b.op("aten::add_.Scalar", t, 1.0, 1)  # the clone must keep the value from before
    program = b.ret(snapshot, t)
    assert not run(program).modified


def test_copy_of_a_tensor_whose_view_is_written_stays():
    b = GraphBuilder("x")
    t = b.op("aten::mul.Scalar", b.inputs[0], 2.0)
    snapshot = b.op("aten::clone", t, None)
    b.op("aten::relu_", b.op("aten::view", t, [-1]))
    program = b.ret(snapshot, t)
    assert not run(program).modified


def test_copy_written_through_a_loop_stays():
    b = GraphBuilder("x")
    y = b.op("aten::clone", b.inputs[0], None)
    with b.block("i", "acc") as body:
        b.op("aten::add_.Scalar", body.inputs[1], 1.0, 1)
        body.outputs = [b.const(True), body.inputs[1]]
    out = b.op("prim::Loop", 3, True, y, blocks=[body])
    program = b.ret(out)
    assert not run(program).modified


def test_copy_nobody_writes_is_removed_even_when_returned():
    b = GraphBuilder("x")
    y = b.op("aten::clone", b.inputs[0], None)
    program = b.ret(b.op("aten::relu", y), y)
    assert run(program).modified
    assert ops(program) == ["aten::relu"] and program.forward.outputs[1] is b.inputs[0]


def test_returned_copy_of_a_weight_stays():
    b = GraphBuilder("x")
    y = b.op("aten::clone", b.weight("w", np.ones(3, np.float32)), None)
    program = b.ret(y)
    assert not run(program).modified  # the caller would get the read-only weight


def test_to_with_copy_true_is_a_copy():
    b = GraphBuilder("x")
    y = b.op("aten::to.dtype", b.inputs[0], 6, False, True, None)
    b.op("aten::relu_", y)
    program = b.ret(y, b.inputs[0])
    assert not run(program).modified
    b = GraphBuilder("x")
    y = b.op("aten::to.dtype", b.inputs[0], 6, False, True, None)
    program = b.ret(b.op("aten::relu", y))
    assert run(program).modified


def test_alias_written_in_place_is_still_removed():
    """A view to the same shape is the input in PyTorch too: writing it writes the input either way."""
    b = GraphBuilder("x", shapes={"x": (2, 3)})
    v = b.op("aten::view", b.inputs[0], [2, 3])
    b.op("aten::relu_", v)
    program = b.ret(b.inputs[0])
    assert run(program).modified
    assert ops(program) == ["aten::relu_"] and program.forward.nodes[-1].inputs[0] is b.inputs[0]


def test_dropout_is_left_to_remove_dropout():
    b = GraphBuilder("x")
    program = b.ret(b.op("aten::dropout", b.inputs[0], 0.5, False))
    assert not run(program).modified
