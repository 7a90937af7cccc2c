"""memory_plan places each planned value at an arena offset by liveness: values whose lifetimes are disjoint share
memory, overlapping ones never do; views, lists and reads inside prim::If blocks extend a lifetime; graph outputs
(and what shares their memory) are never planned; methods without static tensor inputs, or failing on zeros, are
left unplanned; a planned program computes what the unplanned one does, call after call."""

from __future__ import annotations

import numpy as np
from conftest import assert_close
from irbuild import GraphBuilder

from ptlite.backends import reference
from ptlite.backends.numpy.lower.plan_memory import PlanMemory
from ptlite.ir import verify
from ptlite.ir.graph import Node, Program, Value
from ptlite.ir.memory_plan import METADATA_KEY, OUT_ATTR, entry_nbytes
from ptlite.passes.base import copy_program
from ptlite.runtime.interpreter import runner
from ptlite.runtime.module import Module

reference_runner = runner(reference())  # compiles methods on the NumPy reference alone

SHAPE = (1, 4, 8, 8)
SIZE = 4 * 8 * 8 * 4  # bytes of one (1, 4, 8, 8) float32 value (a multiple of 64)


def builder(*inputs: str) -> GraphBuilder:
    return GraphBuilder(*inputs, shapes={name: SHAPE for name in inputs})


def plan(program: Program) -> dict:
    """Run the pass (which never reports a change), check the result, and return forward's plan."""
    unplanned = copy_program(program)
    assert not PlanMemory(reference_runner)(program).modified
    verify(program)
    same_results(program, unplanned)
    return program.metadata.get(METADATA_KEY, {}).get("forward")


def same_results(planned: Program, unplanned: Program) -> None:
    """Two calls of the planned program (the second on other inputs) give the unplanned program's results."""
    rng = np.random.default_rng(0)
    specs = planned.forward.input_specs
    planned_module, reference = Module(planned), Module(unplanned)
    for call in range(2):
        args = [rng.normal(size=s.shape).astype(np.float32) for s in specs]
        expected = reference(*args)
        got = planned_module(*args)
        for i, (g, e) in enumerate(zip(got, expected) if isinstance(got, tuple) else [(got, expected)]):
            assert_close(g, e, what=f"planned program, call {call + 1}, output {i}", rtol=1e-6)


def offset(v: Value) -> int:
    return v.node.attrs[OUT_ATTR]["offset"]


def planned(v: Value) -> bool:
    return OUT_ATTR in v.node.attrs


def test_disjoint_lifetimes_share_memory():
    b = builder("x")
    a = b.op("aten::relu", b.inputs[0])      # step 0, read at 1
    s = b.op("aten::sigmoid", a)             # step 1, read at 2
    c = b.op("aten::relu", s)                # step 2, read at 3
    program = b.ret(b.op("aten::sigmoid", c))
    p = plan(program)
    assert offset(a) == offset(c) != offset(s)
    assert p["inputs"][0]["offset"] == offset(s)  # the input is dead once step 0 has read it
    assert p["arena_bytes"] == 2 * SIZE
    assert p["intermediate_bytes"] == 3 * SIZE  # a, s, c: the output is not an intermediate
    assert p["planned_bytes"] == 4 * SIZE  # a, s, c and the input


def test_overlapping_lifetimes_never_share_memory():
    b = builder("x", "y")
    x, y = b.inputs
    a = b.op("aten::relu", x)
    s = b.op("aten::sigmoid", y)
    m = b.op("aten::mul.Tensor", a, s)
    program = b.ret(b.op("aten::add.Tensor", m, a, 1))  # a lives to the end
    p = plan(program)
    regions = {"a": offset(a), "s": offset(s), "m": offset(m)}
    assert len(set(regions.values())) == 3, f"overlapping values share memory: {regions}"
    inputs = [e["offset"] for e in p["inputs"]]
    assert inputs[0] != inputs[1] and offset(a) != inputs[1], "a is made while y is still to be read"


def test_a_view_keeps_its_base_alive():
    b = builder("x")
    x = b.inputs[0]
    a = b.op("aten::relu", x)                        # 0
    flat = b.op("aten::reshape", a, [-1])            # 1: last direct read of a
    s = b.op("aten::sigmoid", x)                     # 2
    c = b.op("aten::relu", s)                        # 3: could take a's memory were flat not a view of it
    back = b.op("aten::reshape", flat, list(SHAPE))  # 4
    program = b.ret(b.op("aten::add.Tensor", c, back, 1))
    plan(program)
    assert len({offset(a), offset(s), offset(c)}) == 3


