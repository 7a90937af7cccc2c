"""The NumPy backend: the reference. It has a kernel for every operator `ptlite.ops` declares (tests/backends/
numpy/test_registry.py checks it), runs wherever NumPy runs, and is the oracle other backends' kernels are tested
against. Its lowering (prepacked weights, Winograd, the fused convolution blocks, the memory plan) is in `lower/`.

Its kernels are here, one module per operator family (private modules, `_*.py`, hold what several families share):
a family module registers its functions when it is imported (`@kernel("aten::relu")`), and its kernels are those
of the operators declared in the family of the same name (`ptlite/ops/<family>.py` and `<family>.py` here), so
`implementation` imports, the first time an operator is needed, just the family the table names for it: loading a
program imports only the kernels it runs (and no package besides this one). A kernel
takes the operator's arguments positionally (NumPy arrays for tensors, Python values otherwise) and returns the
result, or a tuple of results for operators with several outputs; the kernel of an operator with the `out` trait
also takes a keyword `out=`: an array (a memory plan's buffer) to write its result into when it has exactly the
result's shape and dtype, returning it, and otherwise ignored.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from ptlite import ops
from ptlite.backends.base import Backend, Kernel
from ptlite.ir.graph import Node
from ptlite.ops import OpDef

__all__ = ["NumpyBackend", "create", "kernel", "implementation", "registered", "family_names", "load_all"]

F = TypeVar("F", bound=Callable[..., Any])


_KERNELS: dict[str, Callable[..., Any]] = {}  # operator key -> its kernel
_MODULES: dict[str, str] = {}  # operator key -> the module whose import registered it
_FAMILIES = __name__  # the family modules are this package's
_LOADED = False  # every family imported


def kernel(*keys: str) -> Callable[[F], F]:
    """Register the decorated function as the NumPy kernel of every operator key given (each must be declared
    in `ptlite.ops`; tests/backends/numpy/test_registry.py checks that ptlite's own are). Registering another function
    for a key that has one raises ValueError."""

    def wrap(fn: F) -> F:
        module = _registering_module()
        for key in keys:
            if not module.startswith(_FAMILIES + ".") and not _LOADED:
                _load_family_of(key)  # so that clashing with a ptlite kernel not yet imported is reported here
            known = _KERNELS.get(key)
            if known is not None and known is not fn:
                raise ValueError(f"operator {key} has two NumPy kernels ({known.__module__}.{known.__name__} and "
                                 f"{fn.__module__}.{fn.__name__})")
            _KERNELS[key] = fn
            _MODULES[key] = module
        return fn

    return wrap


def implementation(key: str) -> Callable[..., Any] | None:
    """The kernel of an operator, importing its family on first use; None if the NumPy backend has none (an
    undeclared operator, or a structural one, which the interpreter runs itself)."""
    fn = _KERNELS.get(key)
    if fn is None and not _LOADED:
        _load_family_of(key)
        fn = _KERNELS.get(key)
        if fn is None and ops.lookup(key) is not None:
            load_all()  # declared in another family than the one holding its kernel: found, slowly
            fn = _KERNELS.get(key)
    return fn


def registered() -> dict[str, str]:
    """Every operator with a NumPy kernel -> the module that registered it (imports every family)."""
    load_all()
    return dict(_MODULES)


def family_names() -> list[str]:
    """Names of the kernel family modules (the modules here not starting with '_'; not lower/), sorted."""
    import pkgutil  # here, not at the top: loading a program needs only load_family

    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_") and not m.ispkg)


def load_family(name: str) -> None:
    """Import one family module, registering its kernels (and those of the families it imports)."""
    import importlib

    importlib.import_module(f"{_FAMILIES}.{name}")


def load_all() -> None:
    """Import every family module, registering every kernel."""
    global _LOADED
    if not _LOADED:
        _LOADED = True
        for name in family_names():
            load_family(name)


def _load_family_of(key: str) -> None:
    op = ops.lookup(key)
    if op is None or op.structural:
        return
    try:
        load_family(op.family)
    except ModuleNotFoundError as exc:  # an operator declared in a family without kernels here
        if exc.name != f"{_FAMILIES}.{op.family}":
            raise


def _registering_module() -> str:
    """Name of the module whose body is running the current registration (the caller of the caller of this)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_name != "<module>":
        frame = frame.f_back
    return frame.f_globals.get("__name__", "") if frame is not None else ""


# ------------------------------------------------------------------------------------------------ the backend

class NumpyBackend(Backend):
    name = "numpy"
    lowering_module = "ptlite.backends.numpy.lower"
    per_operator = True  # every declared operator, whatever its node

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

    def describe(self) -> str:
        return f"the reference: NumPy {np.__version__}"


def create() -> NumpyBackend:
    return NumpyBackend()
