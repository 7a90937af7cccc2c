"""Reference models for tests, benchmarks and the CLI: real architectures with weights that give O(1) outputs.

Nothing can be downloaded, so weights are random. Random initialisation alone makes some torchvision models
output values near 1e-9, which would make any comparison meaningless; `calibrate` re-draws the weights with
variance-preserving scales, gives batch-norm layers random affine parameters, and re-estimates their running
statistics on random images so that every normalised activation is O(1) in eval mode.

Every builder is a `package.module:function` entry point usable with `ptlite convert`, e.g.
`ptlite convert ptlite.tools.zoo:resnet18 --input-shape 1,3,224,224 -o resnet18.ptlite`. Needs torch and torchvision.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

IMAGE_SIZE = 224


def sample_images(batch: int, size: int, offset: int = 0) -> torch.Tensor:
    """Crops of scikit-learn's two sample photographs (china.jpg, flower.jpg), ImageNet-normalised NCHW float32.

    Crop i is taken at a position that depends on i + offset, so different offsets give different crops. Needs
    scikit-learn (it ships the photographs); without it, smooth random images stand in.
    """
    try:
        from sklearn.datasets import load_sample_image
    except ImportError:
        gen = torch.Generator().manual_seed(offset)
        coarse = torch.randn(batch, 3, 8, 8, generator=gen)
        return torch.nn.functional.interpolate(coarse, size=(size, size), mode="bilinear", align_corners=False)
    photos = [np.asarray(load_sample_image(n), dtype=np.float32) / 255.0 for n in ("china.jpg", "flower.jpg")]
    out = []
    for i in range(offset, offset + batch):
        img = photos[i % 2]  # 427 x 640 x 3
        top, left = 20 * ((i // 2) % 4), 60 + 40 * ((i // 2) % 6)
        side = min(img.shape[0] - top, img.shape[1] - left)
        idx = np.arange(size) * side // size
        crop = img[top:top + side, left:left + side][idx][:, idx]
        crop = (crop - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225], np.float32)
        out.append(crop.transpose(2, 0, 1))
    return torch.from_numpy(np.ascontiguousarray(np.stack(out), dtype=np.float32))


# torchvision's normalisation for its video classifiers (Kinetics-400)
VIDEO_MEAN, VIDEO_STD = (0.43216, 0.394666, 0.37645), (0.22803, 0.22145, 0.216989)
CLIP_FRAMES, CLIP_SIZE = 8, 112


def sample_clips(batch: int, size: int = CLIP_SIZE, offset: int = 0, frames: int = CLIP_FRAMES) -> torch.Tensor:
    """Video clips (batch, 3, frames, size, size) float32, normalised as torchvision's video models expect: a camera
    panning over scikit-learn's sample photographs, each frame a square crop a few pixels right of (and below) the
    previous one. Clip i starts at a place that depends on i + offset. Without scikit-learn, smooth random clips."""
    try:
        from sklearn.datasets import load_sample_image
    except ImportError:
        gen = torch.Generator().manual_seed(offset)
        coarse = torch.randn(batch, 3, 4, 8, 8, generator=gen)
        return torch.nn.functional.interpolate(coarse, size=(frames, size, size), mode="trilinear",
                                               align_corners=False)
    photos = [np.asarray(load_sample_image(n), dtype=np.float32) / 255.0 for n in ("china.jpg", "flower.jpg")]
    mean, std = np.array(VIDEO_MEAN, np.float32), np.array(VIDEO_STD, np.float32)
    out = np.empty((batch, 3, frames, size, size), np.float32)
    for b, i in enumerate(range(offset, offset + batch)):
        img = photos[i % 2]  # 427 x 640 x 3
        side = 200 + 40 * ((i // 2) % 3)
        top, left = 15 * ((i // 2) % 5), 30 + 50 * ((i // 2) % 4)
        idx = np.arange(size) * side // size
        steps = max(1, frames - 1)  # the pan: up to 8 pixels right and 3 down a frame, inside the photograph
        dy, dx = min(3, (img.shape[0] - side - top) // steps), min(8, (img.shape[1] - side - left) // steps)
        for t in range(frames):
            y, x = top + dy * t, left + dx * t
            crop = img[y:y + side, x:x + side][idx][:, idx]
            out[b, :, t] = ((crop - mean) / std).transpose(2, 0, 1)
    return torch.from_numpy(out)


def varied_crops(count: int, size: int, seed: int = 0) -> np.ndarray:
    """`count` varied crops of scikit-learn's two sample photographs as ImageNet-normalised (count, 3, size, size)
    float32: each a random square of 30-100 % of a photograph's shorter side at a random place, mirrored half the
    time, resized (bilinear, Pillow) to size x size. Different seeds give different crops: calibration and
    evaluation sets that do not overlap."""
    from PIL import Image
    from sklearn.datasets import load_sample_image

    photos = [load_sample_image(n) for n in ("china.jpg", "flower.jpg")]
    rng = np.random.default_rng(seed)
    mean, std = np.array([0.485, 0.456, 0.406], np.float32), np.array([0.229, 0.224, 0.225], np.float32)
    out = np.empty((count, 3, size, size), np.float32)
    for i in range(count):
        photo = photos[int(rng.integers(len(photos)))]
        height, width = photo.shape[:2]
        side = int(rng.uniform(0.3, 1.0) * min(height, width))
        top, left = int(rng.integers(height - side + 1)), int(rng.integers(width - side + 1))
        image = Image.fromarray(photo[top:top + side, left:left + side]).resize((size, size), Image.BILINEAR)
        pixels = np.asarray(image, np.float32) / 255.0
        if rng.random() < 0.5:
            pixels = pixels[:, ::-1]
        out[i] = ((pixels - mean) / std).transpose(2, 0, 1)
    return out


def calibrate(model: nn.Module, seed: int = 0, sizes: tuple[int, ...] = (224, 160), batch: int = 4,
              sample: Callable[..., torch.Tensor] = sample_images) -> nn.Module:
    """Re-draw weights so outputs are O(1), re-estimate batch-norm statistics on `sample(batch, size, offset=...)`
    inputs (photographs; `sample_clips` for video models), and return the model in eval mode."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear, nn.Conv1d, nn.Conv3d)):
                fan_in = m.weight[0].numel()
                m.weight.normal_(0.0, math.sqrt(2.0 / fan_in), generator=gen)
                if m.bias is not None:
                    m.bias.uniform_(-0.1, 0.1, generator=gen)
            elif isinstance(m, (nn.BatchNorm2d, nn.BatchNorm1d, nn.BatchNorm3d)):
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.uniform_(-0.2, 0.2, generator=gen)
                m.reset_running_stats()
                m.momentum = None  # cumulative average over the calibration batches
        if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules()):
            model.train()
            for k, size in enumerate(sizes):
                model(sample(batch, size, offset=100 + k * batch))
    return model.eval()


