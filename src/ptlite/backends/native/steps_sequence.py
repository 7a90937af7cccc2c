"""The executor's steps for sequence models (steps.py's step_for hands these operators here): layer norm and
softmax over the last axis, scaled dot-product attention, matrix products, and whole recurrent layers.
"""

from __future__ import annotations

import math

import numpy as np

from ptlite.ir.graph import Node, Program

from . import _native as lib
from .steps import F32, NOT_CONSTANT, Shapes, Step, constant
from .views import row_major

_RECURRENT = {"aten::lstm.input": "lstm", "aten::gru.input": "gru", "aten::rnn_tanh.input": "rnn_tanh",
              "aten::rnn_relu.input": "rnn_relu"}


def sequence_step(node: Node, args: list, shapes: Shapes, program: Program) -> Step | None:
    """The step for one of steps._SEQUENCE's operators, or None."""
    if node.op == "aten::layer_norm":
        return _layer_norm_step(node, args, shapes)
    if node.op in ("aten::softmax.int", "aten::_softmax"):
        return _softmax_step(node, args, shapes)
    if node.op == "aten::scaled_dot_product_attention":
        return _attention_step(node, args, shapes)
    if node.op in ("aten::matmul", "aten::mm"):
        return _matmul_step(node, args, shapes)
    if node.op in _RECURRENT:
        return _recurrent_step(node, args, shapes, program)
    return None


