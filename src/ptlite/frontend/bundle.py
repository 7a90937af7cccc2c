"""Bundled inputs: example calls run on the PyTorch model, stored with its answers so that the device can check the
file (`ptlite check`) as the lite interpreter's bundled inputs let apps do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ptlite.errors import CaptureError
from ptlite.ir.graph import BundledInput
from ptlite.runtime.bundled import leaves

DEFAULT_TOLERANCE = 1e-3  # float32 kernels that reorder sums (Winograd, blocked GEMMs) stay well inside it


def bundle_inputs(model: Any, calls: Any, method: str = "forward", tolerance: float = DEFAULT_TOLERANCE,
                  atol: float | None = None, rtol: float | None = None) -> list[BundledInput]:
    """Run `model` (an nn.Module, a TorchScript or lite-interpreter module) on each call's inputs and return the
    calls with its outputs, to store with `ptlite.save(..., bundled_inputs=...)`.

    calls: a list of calls, each a tuple of positional inputs (tensors, NumPy arrays, numbers); a single tensor or
        array is one call with one input, a single tuple one call.
    tolerance: each output element may differ from PyTorch's by atol + rtol * |torch|, where by default
        atol = tolerance * the output's largest magnitude and rtol = tolerance (an output of all zeros gets
        atol = tolerance); `atol` and `rtol` set them outright instead.
    """
    import torch

    if not all(t is None or 0 <= t < float("inf") for t in (tolerance, atol, rtol)):
        raise ValueError(f"tolerances must be finite non-negative numbers, not {tolerance}, {atol}, {rtol}")
    run = getattr(model, method, None) if method != "forward" else model
    if run is None:
        raise CaptureError(f"the model has no method {method!r} to bundle inputs for")
    bundled = []
    for i, call in enumerate(_calls(calls, torch)):
        torch_args = [torch.from_numpy(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a for a in call]
        try:
            with torch.no_grad():
                result = run(*torch_args)
        except Exception as exc:
            raise CaptureError(f"bundled input {i}: the PyTorch model fails on it ({type(exc).__name__}: "
                               f"{str(exc)[:300]})") from None
        # (leaves flattens named tuples as the tuples they are, as ptlite returns them)
        outputs = [_to_numpy(value, f"bundled input {i} {name}") for name, value in leaves(result)]
        scale = [_magnitude(o) for o in outputs]
        bundled.append(BundledInput(
            method, [_to_numpy(a, f"bundled input {i} argument {j}") for j, a in enumerate(call)], outputs,
            atol=[atol if atol is not None else tolerance * (s if s > 0 else 1.0) for s in scale],
            rtol=[rtol if rtol is not None else tolerance] * len(outputs)))
    return bundled


def _magnitude(output: Any) -> float:
    """The largest finite magnitude of a float output (what its default atol scales with); 1.0 for the rest."""
    if isinstance(output, np.ndarray) and output.dtype.kind == "f":
        finite = np.abs(output[np.isfinite(output)])
        return float(finite.max()) if finite.size else 1.0
    if isinstance(output, float) and np.isfinite(output):
        return abs(output)
    return 1.0


def _calls(calls: Any, torch: Any) -> list[tuple[Any, ...]]:
    if isinstance(calls, (torch.Tensor, np.ndarray)):
        return [(calls,)]
    if isinstance(calls, tuple):
        return [calls]
    if not isinstance(calls, Sequence) or not calls:
        raise TypeError("calls must be a non-empty list of input tuples (or one tensor, or one tuple)")
    return [c if isinstance(c, tuple) else (c,) for c in calls]


def _to_numpy(value: Any, what: str) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().cpu().contiguous().numpy().copy()
    if isinstance(value, np.ndarray) or value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise CaptureError(f"{what} is a {type(value).__name__}, which a file cannot bundle (tensors, arrays, numbers, "
                       "strings)")
