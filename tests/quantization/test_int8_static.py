"""ptlite.quantize's int8_static: on the demo's digits CNN (trained on scikit-learn's digits, real data) the int8
program's test accuracy is within one percentage point of PyTorch's float model, whichever way it was captured;
on ResNet-18 (in-place residual additions, as torch.export writes them) its logits stay close to float PyTorch's on
photographs; optimizing and saving keep its results; what stays float is reported with why; bad calibration data
and programs it cannot take are refused by name."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import ptlite
from ptlite.errors import InputError
from ptlite.ops import ADD_INT8, CONV2D_INT8, DEQUANTIZE_PER_TENSOR, LINEAR_INT8, QUANTIZE_PER_TENSOR
from ptlite.quantization import describe, report
from ptlite.quantization.observers import Histogram, MinMax
from ptlite.tools import demo, zoo

EPOCHS = 15  # the digits CNN reaches ~99.7 % test accuracy (float) in ~5 s
CALIBRATION = 128  # training images, one a call


def _native_available() -> bool:
    return any(info.name == "native" and info.available for info in ptlite.backends())


@pytest.fixture(scope="module")
def digits():
    pytest.importorskip("sklearn")
    data = demo.load_digits_split()
    model, _, _ = demo.train(data, EPOCHS)
    with torch.no_grad():
        logits = model(torch.from_numpy(data.x_test)).numpy()
    return data, model, demo.accuracy(logits, data.y_test)


def _batched(module, x: np.ndarray, batch: int) -> np.ndarray:
    return np.concatenate([np.asarray(module(x[i:i + batch])) for i in range(0, len(x), batch)])


@pytest.mark.parametrize("method", ["export", "script", "trace"])
def test_digits_accuracy_within_one_point_of_float(digits, method, tmp_path):
    data, model, float_accuracy = digits
    batch = 40  # divides the test set; the export and trace captures have static shapes
    program = ptlite.capture(model, (torch.from_numpy(data.x_test[:batch]),), method=method)
    calibration = [data.x_train[i:i + batch] for i in range(0, CALIBRATION, batch)]
    quantized = ptlite.quantize(program, "int8_static", calibration)
    ops = quantized.operator_names()
    assert CONV2D_INT8 in ops and LINEAR_INT8 in ops, f"digits CNN ({method}): no int8 layers in {ops}"
    assert "aten::conv2d" not in ops and "aten::batch_norm" not in ops, \
        f"digits CNN ({method}): float convolutions or batch norms left: {ops}"
    path = tmp_path / "digits.int8.ptlite"
    ptlite.save(ptlite.optimize_for_mobile(quantized), path)
    module = ptlite.load(path)
    logits = _batched(module, data.x_test, batch)
    accuracy = demo.accuracy(logits, data.y_test)
    assert accuracy >= float_accuracy - 0.01, \
        f"digits CNN ({method}) int8_static: test accuracy {accuracy:.2%}, float {float_accuracy:.2%}"


def test_optimizing_saving_and_backends_keep_the_results(digits, tmp_path):
    data, model, _ = digits
    x = data.x_test[:40]
    program = ptlite.capture(model, (torch.from_numpy(x),), method="export")
    quantized = ptlite.quantize(program, "int8_static", [data.x_train[:40], data.x_train[40:80]])
    want = np.asarray(ptlite.Module(quantized, backends="numpy")(x))
    for backend in ["numpy", "native"] if _native_available() else ["numpy"]:
        ptlite.save(ptlite.optimize_for_mobile(quantized, backend=backend), tmp_path / "q.ptlite")
        got = np.asarray(ptlite.load(tmp_path / "q.ptlite", backends=[backend])(x))
        np.testing.assert_array_equal(got, want, err_msg=f"digits CNN int8 optimized for {backend}, saved and "
                                                         "loaded, differs from the program as quantized")


@pytest.fixture(scope="module")
def resnet():
    model = zoo.resnet18()
    size = 96
    calibration = [zoo.sample_images(1, size, offset=i).numpy() for i in range(8)]
    program = ptlite.capture(model, (torch.from_numpy(calibration[0]),), method="export")
    return model, program, calibration, size


def test_resnet18_int8_logits_close_to_float(resnet):
    """Residual additions written in place (add_, relu_) become int8 additions; the logits' cosine similarity with
    float PyTorch's stays above 0.99 (measured 0.997-0.998; PyTorch's own x86 flow on such models is no closer)."""
    model, program, calibration, size = resnet
    quantized = ptlite.quantize(program, "int8_static", calibration)
    info = quantized.metadata["quantization"]
    assert info["int8"] == {CONV2D_INT8: 20, ADD_INT8: 8, LINEAR_INT8: 1, "aten::max_pool2d": 1}, info["int8"]
    module = ptlite.Module(ptlite.optimize_for_mobile(quantized))
    for offset in (30, 31, 40):
        x = zoo.sample_images(1, size, offset=offset)
        with torch.no_grad():
            want = model(x).numpy()[0]
        got = np.asarray(module(x.numpy()))[0]
        cosine = float(want @ got / np.linalg.norm(want) / np.linalg.norm(got))
        assert cosine > 0.99, f"resnet18 int8_static, image {offset}: cosine {cosine:.4f} with float logits"


def test_report_says_what_stays_float_and_why(resnet):
    _, program, calibration, _ = resnet
    quantized = ptlite.quantize(program, "int8_static", calibration[:2], observer="minmax")
    text = report(quantized)
    assert text.splitlines()[0] == describe(quantized) == \
        "int8_static: 30 operator(s) in int8, 2 in float (minmax observer, 2 calibration sample(s))"
    assert "float     1 x aten::adaptive_avg_pool2d: ptlite has no int8 kernel" in text, text
    assert "float     1 x aten::flatten.using_ints: its input is float here" in text, text
    ops = [n.op for n in quantized.forward.nodes]
    assert ops.count(QUANTIZE_PER_TENSOR) == 2 and ops.count(DEQUANTIZE_PER_TENSOR) == 2, \
        "resnet18: expected a quantize at the input and before the classifier, a dequantize before the pooling " \
        f"and at the output; got {ops.count(QUANTIZE_PER_TENSOR)} and {ops.count(DEQUANTIZE_PER_TENSOR)}"


class _Mixed(nn.Module):
    """A convolution, one whose weight is computed, a branch, and a float addition: what stays float, and why."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.weight = nn.Parameter(torch.randn(4, 4, 1, 1))

    def forward(self, x):
        y = torch.relu(self.conv(x))
        z = nn.functional.conv2d(y, self.weight * x.mean())
        if bool(x.sum() > 0):
            z = z * 2
        return z + torch.ones_like(z)


