"""The native backend: ptlite's compiled CPU kernels (C, SIMD chosen at run time), behind the NumPy reference.

Its library (`_native`, built from csrc/ by `pip install`) has convolution (dense by an indirection-buffer GEMM
with the bias and activation fused, 1x1 as a plain GEMM, depthwise), linear layers, pooling, elementwise
arithmetic and activations, all float32 and channels-last. Kernels for the operators it runs are in kernels.py;
a node it cannot run (another dtype, grouped convolution, an operator it has no kernel for) goes to the NumPy
reference, per call where only the arguments tell. Where a method has a memory plan, runs of nodes it takes
completely become one step each (executor.py: one call into C over the planned arena). Its lowering (lower/) is the
reference's prepacking and activation fusion plus panel-packed dense weights, without the NumPy-only fused blocks
and Winograd.

    ptlite.backends()    # [BackendInfo(name='native', available=True, detail='... avx2 ...'), ...]
    ptlite.load(path, backends=("numpy",))   # the reference alone
"""

from __future__ import annotations

import os
from typing import Any

from ptlite.backends import BackendUnavailable
from ptlite.backends.base import Backend, Delegate, Kernel
from ptlite.ir.graph import Graph, Node, Program
from ptlite.ops import OpDef

__all__ = ["NativeBackend", "create", "library", "set_num_threads"]

FAILURE_FILE = os.path.join(os.path.dirname(__file__), "_build_failure.txt")


def library() -> Any:
    """The compiled library (ptlite.backends.native._native); BackendUnavailable saying why it is missing."""
    try:
        from . import _native
    except ImportError as exc:
        raise BackendUnavailable(_why_missing(exc)) from None
    return _native


def set_num_threads(n: int) -> None:
    """Threads the native kernels use (the calling thread included); nothing where the library is missing."""
    try:
        lib = library()
    except BackendUnavailable:
        return
    lib.set_num_threads(n)


def _why_missing(exc: ImportError) -> str:
    try:
        with open(FAILURE_FILE, encoding="utf-8") as f:
            reason = f.read().strip()
        return f"its C library was not built at install ({reason}); reinstall ptlite with a C compiler to get it"
    except OSError:
        return f"its C library cannot be imported ({exc}); reinstall ptlite with a C compiler to build it"


class NativeBackend(Backend):
    name = "native"
    per_operator = True  # kernel() answers by the operator alone (its kernels decline per call, to the reference)
    lowering_module = "ptlite.backends.native.lower"

    def __init__(self, lib: Any, executor: bool = True) -> None:
        self.lib = lib
        self.executor = executor  # run planned regions in one call each (executor.py); else node by node
        self._kernels: dict[str, Kernel | None] = {}

    def kernel(self, op: OpDef, node: Node | None = None) -> Kernel | None:
        if op.key not in self._kernels:
            from .kernels import kernel_for

            fn = kernel_for(op.key)
            self._kernels[op.key] = None if fn is None else Kernel(fn, self.name, op.out)
        return self._kernels[op.key]

    def delegates(self, graph: Graph, program: Program, kernels: dict[int, Kernel]) -> list[Delegate]:
        """The method's regions that the whole-graph executor runs in one call each (where it has a memory plan)."""
        if not self.executor:
            return []
        from .executor import delegates

        return delegates(self.name, graph, program, kernels)

    def set_num_threads(self, n: int) -> None:
        self.lib.set_num_threads(n)

    def describe(self) -> str:
        return f"compiled kernels, {self.lib.isa()} ({self.lib.get_num_threads()} threads)"


def create() -> NativeBackend:
    if os.environ.get("PTLITE_DISABLE_NATIVE"):
        raise BackendUnavailable("disabled by the PTLITE_DISABLE_NATIVE environment variable")
    return NativeBackend(library())
