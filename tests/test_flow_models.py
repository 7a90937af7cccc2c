"""Optical flow: torchvision's RAFT (raft_small) through every capture method PyTorch can apply to it, written,
loaded and run torch-free, against eager PyTorch on pairs of photographs whose second frame is the first moved by a
few pixels.

RAFT brings `aten::grid_sampler` (its correlation lookup samples each level of the correlation pyramid around every
pixel's current match, align_corners=True), `aten::meshgrid.indexing` (the coordinate grid and the lookup window),
instance norm (raft_small's feature encoder), average pooling of the correlation volume, a convolutional GRU, and, when
scripted, a loop over `num_flow_updates` and a module attribute it sets while running (the correlation pyramid, kept
as the loaded module's state). It returns a list of flows, one per update (12 by default), each (N, 2, H, W).

- **script** keeps the update loop and the `num_flow_updates` argument: checked with the default 12 updates on one
  pair, and with 2 updates on two pairs at 160x160 (sizes are dynamic).
- **export** and **trace** unroll the loop for the count they were captured with. Capturing 12 unrolled updates costs
  several times what 3 do (torch.export: about 10 s against 3 s on two busy cores; the 12 captured updates matched as
  closely when measured), so here they capture the model calling itself with FEW_UPDATES (a wrapper; the operators
  are the same). trace freezes RAFT's shape checks (torch's TracerWarning, and ptlite's when method="trace" is
  asked for): they only raise for bad shapes, so the trace is right for any pair RAFT accepts (checked at batch 2).
- The export capture optimized for the default backend (what `ptlite convert` writes) matches too.

Tolerance as test_models.py: max |ptlite - torch| <= 1e-4 x max |torch| per output. The error does not grow over
the updates: measured on one pair with all 12, every flow is within 2.3e-6 to 4.9e-6 of eager PyTorch's largest
value, and against a float64 run of the model ptlite's flows are 1.8e-6 to 3.3e-6 away where PyTorch's float32 ones
are 2e-6 to 3e-6 away (float32 summation order, no drift). `pytest tests/test_flow_models.py -s` prints the largest
difference of each check.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from conftest import assert_close
from torch import nn

import ptlite

torchvision = pytest.importorskip("torchvision")

RTOL = 1e-4
SIZE = 128  # RAFT's smallest frames: its 4-level correlation pyramid needs 16x16 features at 1/8 resolution
SHIFT = (2, 3)  # (down, right): the second frame's view moved by this many pixels, so the scene moves up and left
FEW_UPDATES = 3  # flow updates unrolled by the export and trace captures here


def raft_small() -> nn.Module:
    """torchvision's raft_small (eval) with its own random initialisation, seeded. Its encoders normalise with
    instance norm (features) or not at all (context), so nothing needs calibrating: on these photographs the flows
    are O(1) to O(10) pixels (the first update's largest about 1.7, the twelfth's about 17)."""
    torch.manual_seed(0)
    return torchvision.models.optical_flow.raft_small(weights=None).eval()


class FewerUpdates(nn.Module):
    """RAFT called with a fixed number of flow updates (what export and trace unroll)."""

    def __init__(self, raft: nn.Module, updates: int) -> None:
        super().__init__()
        self.raft, self.updates = raft, updates

    def forward(self, image1: torch.Tensor, image2: torch.Tensor) -> list[torch.Tensor]:
        return self.raft(image1, image2, num_flow_updates=self.updates)


def _photographs() -> list[np.ndarray]:
    """scikit-learn's sample photographs (427 x 640 RGB) as floats in [0, 1]; smooth random images without it."""
    try:
        from sklearn.datasets import load_sample_image
    except ImportError:
        gen = torch.Generator().manual_seed(0)
        coarse = torch.rand(2, 3, 16, 24, generator=gen)
        smooth = torch.nn.functional.interpolate(coarse, size=(427, 640), mode="bilinear", align_corners=False)
        return list(smooth.permute(0, 2, 3, 1).numpy())
    return [np.asarray(load_sample_image(n), dtype=np.float32) / 255.0 for n in ("china.jpg", "flower.jpg")]


