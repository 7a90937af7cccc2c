"""The backend whose kernels the kernel tests run: each test in tests/kernels runs once per backend available here
(conftest.py parametrizes them), comparing that backend's kernel with PyTorch (oracle.py) or with known values."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from ptlite import backends, ops

_SELECTED = [backends.REFERENCE]


def names() -> list[str]:
    """The backends the kernel tests run on: every one available here."""
    return [info.name for info in backends.available() if info.available]


def select(name: str) -> str:
    """Run the kernel tests' kernels on backend `name`; returns the one selected before."""
    previous, _SELECTED[0] = _SELECTED[0], name
    return previous


def kernel(key: str) -> Callable[..., Any]:
    """The selected backend's kernel for an operator; a test of an operator another backend declines is skipped
    for it (the reference declines none: a missing kernel there fails)."""
    op = ops.get(key)
    backend = backends.get(_SELECTED[0])
    found = backend.kernel(op, None)
    if found is None:
        if backend.name == backends.REFERENCE:
            raise KeyError(f"the reference backend has no kernel for {key}")
        pytest.skip(f"backend {backend.name} has no kernel for {key}")
    return found.fn
