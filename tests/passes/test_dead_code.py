"""dead_code removes nodes nobody reads and nobody could notice running, and weights no constant names."""

from __future__ import annotations

import numpy as np
from irbuild import GraphBuilder, ops

from ptlite.ir import verify
from ptlite.passes.dead_code import DeadCode


def run(program):
    result = DeadCode()(program)
    verify(result.program)
    return result


def test_removes_unused_chain_with_its_constants_and_weights():
    b = GraphBuilder("x")
    x = b.inputs[0]
    w = b.weight("unused.weight", np.ones((4, 4), np.float32))
    h = b.op("aten::linear", x, w, None)
    b.op("aten::relu", h)
    kept = b.weight("kept.weight", np.ones((4, 4), np.float32))
    y = b.op("aten::linear", x, kept, None)
    program = b.ret(y)
    assert run(program).modified
    assert ops(program) == ["aten::linear"]
    assert len(program.forward.nodes) == 3  # the kept weight, bias=None, linear
    assert list(program.weights) == ["kept.weight"]


def test_nothing_to_remove_is_not_modified():
    b = GraphBuilder("x")
    y = b.op("aten::relu", b.inputs[0])
    program = b.ret(y)
    assert not run(program).modified
    assert ops(program) == ["aten::relu"]


def test_drops_weights_no_node_references():
    b = GraphBuilder("x")
    b.program.weights["orphan"] = np.zeros(3, np.float32)
    program = b.ret(b.op("aten::relu", b.inputs[0]))
    assert run(program).modified and program.weights == {}


def test_keeps_raise_and_warn():
    b = GraphBuilder("x")
    b.op("prim::RaiseException", "boom", None, outputs=0)
    b.op("aten::warn", "careful", 2, outputs=0)
    program = b.ret(b.inputs[0])
    assert not run(program).modified
    assert ops(program) == ["prim::RaiseException", "aten::warn"]


def test_keeps_in_place_op_on_value_used_later():
    b = GraphBuilder("x")
    t = b.op("aten::mul.Scalar", b.inputs[0], 2.0)
    b.op("aten::add_.Scalar", t, 1.0, 1)  # result unused, but t is returned: the mutation is visible
    program = b.ret(t)
    assert not run(program).modified
    assert ops(program) == ["aten::mul.Scalar", "aten::add_.Scalar"]


def test_keeps_in_place_op_on_method_input():
    b = GraphBuilder("x")
    b.op("aten::relu_", b.inputs[0])
    program = b.ret(b.op("aten::neg", b.inputs[0]))
    assert not run(program).modified
    assert ops(program) == ["aten::relu_", "aten::neg"]


def test_keeps_in_place_op_on_a_view_of_a_live_tensor():
    b = GraphBuilder("x")
    t = b.op("aten::mul.Scalar", b.inputs[0], 2.0)
    v = b.op("aten::view", t, [-1])
    b.op("aten::relu_", v)
    program = b.ret(t)
    assert not run(program).modified
    assert ops(program) == ["aten::mul.Scalar", "aten::view", "aten::relu_"]


def test_removes_in_place_op_on_a_private_temporary():
    b = GraphBuilder("x")
    t = b.op("aten::mul.Scalar", b.inputs[0], 2.0)
    b.op("aten::relu_", t)
    program = b.ret(b.inputs[0])
    assert run(program).modified
    assert ops(program) == [] and program.forward.nodes == []


def test_list_append_kept_when_list_is_read_removed_when_not():
    b = GraphBuilder("x")
    x = b.inputs[0]
    items = b.op("prim::ListConstruct", x, type="List[Tensor]")
    b.op("aten::append.t", items, x, type="List[Tensor]")
    program = b.ret(b.op("aten::cat", items, 0))
    assert not run(program).modified
    assert ops(program) == ["prim::ListConstruct", "aten::append.t", "aten::cat"]

    b = GraphBuilder("x")
    x = b.inputs[0]
    items = b.op("prim::ListConstruct", x, type="List[Tensor]")
    b.op("aten::append.t", items, x, type="List[Tensor]")
    program = b.ret(x)
    assert run(program).modified and ops(program) == []


def test_if_holding_a_raise_is_kept_and_its_dead_nodes_removed():
    b = GraphBuilder("x", "c")
    x, c = b.inputs
    with b.block() as then:
        b.op("aten::relu", x)  # dead inside the branch
        b.op("prim::RaiseException", "bad input", None, outputs=0)
    with b.block() as other:
        pass
    b.op("prim::If", c, blocks=[then, other], outputs=0)
    program = b.ret(x)
    assert run(program).modified
    assert ops(program) == ["prim::If", "prim::RaiseException"]


def test_if_without_effects_and_unused_results_is_removed():
    b = GraphBuilder("x", "c")
    x, c = b.inputs
    with b.block() as then:
        then.outputs = [b.op("aten::relu", x)]
    with b.block() as other:
        other.outputs = [x]
    b.op("prim::If", c, blocks=[then, other])
    program = b.ret(x)
    assert run(program).modified
    assert ops(program) == [] and len(program.forward.nodes) == 0


def test_block_outputs_keep_their_producers():
    b = GraphBuilder("x", "c")
    x, c = b.inputs
    with b.block() as then:
        then.outputs = [b.op("aten::relu", x)]
    with b.block() as other:
        other.outputs = [x]
    out = b.op("prim::If", c, blocks=[then, other])
    program = b.ret(out)
    assert not run(program).modified
    assert ops(program) == ["prim::If", "aten::relu"]


def test_loop_appending_to_an_outer_list_is_kept():
    b = GraphBuilder("x")
    x = b.inputs[0]
    items = b.op("prim::ListConstruct", type="List[Tensor]")
    with b.block("i") as body:
        b.op("aten::append.t", items, x, type="List[Tensor]")
        body.outputs = [b.const(True)]
    b.op("prim::Loop", 3, True, blocks=[body], outputs=0)
    program = b.ret(b.op("aten::stack", items, 0))
    assert not run(program).modified
    assert ops(program) == ["prim::ListConstruct", "prim::Loop", "aten::append.t", "aten::stack"]


def test_walks_every_method():
    b = GraphBuilder("x")
    b.op("aten::relu", b.inputs[0])
    program = b.ret(b.inputs[0])
    other = GraphBuilder("x")
    other.op("aten::neg", other.inputs[0])
    program.methods["other"] = other.ret(other.inputs[0]).forward
    program.methods["other"].name = "other"
    assert run(program).modified
    assert all(not g.nodes for g in program.methods.values())
