"""ptlite.optimize_for_mobile on real models: for every capture method, resnet18, mobilenet_v2 and
mobilenet_v3_small lose their batch norms and dropout, shrink, save and load, and still match eager PyTorch
(max |diff| <= 1e-4 x max |reference| on a photograph); constant folding and no-op removal fire where real captures
give them work (recurrent and transformer models, shufflenet, arithmetic on weights) and the results still match.
The program given is left as it was; the blocklist takes PyTorch's MobileOptimizerType names and ptlite's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_close
from models import CASES, flatten
from torch import nn

import ptlite
from ptlite import backends
from ptlite.backends.numpy.lower import PASSES as LOWERING
from ptlite.ir import verify
from ptlite.passes import NOTHING_TO_SKIP, PIPELINE
from ptlite.passes import accepted_names as names_with
from ptlite.tools import zoo

# optimize_for_mobile's passes by blocklist name: the target-independent pipeline's, then the NumPy backend's lowering
PASSES = {**PIPELINE, **LOWERING}


def optimize(program: ptlite.Program, **options) -> ptlite.Program:
    """ptlite.optimize_for_mobile lowering for the NumPy backend, whose passes PASSES names, unless told otherwise
    (tests/backends/native checks the native backend's lowering)."""
    return ptlite.optimize_for_mobile(program, **{"backend": "numpy", **options})


def accepted_names() -> dict[str, str]:
    return names_with({name: f"the {p.name} pass" for name, p in LOWERING.items()})


RTOL = 1e-4
MODELS = ["resnet18", "mobilenet_v2", "mobilenet_v3_small"]
METHODS = ["export", "script", "trace"]
REMOVED_OPS = ("batch_norm", "dropout")


def op_names(program: ptlite.Program) -> list[str]:
    return [node.op for graph in program.methods.values() for node in graph.walk()]


def node_count(program: ptlite.Program) -> int:
    return len(op_names(program))


@pytest.fixture(scope="module")
def image() -> torch.Tensor:
    return zoo.sample_images(1, 224)


@pytest.fixture(scope="module", params=MODELS)
def model_case(request, image):
    """(name, model, eager output) for one zoo model, built once for the module."""
    model = getattr(zoo, request.param)()
    with torch.inference_mode():
        expected = model(image).numpy()
    return request.param, model, expected


@pytest.fixture(scope="module", params=METHODS)
def method(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def optimized(model_case, method, image):
    """(captured program, its text before optimizing, optimized program) for one model and capture method."""
    name, model, _ = model_case
    program = ptlite.capture(model, (image,), method=method)
    text = str(program)
    return program, text, optimize(program)


def test_batch_norm_and_dropout_are_gone(optimized, method):
    program, _, result = optimized
    assert any("batch_norm" in op for op in op_names(program))
    assert not [op for op in op_names(result) if any(r in op for r in REMOVED_OPS)]
    verify(result)


def test_program_shrinks(optimized):
    program, _, result = optimized
    assert node_count(result) < node_count(program)
    assert len(result.weights) < len(program.weights)
    # Winograd-transformed weights are 4x larger by design (docs/architecture.md); everything else shrinks
    kept = sum(w.nbytes for name, w in result.weights.items() if not name.endswith(".winograd"))
    assert kept < sum(w.nbytes for w in program.weights.values())


def test_passes_are_recorded(optimized):
    _, _, result = optimized
    assert {"fold_conv_bn", "dead_code"} <= set(result.metadata["passes"])
    assert set(result.metadata["passes"]) <= {p.name for p in PASSES.values()}


def test_program_given_is_unchanged(optimized):
    program, text, _ = optimized
    assert str(program) == text
    assert "passes" not in program.metadata


def test_matches_eager_after_save_and_load(optimized, model_case, image, tmp_path_factory):
    name, _, expected = model_case
    _, _, result = optimized
    path = tmp_path_factory.mktemp("optimized") / f"{name}.ptlite"
    ptlite.save(result, path)
    module = ptlite.load(path)
    assert module.metadata["passes"] == result.metadata["passes"]
    assert_close(module(image.numpy()), expected, what=f"optimized {name} ({result.metadata['capture']})", rtol=RTOL)


# --------------------------------------------------------------------------- a small model, and the API's options

class SmallNet(nn.Module):
    """Conv + BatchNorm2d, dropout, and Linear + BatchNorm1d (the linear fold)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Dropout(0.2))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(8 * 6 * 6, 16), nn.BatchNorm1d(16), nn.ReLU(),
                                  nn.Dropout(), nn.Linear(16, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


@pytest.fixture(scope="module")
def small():
    torch.manual_seed(0)
    model = zoo.calibrate(SmallNet(), sizes=(8,))
    x = torch.randn(2, 3, 8, 8)
    with torch.inference_mode():
        expected = model(x).numpy()
    return model, x, expected


@pytest.mark.parametrize("how", METHODS)
def test_small_net_folds_linear_batch_norm_too(small, how):
    model, x, expected = small
    result = optimize(ptlite.capture(model, (x,), method=how))
    assert not [op for op in op_names(result) if any(r in op for r in REMOVED_OPS)]
    # the target-independent passes settle first (dead code drops the folded batch norms), then the lowering
    assert result.metadata["passes"] == ["remove_dropout", "fold_conv_bn", "dead_code", "prepack", "fuse_activations"]
    assert_close(ptlite.Module(result)(x.numpy()), expected, what=f"optimized SmallNet ({how})", rtol=RTOL)


@pytest.fixture(scope="module")
def small_program(small):
    model, x, _ = small
    return ptlite.capture(model, (x,), method="trace")


def test_blocklist_skips_passes(small, small_program):
    _, x, expected = small
    result = optimize(small_program, optimization_blocklist={"CONV_BN_FUSION", "REMOVE_DROPOUT"})
    assert op_names(result).count("aten::batch_norm") == 2 and op_names(result).count("aten::dropout") == 2
    assert result.metadata["passes"] == ["prepack", "dead_code"]  # nothing to fuse: batch norms follow the layers
    result = optimize(small_program, optimization_blocklist=["DEAD_CODE"])
    assert "aten::batch_norm" not in op_names(result)
    assert len(result.weights) > len(optimize(small_program).weights)  # stale weights remain
    assert result.metadata["passes"] == ["remove_dropout", "fold_conv_bn", "prepack", "fuse_activations"]
    assert_close(ptlite.Module(result)(x.numpy()), expected, what="optimized without dead code", rtol=RTOL)


def test_blocklist_accepts_torch_mobile_optimizer_types(small_program):
    from torch.utils.mobile_optimizer import MobileOptimizerType

    result = optimize(small_program, optimization_blocklist={MobileOptimizerType.CONV_BN_FUSION})
    assert "aten::batch_norm" in op_names(result) and "aten::dropout" not in op_names(result)


def test_unknown_blocklist_name_lists_the_valid_ones(small_program):
    """The valid names: the pipeline's, the lowering's of the backend lowered for, then every other backend's (one
    blocklist serves whichever backend a program is lowered for)."""
    valid = ", ".join(names_with(backends.lowering_passes(backends.get("numpy"))))
    assert valid.startswith("REMOVE_DROPOUT, REMOVE_NOOPS, FOLD_CONSTANTS, CONV_BN_FUSION, FUSE_ADD_RELU, DEAD_CODE, "
                            "INSERT_FOLD_PREPACK_OPS, ")
    assert {"WINOGRAD", "FUSE_POINTWISE_DEPTHWISE", "FUSE_SQUEEZE_EXCITE", "MEMORY_PLAN"} <= set(valid.split(", "))
    with pytest.raises(ValueError, match="FUSE_EVERYTHING.*valid names: " + valid):
        optimize(small_program, optimization_blocklist=["FUSE_EVERYTHING", "DEAD_CODE"])


def test_every_mobile_optimizer_type_is_accepted(small_program):
    """torch's enum members and the names with nothing to skip in ptlite are accepted; the latter change nothing."""
    from torch.utils.mobile_optimizer import MobileOptimizerType

    members = list(MobileOptimizerType.__members__.values())
    assert {m.name for m in members} <= set(accepted_names())
    default = optimize(small_program)
    unskipped = [m for m in members if m.name not in PASSES] + [n for n in NOTHING_TO_SKIP if n not in PASSES]
    result = optimize(small_program, optimization_blocklist=unskipped)
    assert op_names(result) == op_names(default) and result.metadata["passes"] == default.metadata["passes"]
    result = optimize(small_program, optimization_blocklist=members)  # all of them
    assert "aten::batch_norm" in op_names(result) and "aten::dropout" in op_names(result)


def test_architecture_doc_lists_every_accepted_name():
    """docs/architecture.md's blocklist table: a row per accepted name saying which pass it skips (or nothing)."""
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "architecture.md").read_text()
    rows = {line.split("|")[1].strip(" `"): line.split("|")[2] for line in text.splitlines()
            if line.startswith("| `") and line.split("|")[1].strip(" `") in accepted_names()}
    assert set(rows) == set(accepted_names()), f"docs/architecture.md misses {set(accepted_names()) - set(rows)}"
    for name, what in rows.items():
        expected = f"`{PASSES[name].name}`" if name in PASSES else "nothing"
        assert expected in what, f"docs/architecture.md: {name} should say {expected}, says {what.strip()!r}"


