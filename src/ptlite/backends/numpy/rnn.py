"""Recurrent layers (LSTM, GRU, Elman RNN) and their single-step cells, with PyTorch's weight layout.

One matmul projects the inputs of every time step at once; the loop over time then only adds the recurrent
term. Both directions of a bidirectional layer advance together through one batched matmul per step.
A step's gates take one transcendental call (LSTM: one tanh, GRU: one exp for r and z; scaling folded exactly
into the weights), and the step loop keeps its states transposed so that every gate is a contiguous block.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.errors import KernelArgumentError

from ._derived import derived

_GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


# PyTorch's gate order -> ours, and the factor each of our gates' rows is scaled by
_ORDER = {"lstm": ([0, 1, 3, 2], [0.5, 0.5, 0.5, 1.0]), "gru": ([0, 1, 2], [-1.0, -1.0, 1.0]),
          "rnn_tanh": ([0], [1.0]), "rnn_relu": ([0], [1.0])}


def _reorder(mode: str, rows: np.ndarray, hidden: int) -> np.ndarray:
    """Permute the gate blocks of a (G*H, ...) weight or (G*H,) bias and scale each block."""
    order, factors = _ORDER[mode]
    return np.concatenate([rows[k * hidden:(k + 1) * hidden] * np.asarray(f, rows.dtype)
                           for k, f in zip(order, factors, strict=True)], axis=0)


def _prepare(mode: str, w_ih, w_hh, b_ih, b_hh, w_hr, dtype: np.dtype) -> tuple:
    """One direction's (w_ih, w_hh, bias_x, bias_hn, w_hr) as _Layer holds them, unstacked."""
    w_ih = np.asarray(w_ih, dtype=dtype)
    w_hh = np.asarray(w_hh, dtype=dtype)
    hidden = w_ih.shape[0] // _GATES[mode]
    b_ih = np.zeros(w_ih.shape[0], dtype) if b_ih is None else np.asarray(b_ih, dtype=dtype)
    b_hh = np.zeros(w_ih.shape[0], dtype) if b_hh is None else np.asarray(b_hh, dtype=dtype)
    bias_hn = None
    if mode == "gru":
        bias_x = b_ih.copy()
        bias_x[: 2 * hidden] += b_hh[: 2 * hidden]
        bias_hn = b_hh[2 * hidden:]
    else:
        bias_x = b_ih + b_hh
    w_hr = None if w_hr is None else np.asarray(w_hr, dtype=dtype)
    return (_reorder(mode, w_ih, hidden), _reorder(mode, w_hh, hidden), _reorder(mode, bias_x, hidden), bias_hn,
            w_hr)


class _Layer:
    """One layer's directions prepared for the step loop and stacked (D first): made once per weights and kept
    (`derived`), where preparing them at every call cost ~15 % of a small LSTM's or GRU's run.

    Gates are reordered so that those going through a sigmoid come first (LSTM: i, f, o, g; GRU: r, z, n)
    and their rows are pre-scaled (exactly, by powers of two) so that one transcendental call serves every gate of
    a step: for LSTM, one tanh, with sigmoid(x) = tanh(x/2) / 2 + 1/2 on i, f, o (rows scaled by 1/2); for GRU's
    r and z, one exp, with sigmoid(x) = 1 / (1 + exp(-x)) (rows scaled by -1).
    """

    __slots__ = ("w_ih", "bias_x", "w_hh", "bias_hn", "w_hr")

    def __init__(self, mode: str, params: list[tuple], dtype: np.dtype) -> None:
        w_ih, w_hh, bias_x, bias_hn, w_hr = zip(*(_prepare(mode, *p, dtype=dtype) for p in params), strict=True)
        self.w_ih = np.stack(w_ih)  # (D, G*H, In)
        self.bias_x = np.stack(bias_x)[:, :, None]  # (D, G*H, 1): bias added to the input projection
        self.w_hh = np.stack(w_hh)  # (D, G*H, Hout)
        # GRU: (D, H, 1), the hidden bias of the new gate, which r multiplies; LSTM with proj_size: (D, P, H)
        self.bias_hn = None if bias_hn[0] is None else np.stack(bias_hn)[:, :, None]
        self.w_hr = None if w_hr[0] is None else np.stack(w_hr)


def _layer(mode: str, params: list[tuple], dtype: np.dtype) -> _Layer:
    """The prepared layer for these weights (one (w_ih, w_hh, b_ih, b_hh, w_hr) per direction)."""
    arrays = tuple(a for p in params for a in p)
    if not isinstance(arrays[0], np.ndarray):
        return _Layer(mode, params, dtype)
    return derived(arrays, (mode, np.dtype(dtype).str, len(params)), lambda: _Layer(mode, params, dtype))