def frame_pairs(batch: int, size: int = SIZE, shift: tuple[int, int] = SHIFT) -> tuple[torch.Tensor, torch.Tensor]:
    """`batch` pairs of size x size frames cut from the photographs, the second `shift` pixels down and right of the
    first (a camera pan: the true flow, (dx, dy), is (-shift[1], -shift[0]) everywhere), scaled to [-1, 1] as RAFT's
    transforms do."""
    photos = _photographs()
    first, second = [], []
    for i in range(batch):
        photo = photos[i % 2]
        top, left = 30 + 40 * (i // 2), 80 + 60 * (i // 2)
        first.append(photo[top:top + size, left:left + size])
        second.append(photo[top + shift[0]:top + shift[0] + size, left + shift[1]:left + shift[1] + size])

    def tensor(frames: list[np.ndarray]) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(np.stack(frames).transpose(0, 3, 1, 2) * 2 - 1, np.float32))

    return tensor(first), tensor(second)


_models: dict[str, nn.Module] = {}
_captured: dict[str, ptlite.Program] = {}


def _model(method: str) -> nn.Module:
    """The model each method captures: RAFT itself for script, RAFT with FEW_UPDATES for export and trace."""
    key = "raft" if method == "script" else "few"
    if key not in _models:
        _models[key] = raft_small() if key == "raft" else FewerUpdates(_model("script"), FEW_UPDATES).eval()
    return _models[key]


def _capture(method: str) -> ptlite.Program:
    if method not in _captured:
        with warnings.catch_warnings():
            # trace: torch's TracerWarnings and ptlite's UserWarning about RAFT's frozen shape checks
            warnings.simplefilter("ignore")
            _captured[method] = ptlite.capture(_model(method), frame_pairs(1), method=method)
    return _captured[method]


_expected: dict[tuple, list[np.ndarray]] = {}


def _torch(model: nn.Module, inputs: tuple, key: tuple) -> list[np.ndarray]:
    """Eager PyTorch's flows, once per model and inputs (export and trace capture the same model)."""
    key = (id(model), *key)
    if key not in _expected:
        with torch.inference_mode():
            _expected[key] = [flow.numpy() for flow in model(*inputs)]
    return _expected[key]


def _compare(what: str, module: ptlite.Module, model: nn.Module, inputs: tuple, key: tuple) -> None:
    """ptlite's flows for `inputs` (`key` names them) against eager PyTorch's, each within the tolerance."""
    expected = _torch(model, inputs, key)
    actual = module(*[x.numpy() if isinstance(x, torch.Tensor) else x for x in inputs])
    assert isinstance(actual, list) and len(actual) == len(expected), (
        f"raft_small ({what}): {type(actual).__name__} of {len(actual)} flows, torch gives a list of {len(expected)}")
    worst = 0.0
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert_close(a, e, what=f"raft_small ({what}) flow {i + 1} of {len(expected)} {e.shape}", rtol=RTOL)
        worst = max(worst, float(np.abs(a - e).max() / np.abs(e).max()))
    print(f"raft_small ({what}): {len(expected)} flows, largest max |diff| / max |torch| {worst:.2g}")


def _load(program: ptlite.Program, path) -> ptlite.Module:
    ptlite.save(program, path)
    return ptlite.load(path)


@pytest.mark.parametrize("method", ["export", "script", "trace"])
def test_raft_small_matches_torch(method, tmp_path):
    module = _load(_capture(method), tmp_path / f"raft_small.{method}.ptlite")
    model = _model(method)
    _compare(method, module, model, frame_pairs(1), ("batch 1",))
    if method == "export":  # static shapes: another batch is refused, naming the input
        with pytest.raises(ptlite.InputError, match="static shapes"):
            module(*[x.numpy() for x in frame_pairs(2)])
    elif method == "trace":
        _compare(f"{method}, batch 2", module, model, frame_pairs(2), ("batch 2",))
    else:
        # The loop and its int argument are kept, and sizes are dynamic. The correlation pyramid the model set on
        # itself in the call before (module state) was for other frames, of another size: this call sets its own.
        _compare(f"{method}, 2 updates, batch 2, 160x160", module, model, (*frame_pairs(2, 160), 2),
                 ("batch 2, 160, 2 updates",))


def test_raft_small_optimized_matches_torch(tmp_path):
    """What `ptlite convert` writes (optimize_for_mobile for the default backend) matches, on a second call too
    (the memory plan's buffers reused)."""
    program = ptlite.optimize_for_mobile(_capture("export"))
    module = _load(program, tmp_path / "raft_small.optimized.ptlite")
    what = f"export, optimized for {program.metadata['backend']}"
    for call in ("", ", second call"):
        _compare(what + call, module, _model("export"), frame_pairs(1), ("batch 1",))
