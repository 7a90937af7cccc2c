"""The operator table: for each operator, its schema and the kernel that runs it.

Capture, passes, the loader's missing-operator check and the interpreter all read this one table. Kernels
register themselves with the `kernel` decorator in the family modules of `ptlite.backends.numpy.kernels`.
Families are imported lazily: looking up an operator imports the one family that a generated index
(`ptlite/backends/numpy/kernels/_index.py`: operator key -> family) names for it, so that loading a program imports only
the kernels it uses; listing the table (`all_ops`, `overloads`) imports every family. The index is only a hint:
a key it lacks or names wrongly makes the lookup import every family, so a stale index costs time, never a kernel.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import cached_property
from typing import Any

from ptlite.ops.schema import Schema, parse_schema


class OpDef:
    """One row of the table: an operator's schema and the Python callable implementing it.

    The schema text is parsed when first needed, so registering hundreds of kernels stays cheap at import.
    `accepts_out`: the kernel also takes a keyword `out=` array (a buffer of the memory plan) and writes its
    result there when `out` has exactly the result's shape and dtype, returning it; otherwise it allocates as usual.
    """

    __slots__ = ("key", "schema_text", "impl", "module", "accepts_out", "__dict__")

    def __init__(self, key: str, schema_text: str, impl: Callable[..., Any], module: str = "",
                 accepts_out: bool = False) -> None:
        self.key = key
        self.schema_text = schema_text
        self.impl = impl
        self.module = module  # the module whose import registered it: what to import to get it back
        self.accepts_out = accepts_out

    @cached_property
    def schema(self) -> Schema:
        return parse_schema(self.schema_text)

    def __repr__(self) -> str:
        return f"OpDef({self.schema_text!r})"


def _key_of(schema_text: str) -> str:
    head = schema_text.partition("(")[0].strip()
    if not head.partition("::")[2]:
        raise ValueError(f"schema {schema_text!r} lacks a qualified operator name (e.g. 'aten::relu')")
    return head


def _registering_module() -> str:
    """Name of the module whose body is running the current registration (the caller of the caller of this)."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_name != "<module>":
        frame = frame.f_back
    return frame.f_globals.get("__name__", "") if frame is not None else ""


_KERNELS_PACKAGE = "ptlite.backends.numpy.kernels"
# Operator key -> its row: an OpDef or, until the operator is first looked up, the arguments that make it (so that
# importing a family costs little more than a dict entry per kernel: most of a family's kernels are never looked
# up by a given program). Read it through `_row`.
_TABLE: dict[str, OpDef | tuple[str, str, Callable[..., Any], str, bool]] = {}
_FAMILY_PREFIX = _KERNELS_PACKAGE + "."
_LOADED = False  # every family imported
_INDEX: dict[str, str | None] = {}  # operator key -> the family the generated index names for it, once looked up


def kernel(*schemas: str, out: bool = False) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as the kernel of every operator schema given.

    A kernel takes the operator's arguments positionally (NumPy arrays for tensors, Python values otherwise)
    and returns the result, or a tuple of results for operators with several outputs. out=True declares an out
    variant (see OpDef.accepts_out): the function takes a keyword `out=None` besides the schema's arguments.
    """

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        module = _registering_module()
        family = module.startswith(_FAMILY_PREFIX)
        for text in schemas:
            key = _key_of(text)
            if not family and not _LOADED:
                _load_family_of(key)  # so that clashing with a ptlite kernel not yet imported is reported here
            registered = _TABLE.get(key)
            if registered is not None:
                impl = registered[2] if type(registered) is tuple else registered.impl
                if impl is not fn:
                    raise ValueError(f"operator {key} registered twice ({impl.__module__} and {fn.__module__})")
            _TABLE[key] = (key, text, fn, module, out)
        return fn

    return wrap


def _row(key: str) -> OpDef | None:
    """The table's OpDef for a key (made from its registration on first use), or None."""
    row = _TABLE.get(key)
    if type(row) is tuple:
        row = _TABLE[key] = OpDef(*row)
    return row


def _ensure_loaded() -> None:
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from ptlite.backends.numpy import kernels

        kernels.load_all()


def _family_of(key: str) -> str | None:
    """The family the generated index names for `key`, found by searching the index's text (one line per key):
    a program looks up a handful of keys, which costs less than reading all of them into a dict."""
    if key not in _INDEX:
        from ptlite.backends.numpy.kernels._index import FAMILY_OPERATORS

        line = f" {key}\n"  # keys hold no whitespace, so this matches a whole line's key only
        _INDEX[key] = next((family for family, keys in FAMILY_OPERATORS.items() if line in keys), None)
    return _INDEX[key]


def _load_family_of(key: str) -> None:
    """Import the family that the index names for `key`, if any (a module the index names but that is gone is
    skipped: the caller then imports every family)."""
    family = _family_of(key)
    if family is None:
        return
    from ptlite.backends.numpy import kernels

    try:
        kernels.load_family(family)
    except ModuleNotFoundError as exc:
        if exc.name != f"{_KERNELS_PACKAGE}.{family}":
            raise


def lookup(key: str) -> OpDef | None:
    """The table row for 'aten::add.Tensor', or for a name without overload if that is how it is registered.

    Imports the operator's kernel family on first use; a key the table lacks imports every family."""
    op = _row(key)
    if op is None and not _LOADED:
        _load_family_of(key)
        op = _row(key)
        if op is None:
            _ensure_loaded()
            op = _row(key)
    return op


def get(key: str) -> OpDef:
    """Like `lookup`, but raises KeyError naming the operator."""
    op = lookup(key)
    if op is None:
        raise KeyError(f"ptlite has no kernel for operator {key}")
    return op


def all_ops() -> dict[str, OpDef]:
    """Every registered operator, by key."""
    _ensure_loaded()
    return {key: _row(key) for key in list(_TABLE)}


def overloads(name: str) -> list[OpDef]:
    """Every registered overload of an operator name such as 'aten::add'."""
    return [op for op in all_ops().values() if op.schema.name == name]


def kernel_index() -> dict[str, str]:
    """Operator key -> family module name, for every kernel that a family of `ptlite.backends.numpy.kernels` registers
    (imports every family): the contents of the generated index."""
    return {key: op.module.removeprefix(_FAMILY_PREFIX) for key, op in sorted(all_ops().items())
            if op.module.startswith(_FAMILY_PREFIX)}