def _tv(name: str, **kwargs) -> nn.Module:
    import torchvision

    builder = getattr(torchvision.models, name, None) or getattr(torchvision.models.segmentation, name)
    torch.manual_seed(0)
    return calibrate(builder(weights=None, **kwargs))


def mobilenet_v2() -> nn.Module:
    return _tv("mobilenet_v2")


def mobilenet_v3_small() -> nn.Module:
    return _tv("mobilenet_v3_small")


def mobilenet_v3_large() -> nn.Module:
    return _tv("mobilenet_v3_large")


def resnet18() -> nn.Module:
    return _tv("resnet18")


def resnet50() -> nn.Module:
    return _tv("resnet50")


def squeezenet1_1() -> nn.Module:
    return _tv("squeezenet1_1")


def shufflenet_v2_x1_0() -> nn.Module:
    return _tv("shufflenet_v2_x1_0")


def efficientnet_b0() -> nn.Module:
    return _tv("efficientnet_b0")


def densenet121() -> nn.Module:
    return _tv("densenet121")


def googlenet() -> nn.Module:
    return _tv("googlenet", aux_logits=False, init_weights=True)


def deeplabv3_mobilenet_v3_large() -> nn.Module:
    return _tv("deeplabv3_mobilenet_v3_large", weights_backbone=None, aux_loss=False)


def lraspp_mobilenet_v3_large() -> nn.Module:
    return _tv("lraspp_mobilenet_v3_large", weights_backbone=None)


def _video(name: str) -> nn.Module:
    """A torchvision video classifier (Kinetics-400 head), calibrated on panning clips of 8 frames at 112."""
    import torchvision.models.video

    torch.manual_seed(0)
    model = getattr(torchvision.models.video, name)(weights=None)
    return calibrate(model, sizes=(CLIP_SIZE,), batch=2, sample=sample_clips)


def r3d_18() -> nn.Module:
    """ResNet-18 with 3x3x3 convolutions throughout (3x7x7 stem)."""
    return _video("r3d_18")


def mc3_18() -> nn.Module:
    """ResNet-18 with 3x3x3 convolutions in its first stage (and 3x7x7 stem), 1x3x3 (no temporal extent) after."""
    return _video("mc3_18")


def r2plus1d_18() -> nn.Module:
    """ResNet-18 whose 3-D convolutions are each a 1x3x3 spatial one then a 3x1x1 temporal one."""
    return _video("r2plus1d_18")


