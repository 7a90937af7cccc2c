"""torchvision architectures beyond the zoo, each for the operators it brings (layer norm over channels-last
tensors, shifted windows, class tokens, grouped and asymmetric convolutions, squeeze-excitation in other shapes):
captured by torch.export, written, loaded and run as captured and as optimized, on a photograph, against eager
PyTorch.

Weights are re-drawn and batch-norm statistics re-estimated (ptlite.zoo.calibrate) so that outputs are O(1).
Tolerance as test_models.py: max |ptlite - torch| <= 1e-4 x max |torch|. Measured when these tests were written:
at most 6.1e-5 (inception_v3 optimized, 299x299), 4e-5 or less for the others.
"""

from __future__ import annotations

import pytest
import torch
from conftest import assert_close

import ptlite
from ptlite import zoo

torchvision = pytest.importorskip("torchvision")

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning")]

RTOL = 1e-4

# name -> (input size, what it brings); the transformers take only their training size
ARCHITECTURES = {
    "convnext_tiny": (128, "layer norm over the channels of an NHWC permute, GELU, layer scale"),
    "swin_t": (224, "shifted windows (roll, window partition), relative position bias"),
    "vit_b_16": (224, "patch embedding, class token, nn.MultiheadAttention"),
    "maxvit_t": (224, "MBConv with block and grid attention"),
    "regnet_y_400mf": (128, "grouped 3x3 convolutions, squeeze-excitation with ReLU"),
    "efficientnet_v2_s": (128, "fused MBConv (3x3 expansion), SiLU"),
    "inception_v3": (299, "1x7 / 7x1 convolutions, average pooling with padding, channel concatenation"),
    "resnext50_32x4d": (128, "32-group bottlenecks"),
    "mnasnet1_0": (128, "5x5 depthwise convolutions, blocks without activation after projection"),
}


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
        assert_close(actual, expected, what=f"{name} ({brings}), {label}, {size}x{size}", rtol=RTOL)