def test_backend_and_preserved_methods_are_checked(small_program):
    assert optimize(small_program, backend="CPU", preserved_methods=["forward"]).methods
    with pytest.raises(ValueError, match="backend 'vulkan'"):
        optimize(small_program, backend="vulkan")
    with pytest.raises(ValueError, match="preserved method.*predict.*forward"):
        optimize(small_program, preserved_methods=["predict"])


def test_optimizing_again_changes_nothing(small_program):
    once = optimize(small_program)
    twice = optimize(once)
    assert op_names(twice) == op_names(once) and twice.weights.keys() == once.weights.keys()
    assert twice.metadata["passes"] == once.metadata["passes"]
    assert np.all([twice.weights[k] is once.weights[k] for k in once.weights])


def test_optimizes_without_torch(small, small_program, tmp_path):
    from test_torch_free import _run_without_torch

    _, x, expected = small
    ptlite.save(small_program, tmp_path / "captured.ptlite")
    np.save(tmp_path / "x.npy", x.numpy())
    result = _run_without_torch(f"""
        import numpy as np, ptlite
        program = ptlite.optimize_for_mobile(ptlite.load_program({str(tmp_path / 'captured.ptlite')!r}))
        ptlite.save(program, {str(tmp_path / 'optimized.ptlite')!r})
        np.save({str(tmp_path / 'y.npy')!r}, ptlite.load({str(tmp_path / 'optimized.ptlite')!r})(
            np.load({str(tmp_path / 'x.npy')!r})))
        assert "torch" not in sys.modules, "ptlite imported torch"
    """)
    assert result.returncode == 0, result.stderr
    assert_close(np.load(tmp_path / "y.npy"), expected, what="optimized without torch", rtol=RTOL)


