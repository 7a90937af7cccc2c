"""fold_constants computes at optimize time what is known before running: pure nodes on constants (with the runtime's
kernels), questions the static facts answer, and prim::If on a constant condition; it leaves alone what it cannot
fold safely (impure, too large, failing, mutated, returned)."""

from __future__ import annotations

import numpy as np
import pytest
from irbuild import GraphBuilder, ops

import ptlite
from ptlite.backends import reference
from ptlite.ir import verify
from ptlite.passes import fold_constants
from ptlite.passes.base import NOT_CONSTANT, constant_value, weight_of
from ptlite.passes.dead_code import DeadCode
from ptlite.passes.fold_constants import MAX_FOLDED_BYTES, FoldConstants


def run(program):
    result = FoldConstants(reference().evaluate)(program)
    verify(result.program)
    return result


def fold_and_clean(program):
    """Fold (checking that a second run finds nothing left), then drop what became dead."""
    modified = run(program).modified
    assert not run(program).modified, "a second fold_constants run changed the program again"
    DeadCode()(program)
    return modified


def test_int_arithmetic_and_list_of_ints_become_one_constant():
    b = GraphBuilder("x")
    n = b.op("aten::add.int", 2, 3, type="int")
    half = b.op("aten::floordiv.int", n, 2, type="int")
    shape = b.op("prim::ListConstruct", half, -1, type="List[int]")
    program = b.ret(b.op("aten::view", b.inputs[0], shape))
    assert fold_and_clean(program)
    assert ops(program) == ["aten::view"]
    assert constant_value(program.forward.nodes[-1].inputs[1]) == [2, -1]


def test_transposed_weight_becomes_a_new_contiguous_weight():
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = GraphBuilder("x")
    t = b.op("aten::t", b.weight("fc.weight", w))
    program = b.ret(b.op("aten::mm", b.inputs[0], t))
    assert fold_and_clean(program)
    assert ops(program) == ["aten::mm"]
    folded = program.forward.nodes[-1].inputs[1]
    array = weight_of(program, folded)
    np.testing.assert_array_equal(array, w.T)
    assert array.flags.c_contiguous and folded.dtype == "float32" and folded.shape == (4, 3)
    assert list(program.weights) == ["fc.weight.t"]  # the original went with dead code


def test_chain_of_weight_operations_folds_in_one_run():
    w, s = np.ones((2, 3), np.float32), np.arange(2, dtype=np.float32)
    b = GraphBuilder("x")
    scale = b.op("aten::unsqueeze", b.weight("s", s), 1)
    scaled = b.op("aten::mul.Tensor", b.weight("w", w), scale)
    program = b.ret(b.op("aten::mm", b.inputs[0], b.op("aten::permute", scaled, [1, 0])))
    assert fold_and_clean(program)
    assert ops(program) == ["aten::mm"]
    np.testing.assert_array_equal(weight_of(program, program.forward.nodes[-1].inputs[1]), (w * s[:, None]).T)


def test_several_outputs_each_become_a_constant():
    w = np.array([[1, 5], [7, 2]], np.float32)
    b = GraphBuilder("x")
    values, indices = b.op("aten::max.dim", b.weight("w", w), 1, False, outputs=2)
    first, second = b.op("prim::ListUnpack", b.const([4, 5]), outputs=2, type="int")
    x = b.inputs[0]
    program = b.ret(b.op("aten::add.Tensor", x, values, first), b.op("aten::mul.Tensor", x, indices), second)
    assert fold_and_clean(program)
    assert ops(program) == ["aten::add.Tensor", "aten::mul.Tensor"]
    np.testing.assert_array_equal(weight_of(program, values), [5, 7])
    np.testing.assert_array_equal(weight_of(program, indices), [1, 0])
    assert constant_value(first) == 4 and constant_value(second) == 5


def test_zero_dim_tensor_and_tuple_results_survive_save_and_load(tmp_path):
    b = GraphBuilder("x")
    t = b.op("prim::NumToTensor.Scalar", 3)
    pair = b.op("prim::TupleConstruct", 2, 0.5, type="Tuple[int, float]")
    program = b.ret(b.op("aten::mul.Tensor", b.inputs[0], t), pair)
    assert fold_and_clean(program)
    assert weight_of(program, t).shape == () and constant_value(pair) == (2, 0.5)
    ptlite.save(program, tmp_path / "folded.ptlite")
    loaded = ptlite.load(tmp_path / "folded.ptlite")
    y, p = loaded(np.ones(2, np.float32))
    np.testing.assert_array_equal(y, [3, 3])
    assert p == (2, 0.5)


def test_large_results_stay_operators():
    b = GraphBuilder("x")
    big = b.op("aten::zeros", [1000, 1000], None, None, None, None)
    small = b.op("aten::zeros", [4, 4], None, None, None, None)
    w = b.weight("w", np.ones((128, 128), np.float32))  # 64 KiB: its transpose may be as large, not 4x larger
    transposed = b.op("aten::t", w)
    repeated = b.op("aten::repeat", w, [2, 2])
    program = b.ret(*[b.op("aten::add.Tensor", b.inputs[0], v, 1) for v in (big, small, transposed, repeated)])
    assert 128 * 128 * 4 * 4 > MAX_FOLDED_BYTES
    assert fold_and_clean(program)
    assert ops(program).count("aten::zeros") == 1 and "aten::t" not in ops(program)
    assert "aten::repeat" in ops(program)
    assert big.node.op == "aten::zeros" and small.node.op == "prim::Constant"


