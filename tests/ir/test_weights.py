"""Weights nothing can change: sealing the arrays a load makes itself, and telling frozen weights apart."""

from __future__ import annotations

import numpy as np

from ptlite.ir.weights import frozen, seal


def test_sealed_array_is_frozen_without_a_copy_and_stays_read_only():
    for a in (np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros((0, 4), np.float16), np.array(2.0),
              np.ones(3, np.int64), np.ones(2, bool)):
        sealed = seal(a)
        assert sealed.shape == a.shape and sealed.dtype == a.dtype, a.dtype
        assert a.size == 0 or np.shares_memory(sealed, a), f"a {a.dtype} array was copied"
        assert frozen(sealed) and not frozen(a), a.dtype
        assert not a.flags.writeable, "the sealed array's original stayed writeable"
        try:
            sealed.flags.writeable = True
        except ValueError:
            pass
        assert not sealed.flags.writeable, f"a sealed {a.dtype} array was made writeable again"
    strided = np.arange(8.0)[::2]
    assert seal(strided) is strided, "a strided view was sealed"
    mapped = np.arange(3.0)
    mapped = np.asarray(memoryview(mapped).toreadonly())
    assert seal(mapped) is mapped, "an array frozen already was sealed again"
