"""The operator table: for each operator, its schema and the kernel that runs it.

Capture, passes, `export_opnames`, the loader's missing-operator check and the interpreter all read this one
table. Kernels register themselves with the `kernel` decorator in `ptlite.runtime.kernels`; the table is filled
the first time it is read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .schema import Schema, parse_schema


@dataclass(frozen=True)
class OpDef:
    """One row of the table: an operator's schema and the Python callable implementing it."""

    schema: Schema
    impl: Callable[..., Any]

    @property
    def key(self) -> str:
        return self.schema.key


_TABLE: dict[str, OpDef] = {}
_LOADED = False


def kernel(*schemas: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as the kernel of every operator schema given.

    A kernel takes the operator's arguments positionally (NumPy arrays for tensors, Python values otherwise)
    and returns the result, or a tuple of results for operators with several outputs.
    """

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        for text in schemas:
            schema = parse_schema(text)
            if schema.key in _TABLE and _TABLE[schema.key].impl is not fn:
                raise ValueError(f"operator {schema.key} registered twice "
                                 f"({_TABLE[schema.key].impl.__module__} and {fn.__module__})")
            _TABLE[schema.key] = OpDef(schema, fn)
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
