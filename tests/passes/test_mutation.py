"""mutation.Mutations: which values may share memory with which, and whether any of them is written in place."""

from __future__ import annotations

from irbuild import GraphBuilder

from ptlite.passes.mutation import Mutations, holds_mutable_elements, is_immutable_type


def names(found):
    return {v.name for v in found.values}


def test_views_share_memory_both_ways_and_writes_are_seen():
    b = GraphBuilder("x")
    t = b.op("aten::mul.Scalar", b.inputs[0], 2.0)
    t.name = "t"
    v = b.op("aten::view", t, [-1])
    v.name = "v"
    fresh = b.op("aten::relu", v)
    fresh.name = "fresh"
    program = b.ret(fresh)
    found = Mutations(program.forward).alias_class([v])
    assert names(found) == {"t", "v"} and not found.mutated and not found.returned
    b.op("aten::relu_", t)  # appended after the return was set: still part of the method
    assert Mutations(program.forward).alias_class([v]).mutated


def test_a_list_holding_x_does_not_make_its_other_elements_aliases_of_x():
    b = GraphBuilder("x", "y")
    x, y = b.inputs
    items = b.op("prim::ListConstruct", x, y, type="List[Tensor]")
    items.name = "items"
    b.op("aten::relu_", y)
    program = b.ret(b.op("aten::cat", items, 0))
    found = Mutations(program.forward).alias_class([x])
    assert names(found) == {"x", "items"} and not found.mutated  # not y, not the fresh result of cat


def test_an_element_taken_out_of_a_list_may_be_any_element():
    b = GraphBuilder("x", "y")
    x, y = b.inputs
    items = b.op("prim::ListConstruct", x, y, type="List[Tensor]")
    first = b.op("aten::__getitem__.t", items, 0)
    b.op("aten::relu_", first)
    program = b.ret(x)
    assert Mutations(program.forward).alias_class([x]).mutated
    assert Mutations(program.forward).alias_class([y]).mutated


def test_branch_results_and_loop_carried_values_are_followed():
    b = GraphBuilder("x", "c")
    x, c = b.inputs
    with b.block() as then:
        then.outputs = [x]
    with b.block() as other:
        other.outputs = [b.op("aten::neg", x)]
    chosen = b.op("prim::If", c, blocks=[then, other])
    b.op("aten::relu_", chosen)
    program = b.ret(c)
    found = Mutations(program.forward).alias_class([x])
    assert found.mutated and chosen in found.values

    b = GraphBuilder("x")
    with b.block("i", "acc") as body:
        body.outputs = [b.const(True), b.op("aten::add_.Scalar", body.inputs[1], 1.0, 1)]
    out = b.op("prim::Loop", 2, True, b.inputs[0], blocks=[body])
    program = b.ret(out)
    found = Mutations(program.forward).alias_class([b.inputs[0]])
    assert found.mutated and found.returned


def test_types():
    assert is_immutable_type("int") and is_immutable_type("Tuple[int, Optional[str]]")
    assert not is_immutable_type("Tensor") and not is_immutable_type("List[int]") and not is_immutable_type("int[]")
    assert holds_mutable_elements("List[Tensor]") and holds_mutable_elements("Tuple[Tensor, int]")
    assert holds_mutable_elements("List[List[int]]") and holds_mutable_elements("Any")
    assert not holds_mutable_elements("List[int]") and not holds_mutable_elements("Optional[Tensor]")
