"""Run-time type checks of TorchScript values: isinstance() that a .ptl file's translation could not decide (an
Optional, Union or Any value), as ptlite::isinstance."""

from __future__ import annotations

from typing import Any

from ptlite.backends.numpy import kernel
from ptlite.ir.types import has_type
from ptlite.ops import ISINSTANCE


@kernel(ISINSTANCE)
def isinstance_(value: Any, types: list[str]) -> bool:
    """Whether a run-time value has one of the TorchScript types (isinstance() on an Optional, Union or Any value,
    whose answer a .ptl file's translation could not decide)."""
    return any(has_type(value, t) for t in types)
