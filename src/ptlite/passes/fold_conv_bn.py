"""Fold an inference batch norm into the convolution (or linear layer) that feeds it, as PyTorch's
FoldConvBatchNorm does: one operator with new weights instead of two.

    y = bn(conv(x, W, b))  ==  conv(x, W * s, (b - mean) * s + beta),  s = gamma / sqrt(var + eps)

per output channel (dim 0 of W). The pattern, in every form the capture front ends produce:
- producer: aten::conv1d / conv2d / conv3d (and their `.padding` overloads), aten::_convolution_mode,
  aten::convolution and aten::_convolution (non-transposed), aten::linear; constant weight and bias (or None);
- batch norm: aten::batch_norm with training=False (script, trace, export), or
  aten::_native_batch_norm_legit_no_training / native_batch_norm / _native_batch_norm_legit with training=False
  (decomposed export graphs) whose statistics outputs are unused; constant statistics and affine (or None);
- the producer's output is read by the batch norm alone, apart from shape and dtype queries (which the folded
  result answers the same way).
For aten::linear the result must be known to be 2-D (N, C): batch norm normalises dim 1, linear's outputs lie on
the last dim, and the two coincide only then.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ptlite.ir.graph import Graph, Node, Program, Value

from .base import (
    NOT_CONSTANT,
    Pass,
    Use,
    blocks,
    constant_value,
    replace_all_uses,
    uses,
    weight_constant,
    weight_of,
)

# Producers: operator -> position of its `transposed` argument (which must be False), or None.
PRODUCERS: dict[str, int | None] = {
    "aten::conv1d": None, "aten::conv2d": None, "aten::conv3d": None,
    "aten::conv1d.padding": None, "aten::conv2d.padding": None, "aten::conv3d.padding": None,
    "aten::_convolution_mode": None, "aten::convolution": 6, "aten::_convolution": 6,
    "aten::_convolution.deprecated": 6, "aten::linear": None,
}


@dataclass(frozen=True)
class BatchNormArgs:
    """Where an inference batch norm keeps `training` (None: the operator never trains) and `eps`; its first five
    arguments are always (input, weight, bias, running_mean, running_var)."""

    training: int | None
    eps: int


BATCH_NORMS: dict[str, BatchNormArgs] = {
    "aten::batch_norm": BatchNormArgs(training=5, eps=7),
    "aten::_native_batch_norm_legit_no_training": BatchNormArgs(training=None, eps=6),
    "aten::_native_batch_norm_legit": BatchNormArgs(training=5, eps=7),
    "aten::native_batch_norm": BatchNormArgs(training=5, eps=7),
}

# Operators that read only a tensor's shape or dtype, which folding leaves unchanged.
METADATA_READERS = frozenset({"aten::dim", "aten::size", "aten::size.int", "aten::numel", "prim::dtype",
                              "prim::device"})


class FoldConvBatchNorm(Pass):
    name = "fold_conv_bn"

    def run(self, graph: Graph, program: Program) -> bool:
        users = uses(graph)
        input_ranks = {v.id: len(spec.shape) for v, spec in zip(graph.inputs, graph.input_specs)
                       if spec.type == "Tensor" and spec.shape is not None}
        constants: dict[int, list[Node]] = {}  # producer -> the folded weight and bias, to insert before it
        folded: set[int] = set()  # the batch norms folded away
        for block in list(blocks(graph)):
            for bn in block.nodes:
                if bn.op not in BATCH_NORMS:
                    continue
                producer = bn.inputs[0].node
                if producer is None or not _foldable(producer, bn, users, program, input_ranks):
                    continue
                constants[id(producer)] = _fold(graph, program, producer, bn, users)
                folded.add(id(bn))
                users[producer.outputs[0].id] = users.pop(bn.outputs[0].id, [])
        if folded:  # every block rebuilt once (editing it at each fold made large programs quadratic)
            for block in blocks(graph):
                block.nodes = [m for n in block.nodes if id(n) not in folded
                               for m in (*constants.get(id(n), ()), n)]
        return bool(folded)


def _foldable(producer: Node, bn: Node, users: dict[int, list[Use]], program: Program,
              input_ranks: dict[int, int]) -> bool:
    args = BATCH_NORMS[bn.op]
    if producer.op not in PRODUCERS or any(v.id in users for v in bn.outputs[1:]):
        return False
    transposed = PRODUCERS[producer.op]
    if transposed is not None and constant_value(producer.inputs[transposed]) is not False:
        return False
    if args.training is not None and constant_value(bn.inputs[args.training]) is not False:
        return False
    if not isinstance(constant_value(bn.inputs[args.eps]), (int, float)):
        return False
    out = producer.outputs[0]
    readers = users.get(out.id, [])
    if sum(u is bn for u in readers) != 1 or bn.inputs.count(out) != 1:
        return False
    if not all(u is bn or (isinstance(u, Node) and u.op in METADATA_READERS) for u in readers):
        return False
    weight = weight_of(program, producer.inputs[1])
    if weight is None or weight.dtype.kind != "f" or weight.ndim < 2:
        return False
    rank = _rank(out, input_ranks)
    if producer.op == "aten::linear" and rank != 2:
        return False
    if producer.op != "aten::linear" and rank not in (None, weight.ndim):
        return False  # an unbatched convolution: its channels are not on dim 1
    channels = weight.shape[0]
    params = [_vector(program, producer.inputs[2])] + [_vector(program, v) for v in bn.inputs[1:5]]
    if any(p is NOT_CONSTANT or (p is not None and p.shape != (channels,)) for p in params):
        return False
    return params[3] is not None and params[4] is not None  # running statistics are required


def _vector(program: Program, v: Value) -> np.ndarray | None:
    """A per-channel constant: its array, None for a None constant, NOT_CONSTANT otherwise."""
    array = weight_of(program, v)
    if array is not None:
        return array.reshape(-1) if array.ndim <= 1 else array
    return None if constant_value(v) is None else NOT_CONSTANT


def _rank(v: Value, input_ranks: dict[int, int]) -> int | None:
    """The tensor's rank where it is known: from its shape or the method's input specs, or through the
    operators that fix it (flatten(x, start, -1) has start + 1 dims; convolutions and linear keep their
    input's rank)."""
    if v.shape is not None:
        return len(v.shape)
    node = v.node
    if node is None:
        return input_ranks.get(v.id)
    if node.op == "aten::flatten.using_ints":
        start, end = constant_value(node.inputs[1]), constant_value(node.inputs[2])
        return start + 1 if end == -1 and isinstance(start, int) and start >= 0 else None
    if node.op in PRODUCERS:
        return _rank(node.inputs[0], input_ranks)
    return None


def _fold(graph: Graph, program: Program, producer: Node, bn: Node, users: dict[int, list[Use]]) -> list[Node]:
    """Fold `bn` into `producer`'s weight and bias: returns the two new constant nodes, which the caller puts before
    `producer` (and drops `bn` from its block)."""
    weight = weight_of(program, producer.inputs[1])
    bias = _vector(program, producer.inputs[2])
    gamma, beta, mean, var = (_vector(program, v) for v in bn.inputs[1:5])
    eps = float(constant_value(bn.inputs[BATCH_NORMS[bn.op].eps]))
    f64 = np.float64
    scale = 1.0 / np.sqrt(var.astype(f64) + eps)
    if gamma is not None:
        scale = scale * gamma.astype(f64)
    shift = -mean.astype(f64) * scale
    if bias is not None:
        shift = shift + bias.astype(f64) * scale
    if beta is not None:
        shift = shift + beta.astype(f64)
    per_row = scale.reshape(-1, *[1] * (weight.ndim - 1))
    if weight.dtype == np.float32:
        # one pass in float32 (the scale rounded once, then the product): within ~1e-7 of the float64 product, and
        # it keeps a large model's folding at load (a .ptl file) to one pass over its weights instead of four
        new_weight = weight * per_row.astype(np.float32)
    else:
        new_weight = (weight.astype(f64) * per_row).astype(weight.dtype)
    base = _base_name(producer.inputs[1])
    w_node = weight_constant(program, f"{base}.folded.weight", new_weight, producer.source)
    b_node = weight_constant(program, f"{base}.folded.bias", shift.astype(weight.dtype), producer.source)
    producer.inputs[1], producer.inputs[2] = w_node.outputs[0], b_node.outputs[0]
    replace_all_uses(graph, bn.outputs[0], producer.outputs[0], users)
    return [w_node, b_node]


def _base_name(weight: Value) -> str:
    """'layer1.0.conv1' for the weight 'layer1.0.conv1.weight' (or 'layer1.0.conv1.folded.weight')."""
    name = weight.node.attrs["weight"]
    return name.removesuffix(".weight").removesuffix(".folded") or name