def _lstm_step(gates, c, hidden, w_hr, scratch, h_out) -> None:
    """gates (D, 4H, B) hold i/2, f/2, o/2, g before activation; updates c (D, H, B) in place and writes the new h
    (D, Hout, B) into h_out. Ten NumPy calls a step with the matrix product and the input terms' add (a sigmoid
    by exp took twelve), which for the small layers of sequence models is most of the time."""
    np.tanh(gates, out=gates)
    sigmoids = gates[:, :3 * hidden]
    sigmoids *= 0.5
    sigmoids += 0.5
    i, f, o, g = (gates[:, k * hidden:(k + 1) * hidden] for k in range(4))
    c *= f
    i *= g
    c += i
    np.tanh(c, out=scratch)
    if w_hr is None:
        np.multiply(scratch, o, out=h_out)
    else:
        scratch *= o
        np.matmul(w_hr, scratch, out=h_out)


def _gru_step(gates, xp_t, h, hidden, bias_hn, h_out) -> None:
    """gates (D, 3H, B): recurrent terms of -r, -z, n; xp_t the input terms; writes the new h (D, H, B), from h,
    into h_out."""
    rz = gates[:, : 2 * hidden]
    rz += xp_t[:, : 2 * hidden]
    np.exp(rz, out=rz)
    rz += 1.0
    np.reciprocal(rz, out=rz)
    r, z, n = (gates[:, k * hidden:(k + 1) * hidden] for k in range(3))
    n += bias_hn
    n *= r
    n += xp_t[:, 2 * hidden:]
    np.tanh(n, out=n)
    np.subtract(h, n, out=h_out)
    h_out *= z
    h_out += n


def _run_layer(mode: str, x: np.ndarray, layer: _Layer, h0: np.ndarray, c0: np.ndarray | None):
    """x (T, B, In); h0 (D, B, Hout); returns output (T, B, D*Hout), h_n (D, B, Hout), c_n (D, B, H).

    The loop keeps states transposed, (D, features, B): one stacked matmul W_hh @ h per step gives every
    gate of every direction as a contiguous (H, B) block, so the elementwise work runs on contiguous memory
    (and BLAS prefers this shape for small batches). Each step writes its state straight into the output, where
    the next step reads it.
    """
    steps, batch, _ = x.shape
    num_dirs, hidden_gates = layer.w_ih.shape[:2]
    hidden = hidden_gates // _GATES[mode]
    xp = np.matmul(layer.w_ih, x.reshape(steps * batch, x.shape[2]).T)  # (D, G*H, T*B); sizes, not -1: B may be 0
    xp += layer.bias_x
    xp = np.ascontiguousarray(xp.reshape(num_dirs, hidden_gates, steps, batch).transpose(0, 2, 1, 3))
    if num_dirs == 2:
        xp[1] = xp[1, ::-1].copy()
    w_hh = layer.w_hh  # (D, G*H, Hout)
    # Fresh copies: the loop updates c in place, h0 and c0 may be views of inputs (a batch of 1 makes the
    # transpose contiguous already) or even one array (TorchScript passes (zeros, zeros)), and h_n must not be.
    h = np.array(np.asarray(h0, dtype=x.dtype).transpose(0, 2, 1), order="C", copy=True)
    c = None if c0 is None else np.array(np.asarray(c0, dtype=x.dtype).transpose(0, 2, 1), order="C", copy=True)
    out = np.empty((num_dirs, steps) + h.shape[1:], dtype=x.dtype)
    gates = np.empty((num_dirs, hidden_gates, batch), dtype=x.dtype)
    scratch = np.empty((num_dirs, hidden, batch), dtype=x.dtype)
    w_hr, bias_hn = layer.w_hr, layer.bias_hn
    with np.errstate(over="ignore"):  # GRU: exp(-x) overflows to inf for x < -88; 1 / (1 + inf) = 0 is right
        for s in range(steps):
            h_out = out[:, s]
            np.matmul(w_hh, h, out=gates)
            if mode == "gru":
                _gru_step(gates, xp[:, s], h, hidden, bias_hn, h_out)
            else:
                gates += xp[:, s]
                if mode == "lstm":
                    _lstm_step(gates, c, hidden, w_hr, scratch, h_out)
                elif mode == "rnn_tanh":
                    np.tanh(gates, out=h_out)
                else:
                    np.maximum(gates, 0.0, out=h_out)
            h = h_out
    h_n = np.ascontiguousarray(h.transpose(0, 2, 1))  # before the reversal below: h may be a view of out
    if num_dirs == 2:
        out[1] = out[1, ::-1].copy()
    output = out.transpose(1, 3, 0, 2).reshape(steps, batch, num_dirs * out.shape[2])
    return output, h_n, None if c is None else np.ascontiguousarray(c.transpose(0, 2, 1))


def _split_params(mode: str, params: list, has_biases: bool, num_layers: int, num_dirs: int):
    """PyTorch's flat list -> per layer, per direction (w_ih, w_hh, b_ih, b_hh, w_hr)."""
    per = len(params) // (num_layers * num_dirs)
    base = 4 if has_biases else 2
    if per * num_layers * num_dirs != len(params) or per not in (base, base + 1):
        raise ValueError(f"aten::{mode}: {len(params)} parameters do not fit {num_layers} layer(s) x "
                         f"{num_dirs} direction(s)")
    layers = []
    for layer in range(num_layers):
        entry = []
        for d in range(num_dirs):
            chunk = params[(layer * num_dirs + d) * per:(layer * num_dirs + d + 1) * per]
            b_ih, b_hh = (chunk[2], chunk[3]) if has_biases else (None, None)
            w_hr = chunk[base] if per == base + 1 else None
            entry.append((chunk[0], chunk[1], b_ih, b_hh, w_hr))
        layers.append(entry)
    return layers