def test_computed_weights_branches_and_float_adds_stay_float():
    model = _Mixed().eval()
    x = torch.randn(1, 3, 8, 8)
    program = ptlite.capture(model, (x,), method="script")
    quantized = ptlite.quantize(program, "int8_static", [x.numpy(), torch.randn(1, 3, 8, 8).numpy()])
    whys = [(item["op"], item["why"]) for item in quantized.metadata["quantization"]["float"]]
    assert quantized.metadata["quantization"]["int8"] == {CONV2D_INT8: 1}
    for op, why in [("aten::conv2d", "a computed weight"), ("aten::mul.Scalar", "inside control flow"),
                    ("aten::mul.Tensor", "no int8 kernel"),
                    ("aten::add.Tensor", "neither operand comes from an int8 operator")]:
        assert any(op == o and why in w for o, w in whys), f"{op}: '{why}' is not among the reasons {whys}"
    with torch.no_grad():
        want = model(x).numpy()
    got = np.asarray(ptlite.Module(quantized)(x.numpy()))
    assert np.abs(got - want).max() < 0.05 * np.abs(want).max(), \
        f"mixed model int8_static: max |diff| {np.abs(got - want).max():.3g} of {np.abs(want).max():.3g}"


def test_histogram_observer_clips_outliers_minmax_keeps_them():
    rng = np.random.default_rng(0)
    # one outlier in a million: clipping it costs less squared error than the coarse step that would hold it
    values = np.concatenate([rng.standard_normal(1_000_000), [80.0]]).astype(np.float32)
    minmax, histogram = MinMax(), Histogram()
    for step in range(2):
        histogram.observe(values, step)
    minmax.observe(values)
    assert minmax.range()[1] == pytest.approx(80.0)
    lo, hi = histogram.range()
    assert lo <= 0 <= hi and 3 < hi < 10, f"histogram observer: range ({lo:.3g}, {hi:.3g}) for N(0,1) + one 80"

    def error(rng_):
        scale = (rng_[1] - min(rng_[0], 0)) / 255
        q = np.clip(np.rint((values - rng_[0]) / scale), 0, 255) * scale + rng_[0]
        return float(np.mean((q - values) ** 2))
    assert error((lo, hi)) < error(minmax.range()) / 1.5, "the histogram's range errs as much as the full one"


