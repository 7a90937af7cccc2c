"""Winograd's error budget (backends/numpy/lower/winograd_budget.py): a lowering whose Winograd layers take the
outputs too far from exact arithmetic keeps its earliest ones on im2col, at optimize time and at a first call; a
shallow network whose rounding stays under the floor keeps them all. Distances are measured against eager PyTorch in
float64 on a photograph (not the budget's own random probe), as the root mean square of the difference relative to
the exact output's."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import ptlite
from ptlite.backends.numpy.lower import winograd_budget
from ptlite.backends.numpy.lower.winograd_budget import EXACT_KEY, winograd_layers
from ptlite.tools.zoo import sample_images

BACKENDS = ["numpy", "native"]


class Chain(nn.Module):
    """A stem, then `depth` residual 3x3 convolutions of 16 channels at the input's size (each a Winograd
    candidate from 20x20): Winograd's rounding on few channels, carried through many layers."""

    def __init__(self, depth: int = 8) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.body = nn.ModuleList(nn.Conv2d(16, 16, 3, padding=1) for _ in range(depth))
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    m.weight.normal_(0.0, math.sqrt(1.0 / m.weight[0].numel()))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.stem(x))
        for conv in self.body:
            y = y + torch.relu(conv(y))
        return y


def _distance(output: np.ndarray, exact: np.ndarray) -> float:
    return float(np.sqrt(np.mean((output - exact) ** 2) / np.mean(exact ** 2)))


@pytest.fixture(scope="module")
def chain():
    model = Chain().eval()
    photo = sample_images(1, 24, offset=3)
    with torch.inference_mode():
        exact = Chain().eval().double()(photo.double()).numpy()
    return model, photo, exact


@pytest.fixture
def no_floor(monkeypatch):
    """The budget's ratio alone (the chain's own rounding is under the floor that spares shallow networks)."""
    monkeypatch.setattr(winograd_budget, "FLOOR", 0.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_budget_keeps_the_optimized_program_near_the_captured_one(chain, no_floor, monkeypatch, backend):
    if backend == "native":
        from conftest import _library

        _library()  # skipped, saying why, where the native backend is not built
    model, photo, exact = chain
    captured = ptlite.capture(model, (photo,))
    base = _distance(ptlite.Module(captured)(photo.numpy()), exact)
    program = ptlite.optimize_for_mobile(captured, backend=backend)
    distance = _distance(ptlite.Module(program)(photo.numpy()), exact)
    assert distance <= 1.5 * base, (
        f"Chain on {backend}: optimized {distance:.2e} from float64, {distance / base:.2f}x the captured program's "
        f"{base:.2e} (Winograd layers kept: {winograd_layers(program)}, left out: {program.metadata.get(EXACT_KEY)})")
    left_out = program.metadata.get(EXACT_KEY, [])
    order = [f"body.{i}" for i in range(len(model.body))]
    assert [name.removesuffix(".weight") for name in left_out] == order[:len(left_out)], \
        f"the earliest Winograd layers are left out first, got {left_out}"
    if backend == "numpy":  # without the budget, this chain is well outside it: the test can fail
        monkeypatch.setattr(winograd_budget, "RATIO", math.inf)
        unbounded = ptlite.optimize_for_mobile(captured, backend=backend)
        assert not unbounded.metadata.get(EXACT_KEY) and len(winograd_layers(unbounded)) == len(model.body)
        all_winograd = _distance(ptlite.Module(unbounded)(photo.numpy()), exact)
        assert left_out and all_winograd > 1.5 * base, (all_winograd, base)


def test_a_first_call_keeps_to_the_same_budget(chain, no_floor):
    """A TorchScript capture has no static shapes: Winograd is chosen at the first call, within the budget."""
    model, photo, exact = chain
    captured = ptlite.capture(model, (photo,), method="script")
    base = _distance(ptlite.Module(captured)(photo.numpy()), exact)
    module = ptlite.Module(ptlite.optimize_for_mobile(captured, backend="numpy"))
    assert not winograd_layers(module.program)  # sizes unknown until the call
    distance = _distance(module(photo.numpy()), exact)
    specialized = module._methods["forward"].program
    assert specialized.metadata.get(EXACT_KEY)  # the budget left layers out
    assert distance <= 1.5 * base, f"first call: {distance:.2e} from float64, the captured program {base:.2e}"


def test_a_shallow_network_keeps_every_winograd_layer(chain):
    """Under the floor (1e-6 relative), Winograd's extra rounding is not worth giving up its speed for."""
    model, photo, _ = chain
    program = ptlite.optimize_for_mobile(ptlite.capture(model, (photo,)), backend="numpy")
    assert EXACT_KEY not in program.metadata
    assert len(winograd_layers(program)) == len(model.body)


def test_the_choice_is_saved_and_honoured_after_loading(chain, no_floor, tmp_path):
    model, photo, _ = chain
    program = ptlite.optimize_for_mobile(ptlite.capture(model, (photo,)), backend="numpy")
    ptlite.save(program, tmp_path / "chain.ptlite")
    loaded = ptlite.load(tmp_path / "chain.ptlite", backends=("numpy",))
    np.testing.assert_array_equal(loaded(photo.numpy()), ptlite.Module(program)(photo.numpy()))
    specialized = loaded._methods["forward"].program
    assert specialized.metadata[EXACT_KEY] == program.metadata[EXACT_KEY]
    assert winograd_layers(specialized) == winograd_layers(program)


def test_blocking_winograd_measures_nothing(chain, no_floor, monkeypatch):
    def fail(*args):
        raise AssertionError("the budget measured a program with WINOGRAD blocked")

    monkeypatch.setattr(winograd_budget._Probe, "make", fail)
    model, photo, _ = chain
    program = ptlite.optimize_for_mobile(ptlite.capture(model, (photo,)), backend="numpy",
                                         optimization_blocklist=("WINOGRAD",))
    assert not winograd_layers(program) and EXACT_KEY not in program.metadata


def test_a_later_lowering_measures_only_the_layers_it_adds(chain, monkeypatch):
    """A first call's specialization of a program whose Winograd layers an earlier lowering chose (and measured)
    adds none: nothing to measure again."""
    from ptlite.backends import get
    from ptlite.runtime.interpreter import runner

    made = []
    make = winograd_budget._Probe.make
    monkeypatch.setattr(winograd_budget._Probe, "make", classmethod(lambda cls, *a: made.append(1) or make(*a)))
    model, photo, _ = chain
    program = ptlite.optimize_for_mobile(ptlite.capture(model, (photo,)), backend="numpy")
    assert len(made) == 1 and winograd_layers(program)
    assert winograd_budget.within_budget(program, runner(get("numpy")), frozenset(), lambda p: "unchanged") \
        == "unchanged"
    assert len(made) == 1