def _check_states(mode: str, seq: np.ndarray, h0: Any, c0: Any, layers: list) -> None:
    """The initial states' shapes against the input and the first layer's weights, before anything is allocated
    for them: (layers x directions, batch, hidden) (h0's last dimension: proj_size where the LSTM projects)."""
    w_hh = np.asarray(layers[0][0][1])
    if seq.ndim != 3 or w_hh.ndim != 2:
        raise KernelArgumentError(f"aten::{mode}: the input has {seq.ndim} dimensions and the hidden weight "
                                  f"{w_hh.ndim}; they need 3 (steps, batch, features) and 2")
    rows, batch = len(layers) * len(layers[0]), seq.shape[1]
    hidden = w_hh.shape[0] // _GATES[mode]
    for name, state, size in (("h0", h0, w_hh.shape[1]), ("c0", c0, hidden)):
        if state is not None and np.shape(state) != (rows, batch, size):
            raise KernelArgumentError(f"aten::{mode}: the initial state {name} has shape {list(np.shape(state))}; "
                                      f"the weights and the input need {[rows, batch, size]}")


def _run(mode: str, x, h0, c0, params, has_biases, num_layers, bidirectional, batch_first):
    """Every layer in turn; returns output and the stacked final states (layer-major, then direction)."""
    x = np.asarray(x)
    seq = np.swapaxes(x, 0, 1) if batch_first else x
    seq = np.ascontiguousarray(seq)
    num_dirs = 2 if bidirectional else 1
    layers = _split_params(mode, params, has_biases, num_layers, num_dirs)
    _check_states(mode, seq, h0, c0, layers)
    h_n, c_n = [], []
    for layer, entry in enumerate(layers):
        rows = slice(layer * num_dirs, (layer + 1) * num_dirs)
        c_init = None if c0 is None else np.asarray(c0)[rows]
        seq, h, c = _run_layer(mode, seq, _layer(mode, entry, seq.dtype), np.asarray(h0)[rows], c_init)
        h_n.append(h)
        c_n.append(c)
    output = np.ascontiguousarray(np.swapaxes(seq, 0, 1)) if batch_first else seq
    h_n = np.concatenate(h_n, axis=0)
    c_n = None if c0 is None else np.concatenate(c_n, axis=0)
    return output, h_n, c_n


@kernel("aten::lstm.input")
def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):  # noqa: A002
    """Returns (output, h_n, c_n). Inter-layer dropout is not applied (inference)."""
    return _run("lstm", input, hx[0], hx[1], params, has_biases, num_layers, bidirectional, batch_first)


@kernel("aten::gru.input")
def gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):  # noqa: A002
    return _run("gru", input, hx, None, params, has_biases, num_layers, bidirectional, batch_first)[:2]


@kernel("aten::rnn_tanh.input")
def rnn_tanh(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):  # noqa: A002
    return _run("rnn_tanh", input, hx, None, params, has_biases, num_layers, bidirectional, batch_first)[:2]


@kernel("aten::rnn_relu.input")
def rnn_relu(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):  # noqa: A002
    return _run("rnn_relu", input, hx, None, params, has_biases, num_layers, bidirectional, batch_first)[:2]


# ---------------------------------------------------------------------------------------------------------
# Single steps (nn.LSTMCell, nn.GRUCell, nn.RNNCell)
# ---------------------------------------------------------------------------------------------------------

def _cell(mode: str, x, h, c, w_ih, w_hh, b_ih, b_hh):
    """One time step on (B, In) input: the layer loop with T = 1."""
    x = np.asarray(x)
    layer = _layer(mode, [(w_ih, w_hh, b_ih, b_hh, None)], x.dtype)
    c0 = None if c is None else np.asarray(c)[None]
    _, h_new, c_new = _run_layer(mode, x[None], layer, np.asarray(h)[None], c0)
    return h_new[0], None if c_new is None else c_new[0]


@kernel("aten::lstm_cell")
def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    return _cell("lstm", input, hx[0], hx[1], w_ih, w_hh, b_ih, b_hh)


@kernel("aten::gru_cell")
def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    return _cell("gru", input, hx, None, w_ih, w_hh, b_ih, b_hh)[0]


@kernel("aten::rnn_tanh_cell")
def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    return _cell("rnn_tanh", input, hx, None, w_ih, w_hh, b_ih, b_hh)[0]


@kernel("aten::rnn_relu_cell")
def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):  # noqa: A002
    return _cell("rnn_relu", input, hx, None, w_ih, w_hh, b_ih, b_hh)[0]