def test_results_recorded_as_too_large_are_not_computed(monkeypatch):
    b = GraphBuilder("x")
    big = b.op("aten::zeros", [1000, 1000], None, None, None, None, shape=(1000, 1000))
    program = b.ret(b.op("aten::add.Tensor", b.inputs[0], big, 1))
    evaluated = []
    evaluate = fold_constants._Folder.evaluate
    monkeypatch.setattr(fold_constants._Folder, "evaluate",
                        lambda self, node: evaluated.append(node.op) or evaluate(self, node))
    assert not run(program).modified
    assert evaluated == ["aten::add.Tensor"]  # which stops at its first input, not a constant


def test_failing_kernel_leaves_the_node_alone():
    b = GraphBuilder("x", "c")
    x, c = b.inputs
    with b.block() as then:
        then.outputs = [b.op("aten::__getitem__.t", b.const([1, 2]), 5, type="int")]  # IndexError if it ran
    with b.block() as other:
        other.outputs = [b.const(0)]
    index = b.op("prim::If", c, blocks=[then, other], type="int")
    program = b.ret(b.op("aten::select.int", x, 0, index))
    assert not run(program).modified
    assert ops(program) == ["prim::If", "aten::__getitem__.t", "aten::select.int"]


@pytest.mark.parametrize("build", [
    lambda b: b.op("aten::dropout", b.weight("w", np.ones(4, np.float32)), 0.5, True),  # random
    lambda b: b.op("aten::relu_", b.weight("w", np.ones(4, np.float32))),  # in place
    lambda b: b.op("aten::empty.memory_format", [2], None, None, None, None, None),  # uninitialized
    lambda b: b.op("aten::add.Tensor", b.inputs[0], b.weight("w", np.ones(4, np.float32)), 1),  # not constant
], ids=["random", "in-place", "uninitialized", "not-constant"])
def test_impure_or_non_constant_nodes_stay(build):
    b = GraphBuilder("x")
    program = b.ret(b.op("aten::neg", build(b)))
    before = ops(program)
    assert not run(program).modified
    assert ops(program) == before


def test_effects_stay():
    b = GraphBuilder("x")
    b.op("prim::RaiseException", "boom", None, outputs=0)
    b.op("aten::warn", "careful", 2, outputs=0)
    program = b.ret(b.inputs[0])
    assert not run(program).modified
    assert ops(program) == ["prim::RaiseException", "aten::warn"]


def test_list_of_tensors_has_no_constant_form():
    b = GraphBuilder("x")
    w = b.weight("w", np.ones(2, np.float32))
    items = b.op("prim::ListConstruct", w, w, type="List[Tensor]")
    program = b.ret(b.op("aten::add.Tensor", b.inputs[0], b.op("aten::cat", items, 0), 1))
    assert not run(program).modified  # so what reads the list stays too
    assert ops(program) == ["prim::ListConstruct", "aten::cat", "aten::add.Tensor"]


def test_results_written_in_place_or_returned_stay():
    b = GraphBuilder("x")
    z = b.op("aten::zeros", [2], None, None, None, None)
    b.op("aten::add_.Tensor", z, b.inputs[0], 1)  # a weight would be read-only, and shared by every call
    program = b.ret(z)
    assert not run(program).modified

    b = GraphBuilder("x")
    program = b.ret(b.op("aten::zeros", [2], None, None, None, None))  # the caller may write into its output
    assert not run(program).modified

    b = GraphBuilder("x")
    shape = b.op("prim::ListConstruct", 1, 2, type="List[int]")
    b.op("aten::append.t", shape, 3, type="List[int]")  # a constant list would grow on every call
    program = b.ret(b.op("aten::view", b.inputs[0], shape))
    assert not run(program).modified


def test_inputs_written_in_place_block_the_fold():
    b = GraphBuilder("x")
    items = b.op("prim::ListConstruct", 1, 2, type="List[int]")
    n = b.op("aten::len.t", items, type="int")  # 2 when it runs, but the list grows first
    b.op("aten::append.t", items, 3, type="List[int]")
    program = b.ret(b.op("aten::select.int", b.inputs[0], 0, n))
    assert "aten::len.t" in ops(program)
    run(program)
    assert "aten::len.t" in ops(program)


