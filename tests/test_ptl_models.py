"""The zoo models as PyTorch Mobile .ptl files: torchvision mobilenet_v2, resnet18 and deeplabv3_mobilenet_v3_large,
the LSTM and GRU classifiers and the transformer encoder, saved by torch in each variant (bytecode 8, back-ported to
5-7, flatbuffer), run by ptlite with the lite interpreter's results; resnet18 and mobilenet_v2 converted to
.ptlite with optimize_for_mobile's passes still fused and prepacked, with the same results.

Files are written once per model, when a test first needs them, and shared by the tests of this module.
"""

from pathlib import Path

import pytest
from test_ptl import assert_same, compare, save_variants

import ptlite
from ptlite.backends import reference
from ptlite.format.ptl import read_ptl
from ptlite.tools import zoo
from ptlite.tools.cli import main

torch = pytest.importorskip("torch")
from torch.jit.mobile import _load_for_lite_interpreter  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::FutureWarning"),
              pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:The TorchScript type system:UserWarning")]

ALL_VARIANTS = ("zip", "v5", "v6", "v7", "flatbuffer")
# Every model as torch writes it now (bytecode 8), back-ported to bytecode 5, 6 and 7, and as flatbuffer (the
# control-flow module of test_ptl.py also at bytecode 4).
VARIANTS = {name: ALL_VARIANTS for name in ("resnet18", "mobilenet_v2", "deeplabv3_mobilenet_v3_large",
                                            "lstm_classifier", "gru_classifier", "transformer_encoder")}
# Depthwise-heavy networks: ptlite and the lite interpreter each differ from the float64 result by 6e-6 to 9e-6 of
# the largest output on the test photographs (measured), in different directions, so they differ from each other
# by up to about twice that: float32 rounding in a different summation order, not an error of either.
RTOL = {"mobilenet_v2": 3e-5, "deeplabv3_mobilenet_v3_large": 3e-5}
SLOW = ("deeplabv3_mobilenet_v3_large",)


class ZooFiles:
    """Each zoo model's .ptl files, written (in every variant it runs in) the first time a test asks for one."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: dict[str, dict[str, Path]] = {}

    def __call__(self, name: str, variant: str = "zip") -> Path:
        if name not in self.paths:
            torch.manual_seed(0)
            self.paths[name] = save_variants(getattr(zoo, name)(), self.root, name, VARIANTS[name])
        return self.paths[name][variant]


@pytest.fixture(scope="module")
def zoo_files(tmp_path_factory) -> ZooFiles:
    return ZooFiles(tmp_path_factory.mktemp("ptl_zoo"))


def inputs(name: str) -> tuple:
    if name in zoo.VISION:
        return (zoo.sample_images(1, 224),)
    return zoo.example_inputs(name, batch=2)


CASES = [pytest.param(name, variant, id=f"{name}-{variant}", marks=[pytest.mark.slow] if name in SLOW else [])
         for name, variants in VARIANTS.items() for variant in variants]


@pytest.mark.parametrize("name, variant", CASES)
def test_zoo_model_matches_lite_interpreter(zoo_files, name, variant):
    path = zoo_files(name, variant)
    version = ptlite.load_program(path).metadata["bytecode_version"]
    assert version == {"zip": 8, "flatbuffer": 9}.get(variant) or int(variant[1:])
    compare(path, inputs(name), what=f"{name} ({variant})", rtol=RTOL.get(name, 1e-5))


def test_methods_translated_by_default(zoo_files):
    """forward and the public methods; torchvision's `_forward_impl` (inlined into forward) only on request."""
    path = zoo_files("resnet18")
    assert list(ptlite.load_program(path).methods) == ["forward"]
    both = ptlite.load_program(path, methods=["_forward_impl", "forward"])
    assert list(both.methods) == ["forward", "_forward_impl"]
    assert list(read_ptl(path, ["forward"], evaluate=reference().evaluate).methods) == ["forward"]
    with pytest.raises(ValueError, match="no method nope"):
        ptlite.load_program(path, methods=["nope"])


