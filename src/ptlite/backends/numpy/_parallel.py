"""Split large NumPy work across threads: NumPy releases the GIL inside ufunc loops, so exp-heavy activations
and depthwise convolutions (which BLAS does not run) could use every core, as PyTorch's kernels do.

Off by default (one thread): on a 2-core machine these threads lose more than they gain next to OpenBLAS's own
workers, which spin-wait between matrix products on the same cores (docs/decisions.md, Threads). Set
PTLITE_KERNEL_THREADS=n, or call set_num_threads here, to use n threads where a machine has cores BLAS leaves idle."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ._layout import flat_pair

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

def _default_threads() -> int:
    text = os.environ.get("PTLITE_KERNEL_THREADS", "1")
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"PTLITE_KERNEL_THREADS must be a positive integer, got {text!r}")
    return value


_threads = _default_threads()
_pool: ThreadPoolExecutor | None = None


def num_threads() -> int:
    """Threads ptlite's own kernels use (BLAS has its own pool)."""
    return _threads


def set_num_threads(n: int) -> None:
    """Use n threads in ptlite's own kernels (1 runs everything on the calling thread)."""
    global _threads, _pool
    if int(n) < 1:
        raise ValueError(f"number of threads must be at least 1, got {n}")
    _threads = int(n)
    if _pool is not None:
        _pool.shutdown(wait=True)
        _pool = None


def parallel_for(body: Callable[[int, int], None], total: int, grain: int) -> None:
    """Run body(start, stop) over [0, total) in up to num_threads() contiguous pieces of at least `grain` items."""
    global _pool
    pieces = min(_threads, total // max(grain, 1))
    if pieces <= 1:
        body(0, total)
        return
    if _pool is None:
        from concurrent.futures import ThreadPoolExecutor  # on first use: it imports logging, slow to import

        _pool = ThreadPoolExecutor(max_workers=_threads - 1, thread_name_prefix="ptlite")
    bounds = [total * i // pieces for i in range(pieces + 1)]
    futures = [_pool.submit(body, bounds[i], bounds[i + 1]) for i in range(1, pieces)]
    body(bounds[0], bounds[1])
    for f in futures:
        f.result()


# Below this many elements an elementwise kernel runs on one thread (splitting costs ~20-50 us).
ELEMENTWISE_GRAIN = 1 << 16


def elementwise(fn: Callable[[np.ndarray, np.ndarray], object], x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """fn(x_piece, out_piece) over pieces of x and out (same shape), in parallel when large.

    The pieces are slices of flat views in memory order, so x and out must be dense in the same order (both
    C-contiguous, both channels-last, ...); otherwise fn runs once on the whole arrays. Small channels-last
    arrays run as one flat piece too: NumPy's loops are quickest on contiguous 1-D arrays.
    """
    small = x.size < 2 * ELEMENTWISE_GRAIN
    pair = None if small and x.flags.c_contiguous and out.flags.c_contiguous else flat_pair(x, out)
    if pair is None:
        fn(x, out)
    elif small:
        fn(*pair)
    else:
        flat_x, flat_out = pair
        parallel_for(lambda a, b: fn(flat_x[a:b], flat_out[a:b]), x.size, ELEMENTWISE_GRAIN)
    return out
