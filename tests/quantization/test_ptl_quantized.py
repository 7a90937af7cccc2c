"""Quantized .ptl files (PyTorch's eager-mode and dynamic quantization, saved with _save_for_lite_interpreter) load
and run in int8 without torch: their packed weights are rebuilt by running each layer's __setstate__ on the file's
values, and the result is the one ptlite.capture gives the same scripted model. What ptlite cannot run is refused
by name, and a crafted __setstate__ cannot run away."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.ao.quantization as tq
import torchvision
from test_ptl import _code_table, _edit_bytecode
from torch import nn
from torch.jit.mobile import _backport_for_mobile, _load_for_lite_interpreter

import ptlite
from ptlite.ops import CONV2D_INT8, LINEAR_DYNAMIC_INT8, LINEAR_INT8
from ptlite.tools import zoo
from ptlite.tools.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning",
                                        "ignore::FutureWarning")
ENGINES = [e for e in ("qnnpack", "x86") if e in torch.backends.quantized.supported_engines]


class Small(nn.Module):
    """Conv + batch norm + relu (fused), a strided conv, a residual addition, max and average pooling, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv1, self.bn1, self.relu1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()
        self.conv2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.add = torch.ao.nn.quantized.FloatFunctional()
        self.pool, self.avg = nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(self.relu1(self.bn1(self.conv1(self.quant(x)))))
        y = self.pool(self.add.add(y, self.conv3(y)))
        return self.dequant(self.fc(self.avg(y).flatten(1)))


def _quantize(model: nn.Module, engine: str, fuse: list[list[str]] | None = None) -> nn.Module:
    torch.backends.quantized.engine = engine
    model = model.eval()
    if fuse:
        model = tq.fuse_modules(model, fuse)
    model.qconfig = tq.get_default_qconfig(engine)
    tq.prepare(model, inplace=True)
    with torch.no_grad():
        for seed in range(4):
            model(torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(seed)))
    return tq.convert(model)


@pytest.fixture(params=ENGINES)
def engine(request):
    previous = torch.backends.quantized.engine
    yield request.param
    torch.backends.quantized.engine = previous


def test_small_model_runs_as_the_lite_interpreter_in_every_bytecode_version(engine, tmp_path):
    """Every quantized operator within one step of the output's scale of torch's lite interpreter on the same file,
    saved at bytecode 8 and back-ported to 4..7 (older files index tuples with an operator, not an instruction)."""
    torch.manual_seed(0)
    model = _quantize(Small(), engine, [["conv1", "bn1", "relu1"]])
    path = tmp_path / "small.ptl"
    torch.jit.script(model)._save_for_lite_interpreter(str(path))
    x = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        want = _load_for_lite_interpreter(str(path))(x).numpy()
    step = model.fc.scale
    files = {"v8": path}
    for version in (4, 5, 6, 7):
        files[f"v{version}"] = tmp_path / f"small_v{version}.ptl"
        assert _backport_for_mobile(str(path), str(files[f"v{version}"]), version)
    for name, file in files.items():
        module = ptlite.load(file)
        ops = module.program.operator_names()
        assert CONV2D_INT8 in ops and LINEAR_INT8 in ops, f"small {engine} {name}: {sorted(ops)}"
        got = module(x.numpy())
        diff = np.abs(got - want).max()
        assert got.dtype == np.float32 and diff <= step * 1.001, \
            f"small quantized model ({engine}, {name}): {diff / step:.2f} steps from torch's lite interpreter"
    converted = tmp_path / "small.ptlite"
    assert main(["convert", str(path), "-o", str(converted), "--input-shape", "2,3,16,16"]) == 0
    got = ptlite.load(converted)(x.numpy())
    loaded = ptlite.load(path)(x.numpy())
    assert np.array_equal(got, loaded), f"small quantized model ({engine}): ptlite convert changed the results by " \
                                        f"{np.abs(got - loaded).max() / step:.2f} steps"