# In-place operators in the bytecode, and what optimize_for_mobile makes of them (with conv + batch norm folded and
# prepacked): add_ + relu_ fused, hardtanh_ (ReLU6) fused into the convolution.
IN_PLACE = {"resnet18": ("aten::add_.Tensor", "aten::relu_"), "mobilenet_v2": ("aten::hardtanh_",)}
# dense convolutions and linear layers as the default lowering ("cpu") packs them: in panels for the native backend
CONV, LINEAR = (("ptlite::conv2d_packed", "ptlite::linear_packed") if ptlite.backends.get("cpu").name == "native"
                else ("ptlite::conv2d_prepacked", "ptlite::linear_prepacked"))
OPTIMIZED = {"resnet18": (CONV, LINEAR, "aten::_add_relu_.Tensor"),
             "mobilenet_v2": (CONV, "ptlite::conv2d_prepacked", LINEAR)}  # depthwise ones stay prepacked
PASSES = {"resnet18": ("fold_conv_bn", "prepack", "fuse_activations", "fuse_add_relu"),
          "mobilenet_v2": ("remove_dropout", "fold_conv_bn", "prepack", "fuse_activations")}


@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_convert_optimizes_legacy_cnn(zoo_files, tmp_path, name):
    """`ptlite convert model.ptl -o model.ptlite`: issue 3's passes apply to the bytecode's in-place operators as
    to ptlite's own capture, and the optimized file gives the lite interpreter's results."""
    path, out = zoo_files(name), tmp_path / f"{name}.ptlite"
    before = ptlite.load_program(path).operator_names()
    assert set(IN_PLACE[name]) <= set(before), f"{name}: the .ptl no longer has {IN_PLACE[name]}: {before}"
    assert main(["convert", str(path), "-o", str(out)]) == 0
    program = ptlite.load_program(out)
    ops = program.operator_names()
    missing = [op for op in OPTIMIZED[name] if op not in ops]
    left = [op for op in ops if op in ("aten::conv2d", "aten::batch_norm", "aten::linear", "aten::dropout",
                                       *IN_PLACE[name])]
    assert not missing and not left, f"{name} converted: {missing} not made, {left} left; operators {ops}"
    assert set(PASSES[name]) <= set(program.metadata["passes"]), program.metadata["passes"]
    args = inputs(name)
    expected = _load_for_lite_interpreter(str(path))(*args)
    assert_same(ptlite.load(out)(*(a.numpy() for a in args)), expected, f"{name} converted", RTOL.get(name, 1e-5))


@pytest.mark.parametrize("name", ["mobilenet_v2", "lstm_classifier"])
@pytest.mark.parametrize("how", ["ptl", "ptl optimize=False", "ptlite optimize=True"])
def test_weights_made_at_load_are_sealed(zoo_files, tmp_path, name, how):
    """ptlite.load folds and packs a .ptl file's weights (or, with optimize=True, a .ptlite file's) into new arrays:
    they are sealed read-only, as a .ptlite file's mapped weights are, so that kernels keep what they derive from
    them without comparing at every call."""
    from ptlite.ir.weights import frozen

    path = zoo_files(name)
    if how == "ptl":
        module = ptlite.load(path)
    elif how == "ptl optimize=False":
        module = ptlite.load(path, optimize=False)
    else:
        unoptimized = tmp_path / f"{name}.ptlite"
        assert main(["convert", str(path), "-o", str(unoptimized), "--no-optimize"]) == 0
        module = ptlite.load(unoptimized, optimize=True)
        assert "prepack" in module.program.metadata["passes"], "optimize=True did not optimize"
    loose = [k for k, w in module.program.weights.items() if not frozen(w)]
    assert not loose, f"{name} ({how}): weights made at load are writeable: {loose[:5]}"
    assert_same(module(*(a.numpy() for a in inputs(name))),
                _load_for_lite_interpreter(str(path))(*inputs(name)), f"{name} sealed ({how})",
                RTOL.get(name, 1e-5))
