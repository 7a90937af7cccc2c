"""Edges of capturing models quantized in PyTorch's eager mode (a review's cases): a quantized value through control
flow keeps the scale and zero point both branches agree on; a quantized result is returned dequantized; what ptlite
cannot run (quantized concatenation, dynamic quantized LSTM) is refused naming it; a scripted model's rank checks
fold away, so that its int8 layers run in one native region."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.ao.quantization as tq
from torch import nn

import ptlite
from ptlite.errors import CaptureError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")


class Branches(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.dq = tq.QuantStub(), tq.DeQuantStub()
        self.c, self.c2 = nn.Conv2d(3, 6, 3), nn.Conv2d(6, 6, 1)

    def forward(self, x):
        y = self.c(self.q(x))
        if x.shape[0] > 1:
            y = torch.relu(y)
        else:
            y = torch.flatten(y, 2).reshape(y.shape)
        return self.dq(self.c2(y))


class NoDequantize(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.c = tq.QuantStub(), nn.Conv2d(3, 6, 3)

    def forward(self, x):
        return self.c(self.q(x))


class Layers(nn.Module):
    """Quantized convolutions (each checks `len(x.shape) != 4` when scripted), an addition, pooling, a classifier."""

    def __init__(self):
        super().__init__()
        self.q, self.dq = tq.QuantStub(), tq.DeQuantStub()
        self.c1, self.c2, self.c3 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1), nn.Conv2d(8, 8, 1)
        self.add = torch.ao.nn.quantized.FloatFunctional()
        self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(8, 4)

    def forward(self, x):
        y = torch.relu(self.c1(self.q(x)))
        y = self.add.add(y, self.c3(self.c2(y)))
        return self.dq(self.fc(torch.flatten(self.pool(y), 1)))


class Concatenates(nn.Module):
    def __init__(self):
        super().__init__()
        self.q, self.dq = tq.QuantStub(), tq.DeQuantStub()
        self.c, self.cat = nn.Conv2d(3, 6, 3), torch.ao.nn.quantized.FloatFunctional()

    def forward(self, x):
        y = self.c(self.q(x))
        return self.dq(self.cat.cat([y, y], 1))


def _quantized(model: nn.Module) -> nn.Module:
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = "x86"
    try:
        model.eval().qconfig = tq.get_default_qconfig("x86")
        tq.prepare(model, inplace=True)
        for seed in range(4):
            model(torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(seed)))
        return tq.convert(model)
    finally:
        torch.backends.quantized.engine = previous


@pytest.mark.parametrize("batch", [1, 2], ids=["else", "then"])
def test_control_flow_keeps_the_parameters_its_branches_agree_on(batch):
    torch.manual_seed(0)
    model = _quantized(Branches())
    x = torch.randn(batch, 3, 8, 8)
    program = ptlite.capture(torch.jit.script(model), (x,), method="script")
    with torch.no_grad():
        want = model(x).numpy()
    got = ptlite.Module(program)(x.numpy())
    step = model.c2.scale
    assert np.abs(got - want).max() <= step * 1.001, \
        f"a quantized value through prim::If: {np.abs(got - want).max() / step:.2f} steps from torch's"


@pytest.mark.parametrize("method", ["script", "trace"])
def test_a_quantized_result_is_returned_dequantized(method):
    torch.manual_seed(0)
    model = _quantized(NoDequantize())
    x = torch.randn(2, 3, 8, 8)
    captured = torch.jit.script(model) if method == "script" else torch.jit.trace(model, x)
    program = ptlite.capture(captured, (x,), method=method)
    with torch.no_grad():
        want = model(x).dequantize().numpy()
    got = ptlite.Module(program)(x.numpy())
    assert got.dtype == np.float32
    assert np.abs(got - want).max() <= model.c.scale * 1.001, \
        f"a quantized result ({method}): max |diff| {np.abs(got - want).max():.3g} from torch's, dequantized"


def test_quantized_concatenation_is_refused_by_name():
    model = _quantized(Concatenates())
    with pytest.raises(CaptureError, match=r"quantized::cat, which ptlite has no int8 kernel for"):
        ptlite.capture(torch.jit.script(model), (torch.randn(2, 3, 8, 8),), method="script")


def test_dynamic_quantized_lstm_is_refused_with_the_way_out():
    lstm = nn.Sequential(nn.LSTM(4, 8, batch_first=True)).eval()
    quantized = tq.quantize_dynamic(lstm, {nn.LSTM}, dtype=torch.qint8)
    x = torch.randn(1, 5, 4)
    with pytest.raises(CaptureError, match=r"quantize_dynamic.*ptlite.quantize\(program, 'int8_dynamic'\)"):
        ptlite.capture(torch.jit.trace(quantized, x, strict=False), (x,), method="trace")


def test_scripted_rank_checks_fold_and_the_layers_run_in_one_region(tmp_path):
    if not any(info.name == "native" and info.available for info in ptlite.backends()):
        pytest.skip("the native backend is not built here")
    torch.manual_seed(0)
    model = _quantized(Layers())
    x = torch.randn(2, 3, 8, 8)
    captured = ptlite.capture(torch.jit.script(model), (x,), method="script")
    assert "prim::RaiseException" in {n.op for n in captured.forward.walk()}, "the scripted checks were captured"
    optimized = ptlite.optimize_for_mobile(captured)
    left = [n.op for n in optimized.forward.walk() if n.op in ("prim::If", "prim::RaiseException", "aten::size")]
    assert not left, f"scripted quantized layers: rank checks left after optimizing: {left}"
    ptlite.save(optimized, tmp_path / "layers.ptlite")
    module = ptlite.load(tmp_path / "layers.ptlite")
    got = module(x.numpy())
    outside = [p.node.op for p in module.placements() if not p.delegate]
    assert not outside, f"scripted quantized layers: nodes outside the native region: {outside}"
    want = ptlite.Module(captured, backends="numpy")(x.numpy())
    assert np.array_equal(got, want), \
        f"scripted quantized layers: optimized and run in a region, {np.abs(got - want).max():.3g} from the capture"