def test_bad_calibration_data_and_programs_are_refused_by_name(digits):
    data, model, _ = digits
    x = data.x_test[:40]
    program = ptlite.capture(model, (torch.from_numpy(x),), method="export")
    with pytest.raises(ValueError, match="needs calibration data"):
        ptlite.quantize(program, "int8_static")
    with pytest.raises(ValueError, match=r"wrap it in a list, \[batch\]"):
        ptlite.quantize(program, "int8_static", x)
    with pytest.raises(ValueError, match="calibration_data is empty"):
        ptlite.quantize(program, "int8_static", [])
    with pytest.raises(InputError, match=r"calibration sample 1: .*shape"):
        ptlite.quantize(program, "int8_static", [x, x[:3]])
    with pytest.raises(ValueError, match="unknown observer 'mean'"):
        ptlite.quantize(program, "int8_static", [x], observer="mean")
    with pytest.raises(ValueError, match="quantize the program as captured"):
        ptlite.quantize(ptlite.optimize_for_mobile(program), "int8_static", [x])
    quantized = ptlite.quantize(program, "int8_static", [x])
    with pytest.raises(ValueError, match="quantized already"):
        ptlite.quantize(quantized, "int8_static", [x])


def test_file_is_about_a_quarter(resnet, tmp_path):
    _, program, calibration, _ = resnet
    ptlite.save(ptlite.optimize_for_mobile(program), tmp_path / "f.ptlite")
    quantized = ptlite.quantize(program, "int8_static", calibration[:1])
    ptlite.save(ptlite.optimize_for_mobile(quantized), tmp_path / "q.ptlite")
    ratio = (tmp_path / "q.ptlite").stat().st_size / (tmp_path / "f.ptlite").stat().st_size
    assert ratio <= 0.27, f"resnet18 int8_static file is {ratio:.3f}x the float one (the issue's bound: 0.27)"


class _WrittenAfterRead(nn.Module):
    """A tensor two convolutions read, written in place between them (its quantized copy must not be reused)."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 4, 3), nn.Conv2d(3, 4, 3)

    def forward(self, x):
        t = x * 1.0
        a = self.c1(t)
        t.mul_(3.0)
        return a, self.c2(t)


class _PooledWritten(nn.Module):
    """An int8 value passed through max pooling, then written in place between two readers."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2, self.c3 = nn.Conv2d(3, 4, 3), nn.Conv2d(4, 4, 1), nn.Conv2d(4, 4, 1)

    def forward(self, x):
        y = nn.functional.max_pool2d(self.c1(x), 2)
        a = self.c2(y)
        y.mul_(-1.0)
        return a, self.c3(y)