def _layer_norm_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    """aten::layer_norm over the trailing dimensions of a row-major tensor, with an optional weight and bias."""
    x, shape = node.inputs[0], shapes.of(node.inputs[0])
    normalized, weight, bias, eps = (args + [None] * 5)[1:5]
    if shape is None or not isinstance(normalized, list) or not normalized or tuple(normalized) != \
            shape[len(shape) - len(normalized):] or not isinstance(eps, (int, float)) or not shapes.layout(x, False):
        return None
    n = math.prod(normalized)
    for t in (weight, bias):
        if t is not None and not (isinstance(t, np.ndarray) and t.dtype == F32 and t.size == n):
            return None
    if n == 0 or math.prod(shape) == 0:
        return None
    shapes.set(node.outputs[0], shape)
    return Step(lib.STEP_ROWS, [1, math.prod(shape) // n, n], (float(eps), 0.0, 0.0), [x, weight, bias],
                 node.outputs[0])


def _softmax_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    """Softmax over the last dimension of a row-major float32 tensor (aten::softmax.int without a dtype,
    aten::_softmax without half_to_float)."""
    x, shape = node.inputs[0], shapes.of(node.inputs[0])
    if shape is None or not shape or math.prod(shape) == 0 or len(args) < 2 or type(args[1]) is not int \
            or args[1] not in (-1, len(shape) - 1) or (len(args) > 2 and args[2] is not None and args[2] is not False) \
            or not shapes.layout(x, False):
        return None
    shapes.set(node.outputs[0], shape)
    return Step(lib.STEP_ROWS, [0, math.prod(shape) // shape[-1], shape[-1]], (0.0, 0.0, 0.0), [x],
                 node.outputs[0])


def _attention_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    """aten::scaled_dot_product_attention of row-major (..., L, E) tensors with up to two batch dimensions, shared by
    query, key and value; an optional float mask broadcast to (..., L, S), or causal masking; no dropout."""
    q, k, v = node.inputs[:3]
    mask = node.inputs[3] if len(node.inputs) > 3 and args[3] is NOT_CONSTANT else None
    dropout, causal, scale, gqa = (args + [None, 0.0, False, None, False][len(args) - 3:])[4:8]
    sq, sk, sv = shapes.of(q), shapes.of(k), shapes.of(v)
    if None in (sq, sk, sv) or not 2 <= len(sq) <= 4 or not sq[:-2] == sk[:-2] == sv[:-2] or sk[-1] != sq[-1] \
            or sv[-2] != sk[-2] or 0 in sq + sk + sv or type(dropout) not in (int, float) or dropout != 0 \
            or type(causal) is not bool \
            or (causal and mask is not None) or (gqa is not False and gqa is not None) \
            or not (scale is None or isinstance(scale, (int, float))) \
            or (len(args) > 3 and mask is None and args[3] is not None) \
            or not all(shapes.layout(t, False) for t in (q, k, v)):
        return None
    batch = (1,) * (4 - len(sq)) + sq[:-2]
    length, keys = sq[-2], sk[-2]
    strides = [0, 0, 0, 0]
    if mask is not None:
        sm = shapes.of(mask)
        target = batch[4 - len(sq):] + (length, keys)
        if sm is None or len(sm) > len(target) or 0 in sm or not shapes.layout(mask, False):
            return None
        own = row_major(sm)
        for i in range(1, len(sm) + 1):
            if sm[-i] not in (1, target[-i]):
                return None
            strides[-i] = own[-i] if sm[-i] != 1 else 0
    out = sq[:-1] + (sv[-1],)
    shapes.set(node.outputs[0], out)
    factor = 1.0 / math.sqrt(sq[-1]) if scale is None else float(scale)
    ints = [batch[0], batch[1], length, keys, sq[-1], sv[-1], int(causal), *strides]
    return Step(lib.STEP_ATTENTION, ints, (factor, 0.0, 0.0), [q, k, v], node.outputs[0], extra=mask)


def _matmul_step(node: Node, args: list, shapes: Shapes) -> Step | None:
    """aten::matmul / aten::mm of row-major float32 tensors, both at least 2-D (attention.matmul_shapes); either may
    be a constant (the plan holds it)."""
    from .attention import matmul_shapes

    operands, dims = [], []
    for v, arg in zip(node.inputs[:2], args[:2]):
        if isinstance(arg, np.ndarray):
            if arg.dtype != F32:
                return None
            operands.append(np.ascontiguousarray(arg))
            dims.append(arg.shape)
        elif shapes.of(v) is not None and shapes.layout(v, False):
            operands.append(v)
            dims.append(shapes.of(v))
        else:
            return None
    planned = matmul_shapes(*dims)
    if planned is None or (node.op == "aten::mm" and (len(dims[0]), len(dims[1])) != (2, 2)):
        return None
    out, count, shared = planned
    (m, k), n = dims[0][-2:], dims[1][-1]
    shapes.set(node.outputs[0], out)
    ints = [count, m, k, n, m * k, k, 0 if shared else k * n, n, 1]
    return Step(lib.STEP_MATMUL, ints, (0.0, 0.0, 0.0), operands, node.outputs[0])


def _recurrent_step(node: Node, args: list, shapes: Shapes, program: Program) -> Step | None:
    """A whole LSTM / GRU / Elman operator (every layer and direction in one library call) over a row-major float32
    sequence, with constant weights (packed once: recurrent.packed) and initial states that are constants or
    tensors; only where the final states are not read (the output sequence is the step's one result)."""
    from .recurrent import MODES, packed

    mode = _RECURRENT[node.op]
    x, shape = node.inputs[0], shapes.of(node.inputs[0])
    if shape is None or len(shape) != 3 or 0 in shape or len(args) != 9 \
            or any(v.id in shapes.read for v in node.outputs[1:]) or not shapes.layout(x, False):
        return None
    hx, params, has_biases, layers, _, _, bidirectional, batch_first = args[1:]
    states = node.inputs[1].node.inputs if mode == "lstm" and node.inputs[1].node is not None \
        and node.inputs[1].node.op == "prim::ListConstruct" else [node.inputs[1]]
    if not isinstance(params, list) or type(bidirectional) is not bool or type(batch_first) is not bool \
            or len(states) != (2 if mode == "lstm" else 1):
        return None
    dirs = 2 if bidirectional else 1
    weights = packed(mode, params, has_biases, layers, dirs, shape[2])
    if weights is None:
        return None
    steps, batch = (shape[1], shape[0]) if batch_first else shape[:2]
    hidden = weights[1]
    operands = []
    for state in states:  # h0 (and c0): a constant or a tensor of (layers * dirs, batch, hidden)
        value = constant(state, program)
        want = (layers * dirs, batch, hidden)
        if isinstance(value, np.ndarray) and value.dtype == F32 and value.shape == want:
            operands.append(value)
        elif value is NOT_CONSTANT and shapes.of(state) == want and shapes.layout(state, False):
            operands.append(state)
        else:
            return None
    out = (batch, steps, dirs * hidden) if batch_first else (steps, batch, dirs * hidden)
    shapes.set(node.outputs[0], out)
    ints = [MODES[mode], steps, batch, shape[2], hidden, layers, dirs, int(batch_first)]
    return Step(lib.STEP_RNN, ints, (0.0, 0.0, 0.0), [x, weights[0], operands[0]], node.outputs[0],
                extra=operands[1] if mode == "lstm" else None)
