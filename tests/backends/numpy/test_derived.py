"""ptlite.backends.numpy._derived: values kept per weight array (the fused block's plans and the recurrent
layers' prepared gates are tested with their kernels; these are the cache's own rules)."""

from __future__ import annotations

import gc

import numpy as np

from ptlite.backends.numpy import _derived
from ptlite.ir.weights import seal


def test_value_is_kept_per_anchor_and_key_and_goes_with_the_anchor():
    anchor = np.arange(6.0)
    anchor.flags.writeable = False
    other = np.ones(3)
    made = []

    def make():
        made.append(1)
        return len(made)

    assert _derived.derived((anchor, other), ("a",), make) == 1
    assert _derived.derived((anchor, other), ("a",), make) == 1, "not kept"
    assert _derived.derived((anchor, other), ("b",), make) == 2, "another key took the first key's value"
    assert _derived.derived((anchor, np.ones(3)), ("a",), make) == 3, "kept for another array of equal values"
    assert _derived.derived((anchor, None), ("a",), make) == 4, "kept when an array became None"
    key = id(anchor)
    del anchor
    gc.collect()
    assert key not in _derived._CACHE, "the values outlived their anchor"


def test_writable_arrays_changed_in_place_remake_the_value():
    anchor, other = np.arange(4.0), np.zeros(2)
    assert _derived.derived((anchor, other), (), lambda: float(anchor.sum() + other.sum())) == 6.0
    other += 1.0
    assert _derived.derived((anchor, other), (), lambda: float(anchor.sum() + other.sum())) == 8.0
    anchor *= 2.0
    assert _derived.derived((anchor, other), (), lambda: float(anchor.sum() + other.sum())) == 14.0


def test_derived_value_of_an_anchor_viewed_by_another_array_is_not_kept():
    """A value whose other arrays include a view of the anchor is made at every call and not kept: kept, the view
    would hold the anchor alive and the entry would never go."""
    anchor = np.arange(12.0)  # owns its memory: a view of it keeps this very object alive
    view = anchor[4:]
    calls = []
    for _ in range(2):
        assert _derived.derived((anchor, view), ("k",), lambda: calls.append(1) or len(calls)) == len(calls)
    assert calls == [1, 1], "the value was kept although it holds the anchor alive"
    key = id(anchor)
    del anchor, view
    gc.collect()
    assert key not in _derived._CACHE


def test_sealed_arrays_are_not_compared_at_each_call():
    anchor = seal(np.arange(4.0))
    other = seal(np.ones(2))
    _derived.derived((anchor, other), ("sealed",), lambda: 1)
    assert _derived._entries(anchor)[("sealed",)].snapshot is None, "sealed arrays were copied for comparison"