class _ViewWritten(nn.Module):
    """A convolution's output written through a view that a linear layer reads first."""

    def __init__(self):
        super().__init__()
        self.c, self.lin = nn.Conv2d(3, 3, 3), nn.Linear(48, 5)

    def forward(self, x):
        y = self.c(x)
        f = y.view(1, 48)
        a = self.lin(f)
        f.relu_()
        return a, y


class _Shared(nn.Module):
    """One convolution applied twice, and a shape read from an int8 value."""

    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        y = torch.relu(self.c(torch.relu(self.c(x))))
        return y.view(y.size(0), -1)


@pytest.mark.parametrize("model_class", [_WrittenAfterRead, _PooledWritten, _ViewWritten, _Shared])
@pytest.mark.parametrize("method", ["script", "trace"])
def test_in_place_writes_are_kept(model_class, method):
    """Writes in place to what int8 operators read or write (directly, after max pooling, through a view) keep
    their effect: what they touch stays float. (A review found each of these computed on stale int8 copies.)"""
    torch.manual_seed(0)
    model = model_class().eval()
    x = torch.randn(1, 4 if model_class is _Shared else 3, 6, 6)
    capture = torch.jit.trace if method == "trace" else torch.jit.script
    program = ptlite.capture(capture(model, (x.clone(),)) if method == "trace" else capture(model), (x,),
                             method=method)
    quantized = ptlite.quantize(program, "int8_static", [x.numpy(), torch.randn(*x.shape).numpy()])
    with torch.no_grad():
        want = model(x.clone())
    got = ptlite.Module(quantized)(x.numpy())
    for i, (g, w) in enumerate(zip(got if isinstance(got, (list, tuple)) else [got],
                                   want if isinstance(want, tuple) else [want])):
        diff = np.abs(np.asarray(g) - w.numpy()).max()
        assert diff < 0.05 * np.abs(w.numpy()).max(), \
            f"{model_class.__name__} ({method}) int8_static output {i}: max |diff| {diff:.3g} of " \
            f"{np.abs(w.numpy()).max():.3g}\n{report(quantized)}"
    if model_class is _Shared:
        assert len([n for n in quantized.forward.nodes if n.op == CONV2D_INT8]) == 2
        assert len([k for k in quantized.weights if k.endswith(".int8")]) == 1, \
            f"a convolution used twice stores its int8 weight twice: {sorted(quantized.weights)}"
        assert [n.op for n in quantized.forward.nodes].count(DEQUANTIZE_PER_TENSOR) == 1, \
            "a shape read of an int8 value made a dequantize of its own"


def test_non_finite_calibration_data_is_named(digits):
    data, model, _ = digits
    program = ptlite.capture(model, (torch.from_numpy(data.x_test[:40]),), method="export")
    bad = data.x_test[:40].copy()
    bad[3, 0, 2, 2] = np.inf
    for observer in ("minmax", "histogram"):
        with pytest.raises(ValueError, match=r"calibration sample 1: input 'x' holds inf or NaN"):
            ptlite.quantize(program, "int8_static", [data.x_test[:40], bad], observer=observer)