class TransformerClassifier(nn.Module):
    """nn.TransformerEncoder (batch_first) over token embeddings, with a padding mask, mean-pooled."""

    def __init__(self, vocab: int = 100, d_model: int = 64, heads: int = 4, layers: int = 2,
                 classes: int = 5) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=128, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(d_model, classes)

    def forward(self, tokens: torch.Tensor, padding_mask: torch.Tensor) -> torch.Tensor:
        h = self.encoder(self.embed(tokens), src_key_padding_mask=padding_mask)
        keep = (~padding_mask).unsqueeze(-1).to(h.dtype)
        return self.head((h * keep).sum(1) / keep.sum(1))


def transformer_encoder() -> nn.Module:
    torch.manual_seed(0)
    return TransformerClassifier().eval()


class RecurrentClassifier(nn.Module):
    """A 2-layer LSTM or GRU (batch_first; the GRU bidirectional) over feature sequences, then a linear head."""

    def __init__(self, cell: str = "lstm", features: int = 16, hidden: int = 32, classes: int = 4) -> None:
        super().__init__()
        if cell == "lstm":
            self.rnn = nn.LSTM(features, hidden, num_layers=2, batch_first=True)
            out = hidden
        else:
            self.rnn = nn.GRU(features, hidden, num_layers=2, batch_first=True, bidirectional=True)
            out = 2 * hidden
        self.head = nn.Linear(out, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.rnn(x)
        return self.head(y[:, -1])


def lstm_classifier() -> nn.Module:
    torch.manual_seed(0)
    return RecurrentClassifier("lstm").eval()


def gru_classifier() -> nn.Module:
    torch.manual_seed(0)
    return RecurrentClassifier("gru").eval()


class MyDecisionGate(nn.Module):
    """The PyTorch tutorial's data-dependent branch: script keeps it, trace freezes it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x
        else:
            return -x


def decision_gate() -> nn.Module:
    return MyDecisionGate()


class ControlFlowModule(nn.Module):
    """A for loop over a list, an int argument with a default, a tuple return and a dict output."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(3)])
        self.scales: list[float] = [0.5, 1.0, 2.0]

    def forward(self, x: torch.Tensor, repeats: int = 2) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        outs: list[torch.Tensor] = []
        for layer in self.layers:
            x = torch.relu(layer(x))
            outs.append(x)
        total = torch.zeros_like(x)
        for s in self.scales:
            total = total + s * x
        i = 0
        while i < repeats:
            total = total - 0.1 * outs[i % len(outs)]
            i += 1
        return total, {"first": outs[0], "last": outs[-1]}


def control_flow() -> nn.Module:
    torch.manual_seed(0)
    return ControlFlowModule().eval()


VISION: dict[str, Callable[[], nn.Module]] = {
    "mobilenet_v2": mobilenet_v2,
    "mobilenet_v3_small": mobilenet_v3_small,
    "mobilenet_v3_large": mobilenet_v3_large,
    "resnet18": resnet18,
    "resnet50": resnet50,
    "squeezenet1_1": squeezenet1_1,
    "shufflenet_v2_x1_0": shufflenet_v2_x1_0,
    "efficientnet_b0": efficientnet_b0,
    "densenet121": densenet121,
    "googlenet": googlenet,
    "deeplabv3_mobilenet_v3_large": deeplabv3_mobilenet_v3_large,
    "lraspp_mobilenet_v3_large": lraspp_mobilenet_v3_large,
}


# Video classifiers: input (N, 3, frames, H, W), `sample_clips`.
VIDEO: dict[str, Callable[[], nn.Module]] = {
    "r3d_18": r3d_18,
    "mc3_18": mc3_18,
    "r2plus1d_18": r2plus1d_18,
}


SEQUENCE: dict[str, Callable[[], nn.Module]] = {
    "transformer_encoder": transformer_encoder,
    "lstm_classifier": lstm_classifier,
    "gru_classifier": gru_classifier,
}


def example_inputs(name: str, batch: int = 1, size: int = IMAGE_SIZE, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Inputs for a zoo model: an image batch for vision models; a clip of CLIP_FRAMES frames for video models (at
    CLIP_SIZE unless a size other than IMAGE_SIZE is given); tokens and a padding mask (last two positions padded)
    for the transformer; a feature sequence for the recurrent classifiers."""
    gen = torch.Generator().manual_seed(seed)
    if name in VISION:
        return (torch.randn(batch, 3, size, size, generator=gen),)
    if name in VIDEO:
        side = CLIP_SIZE if size == IMAGE_SIZE else size
        return (torch.randn(batch, 3, CLIP_FRAMES, side, side, generator=gen),)
    if name == "transformer_encoder":
        tokens = torch.randint(0, 100, (batch, 12), generator=gen)
        mask = torch.zeros(batch, 12, dtype=torch.bool)
        mask[:, -2:] = True
        return tokens, mask
    if name in SEQUENCE:
        return (torch.randn(batch, 10, 16, generator=gen),)
    raise KeyError(f"no zoo model named {name!r}")
