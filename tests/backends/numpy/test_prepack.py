"""prepack replaces convolutions and linear layers with constant weights by ptlite's prepacked operators, in every
capture spelling, stores the packed weights, and leaves what it cannot pack alone. Results are checked by running
the program before and after with ptlite's kernels."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close
from irbuild import GraphBuilder, ops

from ptlite.backends.numpy.lower.prepack import Prepack
from ptlite.ir import verify
from ptlite.ops.layouts import pack_conv2d_weight
from ptlite.passes.base import copy_program
from ptlite.passes.dead_code import DeadCode
from ptlite.runtime.module import Module


def prepack_and_compare(program, *inputs, expect_ops):
    before = copy_program(program)
    assert Prepack()(program).modified
    DeadCode()(program)
    verify(program)
    assert ops(program) == expect_ops
    assert not Prepack()(program).modified  # a second run finds nothing left to pack
    assert_close(Module(program)(*inputs), Module(before)(*inputs), what="prepacked program", rtol=1e-5)
    return program


def weight(b, rng, name, *shape):
    return b.weight(name, rng.normal(0, 0.5, shape).astype(np.float32))


@pytest.mark.parametrize("groups,c,o", [(1, 4, 6), (4, 4, 4), (2, 4, 6)], ids=["dense", "depthwise", "grouped"])
def test_conv2d(rng, groups, c, o):
    b = GraphBuilder("x")
    w, bias = weight(b, rng, "conv.weight", o, c // groups, 3, 3), weight(b, rng, "conv.bias", o)
    program = b.ret(b.op("aten::conv2d", b.inputs[0], w, bias, [2, 2], [1, 1], [1, 1], groups))
    prepack_and_compare(program, rng.normal(size=(2, c, 9, 8)).astype(np.float32),
                        expect_ops=["ptlite::conv2d_prepacked"])
    assert sorted(program.weights) == ["conv.bias", "conv.packed"]
    packed = program.weights["conv.packed"]
    original = rng.normal(size=(o, c // groups, 3, 3)).astype(np.float32)
    assert packed.shape == pack_conv2d_weight(original, groups).shape and packed.flags.c_contiguous


def test_script_spelling_with_list_construct_and_string_padding(rng):
    b = GraphBuilder("x")
    w = weight(b, rng, "c.weight", 5, 3, 4, 2)
    stride = b.op("prim::ListConstruct", 1, 1, type="List[int]")
    y = b.op("aten::conv2d.padding", b.inputs[0], w, None, stride, "same", [1, 1], 1)
    z = b.op("aten::_convolution", y, weight(b, rng, "d.weight", 5, 5, 1, 1), None, [1, 1], [0, 0], [1, 1], False,
             [0, 0], 1, False, False, True, True)
    prepack_and_compare(b.ret(z), rng.normal(size=(1, 3, 7, 6)).astype(np.float32),
                        expect_ops=["ptlite::conv2d_prepacked", "ptlite::conv2d_prepacked"])


def test_linear(rng):
    b = GraphBuilder("x")
    y = b.op("aten::linear", b.inputs[0], weight(b, rng, "fc.weight", 3, 5), weight(b, rng, "fc.bias", 3))
    program = prepack_and_compare(b.ret(y), rng.normal(size=(2, 4, 5)).astype(np.float32),
                                  expect_ops=["ptlite::linear_prepacked"])
    assert program.weights["fc.packed"].shape == (5, 3)


def test_shared_weight_packed_once(rng):
    b = GraphBuilder("x")
    w = weight(b, rng, "fc.weight", 5, 5)
    y = b.op("aten::linear", b.op("aten::linear", b.inputs[0], w, None), w, None)
    program = prepack_and_compare(b.ret(y), rng.normal(size=(2, 5)).astype(np.float32),
                                  expect_ops=["ptlite::linear_prepacked"] * 2)
    assert list(program.weights) == ["fc.packed"]


def test_left_alone(rng):
    b = GraphBuilder("x", "w")
    w = weight(b, rng, "t.weight", 4, 3, 3, 3)
    transposed = b.op("aten::_convolution", b.inputs[0], w, None, [1, 1], [0, 0], [1, 1], True, [0, 0], 1,
                      False, False, True, True)
    computed_weight = b.op("aten::conv2d", b.inputs[0], b.inputs[1], None, [1, 1], [0, 0], [1, 1], 1)
    conv1d = b.op("aten::conv1d", b.inputs[0], weight(b, rng, "c1.weight", 4, 4, 3), None, [1], [0], [1], 1)
    strided_same = b.op("aten::conv2d.padding", b.inputs[0], weight(b, rng, "s.weight", 4, 4, 3, 3), None, [2, 2],
                        "same", [1, 1], 1)
    computed_bias = b.op("aten::linear", b.inputs[0], weight(b, rng, "fc.weight", 3, 3), b.op("aten::relu", w))
    program = b.ret(transposed, computed_weight, conv1d, strided_same, computed_bias)
    assert not Prepack()(program).modified


def test_unpack_inverts_pack(rng):
    from ptlite.ops.layouts import unpack_dense_conv2d_weight

    w = rng.normal(size=(5, 3, 2, 4)).astype(np.float32)
    np.testing.assert_array_equal(unpack_dense_conv2d_weight(pack_conv2d_weight(w, 1), (2, 4)), w)
