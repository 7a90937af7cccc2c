"""ptlite.quantize's fp16_weights: weight matrices stored as float16, computed in float32. A program quantized as
captured computes what PyTorch computes with its weight matrices rounded to float16; optimized before or after
quantizing (either order), on the native and the NumPy backend, it is as close to float32 PyTorch on a photograph
as PyTorch with rounded weights is (within 2.5x), and its file is at most 0.52x the float32 one. Weights the scheme
must not round (vectors, values past float16's range, float16 weights the model had) stay as they were; a file
whose metadata lists anything but its float16 weights is refused at load."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import assert_close
from torch import nn

import ptlite
from ptlite.ir.weights import FLOAT16_KEY, widened
from ptlite.quantization import describe
from ptlite.tools import zoo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_format import _rewrite_program  # noqa: E402  (tests/: edits a saved file's program JSON)

SIZE = 128  # MobileNetV2 on a 128x128 photograph: the same layers as at 224, a third of the time
# The same rounded weights as PyTorch's: float32 summation order only (the optimize tests' tolerance).
RTOL_SAME = 1e-4
# float16 weights against float32 ones: PyTorch itself, its weight matrices rounded to float16, moves MobileNetV2's
# logits by 1.4e-2 x their largest here (the model's sensitivity, not ptlite's); rounding after batch norms are
# folded in, or rounding twice (quantized before optimizing), moved them 1.6-2.1e-2 (1.1-1.5x that). A wrong kernel
# is off by O(1).
WORSE_THAN_ROUNDED_TORCH = 2.5


def _native_available() -> bool:
    return any(info.name == "native" and info.available for info in ptlite.backends())


def _rounded(model: nn.Module) -> nn.Module:
    """A copy of the model with every parameter and buffer of two or more dimensions rounded through float16 (what
    fp16_weights does to a program as captured: its weights are the model's parameters and buffers)."""
    model = copy.deepcopy(model)
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            if tensor.dtype == torch.float32 and tensor.dim() >= 2:
                tensor.copy_(tensor.half().float())
    return model


@pytest.fixture(scope="module")
def mnv2():
    model = zoo.mobilenet_v2()
    image = zoo.sample_images(1, SIZE)
    with torch.inference_mode():
        want = model(image).numpy()
    return model, image, want, ptlite.capture(model, (image,), method="export")


def test_quantized_as_captured_computes_pytorch_with_rounded_weights(mnv2):
    model, image, _, program = mnv2
    quantized = ptlite.quantize(program, "fp16_weights")
    assert program.metadata.get(FLOAT16_KEY) is None, "the program given is unchanged"
    narrowed = quantized.metadata[FLOAT16_KEY]
    assert narrowed and all(quantized.weights[n].dtype == np.float16 for n in narrowed)
    assert all(w.ndim < 2 for n, w in quantized.weights.items() if n not in narrowed), "only vectors stay float32"
    got = ptlite.Module(quantized, backends="numpy")(image.numpy())
    with torch.inference_mode():
        want = _rounded(model)(image).numpy()
    assert_close(got, want, what="mobilenet_v2 fp16_weights as captured vs PyTorch with float16-rounded weights",
                 rtol=RTOL_SAME)


@pytest.mark.parametrize("backend", ["native", "numpy"])
@pytest.mark.parametrize("order", ["optimize, quantize", "quantize, optimize"])
def test_optimized_file_halves_and_stays_within_float16_rounding(mnv2, backend, order, tmp_path):
    if backend == "native" and not _native_available():
        pytest.skip("the native backend's library is not built here")
    model, image, want, program = mnv2
    with torch.inference_mode():
        rounded = _rounded(model)(image).numpy()
    sensitivity = float(np.abs(rounded - want).max() / np.abs(want).max())
    fp32 = ptlite.optimize_for_mobile(program, backend=backend)
    if order == "optimize, quantize":
        fp16 = ptlite.quantize(fp32, "fp16_weights")
    else:
        fp16 = ptlite.optimize_for_mobile(ptlite.quantize(program, "fp16_weights"), backend=backend)
    assert fp16.metadata[FLOAT16_KEY], f"{order}: the optimized program keeps its weights in float16"
    paths = {"fp32": tmp_path / "fp32.ptlite", "fp16": tmp_path / "fp16.ptlite"}
    ptlite.save(fp32, paths["fp32"])
    ptlite.save(fp16, paths["fp16"])
    ratio = paths["fp16"].stat().st_size / paths["fp32"].stat().st_size
    assert ratio <= 0.52, f"mobilenet_v2 ({backend}, {order}): the float16 file is {ratio:.3f}x the float32 one"
    module = ptlite.load(paths["fp16"])
    assert all(w.dtype != np.float16 for w in module.program.weights.values()), "widened to float32 at load"
    got = module(image.numpy())
    assert got.dtype == np.float32
    assert_close(got, want, what=f"mobilenet_v2 fp16_weights ({backend}, {order}) vs float32 PyTorch (PyTorch with "
                 f"float16-rounded weights: {sensitivity:.3g})", rtol=WORSE_THAN_ROUNDED_TORCH * sensitivity)
    exact = ptlite.load(paths["fp32"])(image.numpy())
    assert np.abs(got - exact).max() > 0, "the weights were rounded: the result moves"


class WideBuffer(nn.Module):
    """A linear layer and buffers float16 would spoil: values past its range (an additive mask's -1e6 would be -inf),
    values all below its smallest normal number (3e-6 would keep 2 significant bits) and integers past 2048 (4001
    would be 4000). They must stay float32."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 4)
        mask = torch.zeros(3, 4)
        mask[1, 2] = -1e6
        self.register_buffer("mask", mask)
        self.register_buffer("tiny", torch.full((3, 4), 3e-6))  # all below float16's smallest normal
        self.register_buffer("ids", torch.arange(12.0).reshape(3, 4) + 4000)  # integers past 2048

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.fc(x)
        return y, y + self.mask, self.tiny * 1e3, self.ids + 1


def test_weights_float16_would_spoil_and_vectors_stay_float32():
    torch.manual_seed(0)
    model = WideBuffer().eval()
    x = torch.randn(3, 6)
    program = ptlite.capture(model, (x,), method="export")
    quantized = ptlite.quantize(program, "fp16_weights")
    kept = quantized.metadata["quantization"]["float32"]
    for reason in ("past float16", "vector", "below", "integers"):
        assert any(reason in why for why in kept.values()), f"{reason!r} not among the reasons: {kept}"
    assert describe(quantized).endswith("4 left in float32 (1 vectors, 3 that float16 would spoil)"), \
        describe(quantized)
    assert len(quantized.metadata[FLOAT16_KEY]) == 1, "the linear weight alone is narrowed"
    got = ptlite.Module(quantized, backends="numpy")(x.numpy())
    model16 = copy.deepcopy(model)
    with torch.no_grad():
        model16.fc.weight.copy_(model16.fc.weight.half().float())
        want = [t.numpy() for t in model16(x)]
    assert_close(got[0], want[0], what="WideBuffer fp16_weights: the linear layer vs PyTorch's with its weight rounded",
                 rtol=RTOL_SAME)
    assert np.isfinite(got[1]).all() and got[1][1, 2] < -9e5, "the -1e6 mask entry is kept (float16: -inf)"
    assert_close(got[2], want[2], what="WideBuffer: the 3e-6 buffer (float16 would keep ~2 bits of it)", rtol=1e-6)
    assert np.array_equal(got[3], want[3]), "WideBuffer: the integer table past 2048 is exact"


def test_float16_weights_the_model_had_are_not_widened(mnv2):
    """Only the weights the scheme narrowed are widened: a float16 weight of the model's own stays float16."""
    _, _, _, program = mnv2
    own = program.weights.copy()
    name = next(n for n, w in own.items() if w.ndim >= 2)
    own[name] = own[name].astype(np.float16)
    model_half = ptlite.Program(methods=program.methods, weights=own, metadata=dict(program.metadata))
    quantized = ptlite.quantize(model_half, "fp16_weights")
    assert name not in quantized.metadata[FLOAT16_KEY]
    assert widened(quantized).weights[name].dtype == np.float16
    assert all(widened(quantized).weights[n].dtype == np.float32 for n in quantized.metadata[FLOAT16_KEY])


@pytest.mark.parametrize("edit,expected", [
    (lambda names, weights: [*names, "no_such_weight"], "not float16 weights"),
    (lambda names, weights: [*names, next(w["name"] for w in weights if w["dtype"] == "float32")],
     "not float16 weights"),
    (lambda names, weights: "every weight", "not a list of weight names"),
    (lambda names, weights: [*names, names[0]], "more than once"),
], ids=["missing", "a float32 weight", "not a list", "twice"])
def test_a_file_listing_other_weights_is_refused(edit, expected, tmp_path):
    torch.manual_seed(0)
    model = WideBuffer().eval()
    program = ptlite.quantize(ptlite.capture(model, (torch.randn(3, 6),), method="export"), "fp16_weights")
    path = tmp_path / "edited.ptlite"
    ptlite.save(program, path)

    def change(body: dict) -> None:
        body["metadata"][FLOAT16_KEY] = edit(body["metadata"][FLOAT16_KEY], body["weights"])

    _rewrite_program(path, change)
    with pytest.raises(ptlite.FormatError, match=expected):
        ptlite.load(path)


def test_unknown_scheme_and_calibration_data_are_refused(mnv2):
    _, image, _, program = mnv2
    with pytest.raises(ValueError, match="unknown quantization scheme 'int4'.*fp16_weights"):
        ptlite.quantize(program, "int4")
    with pytest.raises(ValueError, match="needs no calibration data"):
        ptlite.quantize(program, "fp16_weights", calibration_data=[image.numpy()])


class ThreeByThree(nn.Module):
    """Stride-1 3x3 convolutions on a 28x28 map, which optimize_for_mobile makes Winograd's for float32."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(32, 32, 3, padding=1)
        self.b = nn.Conv2d(32, 32, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


@pytest.mark.parametrize("backend", ["native", "numpy"])
def test_winograd_is_skipped_for_a_quantized_program_and_refused_after(backend):
    """A Winograd-transformed weight rounded to float16 errs ~7x more than the direct weight rounded: a program
    quantized first is optimized without the transform (and stays as close to PyTorch as rounding its weights makes
    PyTorch); one optimized with it is refused, saying what to do."""
    if backend == "native" and not _native_available():
        pytest.skip("the native backend's library is not built here")
    torch.manual_seed(0)
    model = ThreeByThree().eval()
    x = torch.randn(1, 32, 28, 28)
    program = ptlite.capture(model, (x,), method="export")
    fp32 = ptlite.optimize_for_mobile(program, backend=backend)
    assert any("winograd" in op for op in fp32.operator_names()), "the float32 program takes Winograd"
    with pytest.raises(ValueError, match="Winograd-transformed.*quantize before optimize_for_mobile"):
        ptlite.quantize(fp32, "fp16_weights")
    fp16 = ptlite.optimize_for_mobile(ptlite.quantize(program, "fp16_weights"), backend=backend)
    assert not any("winograd" in op for op in fp16.operator_names()), "the quantized program skips Winograd"
    assert "WINOGRAD" in fp16.metadata["optimization_blocklist"]
    with torch.inference_mode():
        want, rounded = model(x).numpy(), _rounded(model)(x).numpy()
    sensitivity = float(np.abs(rounded - want).max() / np.abs(want).max())
    got = ptlite.Module(fp16)(x.numpy())
    assert_close(got, want, what=f"3x3 pair fp16_weights ({backend}) vs float32 PyTorch (PyTorch with float16-rounded "
                 f"weights: {sensitivity:.3g})", rtol=WORSE_THAN_ROUNDED_TORCH * sensitivity)
