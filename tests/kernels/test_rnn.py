"""LSTM, GRU and Elman RNN layers and cells against PyTorch (aten::lstm.input & co., nn modules' weights)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kernel_backend import kernel as op  # noqa: E402
from oracle import compare, to_numpy  # noqa: E402


def _module(kind: str, **kw) -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "lstm":
        return torch.nn.LSTM(**kw).eval()
    if kind == "gru":
        return torch.nn.GRU(**kw).eval()
    return torch.nn.RNN(nonlinearity=kind.split("_")[1], **kw).eval()


# (kind, module options, batch, steps)
LAYER_CASES = [
    ("lstm", dict(input_size=8, hidden_size=16, num_layers=2, batch_first=True), 3, 7),
    ("lstm", dict(input_size=5, hidden_size=6, num_layers=1, batch_first=False, bidirectional=True), 2, 9),
    ("lstm", dict(input_size=5, hidden_size=8, num_layers=2, batch_first=True, proj_size=3,
                  bidirectional=True), 2, 4),
    ("lstm", dict(input_size=4, hidden_size=6, num_layers=1, bias=False), 1, 5),
    ("gru", dict(input_size=16, hidden_size=12, num_layers=1, batch_first=True, bidirectional=True), 3, 6),
    ("gru", dict(input_size=6, hidden_size=10, num_layers=3, batch_first=False), 2, 5),
    ("gru", dict(input_size=6, hidden_size=4, num_layers=2, bias=False, bidirectional=True), 1, 3),
    ("rnn_tanh", dict(input_size=6, hidden_size=7, num_layers=2, batch_first=True, bidirectional=True), 2, 5),
    ("rnn_relu", dict(input_size=6, hidden_size=7, num_layers=2), 3, 4),
    ("gru", dict(input_size=6, hidden_size=5, num_layers=2, batch_first=True, bidirectional=True), 0, 4),  # empty
    ("lstm", dict(input_size=5, hidden_size=8, num_layers=2, proj_size=3, bidirectional=True), 0, 3),  # batch
]


def _layer_args(kind, module, batch, steps, random_state: bool):
    opts = module
    dirs = 2 if opts.bidirectional else 1
    shape = (batch, steps, opts.input_size) if opts.batch_first else (steps, batch, opts.input_size)
    x = torch.randn(*shape)
    out_size = opts.proj_size if getattr(opts, "proj_size", 0) else opts.hidden_size
    make = torch.randn if random_state else torch.zeros
    h0 = make(opts.num_layers * dirs, batch, out_size)
    hx = [h0, make(opts.num_layers * dirs, batch, opts.hidden_size)] if kind == "lstm" else h0
    params = [p.detach() for p in opts._flat_weights]
    rest = (opts.bias, opts.num_layers, 0.0, False, opts.bidirectional, opts.batch_first)
    return x, hx, params, rest


@pytest.mark.parametrize("random_state", [False, True], ids=["zero_state", "given_state"])
@pytest.mark.parametrize("kind,opts,batch,steps", LAYER_CASES,
                         ids=[f"{c[0]}{i}" for i, c in enumerate(LAYER_CASES)])
def test_layer_matches_torch(kind, opts, batch, steps, random_state):
    module = _module(kind, **opts)
    x, hx, params, rest = _layer_args(kind, module, batch, steps, random_state)
    key = f"aten::{kind}.input"
    with torch.no_grad():
        want = getattr(torch.ops.aten, kind).input(x, hx, params, *rest)
        if not random_state:  # the module itself calls the same operator
            ref = module(x)
            torch.testing.assert_close(ref[0], want[0])
    got = op(key)(x.numpy(), to_numpy(hx), to_numpy(params), *rest)
    assert isinstance(got, tuple) and len(got) == len(want), f"{key}: {len(got)} outputs, torch {len(want)}"
    for name, g, w in zip(("output", "h_n", "c_n"), got, want, strict=False):
        compare(f"{key} {name} ({opts}, batch {batch}, steps {steps})", g, w, finite=True)


def test_long_sequence_stays_accurate():
    module = _module("lstm", input_size=32, hidden_size=64, num_layers=2, batch_first=True)
    x, hx, params, rest = _layer_args("lstm", module, 4, 200, True)
    with torch.no_grad():
        want = torch.ops.aten.lstm.input(x, hx, params, *rest)
    got = op("aten::lstm.input")(x.numpy(), to_numpy(hx), to_numpy(params), *rest)
    for name, g, w in zip(("output", "h_n", "c_n"), got, want, strict=True):
        compare(f"aten::lstm.input {name} after 200 steps", g, w, finite=True)


CELLS = [("lstm_cell", torch.nn.LSTMCell), ("gru_cell", torch.nn.GRUCell),
         ("rnn_tanh_cell", torch.nn.RNNCell),
         ("rnn_relu_cell", lambda i, h, bias: torch.nn.RNNCell(i, h, bias, nonlinearity="relu"))]


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("name,cls", CELLS, ids=[c[0] for c in CELLS])
def test_cell_matches_torch(name, cls, bias):
    torch.manual_seed(1)
    cell = cls(5, 7, bias)
    x, h, c = torch.randn(3, 5), torch.randn(3, 7), torch.randn(3, 7)
    hx = [h, c] if name == "lstm_cell" else h
    weights = [cell.weight_ih.detach(), cell.weight_hh.detach(),
               None if not bias else cell.bias_ih.detach(), None if not bias else cell.bias_hh.detach()]
    with torch.no_grad():
        want = getattr(torch.ops.aten, name)(x, hx, *weights)
    got = op(f"aten::{name}")(x.numpy(), to_numpy(hx), *to_numpy(weights))
    compare(f"aten::{name} step", got, want, finite=True)


def test_inputs_are_not_modified():
    module = _module("gru", input_size=4, hidden_size=5, num_layers=2, bidirectional=True)
    x, hx, params, rest = _layer_args("gru", module, 2, 3, True)
    arrays = [x.numpy(), hx.numpy()] + to_numpy(params)
    for a in arrays:
        a.flags.writeable = False  # a read-only memory map must be enough
    op("aten::gru.input")(arrays[0], arrays[1], arrays[2:], *rest)


def test_lstm_with_one_array_for_both_states_batch_one():
    """TorchScript's nn.LSTM passes (zeros, zeros) - the same tensor - as (h0, c0); the states must not alias."""
    rng = np.random.default_rng(3)
    params = [rng.standard_normal(s).astype(np.float32) * 0.3
              for s in [(128, 16), (128, 32), (128,), (128,), (128, 32), (128, 32), (128,), (128,)]]
    x = rng.standard_normal((1, 10, 16)).astype(np.float32)
    zeros = np.zeros((2, 1, 32), np.float32)
    ours = op("aten::lstm.input")(x, [zeros, zeros], params, True, 2, 0.0, False, False, True)
    t_zeros = torch.zeros(2, 1, 32)
    ref = torch.lstm(torch.from_numpy(x), [t_zeros, t_zeros], [torch.from_numpy(p) for p in params],
                     True, 2, 0.0, False, False, True)
    for i, (a, e) in enumerate(zip(ours, ref)):
        diff = float(np.abs(a - e.numpy()).max())
        assert diff <= 1e-5, f"aten::lstm.input output {i}: max |diff| {diff:.3g}"
    assert not zeros.any(), "aten::lstm.input wrote into its initial state"


