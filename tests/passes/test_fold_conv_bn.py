"""fold_conv_bn folds inference batch norms into the convolution or linear layer feeding them, in every form the
capture front ends produce, and leaves every other pattern alone. Results are checked by running the program
before and after with ptlite's own kernels."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import assert_close
from irbuild import GraphBuilder, ops

from ptlite.ir import verify
from ptlite.passes.base import copy_program
from ptlite.passes.dead_code import DeadCode
from ptlite.passes.fold_conv_bn import FoldConvBatchNorm
from ptlite.runtime.module import Module

C_IN, C_OUT = 3, 4


def run(program):
    result = FoldConvBatchNorm()(program)
    verify(result.program)
    return result


def bn_args(b, rng, name="bn", affine=True, channels=C_OUT):
    """weight, bias, running_mean, running_var as weights of the program (None constants without affine)."""
    gamma = b.weight(f"{name}.weight", rng.uniform(0.5, 1.5, channels).astype(np.float32)) if affine else None
    beta = b.weight(f"{name}.bias", rng.uniform(-0.5, 0.5, channels).astype(np.float32)) if affine else None
    mean = b.weight(f"{name}.running_mean", rng.normal(0, 0.5, channels).astype(np.float32))
    var = b.weight(f"{name}.running_var", rng.uniform(0.2, 2.0, channels).astype(np.float32))
    return gamma, beta, mean, var


def batch_norm(b, x, rng, name="bn", affine=True, training=False, channels=C_OUT):
    return b.op("aten::batch_norm", x, *bn_args(b, rng, name, affine, channels), training, 0.1, 1e-5, True)


def conv2d(b, x, rng, name="conv", bias=True, groups=1):
    w = b.weight(f"{name}.weight", rng.normal(0, 0.5, (C_OUT, C_IN // groups, 3, 3)).astype(np.float32))
    bias_v = b.weight(f"{name}.bias", rng.normal(0, 0.5, C_OUT).astype(np.float32)) if bias else None
    return b.op("aten::conv2d", x, w, bias_v, [1, 1], [1, 1], [1, 1], groups)


def check_same_results(before, after, *inputs):
    expected, actual = Module(before)(*inputs), Module(after)(*inputs)
    if not isinstance(expected, tuple):
        expected, actual = (expected,), (actual,)
    for e, a in zip(expected, actual, strict=True):
        assert_close(a, e, what="folded program", rtol=1e-5)


def fold_and_compare(program, *inputs, folded_convs=1):
    before = copy_program(program)
    assert run(program).modified
    assert "aten::batch_norm" not in ops(program) and "aten::_native_batch_norm_legit_no_training" not in ops(program)
    DeadCode()(program)
    verify(program)
    check_same_results(before, program, *inputs)
    assert len([w for w in program.weights if ".folded." in w]) == 2 * folded_convs
    return program


@pytest.fixture
def image(rng):
    return rng.normal(size=(2, C_IN, 6, 6)).astype(np.float32)


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("affine", [True, False])
def test_conv2d_then_batch_norm(rng, image, bias, affine):
    b = GraphBuilder("x")
    y = batch_norm(b, conv2d(b, b.inputs[0], rng, bias=bias), rng, affine=affine)
    program = b.ret(b.op("aten::relu", y))
    fold_and_compare(program, image)
    assert ops(program) == ["aten::conv2d", "aten::relu"]
    conv = next(n for n in program.forward.nodes if n.op == "aten::conv2d")
    assert [program.weights[n.node.attrs["weight"]].dtype for n in conv.inputs[1:3]] == [np.float32, np.float32]
    assert sorted(program.weights) == ["conv.folded.bias", "conv.folded.weight"]


def test_grouped_conv(rng):
    b = GraphBuilder("x")
    x = rng.normal(size=(1, 4, 5, 5)).astype(np.float32)
    w = b.weight("dw.weight", rng.normal(0, 0.5, (C_OUT, 1, 3, 3)).astype(np.float32))
    y = b.op("aten::conv2d", b.inputs[0], w, None, [1, 1], [0, 0], [1, 1], 4)
    program = b.ret(batch_norm(b, y, rng))
    fold_and_compare(program, x)


def test_traced_convolution_and_transposed_one(rng, image):
    def build(transposed):
        b = GraphBuilder("x")
        shape = (C_IN, C_OUT, 3, 3) if transposed else (C_OUT, C_IN, 3, 3)
        w = b.weight("conv.weight", rng.normal(0, 0.5, shape).astype(np.float32))
        y = b.op("aten::_convolution", b.inputs[0], w, None, [1, 1], [0, 0], [1, 1], transposed, [0, 0], 1,
                 False, False, True, True)
        return b.ret(batch_norm(b, y, rng))

    fold_and_compare(build(False), image)
    program = build(True)
    assert not run(program).modified
    assert "aten::batch_norm" in ops(program)


def test_convolution_and_conv1d(rng):
    b = GraphBuilder("x")
    w = b.weight("c.weight", rng.normal(0, 0.5, (C_OUT, C_IN, 3, 3)).astype(np.float32))
    y = b.op("aten::convolution", b.inputs[0], w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    fold_and_compare(b.ret(batch_norm(b, y, rng)), rng.normal(size=(1, C_IN, 5, 5)).astype(np.float32))

    b = GraphBuilder("x")
    w = b.weight("c.weight", rng.normal(0, 0.5, (C_OUT, C_IN, 3)).astype(np.float32))
    y = b.op("aten::conv1d", b.inputs[0], w, None, [1], [1], [1], 1)
    fold_and_compare(b.ret(batch_norm(b, y, rng)), rng.normal(size=(2, C_IN, 7)).astype(np.float32))


def test_decomposed_export_batch_norm_when_only_its_output_is_used(rng, image):
    def build(use_stats):
        b = GraphBuilder("x")
        y = conv2d(b, b.inputs[0], rng)
        out, saved_mean, saved_rstd = b.op("aten::_native_batch_norm_legit_no_training", y, *bn_args(b, rng),
                                           0.1, 1e-5, outputs=3)
        return b.ret(out, saved_mean) if use_stats else b.ret(out)

    fold_and_compare(build(False), image)
    program = build(True)
    assert not run(program).modified


def test_not_folded_when_conv_output_has_other_users(rng):
    b = GraphBuilder("x")
    y = conv2d(b, b.inputs[0], rng)
    program = b.ret(batch_norm(b, y, rng), b.op("aten::relu", y))
    assert not run(program).modified

    b = GraphBuilder("x")
    y = conv2d(b, b.inputs[0], rng)
    program = b.ret(batch_norm(b, y, rng), y)  # the conv output is also a method output
    assert not run(program).modified


def test_shape_queries_do_not_block_folding(rng, image):
    b = GraphBuilder("x")
    y = conv2d(b, b.inputs[0], rng)
    rank = b.op("aten::dim", y, type="int")
    program = b.ret(batch_norm(b, y, rng), rank)
    fold_and_compare(program, image)


def test_training_or_non_constant_statistics_are_not_folded(rng):
    b = GraphBuilder("x")
    program = b.ret(batch_norm(b, conv2d(b, b.inputs[0], rng), rng, training=True))
    assert not run(program).modified

    b = GraphBuilder("x", "mean")
    y = conv2d(b, b.inputs[0], rng)
    gamma, beta, _, var = bn_args(b, rng)
    program = b.ret(b.op("aten::batch_norm", y, gamma, beta, b.inputs[1], var, False, 0.1, 1e-5, True))
    assert not run(program).modified

    b = GraphBuilder("x", "w")
    y = b.op("aten::conv2d", b.inputs[0], b.inputs[1], None, [1, 1], [0, 0], [1, 1], 1)  # weight not constant
    program = b.ret(batch_norm(b, y, rng))
    assert not run(program).modified


def test_channel_count_mismatch_is_not_folded(rng):
    b = GraphBuilder("x")
    program = b.ret(batch_norm(b, conv2d(b, b.inputs[0], rng), rng, channels=C_OUT + 1))
    assert not run(program).modified


def test_shared_conv_weight_and_chained_batch_norms(rng, image):
    """Two convs share one weight; the first feeds two batch norms in a row: both fold, in one run."""
    b = GraphBuilder("x")
    w = b.weight("conv.weight", rng.normal(0, 0.5, (C_OUT, C_IN, 3, 3)).astype(np.float32))
    y1 = b.op("aten::conv2d", b.inputs[0], w, None, [1, 1], [1, 1], [1, 1], 1)
    y1 = batch_norm(b, batch_norm(b, y1, rng, "bn1"), rng, "bn2")
    y2 = b.op("aten::conv2d", b.inputs[0], w, None, [1, 1], [1, 1], [1, 1], 1)
    program = b.ret(b.op("aten::add.Tensor", y1, y2, 1))
    fold_and_compare(program, image)
    assert ops(program) == ["aten::conv2d", "aten::conv2d", "aten::add.Tensor"]
    assert "conv.weight" in program.weights  # still used by the second conv


def test_folds_inside_nested_blocks(rng):
    b = GraphBuilder("x")
    with b.block("i", "h") as body:
        w = b.weight("conv.weight", rng.normal(0, 0.3, (C_OUT, C_OUT, 3, 3)).astype(np.float32))
        y = b.op("aten::conv2d", body.inputs[1], w, None, [1, 1], [1, 1], [1, 1], 1)
        y = batch_norm(b, y, rng)
        body.outputs = [b.const(True), b.op("aten::add.Tensor", y, body.inputs[1], 1)]
    out = b.op("prim::Loop", 2, True, b.inputs[0], blocks=[body])
    program = b.ret(out)
    fold_and_compare(program, rng.normal(size=(2, C_OUT, 6, 6)).astype(np.float32))
    assert ops(program) == ["prim::Loop", "aten::conv2d", "aten::add.Tensor"]


def test_linear_then_batch_norm_1d_when_2d(rng):
    def build(flatten_start=1, shape=None):
        b = GraphBuilder("x", shapes={"x": shape} if shape else None)
        h = b.op("aten::flatten.using_ints", b.inputs[0], flatten_start, -1) if flatten_start is not None \
            else b.inputs[0]
        w = b.weight("fc.weight", rng.normal(0, 0.5, (C_OUT, 6)).astype(np.float32))
        y = b.op("aten::linear", h, w, b.weight("fc.bias", rng.normal(0, 0.5, C_OUT).astype(np.float32)))
        return b.ret(batch_norm(b, y, rng))

    fold_and_compare(build(1), rng.normal(size=(5, 2, 3)).astype(np.float32))
    fold_and_compare(build(None, shape=(None, 6)), rng.normal(size=(5, 6)).astype(np.float32))
    assert not run(build(None)).modified  # rank unknown: BatchNorm1d on (N, C, L) would normalise another dim
    assert not run(build(2)).modified  # 3-D output


def test_nothing_to_fold_is_not_modified(rng):
    b = GraphBuilder("x")
    program = b.ret(b.op("aten::relu", conv2d(b, b.inputs[0], rng)))
    assert not run(program).modified
