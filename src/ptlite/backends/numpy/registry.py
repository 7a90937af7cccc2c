"""The NumPy backend's kernel table: which Python function implements each operator of `ptlite.ops`.

A family module of `kernels/` registers its functions when it is imported (`@kernel("aten::relu")`). Its kernels
are those of the operators declared in the family of the same name (`ptlite/ops/<family>.py` and
`kernels/<family>.py`), so `implementation` imports, the first time an operator is needed, just the family the table
names for it: loading a program imports only the kernels it runs. A kernel takes the operator's arguments
positionally (NumPy arrays for tensors, Python values otherwise) and returns the result, or a tuple of results for
operators with several outputs; the kernel of an operator with the `out` trait also takes a keyword `out=`: an array
(a memory plan's buffer) to write its result into when it has exactly the result's shape and dtype, returning it,
and otherwise ignored.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, TypeVar

from ptlite import ops

F = TypeVar("F", bound=Callable[..., Any])

_KERNELS: dict[str, Callable[..., Any]] = {}  # operator key -> its kernel
_MODULES: dict[str, str] = {}  # operator key -> the module whose import registered it
_FAMILIES = "ptlite.backends.numpy.kernels"
_LOADED = False  # every family imported


def kernel(*keys: str) -> Callable[[F], F]:
    """Register the decorated function as the NumPy kernel of every operator key given (each must be declared
    in `ptlite.ops`; tests/backends/numpy/test_registry.py checks that ptlite's own are). Registering another function
    for a key that has one raises ValueError."""

    def wrap(fn: F) -> F:
        module = _registering_module()
        for key in keys:
            if not module.startswith(_FAMILIES) and not _LOADED:
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
    """Names of the kernel family modules (those of `kernels/` not starting with '_'), sorted."""
    import pkgutil  # here, not at the top: loading a program needs only load_family

    from . import kernels

    return sorted(m.name for m in pkgutil.iter_modules(kernels.__path__) if not m.name.startswith("_"))


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
