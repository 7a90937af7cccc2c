"""Recurrent layers (aten::lstm, gru, rnn_tanh, rnn_relu) on the native library: each direction of each layer is one
call, the loop over time steps in C (csrc/kernels.inc: rnn), with the GIL released. The weights are transposed once
per program and kept (`derived`). Anything else (another dtype, LSTM with proj_size, an empty sequence) goes to the
reference's kernel."""

from __future__ import annotations

from typing import Any

import numpy as np

from ptlite.backends.numpy._derived import derived

from . import _native as lib
from .kernels import F32, _kernel, _reference

MODES = {"lstm": lib.LSTM, "gru": lib.GRU, "rnn_tanh": lib.RNN_TANH, "rnn_relu": lib.RNN_RELU}
_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


class _Direction:
    """One direction of one layer as the library takes it: weights transposed, (in, G*H) and (H, G*H)."""

    __slots__ = ("w_ih", "w_hh", "b_ih", "b_hh", "inputs", "hidden")

    def __init__(self, w_ih: np.ndarray, w_hh: np.ndarray, b_ih: np.ndarray | None, b_hh: np.ndarray | None) -> None:
        gates, self.inputs = w_ih.shape
        self.hidden = w_hh.shape[1]
        self.w_ih = np.array(w_ih.T, F32, order="C")
        self.w_hh = np.array(w_hh.T, F32, order="C")
        self.b_ih = np.zeros(gates, F32) if b_ih is None else np.array(b_ih, F32)
        self.b_hh = np.zeros(gates, F32) if b_hh is None else np.array(b_hh, F32)


def _directions(mode: str, params: Any, has_biases: bool, layers: int, dirs: int) -> list[list[_Direction]] | None:
    """The layers' directions, or None where the library does not take these parameters."""
    if not isinstance(params, (list, tuple)) or not params or type(layers) is not int or layers < 1:
        return None
    per = 4 if has_biases else 2
    if len(params) != per * layers * dirs or not isinstance(params[0], np.ndarray):
        return None  # proj_size (a fifth parameter): the reference
    for p in params:
        if not isinstance(p, np.ndarray) or p.dtype != F32:
            return None
    return derived(tuple(params), ("native-rnn", mode, bool(has_biases), layers, dirs),
                   lambda: _prepare(mode, params, per, layers, dirs))


def _prepare(mode: str, params: Any, per: int, layers: int, dirs: int) -> list[list[_Direction]] | None:
    gates = _GATES[mode]
    expected_in = None
    for i in range(layers * dirs):
        w_ih, w_hh = params[i * per], params[i * per + 1]
        if w_ih.ndim != 2 or w_hh.ndim != 2 or w_hh.shape[0] % gates \
                or w_hh.shape != (w_hh.shape[0], w_hh.shape[0] // gates):
            return None
        hidden = w_hh.shape[1]
        if w_ih.shape[0] != gates * hidden \
                or any(p.shape != (gates * hidden,) for p in params[i * per + 2:i * per + per]):
            return None
        if i % dirs == 0 and i > 0:
            expected_in = dirs * hidden
        if expected_in is not None and w_ih.shape[1] != expected_in:
            return None
    return [[_Direction(*(params[(layer * dirs + d) * per + k] if k < per else None for k in range(4)))
             for d in range(dirs)] for layer in range(layers)]


def packed(mode: str, params: Any, has_biases: Any, layers: Any, dirs: int, features: int) \
        -> tuple[np.ndarray, int] | None:
    """Every layer's and direction's weights in one array as the library's recurrent step reads them (w_ih
    transposed, w_hh transposed, b_ih, b_hh; layer-major), and the hidden size; None where the library does not take
    these parameters (or the first layer does not read `features` inputs)."""
    stack = _directions(mode, params, bool(has_biases), layers, dirs)
    if stack is None or stack[0][0].inputs != features \
            or any(d.hidden != stack[0][0].hidden for layer in stack for d in layer):
        return None
    return derived(tuple(params), ("native-rnn-packed", mode, bool(has_biases), layers, dirs), lambda: np.concatenate(
        [a.reshape(-1) for layer in stack for d in layer for a in (d.w_ih, d.w_hh, d.b_ih, d.b_hh)])), \
        stack[0][0].hidden


def _states(value: Any, shape: tuple[int, ...]) -> np.ndarray | None:
    if not isinstance(value, np.ndarray) or value.dtype != F32 or value.shape != shape:
        return None
    return np.ascontiguousarray(value)


def _run(mode: str, x: Any, h0: Any, c0: Any, params: Any, has_biases: Any, layers: Any, bidirectional: Any,
         batch_first: Any) -> tuple | None:
    """(output, h_n, c_n) as the reference returns them, or None where the library does not take the arguments."""
    if not isinstance(x, np.ndarray) or x.dtype != F32 or x.ndim != 3 or x.size == 0:
        return None
    dirs = 2 if bidirectional else 1
    stack = _directions(mode, params, bool(has_biases), layers, dirs)
    if stack is None:
        return None
    seq = np.ascontiguousarray(x.swapaxes(0, 1) if batch_first else x)  # (T, B, In)
    steps, batch, features = seq.shape
    hidden = stack[0][0].hidden
    if stack[0][0].inputs != features or any(d.hidden != hidden for layer in stack for d in layer):
        return None
    shape = (layers * dirs, batch, hidden)
    h0 = _states(h0, shape)
    c0 = _states(c0, shape) if mode == "lstm" else None
    if h0 is None or (mode == "lstm" and c0 is None):
        return None
    h_n = np.empty(shape, F32)
    c_n = np.empty(shape, F32) if mode == "lstm" else None
    for i, layer in enumerate(stack):
        out = np.empty((steps, batch, dirs * hidden), F32)
        for d, p in enumerate(layer):
            k = i * dirs + d
            lib.rnn(seq, p.w_ih, p.w_hh, p.b_ih, p.b_hh, h0[k], None if c0 is None else c0[k], out, h_n[k],
                    None if c_n is None else c_n[k],
                    (MODES[mode], steps, batch, seq.shape[2], hidden, dirs * hidden, d * hidden, d))
        seq = out
    output = np.ascontiguousarray(seq.swapaxes(0, 1)) if batch_first else seq
    return output, h_n, c_n


@_kernel("aten::lstm.input")
def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):  # noqa: A002
    if isinstance(hx, (list, tuple)) and len(hx) == 2:
        y = _run("lstm", input, hx[0], hx[1], params, has_biases, num_layers, bidirectional, batch_first)
        if y is not None:
            return y
    return _reference("aten::lstm.input")(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                                          batch_first)


def _single_state(mode: str) -> Any:
    key = f"aten::{mode}.input"

    def fn(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):  # noqa: A002
        y = _run(mode, input, hx, None, params, has_biases, num_layers, bidirectional, batch_first)
        if y is not None:
            return y[:2]
        return _reference(key)(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                               batch_first)
    fn.__name__ = mode
    return _kernel(key)(fn)


gru = _single_state("gru")
rnn_tanh = _single_state("rnn_tanh")
rnn_relu = _single_state("rnn_relu")
