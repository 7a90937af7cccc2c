"""Object detectors for tests and the CLI: torchvision's mobile detectors and a small YOLO-style head, with random
weights re-drawn so that they detect something, and a photograph to run them on.

Nothing can be downloaded, so weights are random. Left as torchvision initialises them, the detectors score
every box about alike (ties everywhere, which no two implementations break the same way) or below their
thresholds. `redraw` gives convolutions and linear layers variance-preserving weights and batch-norm layers random
affine parameters, `estimate_batch_norm` re-estimates the running statistics on photographs, and each builder
sets the score threshold so that a photograph gives a few dozen detections with well separated scores. The models
take what torchvision's take: a list of 3xHxW float images in [0, 1]. Needs torch, torchvision, Pillow and
scikit-learn (for the photographs).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor, nn
from torchvision.models import detection
from torchvision.ops import batched_nms

SIZE = 320


def photo(size: int | tuple[int, int] = SIZE, name: str = "china.jpg") -> torch.Tensor:
    """One of scikit-learn's sample photographs resized (bilinear) to size (H, W), as a float [0, 1] 3xHxW image."""
    from PIL import Image
    from sklearn.datasets import load_sample_image

    height, width = (size, size) if isinstance(size, int) else size
    image = Image.fromarray(load_sample_image(name)).resize((width, height), Image.BILINEAR)
    return torch.from_numpy(np.ascontiguousarray(np.asarray(image, np.float32).transpose(2, 0, 1) / 255.0))


