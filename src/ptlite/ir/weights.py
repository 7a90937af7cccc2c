"""Weights nothing can change: how to tell (a loaded file's, mapped read-only) and how to make arrays so (those a
load folds or packs itself). Kernels that keep values derived from weights compare them with copies only when the
weights are not frozen."""

from __future__ import annotations

import numpy as np


def frozen(a: np.ndarray) -> bool:
    """Whether nothing can change a's values: a read-only view, over read-only views, of a read-only buffer (a
    loaded file's memory map). An array that owns its memory can be made writeable again, so it is not."""
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        a = a.base
    if a is None:
        return False
    try:
        return memoryview(a).readonly
    except TypeError:
        return False


def seal(a: np.ndarray) -> np.ndarray:
    """A read-only view of a C-contiguous array, read through a read-only memoryview so that NumPy will not make it
    writeable again: frozen() holds for it, with no copy. For arrays that only their maker holds, such as the
    weights ptlite.load folds and packs from a .ptl file, whose derived values would otherwise be compared at every
    call. `a` itself is made read-only too; what could still change the values is code that digs the original out
    of the view (`.base.obj`) and makes it writeable again, which then also leaves kept values stale. Other arrays
    (frozen already, or not C-contiguous) are returned as they are."""
    if frozen(a) or not a.flags.c_contiguous:
        return a
    a.flags.writeable = False
    sealed = np.asarray(memoryview(a).toreadonly())
    return sealed if sealed.dtype == a.dtype and sealed.shape == a.shape else a
