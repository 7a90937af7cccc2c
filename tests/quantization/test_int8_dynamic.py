"""ptlite.quantize's int8_dynamic: every linear layer with a constant weight gets int8 weights and quantizes its
input at each call. On the zoo's transformer encoder the result stays near PyTorch's own dynamic quantization
(torch.ao.quantization.quantize_dynamic, qnnpack: the same per-call uint8 scheme, on fewer layers); optimizing and
saving keep the results; LSTM and GRU layers are as close to float as PyTorch's dynamic ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import ptlite
from ptlite.ops import EMBEDDING_INT8, GRU_DYNAMIC_INT8, LINEAR_DYNAMIC_INT8, LSTM_DYNAMIC_INT8
from ptlite.quantization import describe, report
from ptlite.tools import zoo

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore:torch.ao.quantization:UserWarning")


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def test_transformer_as_close_as_torch_dynamic_quantization(tmp_path):
    model = zoo.transformer_encoder()
    example = zoo.example_inputs("transformer_encoder")
    program = ptlite.capture(model, example, method="export")
    quantized = ptlite.quantize(program, "int8_dynamic")
    assert quantized.metadata["quantization"]["int8"] == {LINEAR_DYNAMIC_INT8: 9, EMBEDDING_INT8: 1}, \
        report(quantized)
    ptlite.save(ptlite.optimize_for_mobile(quantized), tmp_path / "q.ptlite")
    got = _first(ptlite.load(tmp_path / "q.ptlite")(*[e.numpy() for e in example]))
    with torch.no_grad():
        want = _first(model(*example)).numpy()
    previous = torch.backends.quantized.engine, torch.backends.mha.get_fastpath_enabled()
    torch.backends.quantized.engine = "qnnpack"
    torch.backends.mha.set_fastpath_enabled(False)  # its checks read a dynamic linear's weight as a tensor
    try:
        theirs = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
        with torch.no_grad():
            torch_int8 = _first(theirs(*example)).numpy()
    finally:
        torch.backends.quantized.engine = previous[0]
        torch.backends.mha.set_fastpath_enabled(previous[1])
    # PyTorch leaves the attention projections float (MultiheadAttention's in_proj is no nn.Linear, its out_proj a
    # NonDynamicallyQuantizableLinear): it quantizes 5 of the 9 layers ptlite does, and errs about half as much
    # (0.0022 against 0.0047 of 0.52). A wrong kernel errs by O(0.1).
    ours, torch_error = np.abs(got - want).max(), np.abs(torch_int8 - want).max()
    assert ours <= max(3 * torch_error, 1e-3 * np.abs(want).max()), \
        f"transformer_encoder int8_dynamic: max |diff| from float {ours:.3g}, PyTorch's dynamic int8 {torch_error:.3g}"
    assert ours < 0.02 * np.abs(want).max(), f"transformer_encoder int8_dynamic: max |diff| {ours:.3g}"


@pytest.mark.parametrize("name, op", [("lstm_classifier", LSTM_DYNAMIC_INT8), ("gru_classifier", GRU_DYNAMIC_INT8)])
def test_recurrent_layers_as_close_as_torch_dynamic_quantization(name, op):
    """LSTM and GRU layers (2 layers; the GRU bidirectional) get int8 weights, their products quantized per row at
    each step: as close to float as PyTorch's own dynamic LSTM/GRU (qnnpack), within 2x."""
    model = getattr(zoo, name)()
    example = zoo.example_inputs(name)
    quantized = ptlite.quantize(ptlite.capture(model, example, method="export"), "int8_dynamic")
    assert quantized.metadata["quantization"]["int8"] == {op: 1, LINEAR_DYNAMIC_INT8: 1}, report(quantized)
    assert describe(quantized) == "int8_dynamic: 2 layer(s) with int8 weights, inputs quantized per call and row"
    got = ptlite.Module(ptlite.optimize_for_mobile(quantized))(*[e.numpy() for e in example])
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = "qnnpack"
    try:
        theirs = torch.ao.quantization.quantize_dynamic(model, {nn.LSTM, nn.GRU, nn.Linear}, dtype=torch.qint8)
        with torch.no_grad():
            torch_int8, want = theirs(*example).numpy(), model(*example).numpy()
    finally:
        torch.backends.quantized.engine = previous
    ours, torch_error = np.abs(got - want).max(), np.abs(torch_int8 - want).max()
    assert ours <= max(2 * torch_error, 1e-3 * np.abs(want).max()), \
        f"{name} int8_dynamic: max |diff| from float {ours:.3g}, PyTorch's dynamic int8 {torch_error:.3g}"


def test_dynamic_refuses_calibration_data_and_optimized_programs():
    model = zoo.transformer_encoder()
    example = zoo.example_inputs("transformer_encoder")
    program = ptlite.capture(model, example, method="export")
    with pytest.raises(ValueError, match="int8_dynamic needs no calibration data"):
        ptlite.quantize(program, "int8_dynamic", [example[0].numpy()])
    with pytest.raises(ValueError, match="quantize the program as captured"):
        ptlite.quantize(ptlite.optimize_for_mobile(program), "int8_dynamic")


@pytest.mark.parametrize("method", ["script", "trace"])
def test_pytorch_dynamic_quantized_model_captures(method):
    """A model quantized by torch.ao.quantization.quantize_dynamic captures with its int8 weights: ptlite quantizes
    each row of the input, torch the whole input at once, so ptlite is at least as close to float as torch is."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).eval()
    x = torch.randn(5, 32)
    x[2] *= 10  # one row with a wider range
    quantized = torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    captured = torch.jit.script(quantized) if method == "script" else torch.jit.trace(quantized, x)
    program = ptlite.capture(captured, (x,), method=method)
    assert describe(program) == "quantized in PyTorch: 2 operator(s) in int8", describe(program)
    got = ptlite.Module(ptlite.optimize_for_mobile(program))(x.numpy())
    with torch.no_grad():
        theirs, want = quantized(x).numpy(), model(x).numpy()
    ours_error, torch_error = np.abs(got - want).max(), np.abs(theirs - want).max()
    assert ours_error <= 1.05 * torch_error, \
        f"dynamic MLP ({method}): max |error| from float {ours_error:.3g}, torch's dynamic int8 {torch_error:.3g}"


def test_unsupported_quantized_operators_are_named():
    class HardswishNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.quant, self.dequant = torch.ao.quantization.QuantStub(), torch.ao.quantization.DeQuantStub()
            self.conv, self.act = nn.Conv2d(3, 4, 3), nn.Hardswish()

        def forward(self, x):
            return self.dequant(self.act(self.conv(self.quant(x))))

    import torch.ao.quantization as tq

    model = HardswishNet().eval()
    model.qconfig = tq.get_default_qconfig("x86")
    prepared = tq.prepare(model)
    prepared(torch.randn(1, 3, 8, 8))
    quantized = tq.convert(prepared)
    with pytest.raises(ptlite.errors.CaptureError, match=r"quantized::hardswish, which ptlite has no int8 kernel"):
        ptlite.capture(torch.jit.script(quantized), (torch.randn(1, 3, 8, 8),), method="script")
