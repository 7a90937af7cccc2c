"""The NumPy backend: the reference. It has a kernel for every operator `ptlite.ops` declares (tests/backends/
numpy/test_registry.py checks it), runs wherever NumPy runs, and is the oracle other backends' kernels are tested
against. Its kernels are in `kernels/` by operator family; its lowering (prepacked weights, Winograd, the fused
convolution blocks, the memory plan) in `lower/`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ptlite.backends.base import Backend, Kernel, LoweringContext
from ptlite.ir.graph import Node, Program
from ptlite.ops import OpDef

from .registry import implementation, kernel

__all__ = ["NumpyBackend", "create", "kernel", "implementation"]


class NumpyBackend(Backend):
    name = "numpy"

    def __init__(self) -> None:
        self._kernels: dict[str, Kernel] = {}

    def kernel(self, op: OpDef, node: Node | None = None) -> Kernel | None:
        bound = self._kernels.get(op.key)
        if bound is None:
            fn = implementation(op.key)
            if fn is None:
                return None
            bound = self._kernels[op.key] = Kernel(fn, self.name, op.out)
        return bound

    def evaluate(self, key: str, args: Sequence[Any]) -> Any:
        """An operator's results on the given arguments: how compile-time evaluation (constant folding, the .ptl
        translator) computes, with the reference's kernels. KeyError if the operator has no kernel."""
        fn = implementation(key)
        if fn is None:
            raise KeyError(f"the NumPy backend has no kernel for {key}")
        return fn(*args)

    def lowering_passes(self) -> dict[str, str]:
        from .lower import PASSES

        return {name: f"the {p.name} pass" for name, p in PASSES.items()}

    def lower(self, program: Program, context: LoweringContext) -> list[str]:
        from .lower import lower

        return lower(program, context)

    def specialize(self, program: Program, method: str, context: LoweringContext) -> bool:
        from .lower import specialize

        return specialize(program, method, context)

    def describe(self) -> str:
        return f"the reference: NumPy {np.__version__}"


def create() -> NumpyBackend:
    return NumpyBackend()
