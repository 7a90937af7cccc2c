"""Kernels for operators that fusion passes make out of two aten operators (add + relu), as PyTorch's own
fused operators: one pass over memory instead of two."""

from __future__ import annotations

from typing import Any

import numpy as np

from ptlite.backends.numpy import kernel

from ._fastnp import clip
from .elementwise import add, add_


@kernel("aten::_add_relu.Tensor")
def add_relu(self: Any, other: Any, alpha: Any = 1, *, out: np.ndarray | None = None) -> np.ndarray:
    """relu(self + alpha * other) with add's type promotion; the relu runs in place on the sum (written into
    `out`, and returned, when the sum fits it: see add)."""
    out = add(self, other, alpha, out=out)
    _relu_in_place(out)
    return out


@kernel("aten::_add_relu_.Tensor")
def add_relu_(self: np.ndarray, other: Any, alpha: Any = 1) -> np.ndarray:
    """self = relu(self + alpha * other), in place (add_ then relu_, as torch.export writes residual blocks)."""
    add_(self, other, alpha)
    _relu_in_place(self)
    return self


def _relu_in_place(x: np.ndarray) -> None:
    if x.dtype.kind == "f":  # clip: NumPy's maximum with a scalar is several times slower
        clip(x, x.dtype.type(0), x.dtype.type(np.inf), out=x)
    else:
        np.maximum(x, 0, out=x)
