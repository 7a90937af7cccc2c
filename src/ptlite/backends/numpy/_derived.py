"""Values a kernel derives from weight arrays (a fused block's plan, an RNN layer's reordered gates), kept from call
to call and dropped with the weights.

A value is remade when the arrays it came from are other objects, or when one of them could still be written
(an in-memory program's arrays) and now holds other values: those are compared with copies at every call. A
loaded file's weights are read-only views of a read-only map, so their values are never compared.

The first array is the anchor: values are kept per anchor, behind a weak reference, so that a discarded Module's
derived values (and the weights they hold) do not stay, and a value is never taken for another array that
reuses the anchor's address. A value must not hold a view of the anchor (that would keep it alive).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

T = TypeVar("T")

PER_ANCHOR = 64  # keys (shapes, arguments) kept per anchor: beyond that the anchor's values are all dropped


class _Entry:
    """A derived value with the arrays it came from (bar the anchor, held weakly) and, when any of them could
    change in place, copies of all of them. A plain class: a dataclass costs ~2 ms at import, which loading a
    program pays."""

    __slots__ = ("others", "snapshot", "value")

    def __init__(self, others: tuple, snapshot: tuple | None, value: Any) -> None:
        self.others = others
        self.snapshot = snapshot
        self.value = value

    def holds_for(self, arrays: tuple) -> bool:
        others = self.others
        if len(arrays) != len(others) + 1:
            return False
        for i, a in enumerate(others, 1):  # a loop, not any(): this runs at every call of a fused block
            if arrays[i] is not a:
                return False
        return self.snapshot is None or all(
            (a is None and b is None) or (a is not None and b is not None and np.array_equal(a, b))
            for a, b in zip(self.snapshot, arrays))


# id(anchor) -> (a weak reference to it, {key: entry}); the entry goes when the anchor is collected
_CACHE: dict[int, tuple[weakref.ref, dict[tuple, _Entry]]] = {}


def derived(arrays: tuple[Any, ...], key: tuple, make: Callable[[], T]) -> T:
    """make(), for these arrays and this key, made once and kept while arrays[0] (an ndarray) lives. The other
    arrays (ndarrays or None) must be the same objects at later calls; `key` holds what else the value depends
    on (shapes, dtypes, arguments), hashable."""
    anchor = arrays[0]
    entries = _entries(anchor)
    entry = entries.get(key)
    if entry is None or not entry.holds_for(arrays):
        value = make()
        if any(_based_on(a, anchor) for a in arrays[1:]):
            return value  # not kept: through that view the entry would hold the anchor alive (made at every call)
        from ptlite.ir.weights import frozen  # here: a load need not import it, only a first call making a value

        snapshot = None if all(a is None or frozen(a) for a in arrays) else \
            tuple(None if a is None else np.array(a, copy=True) for a in arrays)
        if len(entries) >= PER_ANCHOR:
            entries.clear()
        entry = entries[key] = _Entry(arrays[1:], snapshot, value)
    return entry.value


def _entries(anchor: np.ndarray) -> dict[tuple, _Entry]:
    key = id(anchor)
    entry = _CACHE.get(key)
    if entry is None or entry[0]() is not anchor:
        # the callback holds the dict itself: at interpreter exit the module's globals may already be None
        entry = (weakref.ref(anchor, lambda _ref, key=key, cache=_CACHE: cache.pop(key, None)), {})
        _CACHE[key] = entry
    return entry[1]


def _based_on(a: Any, anchor: np.ndarray) -> bool:
    """Whether array a is a view (of a view ...) of the anchor."""
    while isinstance(a, np.ndarray):
        a = a.base
        if a is anchor:
            return True
    return False
