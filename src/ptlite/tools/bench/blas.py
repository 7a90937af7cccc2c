"""The BLAS library NumPy uses (through threadpoolctl) and the settings that can slow it."""

from __future__ import annotations

import os
from typing import Any

# Set on some machines to pick a BLAS kernel; they can select a slow one, so comparisons run without them.
SLOW_BLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
INSTALL = {"torch": "pip install 'ptlite[export]'", "onnxruntime": "pip install onnxruntime",
           "threadpoolctl": "pip install threadpoolctl"}


def _threadpoolctl() -> Any:
    try:
        import threadpoolctl
    except ImportError:
        return None
    return threadpoolctl


def blas_libraries() -> tuple[list[dict[str, Any]] | None, str | None]:
    """The BLAS libraries NumPy uses as threadpoolctl reports them (library, version, kernel, threads), or
    (None, why not) when threadpoolctl is missing."""
    threadpoolctl = _threadpoolctl()
    if threadpoolctl is None:
        return None, f"threadpoolctl is not installed ({INSTALL['threadpoolctl']}): BLAS unknown, its threads not set"
    libraries = [{"library": info.get("internal_api"), "version": info.get("version"),
                  "kernel": info.get("architecture"), "threads": info.get("num_threads")}
                 for info in threadpoolctl.threadpool_info() if info.get("user_api") == "blas"]
    return libraries, None


def _slow_blas_settings() -> dict[str, str]:
    return {var: os.environ[var] for var in SLOW_BLAS_VARIABLES if var in os.environ}