def _bias_on_int32_grid(model: nn.Module, example: torch.Tensor) -> None:
    """Round each quantized layer's float bias to a multiple of its input scale x weight scale, the int32 bias
    ptlite's kernels add (fbgemm adds the float one to the integer sum). The activations are 7-bit (reduce_range, in
    get_default_qconfig('x86')), so fbgemm's AVX2 int16 pair sums do not saturate: it then computes ptlite's sums."""
    scales: dict[nn.Module, float] = {}
    hooks = [m.register_forward_pre_hook(lambda m, args: scales.__setitem__(m, args[0].q_scale()))
             for m in model.modules() if hasattr(m, "set_weight_bias")]
    with torch.no_grad():
        model(example)
    for hook in hooks:
        hook.remove()
    assert len(scales) == 53, f"{len(scales)} quantized layers ran"  # 52 convolutions and the classifier
    for layer, input_scale in scales.items():
        weight, bias = layer.weight(), layer.bias()
        if bias is None:
            continue
        per_channel = weight.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric)
        weight_scale = weight.q_per_channel_scales() if per_channel else torch.tensor([weight.q_scale()])
        scale = np.float32(input_scale) * weight_scale.numpy().astype(np.float32)
        layer.set_weight_bias(weight, torch.from_numpy(np.rint(bias.detach().numpy() / scale) * scale))


def test_mobilenet_v2_file_matches_torch_and_ptlites_capture(engine, tmp_path):
    """torchvision's quantizable MobileNetV2 (weights re-drawn, batch norm re-estimated on photographs, calibrated on
    photographs), quantized by PyTorch and saved for the lite interpreter: ptlite's result is the one it gives when
    capturing the scripted model, and every logit is within one step of torch's. With the x86 engine the biases are
    first put on the int32 grid ptlite's kernels (and qnnpack) round them to: fbgemm adds the float bias after the
    integer sum, which rounds some requantizations the other way (one step per layer, test_int8_static.py checks it
    on the digits CNN) and over 52 layers of these random weights moves the logits by 20-30 steps and the top-1 class
    of half the images, differently on each CPU (the model's own float construction depends on it)."""
    float_model = zoo.mobilenet_v2()
    torch.backends.quantized.engine = engine
    twin = torchvision.models.quantization.mobilenet_v2(weights=None, quantize=False)
    twin.load_state_dict(float_model.state_dict())
    twin.eval().fuse_model(is_qat=False)
    twin.qconfig = tq.get_default_qconfig(engine)
    tq.prepare(twin, inplace=True)
    with torch.no_grad():
        twin(torch.from_numpy(zoo.varied_crops(8, 96, seed=1)))
    tq.convert(twin, inplace=True)
    images = zoo.varied_crops(4, 96, seed=2)
    if engine == "x86":
        _bias_on_int32_grid(twin, torch.from_numpy(images[:1]))
    with torch.no_grad():
        want = twin(torch.from_numpy(images)).numpy()
    scripted = torch.jit.script(twin)
    path = tmp_path / "mnv2.ptl"
    scripted._save_for_lite_interpreter(str(path))
    module = ptlite.load(path)
    got = module(images)
    captured = ptlite.Module(ptlite.capture(scripted, (torch.from_numpy(images),), method="script"))(images)
    assert np.array_equal(got, captured), \
        f"mobilenet_v2 ({engine}): the .ptl file's result differs from the capture's by {np.abs(got - captured).max()}"
    assert module.program.metadata["quantization"]["int8"][CONV2D_INT8] == 52, module.program.metadata
    step = twin.classifier[1].scale
    diff = np.abs(got - want).max() / step
    assert diff <= 1.001, f"mobilenet_v2 ({engine}): logits {diff:.2f} steps from torch's"


