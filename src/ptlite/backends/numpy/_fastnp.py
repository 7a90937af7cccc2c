"""Quicker stand-ins for NumPy helpers that the kernels call hundreds of times per run, where NumPy's own is a Python
wrapper whose overhead rivals the work on small layers (docs/decisions.md, Python-level overhead):

- `clip`: the clip ufunc itself; np.clip checks and forwards its arguments in Python first. Callers pass both
  bounds, as scalars of the array's dtype.
- `tile_row` / `tile_cols`: np.tile of a row or of a matrix's rows, by a broadcast assignment.
- `strided_view`: a read-only as_strided view through ndarray's constructor, which also checks that the view
  stays inside the array (as_strided does not).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided

try:
    from numpy._core.umath import clip  # NumPy 2
except ImportError:  # pragma: no cover - NumPy 1.x keeps it in numpy.core; anything else gets the wrapper
    try:
        from numpy.core.umath import clip
    except ImportError:
        clip = np.clip

__all__ = ["clip", "strided_view", "tile_cols", "tile_row"]


def tile_row(row: np.ndarray, reps: int) -> np.ndarray:
    """np.tile(row, reps) of a 1-D array: the row repeated `reps` times, as a new C-contiguous 1-D array."""
    out = np.empty((reps, row.shape[0]), dtype=row.dtype)
    out[...] = row
    return out.reshape(-1)


def tile_cols(matrix: np.ndarray, reps: int) -> np.ndarray:
    """np.tile(matrix, (1, reps)) of a 2-D array: each row repeated `reps` times, as a new C-contiguous array."""
    rows, cols = matrix.shape
    out = np.empty((rows, reps, cols), dtype=matrix.dtype)
    out[...] = matrix[:, None, :]
    return out.reshape(rows, reps * cols)


def strided_view(base: np.ndarray, shape: Sequence[int], strides: Sequence[int]) -> np.ndarray:
    """as_strided(base, shape, strides, writeable=False): a read-only view of base's memory from its first element.
    A C-contiguous base goes through ndarray's constructor (which refuses a view reaching outside it); any other
    falls back to as_strided."""
    if base.flags.c_contiguous and base.size:
        view = np.ndarray(tuple(shape), dtype=base.dtype, buffer=base, strides=tuple(strides))
        view.flags.writeable = False
        return view
    return as_strided(base, shape=tuple(shape), strides=tuple(strides), writeable=False)