# --------------------------------------------------------------------------- constant folding and no-op removal

# (model, capture method, passes that must fire, operators that must be gone or fewer afterwards)
FIRING = [
    ("lstm_classifier", "script", {"fold_constants"}, {"prim::RaiseException", "prim::If", "aten::dim"}),
    ("lstm_classifier", "export", {"fold_constants"}, {"aten::zeros"}),
    ("transformer_encoder", "export", {"remove_noops"}, {"aten::contiguous"}),
    ("transformer_encoder", "script", {"remove_noops", "fold_constants"}, {"aten::contiguous", "prim::If"}),
    ("shufflenet_v2_x1_0", "trace", {"remove_noops"}, {"aten::contiguous"}),
]


@pytest.mark.parametrize("name, how, passes, fewer", FIRING, ids=[f"{c[0]}-{c[1]}" for c in FIRING])
def test_folding_and_noop_removal_on_real_captures_match_eager(name, how, passes, fewer):
    case = CASES[name]
    model, inputs = case.build(), case.inputs(1, None)
    with torch.inference_mode():
        expected = flatten(model(*inputs))
    program = ptlite.capture(model, inputs, method=how)
    result = optimize(program)
    assert passes <= set(result.metadata["passes"]), f"{name} ({how}): passes {result.metadata['passes']}"
    for op in fewer:
        assert op_names(result).count(op) < op_names(program).count(op), f"{name} ({how}): {op} not fewer"
    outputs = flatten(ptlite.Module(result)(*[x.numpy() for x in inputs]))
    for i, (got, want) in enumerate(zip(outputs, expected, strict=True)):
        assert_close(got, want, what=f"optimized {name} ({how}) output {i}", rtol=RTOL)


