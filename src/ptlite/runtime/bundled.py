"""Replaying the example calls a file bundles, and how far ptlite's outputs are from PyTorch's answers to them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ptlite.errors import PtliteError
from ptlite.ir.graph import BundledInput


@dataclass(frozen=True)
class OutputCheck:
    """One output of one bundled call, compared: `error` is the largest |ptlite - torch|, `excess` the largest
    amount by which an element exceeds its tolerance atol + rtol * |torch| (0 when all are within: `passed`)."""

    call: int
    method: str
    output: str
    passed: bool
    error: float
    excess: float
    atol: float
    rtol: float
    problem: str = ""  # a mismatch that is not a difference of values (shape, dtype, type), else ""

    def describe(self) -> str:
        """One line: the call, the output, the difference and the tolerance."""
        what = f"call {self.call} ({self.method}) {self.output}"
        if self.problem:
            return f"{what}: {self.problem}"
        verdict = "ok" if self.passed else f"FAILS by {self.excess:.3g}"
        return f"{what}: max |diff| {self.error:.3g} (tolerance {self.atol:.3g} + {self.rtol:.3g} x |torch|): {verdict}"


def leaves(result: Any, prefix: str = "output") -> list[tuple[str, Any]]:
    """A method's result flattened into (name, leaf) pairs in order: tuples and lists by position, dicts by key (in
    their order), everything else a leaf; the names say where ("output[0]", "output['logits']")."""
    if isinstance(result, (tuple, list)):
        return [pair for i, item in enumerate(result) for pair in leaves(item, f"{prefix}[{i}]")]
    if isinstance(result, dict):
        return [pair for key, item in result.items() for pair in leaves(item, f"{prefix}[{key!r}]")]
    return [(prefix, result)]


def compare_output(call: int, bundle: BundledInput, index: int, name: str, got: Any) -> OutputCheck:
    """ptlite's leaf `got` against the bundled answer at `index`, within that output's tolerance."""
    want = bundle.outputs[index]
    atol, rtol = bundle.atol[index], bundle.rtol[index]

    def failed(problem: str) -> OutputCheck:
        return OutputCheck(call, bundle.method, name, False, float("inf"), float("inf"), atol, rtol, problem)

    if _is_number(want) and (_is_number(got) or (isinstance(got, np.ndarray) and got.ndim == 0)):
        want, got = np.asarray(want, np.float64), np.asarray(got, np.float64)  # numbers: within the tolerance
    elif not isinstance(want, np.ndarray):
        if isinstance(got, np.ndarray) or got != want:
            return failed(f"is {str(got)[:60]}, torch gave {str(want)[:60]}")
        return OutputCheck(call, bundle.method, name, True, 0.0, 0.0, atol, rtol)
    if not isinstance(got, np.ndarray):
        return failed(f"is a {type(got).__name__}, torch gave an array of shape {list(want.shape)}")
    if got.shape != want.shape:
        return failed(f"has shape {list(got.shape)}, torch gave {list(want.shape)}")
    if want.size == 0:
        return OutputCheck(call, bundle.method, name, True, 0.0, 0.0, atol, rtol)
    if want.dtype.kind in "biu" and got.dtype.kind in "biu":  # labels, masks, indices: exactly
        wrong = int(np.count_nonzero(got.astype(np.int64) != want.astype(np.int64)))
        if wrong:
            return failed(f"differs from torch's in {wrong} of {want.size} elements (integers compare exactly)")
        return OutputCheck(call, bundle.method, name, True, 0.0, 0.0, atol, rtol)
    g, w = got.astype(np.float64), want.astype(np.float64)
    same_special = (np.isnan(g) & np.isnan(w)) | (np.isinf(g) & (g == w))
    diff = np.where(same_special, 0.0, np.abs(g - w))
    diff = np.where(np.isnan(diff), np.inf, diff)
    excess = float(np.max(diff - (atol + rtol * np.abs(np.where(np.isfinite(w), w, 0.0)))))
    return OutputCheck(call, bundle.method, name, excess <= 0, float(diff.max()), max(excess, 0.0), atol, rtol)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def check(bundled: list[BundledInput], run: Callable[[str, list[Any]], Any]) -> list[OutputCheck]:
    """Every output of every bundled call, compared; `run(method, inputs)` runs a method on ptlite. A call that
    raises a ptlite error fails as a whole (its OutputCheck names the error) and the others are still checked."""
    results = []
    for call, bundle in enumerate(bundled):
        try:
            got = leaves(run(bundle.method, list(bundle.inputs)))
        except PtliteError as exc:
            results.append(OutputCheck(call, bundle.method, "outputs", False, float("inf"), float("inf"), 0.0, 0.0,
                                       f"raises {type(exc).__name__}: {str(exc)[:300]}"))
            continue
        if len(got) != len(bundle.outputs):
            results.append(OutputCheck(call, bundle.method, "outputs", False, float("inf"), float("inf"), 0.0, 0.0,
                                       f"ptlite returns {len(got)} output(s), torch gave {len(bundle.outputs)}"))
            continue
        results.extend(compare_output(call, bundle, i, name, value) for i, (name, value) in enumerate(got))
    return results
