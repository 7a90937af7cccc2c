"""Kernel arguments as PyTorch broadcasts them: an `int[n]` argument given as one int or a one-element list.

Shared by the convolution and pooling kernels (kernel size, stride, padding, dilation), so that neither family has
to import the other.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

IntList = int | Sequence[int]


def expand(value: IntList, n: int, what: str = "argument") -> tuple[int, ...]:
    """[k] or k -> (k,) * n; a list of n ints stays as it is (PyTorch's int[n] broadcasting)."""
    if isinstance(value, (int, np.integer)):
        return (int(value),) * n
    value = [int(v) for v in value]
    if len(value) == 1:
        return (value[0],) * n
    if len(value) != n:
        raise ValueError(f"{what} must have 1 or {n} values, got {value}")
    return tuple(value)
