"""The helpers every pass uses: walking nested blocks, uses, replacing uses, removing nodes, weights, copying."""

from __future__ import annotations

import numpy as np
from irbuild import GraphBuilder, structure

from ptlite.ir import verify
from ptlite.passes.base import (
    NOT_CONSTANT,
    Pass,
    PassResult,
    add_weight,
    blocks,
    constant_value,
    copy_program,
    remove_nodes,
    replace_all_uses,
    uses,
    weight_of,
)


def _if_program():
    """y = relu(x); out = if c: y + y else: y; return (out, y)"""
    b = GraphBuilder("x", "c")
    x, c = b.inputs
    y = b.op("aten::relu", x)
    with b.block() as then:
        s = b.op("aten::add.Tensor", y, y, 1)
        then.outputs = [s]
    with b.block() as other:
        other.outputs = [y]
    out = b.op("prim::If", c, blocks=[then, other])
    return b, x, y, out, then, other, b.ret(out, y)


def test_blocks_yields_nested_blocks_outer_first():
    b, *_, then, other, program = _if_program()
    assert list(blocks(program.forward)) == [program.forward, then, other]


def test_uses_counts_node_inputs_and_block_outputs_everywhere():
    b, x, y, out, then, other, program = _if_program()
    found = uses(program.forward)
    add = then.nodes[-1]
    assert sorted(map(id, found[y.id])) == sorted(map(id, [add, add, other, program.forward]))
    assert found[out.id] == [program.forward]


def test_replace_all_uses_reaches_nested_blocks_and_outputs():
    b, x, y, out, then, other, program = _if_program()
    assert replace_all_uses(program.forward, y, x) == 4
    assert then.nodes[-1].inputs[:2] == [x, x] and other.outputs == [x] and program.forward.outputs[1] is x
    remove_nodes(program.forward, [y.node])
    assert [n.op for n in program.forward.nodes if n.op != "prim::Constant"] == ["prim::If"]
    verify(program)


def test_replace_all_uses_with_a_uses_map_visits_only_those_uses_and_keeps_the_map():
    b, x, y, out, then, other, program = _if_program()
    users = uses(program.forward)
    before = len(users.get(x.id, []))
    moved = list(users[y.id])
    assert replace_all_uses(program.forward, y, x, users) == 4
    assert then.nodes[-1].inputs[:2] == [x, x] and other.outputs == [x] and program.forward.outputs[1] is x
    assert len(users[x.id]) == before + 4 and all(any(u is m for u in users[x.id]) for m in moved)
    # a later replacement of x reaches the uses moved to it (including those added by the first one)
    z = program.forward.inputs[1]  # any other value will do for the bookkeeping
    assert replace_all_uses(program.forward, x, z, users) == before + 4 and y.node.inputs[0] is z
    assert then.nodes[-1].inputs[:2] == [z, z] and other.outputs == [z] and program.forward.outputs[1] is z


def test_constants_and_weights():
    b = GraphBuilder("x")
    none, flag = b.const(None), b.const(False)
    w = b.weight("conv.weight", np.ones((2, 2), np.float32))
    assert constant_value(none) is None and constant_value(flag) is False
    assert constant_value(w) is NOT_CONSTANT and constant_value(b.inputs[0]) is NOT_CONSTANT
    assert weight_of(b.program, w) is b.program.weights["conv.weight"] and weight_of(b.program, flag) is None


def test_add_weight_picks_unused_names():
    b = GraphBuilder("x")
    b.weight("w", np.zeros(1, np.float32))
    assert add_weight(b.program, "w", np.ones(1, np.float32)) == "w_2"
    assert add_weight(b.program, "w", np.ones(1, np.float32)) == "w_3"
    assert add_weight(b.program, "v", np.ones(1, np.float32)) == "v"


def test_copy_program_is_independent_but_shares_weights():
    b, x, y, out, then, other, program = _if_program()
    program.weights["w"] = np.ones(3, np.float32)
    program.metadata["passes"] = ["a"]
    copy = copy_program(program)
    verify(copy)
    assert structure(copy) == structure(program)
    assert copy.weights["w"] is program.weights["w"]
    copied_ids = {v.id for n in copy.forward.walk() for v in n.inputs + n.outputs}
    original_ids = {v.id for n in program.forward.walk() for v in n.inputs + n.outputs}
    assert not copied_ids & original_ids
    copy.forward.nodes.clear()
    copy.metadata["passes"].append("b")
    copy.forward.input_specs[0].name = "changed"
    assert program.forward.nodes and program.metadata["passes"] == ["a"] and program.forward.input_specs[0].name == "x"


def test_pass_contract_runs_every_method():
    class CountNodes(Pass):
        name = "count"

        def __init__(self):
            self.seen = []

        def run(self, graph, program):
            self.seen.append(graph.name)
            return graph.name == "other"

    b, *_, program = _if_program()
    program.methods["other"] = copy_program(program).forward
    program.methods["other"].name = "other"
    p = CountNodes()
    result = p(program)
    assert isinstance(result, PassResult) and result.program is program and result.modified
    assert p.seen == ["forward", "other"]
