"""ptlite.optimize_for_mobile on real models: for every capture method, resnet18, mobilenet_v2 and
mobilenet_v3_small lose their batch norms and dropout, shrink, save and load, and still match eager PyTorch
(max |diff| <= 1e-4 x max |reference| on a photograph). The program given is left as it was."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_close
from torch import nn

import ptlite
from ptlite import zoo
from ptlite.ir import verify

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
    return program, text, ptlite.optimize_for_mobile(program)


def test_batch_norm_and_dropout_are_gone(optimized, method):
    program, _, result = optimized
    assert any("batch_norm" in op for op in op_names(program))
    assert not [op for op in op_names(result) if any(r in op for r in REMOVED_OPS)]
    verify(result)


def test_program_shrinks(optimized):
    program, _, result = optimized
    assert node_count(result) < node_count(program)
    assert len(result.weights) < len(program.weights)
    assert sum(w.nbytes for w in result.weights.values()) < sum(w.nbytes for w in program.weights.values())


def test_passes_are_recorded(optimized):
    _, _, result = optimized
    assert {"fold_conv_bn", "dead_code"} <= set(result.metadata["passes"])
    assert set(result.metadata["passes"]) <= {"remove_dropout", "fold_conv_bn", "dead_code"}


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
    result = ptlite.optimize_for_mobile(ptlite.capture(model, (x,), method=how))
    assert not [op for op in op_names(result) if any(r in op for r in REMOVED_OPS)]
    assert result.metadata["passes"] == ["remove_dropout", "fold_conv_bn", "dead_code"]
    assert_close(ptlite.Module(result)(x.numpy()), expected, what=f"optimized SmallNet ({how})", rtol=RTOL)


@pytest.fixture(scope="module")
def small_program(small):
    model, x, _ = small
    return ptlite.capture(model, (x,), method="trace")


def test_blocklist_skips_passes(small, small_program):
    _, x, expected = small
    result = ptlite.optimize_for_mobile(small_program, optimization_blocklist={"CONV_BN_FUSION", "REMOVE_DROPOUT"})
    assert op_names(result).count("aten::batch_norm") == 2 and op_names(result).count("aten::dropout") == 2
    assert result.metadata["passes"] == []
    result = ptlite.optimize_for_mobile(small_program, optimization_blocklist=["DEAD_CODE"])
    assert "aten::batch_norm" not in op_names(result)
    assert len(result.weights) > len(ptlite.optimize_for_mobile(small_program).weights)  # stale weights remain
    assert result.metadata["passes"] == ["remove_dropout", "fold_conv_bn"]
    assert_close(ptlite.Module(result)(x.numpy()), expected, what="optimized without dead code", rtol=RTOL)


def test_blocklist_accepts_torch_mobile_optimizer_types(small_program):
    from torch.utils.mobile_optimizer import MobileOptimizerType

    result = ptlite.optimize_for_mobile(small_program, optimization_blocklist={MobileOptimizerType.CONV_BN_FUSION})
    assert "aten::batch_norm" in op_names(result) and "aten::dropout" not in op_names(result)


def test_unknown_blocklist_name_lists_the_valid_ones(small_program):
    with pytest.raises(ValueError, match="FUSE_ADD_RELU.*valid names: REMOVE_DROPOUT, CONV_BN_FUSION, DEAD_CODE"):
        ptlite.optimize_for_mobile(small_program, optimization_blocklist=["FUSE_ADD_RELU"])


def test_backend_and_preserved_methods_are_checked(small_program):
    assert ptlite.optimize_for_mobile(small_program, backend="CPU", preserved_methods=["forward"]).methods
    with pytest.raises(ValueError, match="backend 'vulkan'"):
        ptlite.optimize_for_mobile(small_program, backend="vulkan")
    with pytest.raises(ValueError, match="preserved method.*predict.*forward"):
        ptlite.optimize_for_mobile(small_program, preserved_methods=["predict"])


def test_optimizing_again_changes_nothing(small_program):
    once = ptlite.optimize_for_mobile(small_program)
    twice = ptlite.optimize_for_mobile(once)
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