def test_static_facts_answer_questions_about_tensors():
    b = GraphBuilder("x", shapes={"x": (None, 3, 8)})
    x = b.inputs[0]
    rank = b.op("aten::dim", x, type="int")
    channels = b.op("aten::size.int", x, 1, type="int")
    batch = b.op("aten::size.int", x, 0, type="int")  # dynamic: stays
    dtype = b.op("prim::dtype", x, type="int")
    floating = b.op("aten::is_floating_point", x, type="bool")
    device = b.op("prim::device", x, type="Device")
    program = b.ret(rank, channels, batch, dtype, floating, device)
    assert fold_and_clean(program)
    assert ops(program) == ["aten::size.int"]
    assert [constant_value(v) for v in (rank, channels, dtype, floating, device)] == [3, 3, 6, True, "cpu"]


def test_len_of_size_is_the_rank_and_a_static_size_is_a_list():
    b = GraphBuilder("x", "y", shapes={"x": (None, 4), "y": (2, 5)})
    x, y = b.inputs
    n = b.op("aten::len.t", b.op("aten::size", x, type="List[int]"), type="int")
    size = b.op("aten::size", y, type="List[int]")
    program = b.ret(b.op("aten::select.int", x, 0, n), b.op("aten::view", x, size))
    assert fold_and_clean(program)
    assert ops(program) == ["aten::select.int", "aten::view"]
    assert constant_value(n) == 2 and constant_value(size) == [2, 5]


def test_rank_checks_fold_through_the_operators_rank_rules():
    """A scripted capture records no shapes, only its input's rank: a quantized convolution's `len(x.shape) != 4`
    check (torch.ao's, between every two layers of a quantized model) folds through the @rank rules of the nodes
    before it (same rank as their input; a broadcast's, the most of its operands'); a node without a rule stops it."""
    b = GraphBuilder("x", "bias", shapes={"x": (None, None, None, None), "bias": (None, None, None)})
    x, bias = b.inputs
    q = b.op("ptlite::quantize_per_tensor", x, 0.1, 0)
    pooled = b.op("aten::max_pool2d", b.op("aten::relu", b.op("ptlite::dequantize_per_tensor", q, 0.1, 0)), [2, 2],
                  [2, 2], [0, 0], [1, 1], False)
    summed = b.op("aten::add.Tensor", pooled, bias, 1)  # no @rank rule: its rank stays unknown
    four = b.op("aten::len.t", b.op("aten::size", pooled, type="List[int]"), type="int")
    unknown = b.op("aten::len.t", b.op("aten::size", summed, type="List[int]"), type="int")
    program = b.ret(four, unknown)
    assert fold_and_clean(program)
    assert constant_value(four) == 4 and constant_value(unknown) is NOT_CONSTANT
    assert ops(program).count("aten::len.t") == 1


def test_a_long_chain_of_rank_rules_needs_no_recursion():
    from ptlite.passes.facts import TensorFacts

    b = GraphBuilder("x", shapes={"x": (None, 3)})
    y = b.inputs[0]
    for _ in range(5000):
        y = b.op("aten::relu", y)
    program = b.ret(y)
    assert TensorFacts(program.forward).rank(y) == 2


def test_if_on_a_constant_condition_becomes_its_branch():
    b = GraphBuilder("x", shapes={"x": (None, 3)})
    x = b.inputs[0]
    unbatched = b.op("aten::eq.int", b.op("aten::dim", x, type="int"), 1, type="bool")
    with b.block() as then:
        b.op("prim::RaiseException", "expected a batch", None, outputs=0)
        then.outputs = [b.op("aten::unsqueeze", x, 0)]
    with b.block() as other:
        other.outputs = [b.op("aten::relu", x)]
    out = b.op("prim::If", unbatched, blocks=[then, other])
    program = b.ret(b.op("aten::neg", out))
    assert fold_and_clean(program)
    assert ops(program) == ["aten::relu", "aten::neg"]
    assert program.forward.nodes[-1].inputs == other.outputs


def test_nested_ifs_fold_from_the_outside_in():
    b = GraphBuilder("x")
    x = b.inputs[0]
    with b.block() as inner_then:
        inner_then.outputs = [b.op("aten::relu", x)]
    with b.block() as inner_else:
        inner_else.outputs = [x]
    with b.block() as then:
        then.outputs = [b.op("prim::If", b.op("aten::gt.int", 2, 1, type="bool"), blocks=[inner_then, inner_else])]
    with b.block() as other:
        other.outputs = [x]
    program = b.ret(b.op("prim::If", True, blocks=[then, other]))
    assert fold_and_clean(program)
    assert ops(program) == ["aten::relu"] and program.forward.outputs == inner_then.outputs


def test_folds_inside_blocks_of_a_dynamic_if():
    b = GraphBuilder("x", "c")
    x, c = b.inputs
    with b.block() as then:
        then.outputs = [b.op("aten::mul.Scalar", x, b.op("aten::mul.int", 2, 3, type="int"))]
    with b.block() as other:
        other.outputs = [x]
    program = b.ret(b.op("prim::If", c, blocks=[then, other]))
    assert fold_and_clean(program)
    assert ops(program) == ["prim::If", "aten::mul.Scalar"]
    assert constant_value(then.nodes[-1].inputs[1]) == 6


def test_nothing_to_fold_is_not_modified():
    b = GraphBuilder("x")
    program = b.ret(b.op("aten::relu", b.inputs[0]))
    assert not run(program).modified