def test_dynamic_quantized_linear_file(engine, tmp_path):
    """quantize_dynamic's linear layers (LinearPackedParamsBase objects pickled with their weight and bias): as
    close to float as torch's own dynamic int8, within 2x."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).eval()
    torch.backends.quantized.engine = engine
    dynamic = tq.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8)
    path = tmp_path / "dynamic.ptl"
    torch.jit.script(dynamic)._save_for_lite_interpreter(str(path))
    x = torch.randn(8, 16)
    with torch.no_grad():
        want, theirs = model(x).numpy(), dynamic(x).numpy()
    module = ptlite.load(path)
    assert module.program.operator_names().count(LINEAR_DYNAMIC_INT8) == 1
    ours, torch_error = np.abs(module(x.numpy()) - want).max(), np.abs(theirs - want).max()
    assert ours <= 2 * torch_error, \
        f"dynamic linear ({engine}): max |diff| from float {ours:.3g}, torch's dynamic int8 {torch_error:.3g}"


class Concatenates(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.conv, self.cat = nn.Conv2d(3, 4, 3), torch.ao.nn.quantized.FloatFunctional()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(self.quant(x))
        return self.dequant(self.cat.cat([y, y], 1))


def test_what_ptlite_cannot_run_is_named(tmp_path):
    """A quantized operator without an int8 kernel (quantized::cat) is listed as a missing operator; a flatbuffer
    file is refused naming its quantized operators."""
    model = _quantize(Concatenates(), "qnnpack")
    path = tmp_path / "cat.ptl"
    torch.jit.script(model)._save_for_lite_interpreter(str(path))
    with pytest.raises(ptlite.UnsupportedOperatorError, match=r"(?s)cannot run.*quantized::cat"):
        ptlite.load(path)
    small = _quantize(Small(), "qnnpack")
    flat = tmp_path / "small.ff.ptl"
    torch.jit.script(small)._save_for_lite_interpreter(str(flat), _use_flatbuffer=True)
    with pytest.raises(ptlite.UnsupportedOperatorError) as info:
        ptlite.load(flat)
    for op in ("quantized::conv2d.new", "quantized::linear", "aten::quantize_per_tensor"):
        assert f"  {op}  (used in " in str(info.value), str(info.value)


@pytest.fixture(scope="module")
def small_file(tmp_path_factory):
    previous = torch.backends.quantized.engine
    try:
        model = _quantize(Small(), "qnnpack", [["conv1", "bn1", "relu1"]])
    finally:
        torch.backends.quantized.engine = previous
    path = tmp_path_factory.mktemp("q") / "small.ptl"
    torch.jit.script(model)._save_for_lite_interpreter(str(path))
    return path


SETSTATE = "Conv2d.__setstate__"


def _loop(code):
    _code_table(code, SETSTATE, "instructions")[5] = ["JMP", 0, 0]


def _other_operator(code):
    _code_table(code, SETSTATE, "operators")[-1] = ["aten::save", "", 2]


def _swapped_arguments(code):
    """The bias pushed where the weight goes, for quantized::conv2d_prepack."""
    rows, operators = (_code_table(code, SETSTATE, t) for t in ("instructions", "operators"))
    at = next(i for i, row in enumerate(rows) if row[0] == "OP" and operators[row[1]][0] == "quantized::conv2d_prepack")
    loads = [i for i in range(at) if rows[i][0] == "LOAD"][-2:]  # w and b pushed before the lists
    rows[loads[0]], rows[loads[1]] = rows[loads[1]], rows[loads[0]]


@pytest.mark.parametrize("edit, error, message", [
    (_loop, ptlite.FormatError, r"runs more than 1000000 instructions while loading"),
    (_other_operator, ptlite.UnsupportedOperatorError, r"operator aten::save, which ptlite does not run"),
    (_swapped_arguments, ptlite.FormatError, r"__setstate__, instruction \d+: prepacks weights that are not"),
], ids=["loop", "other operator", "swapped arguments"])
def test_a_crafted_setstate_is_refused(small_file, tmp_path, edit, error, message):
    """The small model's file (which loads as saved) with its convolutions' __setstate__ edited: refused, naming the
    function, before anything of the model runs."""
    ptlite.load(small_file)
    with pytest.raises(error, match=message):
        ptlite.load(_edit_bytecode(small_file, tmp_path / "crafted.ptl", edit))


def test_quantized_tensors_are_checked_while_unpickling():
    """`_rebuild_qtensor` takes only quantized storages, and plain tensors never take them; per-channel parameters
    must match the channels."""
    from ptlite.format.ptl.unpickler import QuantizedStorage, rebuild_qtensor, rebuild_tensor

    storage = QuantizedStorage(np.arange(8, dtype=np.int8))
    q = rebuild_qtensor(storage, 0, (2, 4), (4, 1), (1, np.array([0.5, 0.25]), np.array([0, 0]), 0))
    assert q.values.shape == (2, 4) and list(q.scales) == [0.5, 0.25]
    with pytest.raises(ptlite.FormatError, match="a plain tensor over a quantized storage"):
        rebuild_tensor(storage, 0, (8,), (1,))
    with pytest.raises(ptlite.FormatError, match="not a quantized storage"):
        rebuild_qtensor(np.zeros(8, np.int8), 0, (8,), (1,), (0, 0.5, 0))
    with pytest.raises(ptlite.FormatError, match=r"shape \[2, 4\] with 3 scales"):
        rebuild_qtensor(storage, 0, (2, 4), (4, 1), (1, np.ones(3), np.zeros(3, np.int64), 0))
    with pytest.raises(ptlite.FormatError, match="reaches element 11"):
        rebuild_qtensor(storage, 4, (2, 4), (4, 1), (0, 0.5, 0))
    with pytest.raises(ptlite.FormatError, match="per_channel_affine_float_qparams"):
        rebuild_qtensor(storage, 0, (8,), (1,), (4, np.ones(8), np.zeros(8), 0))


def _setstate(instructions, operators=(), constants=()):
    """A __setstate__ function of class __torch__.M made of the given rows."""
    from ptlite.format.ptl.bytecode import Function, Operator

    return Function("__torch__.M.__setstate__", [tuple(row) for row in instructions],
                    [Operator(*op) for op in operators], list(constants), [], 8)


def _restore(fn, objects=1):
    """restore_objects on `objects` objects of class __torch__.M, each holding the next, restored by fn."""
    from ptlite.format.ptl.restore import restore_objects
    from ptlite.format.ptl.unpickler import ClassTable

    cls, inner = ClassTable().get("__torch__.M"), None
    for _ in range(objects):
        obj = cls()
        obj.__setstate__((0, inner))
        inner = obj
    restore_objects(inner, {fn.qualname: fn}, "crafted.ptl")
    return inner


def test_crafted_setstate_functions_are_bounded():
    """A __setstate__ doubling its stack with tuple unpacking, or objects that together run or create too much, are
    stopped with a FormatError; so are wrong argument counts and non-bool conditions (never a raw Python error)."""
    doubling, size = [], 2
    for _ in range(20):
        doubling += [("TUPLE_CONSTRUCT", size, 0), ("STORE", 3, 0), ("LOAD", 3, 0), ("OP", 0, 0), ("LOAD", 3, 0),
                     ("OP", 0, 0)]
        size *= 2
    unpack = [("prim::TupleUnpack", "", 1)]
    with pytest.raises(ptlite.FormatError, match="grows its stack past 65536 values"):
        _restore(_setstate(doubling + [("RET", 0, 0)], unpack))
    long = [("DROP", 0, 0)] * 2 + [("LOADC", 0, 0), ("DROP", 0, 0)] * 40_000 + [("LOADC", 0, 0), ("RET", 0, 0)]
    with pytest.raises(ptlite.FormatError, match=r"more than 1000000 instructions while loading \(all"):
        _restore(_setstate(long, (), [None]), objects=20)
    wide = [("STORE", 2, 0), ("LOADC", 0, 0), ("SET_ATTR", 4095, 0), ("LOADC", 0, 0), ("RET", 0, 0)]
    with pytest.raises(ptlite.FormatError, match=r"writes more than 1048576 attributes"):
        _restore(_setstate(wide, (), [None]), objects=300)
    with pytest.raises(ptlite.FormatError, match=r"prim::TupleIndex given 3 arguments; it takes 2"):
        _restore(_setstate([("OP", 0, 0)], [("prim::TupleIndex", "", 3)]))
    with pytest.raises(ptlite.FormatError, match="negates a value that is not a bool"):
        _restore(_setstate([("__NOT__", 0, 0)]))


def test_a_quantized_value_inside_a_returned_tuple_is_dequantized(tmp_path):
    class Pair(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.quant, self.dequant, self.conv = tq.QuantStub(), tq.DeQuantStub(), nn.Conv2d(3, 4, 3)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            y = self.conv(self.quant(x))
            return y, self.dequant(y)

    torch.manual_seed(0)
    model = _quantize(Pair(), "qnnpack")
    path = tmp_path / "pair.ptl"
    scripted = torch.jit.script(model)
    scripted._save_for_lite_interpreter(str(path))
    x = torch.randn(1, 3, 8, 8)
    with torch.no_grad():
        want = model(x)[1].numpy()
    captured = ptlite.Module(ptlite.capture(scripted, (x,), method="script"))(x.numpy())
    for how, got in (("the .ptl file", ptlite.load(path)(x.numpy())), ("the capture", captured)):
        assert all(g.dtype == np.float32 for g in got), f"{how}: {[g.dtype for g in got]}"
        assert np.array_equal(got[0], got[1]) and np.abs(got[1] - want).max() <= model.conv.scale * 1.001, how


def test_compare_notes_an_int8_model(engine, tmp_path, capsys):
    """`ptlite compare` on a quantized .ptl file (against the lite interpreter) says that its default tolerance is
    a float one, and passes when the model's results are within the one given."""
    torch.manual_seed(0)
    path = tmp_path / "small.ptl"
    torch.jit.script(_quantize(Small(), engine, [["conv1", "bn1", "relu1"]]))._save_for_lite_interpreter(str(path))
    code = main(["compare", str(path), "--input-shape", "2,3,16,16", "--tolerance", "0.2"])
    out = capsys.readouterr().out
    assert code == 0 and "note:" not in out, out
    main(["compare", str(path), "--input-shape", "2,3,16,16"])
    assert "note:      an int8 model" in capsys.readouterr().out
