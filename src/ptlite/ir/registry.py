"""The operator table: for each operator, its schema and the kernel that runs it.

Capture, passes, `export_opnames`, the loader's missing-operator check and the interpreter all read this one
table. Kernels register themselves with the `kernel` decorator in `ptlite.runtime.kernels`; the table is filled
the first time it is read.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

from .schema import Schema, parse_schema


class OpDef:
    """One row of the table: an operator's schema and the Python callable implementing it.

    The schema text is parsed when first needed, so registering hundreds of kernels stays cheap at import.
    """

    __slots__ = ("key", "schema_text", "impl", "__dict__")

    def __init__(self, key: str, schema_text: str, impl: Callable[..., Any]) -> None:
        self.key = key
        self.schema_text = schema_text
        self.impl = impl

    @cached_property
    def schema(self) -> Schema:
        return parse_schema(self.schema_text)

    def __repr__(self) -> str:
        return f"OpDef({self.schema_text!r})"


def _key_of(schema_text: str) -> str:
    head = schema_text.split("(", 1)[0].strip()
    if "::" not in head or not head.split("::", 1)[1]:
        raise ValueError(f"schema {schema_text!r} lacks a qualified operator name (e.g. 'aten::relu')")
    return head


_TABLE: dict[str, OpDef] = {}
_LOADED = False


def kernel(*schemas: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as the kernel of every operator schema given.

    A kernel takes the operator's arguments positionally (NumPy arrays for tensors, Python values otherwise)
    and returns the result, or a tuple of results for operators with several outputs.
    """

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        for text in schemas:
            key = _key_of(text)
            if key in _TABLE and _TABLE[key].impl is not fn:
                raise ValueError(f"operator {key} registered twice "
                                 f"({_TABLE[key].impl.__module__} and {fn.__module__})")
            _TABLE[key] = OpDef(key, text, fn)
        return fn

    return wrap


def _ensure_loaded() -> None:
    global _LOADED
    if not _LOADED:
        _LOADED = True
        from ptlite.runtime import kernels  # noqa: F401  (importing registers every kernel)


def lookup(key: str) -> OpDef | None:
    """The table row for 'aten::add.Tensor', or for a name without overload if that is how it is registered."""
    _ensure_loaded()
    return _TABLE.get(key)


def get(key: str) -> OpDef:
    """Like `lookup`, but raises KeyError naming the operator."""
    op = lookup(key)
    if op is None:
        raise KeyError(f"ptlite has no kernel for operator {key}")
    return op


def all_ops() -> dict[str, OpDef]:
    """Every registered operator, by key."""
    _ensure_loaded()
    return dict(_TABLE)


def overloads(name: str) -> list[OpDef]:
    """Every registered overload of an operator name such as 'aten::add'."""
    _ensure_loaded()
    return [op for op in _TABLE.values() if op.schema.name == name]
