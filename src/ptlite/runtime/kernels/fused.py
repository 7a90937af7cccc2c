"""Kernels for operators that fusion passes make out of two aten operators (add + relu), as PyTorch's own
fused operators: one pass over memory instead of two."""

from __future__ import annotations

from typing import Any

import numpy as np

from ptlite.ir.registry import kernel

from .elementwise import add


@kernel("aten::_add_relu.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
def add_relu(self: Any, other: Any, alpha: Any = 1) -> np.ndarray:
    """relu(self + alpha * other) with add's type promotion; the relu runs in place on the sum."""
    out = add(self, other, alpha)
    if out.dtype.kind == "f":  # np.clip: NumPy's maximum with a scalar is several times slower
        np.clip(out, out.dtype.type(0), out.dtype.type(np.inf), out=out)
    else:
        np.maximum(out, 0, out=out)
    return out
