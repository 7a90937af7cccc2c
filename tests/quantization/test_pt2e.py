"""Models quantized by PyTorch 2 export quantization (torchao's prepare_pt2e / convert_pt2e with its
X86InductorQuantizer; ExecuTorch's XNNPACKQuantizer where installed), captured by torch.export: as captured, ptlite
computes PyTorch's reference representation exactly (float operators between quantize/dequantize pairs);
optimize_for_mobile folds the pairs into int8 operators, bit-identical to PyTorch on a small residual CNN. On
MobileNetV2 both are checked rounding by rounding, with PyTorch's graph run on ptlite's own quantized activations: a
float32 sum a few ulps from a rounding tie (its order of summation depends on the CPU's kernels) flips an activation
by one step, which over 50 layers moves the logits by percents; so each flip must be one step, at a tie, and the
logits given the same activations within 1e-4. Its biases are first put on the int32 grid the int8 kernels round
them to (ops/quantized.py), so that the folded kernels compute torch's sums too."""

from __future__ import annotations

import operator

import numpy as np
import pytest
import torch
from torch import nn

import ptlite
from ptlite.ops import ADD_INT8, CONV2D_INT8, DEQUANTIZE_PER_CHANNEL, LINEAR_INT8, QUANTIZE_PER_TENSOR
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


class _Forced(torch.fx.Interpreter):
    """PyTorch's graph run with each quantize_per_tensor's output replaced by ptlite's value of the same name (teacher
    forcing), so that both sides go on from the same integers; `flips` holds, for each activation ptlite rounded
    otherwise than torch does from its own float, (node, steps apart, distance of torch's unrounded value from the
    tie between the two, in steps)."""

    def __init__(self, module: torch.fx.GraphModule, ours: dict) -> None:
        super().__init__(module)
        self.ours, self.flips, self.compared = ours, [], 0

    def run_node(self, n: torch.fx.Node):
        result = super().run_node(n)
        if n.op != "call_function" or n.target != torch.ops.quantized_decomposed.quantize_per_tensor.default:
            return result
        (value, scale, zero_point, *_), _ = self.fetch_args_kwargs_from_env(n)
        assert n.name in self.ours, f"ptlite has no value {n.name} to compare with torch's"
        mine, theirs = np.asarray(self.ours[n.name]), result.numpy()
        assert mine.shape == theirs.shape and mine.dtype == theirs.dtype, f"{n.name}: {mine.shape} {mine.dtype}"
        flipped = mine != theirs
        unrounded = value.numpy()[flipped].astype(np.float64) * np.float32(1 / scale) + zero_point
        tie = np.minimum(mine, theirs)[flipped] + 0.5
        apart = np.abs(mine[flipped].astype(np.int64) - theirs[flipped])
        self.flips += [(n.name, int(a), float(d)) for a, d in zip(apart, np.abs(unrounded - tie))]
        self.compared += 1
        return torch.from_numpy(np.ascontiguousarray(mine))


def _bias_on_int32_grid(quantized: torch.fx.GraphModule) -> None:
    """Round each quantized convolution's float bias to a multiple of its input scale x weight scale: the int32 bias
    the folded int8 kernels add, where PyTorch's reference representation adds the float one (a shift of up to half
    that scale over the output's, 0.033 of a step on MobileNetV2). So rounded, the two compute the same sums."""
    dequantize = torch.ops.quantized_decomposed.dequantize_per_tensor.default
    per_channel = torch.ops.quantized_decomposed.dequantize_per_channel.default
    for node in quantized.graph.nodes:
        if node.op != "call_function" or node.target != torch.ops.aten.conv2d.default:
            continue
        x, w, b = node.args[:3]
        if b is None or x.target != dequantize or w.target != per_channel:
            continue
        scale = np.float32(x.args[1]) * operator.attrgetter(w.args[1].target)(quantized).numpy().astype(np.float32)
        bias = operator.attrgetter(b.target)(quantized)
        with torch.no_grad():
            bias.copy_(torch.from_numpy(np.rint(bias.numpy() / scale) * scale))


def _rounding_by_rounding(quantized: nn.Module, x: torch.Tensor, reference: ptlite.Module, window: float,
                          what: str) -> np.ndarray:
    """Check every quantized activation of `reference` (a Module on the NumPy reference, whose values can be read)
    against torch's graph forced onto ptlite's activations: one step apart at most, and only where torch's value lies
    within `window` steps of the tie between them. Returns torch's output so forced."""
    ours = reference._method("forward").compile().intermediates(x.numpy())
    forced = _Forced(torch.export.export(quantized, (x,)).module(), ours)
    with torch.no_grad():
        want = forced.run(x).numpy()[0]
    graph = reference.program.methods["forward"]
    assert forced.compared == sum(node.op in (QUANTIZE_PER_TENSOR, CONV2D_INT8) for node in graph.walk()), \
        f"{what}: {forced.compared} quantizations compared"
    far = [flip for flip in forced.flips if flip[1] > 1 or flip[2] > window]
    assert not far, f"{what}: {len(far)} of {len(forced.flips)} activations rounded otherwise than torch's away " \
                    f"from a tie (node, steps apart, steps from the tie): {far[:5]}"
    return want


@pytest.mark.filterwarnings("ignore:this program was lowered for:RuntimeWarning")  # the reference, asked for
def test_mobilenet_v2_x86_folds_every_quantized_convolution():
    model = zoo.mobilenet_v2()
    x = torch.from_numpy(zoo.varied_crops(1, 96, seed=3))
    calibration = [torch.from_numpy(zoo.varied_crops(1, 96, seed=10 + i)) for i in range(4)]
    quantized = _pt2e(model, x, calibration, _x86())
    _bias_on_int32_grid(quantized)
    program = ptlite.capture(quantized, (x,), method="export")
    # As captured: float32 convolutions on both sides, summed in orders that depend on the CPU (oneDNN's and
    # OpenBLAS's kernels); one activation a few ulps from a tie (9.499996 against torch's 9.500000 steps on an AVX2
    # EPYC) rounds the other way and moves the logits by 1.4%. Ties within a thousandth of a step.
    reference = ptlite.Module(program, backends="numpy")
    captured = reference(x.numpy())[0]
    want = _rounding_by_rounding(quantized, x, reference, 1e-3, "mobilenet_v2 (PT2E, x86) as captured")
    for name, got in (("reference", captured), ("default backends", ptlite.Module(program)(x.numpy())[0])):
        assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), \
            f"mobilenet_v2 (PT2E, x86) as captured ({name}): max |diff| {np.abs(got - want).max():.3g}"
    optimized = ptlite.optimize_for_mobile(program)
    assert optimized.metadata["quantization"]["int8"] == {CONV2D_INT8: 42}, optimized.metadata["quantization"]
    # Folded: the int8 kernels' exact integer sums against torch's float32 ones (the biases are on the int32 grid)
    reference = ptlite.Module(optimized, backends="numpy")
    folded = reference(x.numpy())[0]
    want = _rounding_by_rounding(quantized, x, reference, 1e-3, "mobilenet_v2 (PT2E, x86) folded")
    for name, got in (("reference", folded), ("default backends", ptlite.Module(optimized)(x.numpy())[0])):
        assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), \
            f"mobilenet_v2 (PT2E, x86) folded ({name}): max |diff| {np.abs(got - want).max():.3g} from PyTorch's " \
            "logits on the same int8 activations"


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