def test_a_list_keeps_its_items_alive():
    b = builder("x")
    x = b.inputs[0]
    a = b.op("aten::relu", x)                                          # 0
    items = b.op("prim::ListConstruct", a, x, type="List[Tensor]")     # 1: last direct read of a
    s = b.op("aten::sigmoid", x)                                       # 2
    c = b.op("aten::relu", s)                                          # 3
    joined = b.op("aten::cat", items, 1)                               # 4: reads a through the list
    pair = b.op("prim::ListConstruct", c, c, type="List[Tensor]")
    program = b.ret(b.op("aten::add.Tensor", joined, b.op("aten::cat", pair, 1), 1))
    plan(program)
    assert offset(a) not in (offset(s), offset(c))


def test_reads_inside_an_if_count_at_the_if():
    b = builder("x")
    x = b.inputs[0]
    a = b.op("aten::relu", x)                   # 0
    s = b.op("aten::sigmoid", x)                # 1
    cond = b.const(True)
    with b.block() as then:
        then.outputs = [b.op("aten::relu", a)]  # a is read here, at step 2 for the plan
    with b.block() as other:
        other.outputs = [b.op("aten::relu", s)]
    chosen = b.op("prim::If", cond, blocks=[then, other])
    program = b.ret(b.op("aten::add.Tensor", chosen, s, 1))
    plan(program)
    assert offset(a) != offset(s)
    assert not any(OUT_ATTR in n.attrs for blk in (then, other) for n in blk.nodes), "nested nodes were planned"


def test_outputs_and_what_shares_their_memory_are_not_planned():
    b = builder("x")
    x = b.inputs[0]
    a = b.op("aten::relu", x)
    view = b.op("aten::reshape", a, [-1])     # returned: a must survive the call
    s = b.op("aten::sigmoid", x)
    kept = b.op("aten::relu", s)              # not returned: planned
    program = b.ret(view, s, x, b.op("aten::add.Tensor", kept, kept, 1))  # x returned as it came
    p = plan(program)
    assert not planned(a) and not planned(s) and planned(kept)
    assert p["inputs"] == [None], "the input buffer of an input that is returned was planned"


def test_two_outputs_of_one_value_and_an_if_returning_an_intermediate():
    """An If may return a value read inside it (here: a); when the If's result is returned, a is not planned."""
    b = builder("x")
    x = b.inputs[0]
    a = b.op("aten::relu", x)
    with b.block() as then:
        then.outputs = [a]
    with b.block() as other:
        other.outputs = [b.op("aten::sigmoid", x)]
    program = b.ret(b.op("prim::If", b.const(False), blocks=[then, other]))  # the zero run takes `other`
    plan(program)
    assert not planned(a)


def test_methods_that_cannot_be_planned_are_left_alone():
    b = GraphBuilder("x", shapes={"x": (None, 4)})  # a dynamic dimension
    dynamic = b.ret(b.op("aten::sigmoid", b.op("aten::relu", b.inputs[0])))
    b = GraphBuilder("x", "y", shapes={"x": (2, 3), "y": (4, 5)})  # fails on zeros: mm of mismatched shapes
    failing = b.ret(b.op("aten::relu", b.op("aten::mm", *b.inputs)))
    b = builder("x")
    b.graph.input_specs[0].type = "int"  # not a tensor: nothing to make a zero run with
    scalar = b.ret(b.op("aten::relu", b.inputs[0]))
    for what, program in [("dynamic", dynamic), ("failing", failing), ("scalar input", scalar)]:
        assert not PlanMemory(reference_runner)(program).modified
        verify(program)
        assert METADATA_KEY not in program.metadata, f"{what}: planned"
        assert not any(OUT_ATTR in n.attrs for n in program.forward.nodes), f"{what}: a node got a buffer"


def test_replanning_replaces_the_plan_and_drops_stale_entries():
    b = builder("x")
    a = b.op("aten::relu", b.inputs[0])
    program = b.ret(b.op("aten::sigmoid", a))
    first = plan(program)
    stale = Node("aten::relu", [b.inputs[0]], [Value()], {OUT_ATTR: dict(a.node.attrs[OUT_ATTR])})
    program.forward.nodes.insert(len(program.forward.nodes) - 1, stale)  # e.g. left by an earlier optimize
    program.metadata[METADATA_KEY]["gone"] = {"arena_bytes": 0}  # a method that no longer exists
    again = plan(program)
    assert list(program.metadata[METADATA_KEY]) == ["forward"]
    assert again["intermediate_bytes"] == first["intermediate_bytes"] + SIZE  # the new relu counts too
    for v in (a, stale.output):
        assert offset(v) + entry_nbytes(v.node.attrs[OUT_ATTR]) <= again["arena_bytes"]
    assert offset(stale.output) != offset(a), "the stale entry was kept: both relus would share memory"