def _eager_int8(model: nn.Module, calibration: list[np.ndarray], engine: str) -> nn.Module:
    """PyTorch Mobile's recipe: fuse_modules, the engine's qconfig, prepare, calibrate, convert."""
    import copy

    import torch.ao.quantization as tq

    torch.backends.quantized.engine = engine
    float_model = copy.deepcopy(model).eval()
    tq.fuse_modules(float_model.features, [["0", "1", "2"], ["3", "4", "5"], ["7", "8", "9"]], inplace=True)
    wrapped = tq.QuantWrapper(float_model).eval()
    wrapped.qconfig = tq.get_default_qconfig(engine)
    tq.prepare(wrapped, inplace=True)
    with torch.no_grad():
        for x in calibration:
            wrapped(torch.from_numpy(x))
    return tq.convert(wrapped)


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")
@pytest.mark.parametrize("engine", [e for e in ("qnnpack", "x86") if e in torch.backends.quantized.supported_engines])
@pytest.mark.parametrize("method", ["script", "trace"])
def test_pytorch_eager_quantized_digits_captures_with_torchs_results(digits, engine, method):
    """The digits CNN quantized by PyTorch's own eager-mode workflow, scripted or traced, runs in ptlite with the
    results of torch's quantized kernels (every logit within one step of the output's scale) and its accuracy
    within a point of the float model's."""
    data, model, float_accuracy = digits
    previous = torch.backends.quantized.engine
    try:
        quantized = _eager_int8(model, [data.x_train[i:i + 40] for i in range(0, CALIBRATION, 40)], engine)
        x = torch.from_numpy(data.x_test[:40])
        scripted = torch.jit.script(quantized) if method == "script" else torch.jit.trace(quantized, x)
        with torch.no_grad():
            want = np.concatenate([quantized(torch.from_numpy(data.x_test[i:i + 40])).numpy()
                                   for i in range(0, len(data.x_test), 40)])
        program = ptlite.capture(scripted, (x,), method=method)
    finally:
        torch.backends.quantized.engine = previous
    assert describe(program) == "quantized in PyTorch: 4 operator(s) in int8", describe(program)
    module = ptlite.Module(ptlite.optimize_for_mobile(program))
    got = _batched(module, data.x_test, 40)
    step = quantized.module.classifier.scale
    diff = np.abs(got - want)
    assert diff.max() <= step * 1.001, f"digits CNN ({engine}, {method}): logits {diff.max() / step:.2f} steps " \
                                       "from torch's quantized model"
    for name, logits in (("PyTorch int8", want), ("ptlite", got)):
        accuracy = demo.accuracy(logits, data.y_test)
        assert accuracy >= float_accuracy - 0.01, \
            f"digits CNN ({engine}, {method}) {name}: accuracy {accuracy:.2%}, float {float_accuracy:.2%}"


@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning", "ignore::FutureWarning")
@pytest.mark.parametrize("engine", [e for e in ("qnnpack", "x86") if e in torch.backends.quantized.supported_engines])
def test_pytorch_eager_quantized_digits_ptl_runs_without_torch(digits, engine, tmp_path):
    """The same quantized digits CNN saved for the lite interpreter (a .ptl file) loads and runs where torch cannot
    be imported: logits within one step of torch's quantized model, accuracy within a point of the float model's."""
    from test_torch_free import _run_without_torch

    data, model, float_accuracy = digits
    previous = torch.backends.quantized.engine
    try:
        quantized = _eager_int8(model, [data.x_train[i:i + 40] for i in range(0, CALIBRATION, 40)], engine)
        torch.jit.script(quantized)._save_for_lite_interpreter(str(tmp_path / "digits.ptl"))
        with torch.no_grad():
            want = np.concatenate([quantized(torch.from_numpy(data.x_test[i:i + 40])).numpy()
                                   for i in range(0, len(data.x_test), 40)])
    finally:
        torch.backends.quantized.engine = previous
    np.save(tmp_path / "x.npy", data.x_test)
    result = _run_without_torch(f"""
        import numpy as np, ptlite
        module = ptlite.load({str(tmp_path / 'digits.ptl')!r})
        x = np.load({str(tmp_path / 'x.npy')!r})
        np.save({str(tmp_path / 'got.npy')!r}, np.concatenate([module(x[i:i + 40]) for i in range(0, len(x), 40)]))
        assert "torch" not in sys.modules, "ptlite imported torch"
    """)
    assert result.returncode == 0, result.stderr[-3000:]
    got = np.load(tmp_path / "got.npy")
    step = quantized.module.classifier.scale
    diff = np.abs(got - want).max()
    assert diff <= step * 1.001, f"digits CNN .ptl ({engine}): logits {diff / step:.2f} steps from torch's"
    accuracy = demo.accuracy(got, data.y_test)
    assert accuracy >= float_accuracy - 0.01, \
        f"digits CNN .ptl ({engine}): accuracy {accuracy:.2%}, float {float_accuracy:.2%}"