def test_prepared_weights_follow_the_weights():
    """A layer's reordered, stacked weights are made once per weights and kept (ptlite.backends.numpy._derived):
    new arrays of the same shapes, or weights changed in place (an in-memory program's), give new results; the
    prepared copies go when the weights are collected."""
    import gc

    from ptlite.backends.numpy import _derived

    for kind in ("lstm", "gru"):
        key = f"aten::{kind}.input"
        for round_ in range(3):
            module = _module(kind, input_size=6, hidden_size=5, num_layers=2, bidirectional=True)
            if round_:  # other values in arrays of the same shapes
                with torch.no_grad():
                    for p in module.parameters():
                        p.mul_(1.0 + 0.3 * round_)
            x, hx, params, rest = _layer_args(kind, module, 2, 4, True)
            arrays = to_numpy(params)
            for step in ("first call", "kept", "changed in place"):
                if step == "changed in place":
                    arrays[1] *= 0.5  # w_hh of the first layer
                    params[1].mul_(0.5)
                with torch.no_grad():
                    want = getattr(torch.ops.aten, kind).input(x, hx, params, *rest)
                got = op(key)(x.numpy(), to_numpy(hx), arrays, *rest)
                for name, g, w in zip(("output", "h_n", "c_n"), got, want, strict=False):
                    compare(f"{key} {name} (weights {round_}, {step})", g, w, finite=True)
        anchor = id(arrays[0])
        assert anchor in _derived._CACHE
        del arrays, params, module
        gc.collect()
        assert anchor not in _derived._CACHE, f"{key}: the prepared weights outlived the weights"


def test_cell_prepared_weights_are_not_reused_for_other_weights():
    torch.manual_seed(2)
    for _ in range(2):
        cell = torch.nn.GRUCell(4, 6)
        x, h = torch.randn(2, 4), torch.randn(2, 6)
        weights = [cell.weight_ih.detach(), cell.weight_hh.detach(), cell.bias_ih.detach(), cell.bias_hh.detach()]
        with torch.no_grad():
            want = torch.ops.aten.gru_cell(x, h, *weights)
        compare("aten::gru_cell with new weights", op("aten::gru_cell")(x.numpy(), h.numpy(),
                                                                               *to_numpy(weights)), want, finite=True)