def redraw(model: nn.Module, seed: int = 0) -> nn.Module:
    """Variance-preserving random weights for convolutions and linear layers, random affine parameters and reset
    statistics for batch norms (as ptlite.tools.zoo.calibrate draws them)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                m.weight.normal_(0.0, math.sqrt(2.0 / m.weight[0].numel()), generator=gen)
                if m.bias is not None:
                    m.bias.uniform_(-0.1, 0.1, generator=gen)
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5, generator=gen)
                m.bias.uniform_(-0.2, 0.2, generator=gen)
                m.reset_running_stats()
                m.momentum = None  # a cumulative average over the calibration images
    return model


def estimate_batch_norm(model: nn.Module, images: list[torch.Tensor]) -> nn.Module:
    """Batch-norm running statistics from the model (in eval mode otherwise) run on the images as one batch (the
    smallest feature maps are 1x1: a batch norm needs more than one image there). Of a torchvision detector, only
    the parts with batch norms run (transform, backbone, an SSD's head): not the post-processing of thousands of
    low-scoring boxes."""
    norms = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    model.eval()
    with torch.no_grad():
        for m in norms:
            m.train()
        if hasattr(model, "transform") and hasattr(model, "backbone"):
            features = model.backbone(model.transform(images)[0].tensors)
            if isinstance(model, detection.ssd.SSD):
                model.head(list(features.values()))
        else:
            model(images)
        for m in norms:
            m.eval()
    return model


def calibration_images(count: int = 16, size: int = SIZE, seed: int = 1) -> list[torch.Tensor]:
    """Photographs the batch-norm statistics are estimated on: random square crops (30-100 % of the shorter side)
    of both sample photographs, mirrored half the time, resized to size x size. Many, so that the statistics of
    the smallest feature maps (1x1) are not estimated from a handful of values."""
    from PIL import Image
    from sklearn.datasets import load_sample_image

    photos = [load_sample_image(n) for n in ("flower.jpg", "china.jpg")]
    rng = np.random.default_rng(seed)
    images = []
    for i in range(count):
        pixels = photos[i % 2]
        height, width = pixels.shape[:2]
        side = int(rng.uniform(0.3, 1.0) * min(height, width))
        top, left = int(rng.integers(height - side + 1)), int(rng.integers(width - side + 1))
        crop = Image.fromarray(pixels[top:top + side, left:left + side]).resize((size, size), Image.BILINEAR)
        array = np.asarray(crop, np.float32).transpose(2, 0, 1) / 255.0
        images.append(torch.from_numpy(np.ascontiguousarray(array[:, :, ::-1] if rng.random() < 0.5 else array)))
    return images


def _scale(layers: list[nn.Module], factor: float) -> None:
    """Scale the layers' weights and biases (class logits): with random weights they are large enough that float32
    rounding moves scores by more than 1e-4, and boxes score alike where the softmax saturates."""
    with torch.no_grad():
        for layer in layers:
            layer.weight.mul_(factor)
            layer.bias.mul_(factor)


def ssdlite320_mobilenet_v3_large(score_thresh: float = 0.3) -> nn.Module:
    """torchvision's SSDlite (MobileNetV3-Large), calibrated; scores above score_thresh are kept (about a
    hundred boxes on the test photograph)."""
    torch.manual_seed(0)
    model = detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None)
    estimate_batch_norm(redraw(model), calibration_images())
    model.score_thresh = score_thresh
    return model.eval()


def fasterrcnn_mobilenet_v3_large_320_fpn(score_thresh: float = 0.07) -> nn.Module:
    """torchvision's Faster R-CNN (MobileNetV3-Large FPN, 320 px), calibrated; the box head's scores above
    score_thresh are kept (a few dozen boxes on the test photograph)."""
    torch.manual_seed(0)
    model = detection.fasterrcnn_mobilenet_v3_large_320_fpn(weights=None, weights_backbone=None)
    estimate_batch_norm(redraw(model), calibration_images())
    _scale([model.roi_heads.box_predictor.cls_score], 0.3)
    model.roi_heads.score_thresh = score_thresh
    return model.eval()


class YoloHead(nn.Module):
    """A user's YOLO-style detector: a small convolutional backbone, one prediction per anchor and grid cell
    (box offsets, objectness, class scores) decoded into boxes; the best `candidates` kept (topk), then
    torchvision.ops.batched_nms per class, then the score threshold (after NMS, which keeps the same boxes: a box
    suppresses only lower-scoring ones, and shapes stay static up to NMS, so that torch.export takes it too).
    Input: a list of 3xHxW images in [0, 1] (the first is used); output: a list of one dict of boxes
    (x1, y1, x2, y2), scores and labels, as torchvision's detectors return."""

    def __init__(self, num_classes: int = 5, anchors: tuple[tuple[float, float], ...] = ((24, 24), (48, 32), (32, 64)),
                 score_thresh: float = 0.25, iou_thresh: float = 0.45, candidates: int = 200) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.stride = 8
        self.score_thresh = score_thresh
        self.iou_thresh = iou_thresh
        self.candidates = candidates
        self.register_buffer("anchors", torch.tensor(anchors, dtype=torch.float32))
        outputs = len(anchors) * (5 + num_classes)
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.SiLU(),
            nn.Conv2d(16, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.SiLU(),
            nn.Conv2d(32, 64, 3, 2, 1), nn.BatchNorm2d(64), nn.SiLU(),
        )
        self.predict = nn.Conv2d(64, outputs, 1)

    def forward(self, images: list[Tensor]) -> list[dict[str, Tensor]]:
        image = images[0]
        p = self.predict(self.features(image.unsqueeze(0) * 2.0 - 1.0))  # [1, A * (5 + classes), h, w]
        h, w = p.shape[-2], p.shape[-1]
        a = self.anchors.shape[0]
        p = p.reshape(a, 5 + self.num_classes, h, w).permute(0, 2, 3, 1).reshape(a, h * w, 5 + self.num_classes)
        ys, xs = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        cells = torch.stack([xs, ys], dim=-1).reshape(1, h * w, 2).to(p.dtype)
        centres = (p[..., 0:2].sigmoid() + cells) * self.stride
        sizes = p[..., 2:4].clamp(max=4.0).exp() * self.anchors.reshape(a, 1, 2)
        corners = torch.cat([centres - sizes / 2, centres + sizes / 2], dim=-1).reshape(-1, 4)
        height, width = image.shape[-2], image.shape[-1]
        limits = torch.tensor([width, height, width, height], dtype=p.dtype)
        boxes = torch.min(corners.clamp(min=0.0), limits)
        scores, labels = (p[..., 4:5].sigmoid() * p[..., 5:].sigmoid()).reshape(-1, self.num_classes).max(dim=1)
        scores, order = scores.topk(self.candidates)
        boxes, labels = boxes[order], labels[order]
        keep = batched_nms(boxes, scores, labels, self.iou_thresh)
        boxes, scores, labels = boxes[keep], scores[keep], labels[keep]
        keep = scores > self.score_thresh
        return [{"boxes": boxes[keep], "scores": scores[keep], "labels": labels[keep] + 1}]


def yolo_head() -> nn.Module:
    """YoloHead with calibrated random weights."""
    torch.manual_seed(0)
    return estimate_batch_norm(redraw(YoloHead()), calibration_images()).eval()
