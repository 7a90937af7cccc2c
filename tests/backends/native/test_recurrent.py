"""The native recurrent layers (LSTM, GRU, Elman RNN with tanh or relu) against torch.nn on every instruction set:
several layers, both directions, batch_first or not, batch > 1, hidden sizes that are not multiples of the vector
width, no biases, given initial states. Tolerance 1e-5 of the largest output: the gates' sums are short (in +
hidden products) and the activations within 2 ulp, but the state goes through every step."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_close

# (mode, input size, hidden, layers, bidirectional, batch_first, batch, steps, bias, initial states)
CASES = [
    ("lstm", 16, 32, 2, False, True, 1, 10, True, False),
    ("lstm", 5, 13, 1, True, False, 3, 7, True, True),
    ("lstm", 9, 8, 3, True, True, 2, 4, False, True),
    ("gru", 16, 32, 2, True, True, 1, 10, True, False),
    ("gru", 7, 11, 2, False, False, 4, 6, True, True),
    ("gru", 3, 40, 1, True, True, 1, 1, False, False),
    ("rnn_tanh", 6, 21, 2, True, False, 2, 5, True, True),
    ("rnn_relu", 6, 17, 2, False, True, 3, 5, True, False),
]


def _module(mode: str, size: int, hidden: int, layers: int, bidirectional: bool, batch_first: bool, bias: bool):
    kw = dict(num_layers=layers, bidirectional=bidirectional, batch_first=batch_first, bias=bias)
    if mode == "lstm":
        return torch.nn.LSTM(size, hidden, **kw)
    if mode == "gru":
        return torch.nn.GRU(size, hidden, **kw)
    return torch.nn.RNN(size, hidden, nonlinearity=mode.split("_")[1], **kw)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "{}_in{}_h{}_l{}_bi{}_bf{}_b{}_t{}_bias{}_h0{}".format(*c))
def test_recurrent_layer_matches_torch(isa, case, monkeypatch):
    from ptlite.backends.native import recurrent
    from ptlite.backends.native.kernels import kernel_for

    monkeypatch.setattr(recurrent, "_reference", lambda key: pytest.fail(f"{key} went to the reference"))
    mode, size, hidden, layers, bidirectional, batch_first, batch, steps, bias, given = case
    torch.manual_seed(hash(case) % 2**31)
    module = _module(mode, size, hidden, layers, bidirectional, batch_first, bias).eval()
    x = torch.randn((batch, steps, size) if batch_first else (steps, batch, size))
    states = (2 if bidirectional else 1) * layers
    h0 = torch.randn(states, batch, hidden) if given else torch.zeros(states, batch, hidden)
    c0 = torch.randn(states, batch, hidden) if given else torch.zeros(states, batch, hidden)
    with torch.no_grad():
        want = module(x, (h0, c0)) if mode == "lstm" else module(x, h0)
    params = [p.detach().numpy() for p in module._flat_weights]
    hx = [h0.numpy(), c0.numpy()] if mode == "lstm" else h0.numpy()
    got = kernel_for(f"aten::{mode}.input")(x.numpy(), hx, params, bias, layers, 0.0, False, bidirectional, batch_first)
    what = f"native {isa} {mode} {case}"
    assert_close(got[0], want[0].numpy(), what=f"{what}: output", rtol=1e-5)
    if mode == "lstm":
        assert_close(got[1], want[1][0].numpy(), what=f"{what}: h_n", rtol=1e-5)
        assert_close(got[2], want[1][1].numpy(), what=f"{what}: c_n", rtol=1e-5)
    else:
        assert_close(got[1], want[1].numpy(), what=f"{what}: h_n", rtol=1e-5)


def test_projection_and_other_dtypes_go_to_the_reference(lib):
    from ptlite.backends.native import recurrent
    from ptlite.backends.native.kernels import kernel_for

    torch.manual_seed(0)
    lstm = torch.nn.LSTM(4, 6, proj_size=3).eval()
    x = torch.randn(5, 1, 4)
    with torch.no_grad():
        want = lstm(x)[0].numpy()
    params = [p.detach().numpy() for p in lstm._flat_weights]
    h0, c0 = np.zeros((1, 1, 3), np.float32), np.zeros((1, 1, 6), np.float32)
    assert recurrent._run("lstm", x.numpy(), h0, c0, params, True, 1, False, False) is None
    got = kernel_for("aten::lstm.input")(x.numpy(), [h0, c0], params, True, 1, 0.0, False, False, False)
    assert_close(got[0], want, what="native lstm with proj_size (the reference)")
    params64 = [p.astype(np.float64) for p in params]
    assert recurrent._run("lstm", x.numpy().astype(np.float64), h0, c0, params64, True, 1, False, False) is None


def test_library_refuses_inconsistent_sizes(lib):
    x = np.zeros((4, 1, 3), np.float32)
    w_ih, w_hh, b = np.zeros((3, 8), np.float32), np.zeros((2, 8), np.float32), np.zeros(8, np.float32)
    h, out = np.zeros((1, 2), np.float32), np.zeros((4, 1, 2), np.float32)
    ok = (lib.LSTM, 4, 1, 3, 2, 2, 0, 0)
    lib.rnn(x, w_ih, w_hh, b, b, h, h.copy(), out, h.copy(), h.copy(), ok)
    bad = {
        "more steps than the input holds": (lib.LSTM, 5, 1, 3, 2, 2, 0, 0),
        "the state past the output row": (lib.LSTM, 4, 1, 3, 2, 2, 1, 0),
        "weights for another hidden size": (lib.LSTM, 4, 1, 3, 3, 3, 0, 0),
        "an unknown mode": (9, 4, 1, 3, 2, 2, 0, 0),
        "a huge batch": (lib.LSTM, 4, 2**40, 3, 2, 2, 0, 0),
    }
    for what, geometry in bad.items():
        with pytest.raises(ValueError):
            lib.rnn(x, w_ih, w_hh, b, b, h, h.copy(), out, h.copy(), h.copy(), geometry)
            pytest.fail(what)
    with pytest.raises(ValueError, match="overlaps"):
        lib.rnn(x, w_ih, w_hh, b, b, h, h.copy(), out, out[0], h.copy(), ok)


def test_a_load_imports_the_recurrent_kernels_only_for_a_recurrent_program():
    import subprocess
    import sys

    code = ("import sys\nfrom ptlite.backends.native.kernels import kernel_for\n"
            "assert kernel_for('aten::relu') is not None\n"
            "assert 'ptlite.backends.native.recurrent' not in sys.modules\n"
            "assert kernel_for('aten::gru.input') is not None\n"
            "assert 'ptlite.backends.native.recurrent' in sys.modules\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
