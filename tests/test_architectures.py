"""torchvision architectures beyond the zoo, each for the operators it brings (layer norm over channels-last
tensors, shifted windows, class tokens, grouped and asymmetric convolutions, squeeze-excitation in other shapes):
captured by torch.export, written, loaded and run as captured and as optimized, on a photograph, against eager
PyTorch.

Weights are re-drawn and batch-norm statistics re-estimated (ptlite.tools.zoo.calibrate) so that outputs are O(1).
Tolerance as test_models.py: max |ptlite - torch| <= 1e-4 x max |torch|. `pytest tests/test_architectures.py -s`
prints each difference (when these tests were written: at most 5.5e-5, inception_v3 optimized at 299x299).
"""

from __future__ import annotations

import pytest
import torch
from architectures import ARCHITECTURES
from conftest import assert_close

import ptlite
from ptlite.tools import zoo

torchvision = pytest.importorskip("torchvision")

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning")]

RTOL = 1e-4


def _build(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    kwargs = {"aux_logits": False, "init_weights": False} if name == "inception_v3" else {}
    model = getattr(torchvision.models, name)(weights=None, **kwargs)
    return zoo.calibrate(model, sizes=(ARCHITECTURES[name][0],), batch=2)


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_architecture_matches_torch(name, tmp_path):
    size, brings = ARCHITECTURES[name]
    model = _build(name)
    image = zoo.sample_images(1, size)
    with torch.inference_mode():
        expected = model(image).numpy()
    captured = ptlite.capture(model, (image,), method="export")
    for label, program in (("captured", captured), ("optimized", ptlite.optimize_for_mobile(captured))):
        path = tmp_path / f"{name}.{label}.ptlite"
        ptlite.save(program, path)
        actual = ptlite.load(path)(image.numpy())
        print(f"{name} {label}: max |diff| / max |torch| = {abs(actual - expected).max() / abs(expected).max():.2g}")
        assert_close(actual, expected, what=f"{name} ({brings}), {label}, {size}x{size}", rtol=RTOL)