class WeightMath(nn.Module):
    """Arithmetic on parameters in forward (a scaled, transposed weight; a reshaped, doubled buffer): torch.export
    keeps it as operators, fold_constants turns it into weights."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(6, 8))
        self.scale = nn.Parameter(torch.rand(6) + 0.5)
        self.register_buffer("offset", torch.arange(6.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = (self.weight * self.scale[:, None]).t()
        return x @ w + self.offset.reshape(1, -1) * 2


@pytest.mark.parametrize("how", METHODS)
def test_arithmetic_on_weights_is_folded(how):
    torch.manual_seed(0)
    model, x = WeightMath().eval(), torch.randn(3, 8)
    with torch.inference_mode():
        expected = model(x).numpy()
    result = optimize(ptlite.capture(model, (x,), method=how))
    assert [op for op in op_names(result) if op != "prim::Constant"] == ["aten::matmul", "aten::add.Tensor"]
    if how == "export":  # TorchScript's freezing folds these already
        assert "fold_constants" in result.metadata["passes"]
    assert_close(ptlite.Module(result)(x.numpy()), expected, what=f"optimized WeightMath ({how})", rtol=RTOL)


def test_export_opnames_lists_the_prepacked_and_fused_operators(tmp_path):
    model = zoo.resnet18()
    result = optimize(ptlite.capture(model, (zoo.sample_images(1, 64),), method="trace"))
    path = tmp_path / "resnet18.ptlite"
    ptlite.save(result, path)
    names = ptlite.export_opnames(path)
    assert {"ptlite::conv2d_prepacked", "ptlite::linear_prepacked", "aten::_add_relu.Tensor"} <= set(names), names
    assert not {"aten::conv2d", "aten::_convolution", "aten::linear", "aten::relu", "aten::relu_"} & set(names), names


def test_inverted_residual_blocks_run_fused(tmp_path):
    """MobileNetV2's expand (1x1) and depthwise convolutions, with their ReLU6s, become one fused operator per block
    (the first block has no expansion); the program still gives eager PyTorch's result."""
    model = zoo.mobilenet_v2()
    x = zoo.sample_images(1, 96)
    result = optimize(ptlite.capture(model, (x,), method="export"))
    ops = [n.op for n in result.forward.nodes]
    assert ops.count("ptlite::conv2d_pointwise_depthwise") == 16, ops
    assert "fuse_pointwise_depthwise" in result.metadata["passes"]
    path = tmp_path / "mobilenet_v2.ptlite"
    ptlite.save(result, path)
    assert "ptlite::conv2d_pointwise_depthwise" in ptlite.export_opnames(path)
    with torch.inference_mode():
        expected = model(x).numpy()
    assert_close(ptlite.load(path)(x.numpy()), expected, what="mobilenet_v2 with fused blocks", rtol=RTOL)


@pytest.mark.parametrize("name", ["efficientnet_b0", "mobilenet_v3_large"])
def test_squeeze_excitation_blocks_run_fused(name, tmp_path):
    """Every squeeze-and-excitation block (pool, two 1x1 convolutions, sigmoid or hardsigmoid gate, multiply)
    becomes one ptlite::squeeze_excite, in programs captured by torch.export and by TorchScript; the program still
    gives eager PyTorch's result."""
    model = getattr(zoo, name)()
    x = zoo.sample_images(1, 96)
    with torch.inference_mode():
        expected = model(x).numpy()
    blocks = sum(type(m).__name__ == "SqueezeExcitation" for m in model.modules())
    for method in ("export", "script"):
        result = optimize(ptlite.capture(model, (x,), method=method))
        ops = [n.op for n in result.forward.walk()]
        assert ops.count("ptlite::squeeze_excite") == blocks, (name, method, ops)
        assert not {"aten::sigmoid", "aten::hardsigmoid", "aten::mul.Tensor"} & set(ops), (name, method, ops)
        path = tmp_path / f"{name}_{method}.ptlite"
        ptlite.save(result, path)
        assert "ptlite::squeeze_excite" in ptlite.export_opnames(path)
        assert_close(ptlite.load(path)(x.numpy()), expected, what=f"{name} ({method}) with fused SE blocks",
                     rtol=RTOL)
