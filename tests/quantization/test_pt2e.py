"""Models quantized by PyTorch 2 export quantization (torchao's prepare_pt2e / convert_pt2e with its
X86InductorQuantizer; ExecuTorch's XNNPACKQuantizer where installed), captured by torch.export: as captured, ptlite
computes PyTorch's reference representation exactly (float operators between quantize/dequantize pairs);
optimize_for_mobile folds the pairs into int8 operators, bit-identical to PyTorch on a small residual CNN and close on
MobileNetV2."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import ptlite
from ptlite.ops import ADD_INT8, CONV2D_INT8, DEQUANTIZE_PER_CHANNEL, LINEAR_INT8
from ptlite.quantization import describe
from ptlite.tools import zoo

pt2e = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning",
                                        "ignore::FutureWarning")


def _x86():
    import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer as xiq

    return xiq.X86InductorQuantizer().set_global(xiq.get_default_x86_inductor_quantization_config())


def _xnnpack():
    quantizer = pytest.importorskip("executorch.backends.xnnpack.quantizer.xnnpack_quantizer")
    return quantizer.XNNPACKQuantizer().set_global(quantizer.get_symmetric_quantization_config(is_per_channel=True))


QUANTIZERS = {"x86": _x86, "xnnpack": _xnnpack}


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.c1, self.c2 = nn.Conv2d(3, 8, 3, padding=1), nn.Conv2d(8, 8, 3, padding=1), \
            nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        y = self.c2(torch.relu(self.c1(x)))
        y = torch.relu(y + x)
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


def _pt2e(model: nn.Module, example: torch.Tensor, calibration: list[torch.Tensor], quantizer) -> nn.Module:
    prepared = pt2e.prepare_pt2e(torch.export.export(model, (example,)).module(), quantizer)
    for x in calibration:
        prepared(x)
    return pt2e.convert_pt2e(prepared)


@pytest.mark.parametrize("which", QUANTIZERS)
def test_small_residual_cnn_matches_pytorch_exactly(which, tmp_path):
    torch.manual_seed(0)
    model = Residual().eval()
    x = torch.randn(2, 3, 12, 12)
    quantized = _pt2e(model, x, [torch.randn(2, 3, 12, 12) for _ in range(8)], QUANTIZERS[which]())
    program = ptlite.capture(quantized, (x,), method="export")
    assert DEQUANTIZE_PER_CHANNEL in program.operator_names()
    with torch.no_grad():
        want = quantized(x).numpy()
    captured = ptlite.Module(program)(x.numpy())
    assert np.abs(captured - want).max() <= 1e-5 * np.abs(want).max(), \
        f"residual CNN ({which}) as captured: max |diff| {np.abs(captured - want).max():.3g} from PyTorch's"
    ptlite.save(ptlite.optimize_for_mobile(program), tmp_path / "q.ptlite")
    loaded = ptlite.load_program(tmp_path / "q.ptlite")
    # x86 leaves the convolution feeding the addition, the addition and the classifier float (no quantize after
    # them); XNNPACK quantizes them all
    expected = {CONV2D_INT8: 2} if which == "x86" else {CONV2D_INT8: 3, ADD_INT8: 1, LINEAR_INT8: 1}
    assert loaded.metadata["quantization"]["int8"] == expected, describe(loaded)
    assert describe(loaded) == f"quantized in PyTorch: {sum(expected.values())} operator(s) in int8"
    folded = ptlite.load(tmp_path / "q.ptlite")(x.numpy())
    assert np.abs(folded - want).max() <= 1e-5 * np.abs(want).max(), \
        f"residual CNN ({which}) folded into int8 operators: max |diff| {np.abs(folded - want).max():.3g}"


def test_mobilenet_v2_x86_folds_every_quantized_convolution():
    model = zoo.mobilenet_v2()
    x = torch.from_numpy(zoo.varied_crops(1, 96, seed=3))
    calibration = [torch.from_numpy(zoo.varied_crops(1, 96, seed=10 + i)) for i in range(4)]
    quantized = _pt2e(model, x, calibration, _x86())
    program = ptlite.capture(quantized, (x,), method="export")
    with torch.no_grad():
        want = quantized(x).numpy()[0]
    captured = ptlite.Module(program)(x.numpy())[0]
    assert np.abs(captured - want).max() <= 1e-4 * np.abs(want).max(), "mobilenet_v2 (PT2E, x86) as captured"
    optimized = ptlite.optimize_for_mobile(program)
    assert optimized.metadata["quantization"]["int8"] == {CONV2D_INT8: 42}, optimized.metadata["quantization"]
    got = ptlite.Module(optimized)(x.numpy())[0]
    cosine = float(got @ want / np.linalg.norm(got) / np.linalg.norm(want))
    # one-step differences (rounding ties, the bias rounded to int32) flip later layers' rounding; measured 0.966
    assert cosine > 0.95 and np.argmax(got) == np.argmax(want), \
        f"mobilenet_v2 (PT2E, x86) folded: cosine {cosine:.4f} with PyTorch's int8 logits"


def test_an_affine_weight_is_refused_whatever_its_granularity():
    """A weight quantized per tensor with a nonzero zero point (a custom quantizer's affine weight observer) is
    refused as the per-channel one is, not run as if symmetric (a review found it silently wrong)."""
    from ptlite.frontend.pt2e import lower_decomposed
    from ptlite.ir.graph import Graph, Node, Program, Value

    program = Program(weights={"w": np.full((4, 3, 1, 1), 5, np.int8)})
    w = Value(name="w", dtype="int8", shape=(4, 3, 1, 1))
    consts = [Node("prim::Constant", [], [Value(type=t)], {"value": v})
              for v, t in ((0.1, "float"), (-128, "int"), (-128, "int"), (127, "int"), (1, "int"))]
    out = Value(name="w_real")
    node = Node("quantized_decomposed::dequantize_per_tensor", [w, *(c.outputs[0] for c in consts)], [out])
    graph = Graph("forward", [], [Node("prim::Constant", [], [w], {"weight": "w"}), *consts, node], [out])
    program.methods["forward"] = graph
    with pytest.raises(ptlite.errors.CaptureError, match="nonzero zero points"):
        lower_decomposed(program)
