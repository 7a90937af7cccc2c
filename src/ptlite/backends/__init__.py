"""Backends by name: which implementations of the operators this machine has, in the order they are asked.

    ptlite.backends()   # [BackendInfo(name='native', available=True, detail=...), BackendInfo(name='numpy', ...)]
    ptlite.load(path, backends=("numpy",))   # names, or Backend objects of your own (the reference always last)

A built-in backend is a subpackage here whose `create()` returns its `Backend` (base.py) or raises
`BackendUnavailable` saying why not (a library not built, no device); adding one is its folder plus its line in
BUILTIN. The NumPy backend is the reference: complete, always available, asked last.
"""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .base import Backend

# Built-in backends, in the order they are asked for a node (the reference last): name -> module with create().
BUILTIN: dict[str, str] = {
    "native": "ptlite.backends.native",
    "gpu": "ptlite.backends.gpu",
    "numpy": "ptlite.backends.numpy",
}
# Opt-in backends: asked only when selected by name (`backends=("gpu",)`), never by the default selection
# (resolve(None)), and not set up by the listing (`ptlite.backends()`, available()) until selected once: the GPU
# backend's device takes a second to start, and a software driver runs models far slower than the CPU backends.
OPT_IN: frozenset[str] = frozenset({"gpu"})
REFERENCE = "numpy"
# Other names get() takes -> the backends they stand for, the first available one: "cpu" is the CPU backend a
# program is lowered for by default (optimize_for_mobile's), the native one where its library was built.
ALIASES: dict[str, tuple[str, ...]] = {"cpu": ("native", "numpy")}


class BackendUnavailable(Exception):  # noqa: N818  (a reason, not an error: the backend is skipped)
    """Raised by a backend's create() when it cannot run here; the message says why."""


class BackendInfo:
    """A backend's name, whether it runs here, and what it is or why it is not available (a plain class: a
    NamedTuple would cost `import ptlite` more than the rest of this module)."""

    __slots__ = ("name", "available", "detail")

    def __init__(self, name: str, available: bool, detail: str) -> None:
        self.name = name
        self.available = available
        self.detail = detail

    def __iter__(self):  # noqa: ANN204  (name, available, detail = info)
        return iter((self.name, self.available, self.detail))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BackendInfo) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return f"BackendInfo(name={self.name!r}, available={self.available}, detail={self.detail!r})"


_CREATED: dict[str, Any] = {}  # name -> the Backend, or the BackendUnavailable raised making it


def available() -> list[BackendInfo]:
    """Every built-in backend, in dispatch order, available or not (and why not); an opt-in one (OPT_IN) not yet
    selected in this process is listed as not set up, without starting it."""
    infos = []
    for name in BUILTIN:
        if name in OPT_IN and name not in _CREATED:
            infos.append(BackendInfo(name, False, f"opt-in, not set up: select it by name (backends=({name!r},)) "
                                                  f"or ptlite.backends.get({name!r}) to use it"))
            continue
        made = _create(name)
        if isinstance(made, BackendUnavailable):
            infos.append(BackendInfo(name, False, str(made)))
        else:
            infos.append(BackendInfo(name, True, made.describe()))
    return infos


def get(name: str) -> Backend:
    """The built-in backend called `name` (or an alias: ALIASES); ValueError naming the known ones, or saying why
    it is not available."""
    if name in ALIASES:
        name = next((n for n in ALIASES[name] if not isinstance(_create(n), BackendUnavailable)), ALIASES[name][-1])
    if name not in BUILTIN:
        raise ValueError(f"no backend named {name!r}; ptlite has {', '.join(BUILTIN)}")
    made = _create(name)
    if isinstance(made, BackendUnavailable):
        raise ValueError(f"backend {name!r} is not available here: {made}")
    return made


def reference() -> Backend:
    """The NumPy backend: every declared operator has a kernel there."""
    return get(REFERENCE)


def resolve(selection: Iterable[str | Backend] | str | None = None) -> list[Backend]:
    """The backends to ask, in order, for a selection of names and Backend objects (None: every available
    built-in one). The reference comes last, whether the selection names it or not: it accepts every node, so a
    backend after it would never be asked."""
    from .base import Backend

    if selection is None:
        chosen = [made for name in BUILTIN
                  if name not in OPT_IN and not isinstance(made := _create(name), BackendUnavailable)]
    else:
        items = [selection] if isinstance(selection, str) else list(selection)
        chosen = []
        for item in items:
            backend = get(item) if isinstance(item, str) else item
            if not isinstance(backend, Backend) or not backend.name:
                raise ValueError(f"{item!r} is not a backend: give a name ({', '.join(BUILTIN)}) or an instance of a "
                                 "ptlite.backends.base.Backend subclass with a name")
            if any(b.name == backend.name for b in chosen):
                raise ValueError(f"backend {backend.name!r} is selected twice")
            chosen.append(backend)
    return [b for b in chosen if b.name != REFERENCE] + [reference()]


def supported_operators(backend: str | Backend) -> list[str]:
    """The operators a backend has a kernel for, sorted: every operator of the table (`ptlite.ops`, those you
    declared included) that it does not decline when asked by the operator alone (`kernel(op, None)`), without
    the structural ones, which the interpreter runs itself (prim::Constant, prim::If, prim::Loop,
    ptlite::module_state). A backend may still decline a node of one of these for its arguments (the native
    backend runs float32 tensors; another dtype or layout goes to the next backend): the NumPy reference, asked
    last, runs every operator (`ptlite ops --supported` prints these lists).

    backend: a built-in backend's name (or an alias such as "cpu"), or a Backend object; ValueError naming the
    known ones, or saying why that one is not available here."""
    from ptlite import ops

    target = get(backend) if isinstance(backend, str) else backend
    return sorted(key for key, op in ops.all_ops().items() if not op.structural and target.kernel(op, None) is not None)


def lowering_passes(target: Backend) -> dict[str, str]:
    """Every lowering pass a blocklist may name when lowering for `target` -> what blocking it skips: the target's
    own, then the other available backends' (which skip nothing for this target), so that one blocklist serves
    whichever backend a program is lowered for."""
    passes = dict(target.lowering_passes())
    for name in BUILTIN:
        if name in OPT_IN and name not in _CREATED:
            continue
        other = _create(name)
        if name == target.name or isinstance(other, BackendUnavailable):
            continue
        for key in other.lowering_passes():
            passes.setdefault(key, f"nothing when lowering for {target.name} (a pass of the {name} backend's)")
    return passes


def _create(name: str) -> Backend | BackendUnavailable:
    made = _CREATED.get(name)
    if made is None:
        try:
            made = importlib.import_module(BUILTIN[name]).create()
        except BackendUnavailable as exc:
            made = exc
        _CREATED[name] = made
    return made


class _CallablePackage(types.ModuleType):
    """Lets `ptlite.backends()` (the public listing) be this package called."""

    def __call__(self) -> list[BackendInfo]:
        return available()


sys.modules[__name__].__class__ = _CallablePackage
