"""benchmarks/bench_headroom.py: its stand-ins must reach the kernels they stand in for (a refactor that renames
what they patch would otherwise make every ratio 1.0, or "no such work"), apply only inside their context, and be
reported as absent for a model without that work."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import ptlite

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_headroom.py"


def _load_script():
    if str(SCRIPT.parent) not in sys.path:  # the script imports bench_models from its own directory, as run
        sys.path.insert(0, str(SCRIPT.parent))
    spec = importlib.util.spec_from_file_location("bench_headroom", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Block(nn.Module):
    """An inverted-residual block: 1x1 expansion, depthwise 3x3, activation after each (fused by the optimizer
    into ptlite::conv2d_pointwise_depthwise), then a 1x1 projection."""

    def __init__(self, act: type[nn.Module]) -> None:
        super().__init__()
        self.expand, self.dw, self.project = nn.Conv2d(3, 12, 1), nn.Conv2d(12, 12, 3, padding=1, groups=12), \
            nn.Conv2d(12, 4, 1)
        self.act1, self.act2 = act(), act()

    def forward(self, x):
        y = self.project(self.act2(self.dw(self.act1(self.expand(x)))))
        return {"out": y, "mean": y.mean()}  # a dict, as segmentation models return


def _file(tmp_path: Path, act: type[nn.Module]) -> str:
    torch.manual_seed(0)
    program = ptlite.capture(Block(act).eval(), (torch.randn(1, 3, 16, 16),), method="export")
    program = ptlite.optimize_for_mobile(program, backend="numpy")  # the NumPy backend's kernels have stand-ins
    assert "ptlite::conv2d_pointwise_depthwise" in ptlite.export_opnames(program)
    path = tmp_path / f"{act.__name__}.ptlite"
    ptlite.save(program, path)
    return str(path)


def test_standins_change_the_output_only_inside_their_context(tmp_path):
    headroom = _load_script()
    module = ptlite.load(_file(tmp_path, nn.SiLU))
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    before = headroom._flat(module(x))
    for name, standin in headroom.STANDINS.items():
        with standin():
            during = headroom._flat(module(x))
        assert not np.array_equal(during, before), f"the {name} stand-in did not reach the block's kernel"
        np.testing.assert_array_equal(headroom._flat(module(x)), before, err_msg=f"{name} stand-in left in place")


def test_measure_reports_each_standin_and_work_the_model_lacks(tmp_path):
    headroom = _load_script()
    silu = headroom.measure(_file(tmp_path, nn.SiLU), runs=2, warmup=1)
    assert set(silu) == set(headroom.STANDINS)
    for name, (plain, swapped, ratio) in silu.items():
        assert plain > 0 and swapped > 0 and ratio > 0, name
    relu = headroom.measure(_file(tmp_path, nn.ReLU), runs=2, warmup=1)
    assert relu["silu"] is None  # no SiLU to stand in for
    assert relu["depthwise"] is not None
    table = headroom.table({"relu_block": relu})
    assert "| relu_block | silu | - | - | no such work in the model |" in table
    assert relu["silu + depthwise"] is None  # not measured: it would repeat the depthwise row
    assert "| relu_block | silu + depthwise | - | - | the model lacks one of the two |" in table
