"""The native lowering's Winograd sizes: F(4x4, 3x3) from 20x20 outputs (the reference's WINOGRAD pass), F(2x2, 3x3)
from 10x10 to under 20x20 (WINOGRAD_2X2), direct below; blocking WINOGRAD blocks both, WINOGRAD_2X2 only the small
tiles; results stay PyTorch's."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_close
from torch import nn

import ptlite
from ptlite.backends.native.lower.winograd_2x2 import MIN_SIZE_2X2
from ptlite.backends.numpy.lower.winograd import MIN_SIZE

pytest.importorskip("ptlite.backends.native._native")


class Pyramid(nn.Module):
    """3x3 stride-1 convolutions at 24x24 (F(4x4)), 12x12 (F(2x2), a residual added after it) and 6x6 (direct)."""

    def __init__(self) -> None:
        super().__init__()
        self.large = nn.Conv2d(16, 24, 3, 1, 1)
        self.medium = nn.Conv2d(24, 24, 3, 1, 1)
        self.small = nn.Conv2d(24, 20, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.large(x))
        y = nn.functional.max_pool2d(y, 2)
        y = torch.relu(self.medium(y) + y)
        return self.small(nn.functional.max_pool2d(y, 2))


def _convert(blocklist=()):
    torch.manual_seed(0)
    model = Pyramid().eval()
    x = torch.randn(2, 16, 24, 24)
    program = ptlite.optimize_for_mobile(ptlite.capture(model, (x,)), backend="native",
                                         optimization_blocklist=blocklist)
    with torch.inference_mode():
        want = model(x).numpy()
    return program, x.numpy(), want


def _winograd_weights(program) -> dict[str, tuple]:
    return {name: w.shape for name, w in program.weights.items() if "winograd" in name}


def test_sizes_choose_the_tile():
    assert MIN_SIZE_2X2 <= 12 < MIN_SIZE <= 24 and 6 < MIN_SIZE_2X2
    program, x, want = _convert()
    assert _winograd_weights(program) == {"large.winograd": (36, 16, 24), "medium.winograd_2x2": (16, 24, 24)}
    ops = program.operator_names()
    assert "ptlite::conv2d_winograd_v2" in ops and "ptlite::conv2d_winograd_2x2" in ops
    assert_close(ptlite.Module(program)(x), want, what="Pyramid on the native backend", rtol=1e-4)


@pytest.mark.parametrize("blocked,left", [("WINOGRAD_2X2", {"large.winograd"}), ("WINOGRAD", set())])
def test_blocklist(blocked, left):
    program, x, want = _convert([blocked])
    assert set(_winograd_weights(program)) == left, blocked
    assert_close(ptlite.Module(program)(x), want, what=f"Pyramid without {blocked}", rtol=1e-4)


def _pyramid_ptl(tmp_path):
    """Pyramid saved for PyTorch's lite interpreter (no shapes in the file): its path, an input, eager's output."""
    torch.manual_seed(0)
    model = Pyramid().eval()
    path = tmp_path / "pyramid.ptl"
    torch.jit.script(model)._save_for_lite_interpreter(str(path))
    x = torch.randn(1, 16, 24, 24)
    with torch.inference_mode():
        return path, x.numpy(), model(x).numpy()


def test_first_call_chooses_the_small_tiles_too(tmp_path):
    """A .ptl file has no shapes at load: the first call's specialization picks both tile sizes."""
    path, x, want = _pyramid_ptl(tmp_path)
    module = ptlite.load(path)
    assert not {"ptlite::conv2d_winograd_v2", "ptlite::conv2d_winograd_2x2"} & set(module.program.operator_names())
    assert_close(module(x), want, what="pyramid.ptl first call", rtol=1e-4)
    specialized = module._method("forward").program.operator_names()
    assert {"ptlite::conv2d_winograd_v2", "ptlite::conv2d_winograd_2x2"} <= set(specialized), specialized
    assert_close(module(x), want, what="pyramid.ptl second call", rtol=1e-4)
    np.testing.assert_array_equal(module(x), module(x))


def test_first_call_observes_once_and_blocking_winograd_blocks_both(tmp_path, monkeypatch):
    """The two passes share one run on zeros at a first call; a program optimized with WINOGRAD blocked gets neither
    tile size then either."""
    from ptlite.backends.numpy.lower import winograd

    path, x, want = _pyramid_ptl(tmp_path)
    runs = []
    observe = winograd.observed_shapes
    monkeypatch.setattr(winograd, "observed_shapes", lambda *args: runs.append(1) or observe(*args))
    module = ptlite.load(path)  # (no shapes yet: the passes find none)
    runs.clear()
    module(x)
    assert len(runs) == 1, f"{len(runs)} runs on zeros to observe shapes at the first call"
    blocked = ptlite.Module(ptlite.optimize_for_mobile(ptlite.load_program(path), optimization_blocklist=["WINOGRAD"],
                                                       backend="native"))
    assert_close(blocked(x), want, what="pyramid.ptl, WINOGRAD blocked", rtol=1e-4)
    ops = set(blocked._method("forward").program.operator_names())
    assert not {"ptlite::conv2d_winograd_v2", "ptlite::conv2d_winograd_2x2"} & ops, ops
