"""The model matrix of the foundation issue: which models, which inputs, which capture methods (and why not)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from ptlite.tools import zoo


def real_images(batch: int, size: int) -> torch.Tensor:
    """Photographs the models were not calibrated on (ptlite.tools.zoo.sample_images, offset 0)."""
    return zoo.sample_images(batch, size)


def tokens(batch: int, length: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(batch)
    toks = torch.randint(0, 100, (batch, length), generator=gen)
    mask = torch.zeros(batch, length, dtype=torch.bool)
    for b in range(batch):
        mask[b, length - (b % 3) * 2:] = True  # 0, 2 or 4 padded positions at the end
    return toks, mask


def sequence(batch: int, length: int = 10) -> tuple[torch.Tensor]:
    gen = torch.Generator().manual_seed(batch)
    return (torch.randn(batch, length, 16, generator=gen),)


@dataclass
class Case:
    name: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[int, int | None], tuple]  # (batch, size) -> example inputs
    methods: tuple[str, ...]
    sizes: tuple[int, ...] = (0,)  # second size for models captured by script (0: not size-dependent)
    why_not: dict[str, str] = field(default_factory=dict)
    slow: bool = False


def gate_inputs(batch: int) -> torch.Tensor:
    """Seeded inputs whose sum is positive: the branch a trace records for the batch-1 example is the one every
    compared input takes (test_decision_gate_* cover the other branch), whatever tests ran before."""
    x = torch.randn(batch, 4, generator=torch.Generator().manual_seed(batch))
    return x if x.sum() > 0 else -x


def _images(batch: int, size: int | None) -> tuple:
    return (real_images(batch, size or 224),)


VISION_CASES = [
    Case(name, build, _images, ("export", "script", "trace"), sizes=(224, 160),
         slow=name in ("densenet121", "resnet50", "googlenet", "deeplabv3_mobilenet_v3_large", "efficientnet_b0"))
    for name, build in zoo.VISION.items()
]

OTHER_CASES = [
    Case("transformer_encoder", zoo.transformer_encoder, lambda b, s: tokens(b), ("export", "script", "trace")),
    Case("lstm_classifier", zoo.lstm_classifier, lambda b, s: sequence(b), ("export", "script", "trace")),
    Case("gru_classifier", zoo.gru_classifier, lambda b, s: sequence(b), ("export", "script", "trace")),
    Case("decision_gate", zoo.decision_gate, lambda b, s: (gate_inputs(b),), ("script", "trace"),
         why_not={"export": "the branch depends on tensor data; torch.export needs torch.cond for that"}),
    Case("control_flow", zoo.control_flow, lambda b, s: (torch.randn(b, 8),), ("export", "script", "trace")),
]

CASES = {c.name: c for c in VISION_CASES + OTHER_CASES}


def flatten(value: Any) -> list[Any]:
    """Leaves of nested tuples/lists/dicts (dict values in insertion order), tensors as NumPy arrays."""
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in flatten(v)]
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in flatten(v)]
    if isinstance(value, torch.Tensor):
        return [value.detach().numpy()]
    return [value]
