"""Check that a ptlite (or PyTorch Mobile .ptl) file computes what PyTorch computes: run both on the same inputs and
measure every output's largest difference against a tolerance relative to the reference's magnitude.

The criterion is the one ptlite's tests hold every model to: max |ptlite - reference| <= tolerance x max |reference|
(1e-4 by default); integer, boolean and string outputs must be equal. `compare_outputs` needs NumPy only;
`run_reference`, which runs the PyTorch side (an eager model from 'module:function', a TorchScript file, or a .ptl
file on PyTorch's lite interpreter), imports torch. `ptlite compare` is the command line for both.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_TOLERANCE = 1e-4


@dataclass(frozen=True)
class OutputDifference:
    """How one output of ptlite differs from the reference's.

    name: where the output sits in the result ('output', '0', 'out', '1.0', ...). max_abs: the largest absolute
    difference (inf where only one side is NaN or infinite). scale: the largest finite magnitude of the reference.
    relative: max_abs / scale (max_abs when scale is 0). problem: why the two cannot be compared value by value (shape,
    dtype or structure), or None.
    """

    name: str
    shape: tuple[int, ...] | None
    dtype: str | None
    max_abs: float
    scale: float
    relative: float
    tolerance: float
    exact: bool = False  # integer, boolean and string outputs must be equal
    problem: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the output matches: no problem, and within tolerance (equal, for exact outputs)."""
        if self.problem is not None:
            return False
        return self.max_abs == 0 if self.exact else self.relative <= self.tolerance


def flatten_outputs(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """(path, leaf) pairs of a nested result: dicts by key, tuples and lists by position ('0', 'out.1', ...); a list
    of numbers is one leaf, and a result that is not a container is one leaf called 'output'."""
    if isinstance(value, dict):
        items = list(value.items())
    elif isinstance(value, (list, tuple)) and not _is_number_list(value):
        items = list(enumerate(value))
    else:
        return [(prefix or "output", value)]
    return [leaf for key, v in items for leaf in flatten_outputs(v, f"{prefix}.{key}" if prefix else str(key))]


def _is_number_list(value: list | tuple) -> bool:
    """Numbers (Python or NumPy scalars, 0-d arrays): a shape or a list of scores, one leaf."""
    return bool(value) and all(isinstance(v, (int, float, bool, np.generic))
                               or (isinstance(v, np.ndarray) and v.ndim == 0) for v in value)


def compare_outputs(ours: Any, reference: Any, tolerance: float = DEFAULT_TOLERANCE) -> list[OutputDifference]:
    """One OutputDifference per output of the reference (and one per output only ptlite has), in order."""
    if not tolerance >= 0:
        raise ValueError(f"tolerance must be a non-negative number, got {tolerance!r}")
    mine, theirs = dict(flatten_outputs(ours)), flatten_outputs(reference)
    results = [difference(name, mine.pop(name), value, tolerance) if name in mine
               else _problem(name, value, tolerance, "ptlite's result has no such output")
               for name, value in theirs]
    results += [_problem(name, value, tolerance, "the reference's result has no such output")
                for name, value in mine.items()]
    return results


def difference(name: str, ours: Any, reference: Any, tolerance: float = DEFAULT_TOLERANCE) -> OutputDifference:
    """How `ours` differs from `reference` (arrays, numbers, strings or None)."""
    ours, reference = (str(v) if isinstance(v, np.str_) else v for v in (ours, reference))
    if ours is None or reference is None or isinstance(ours, str) or isinstance(reference, str):
        same = type(ours) is type(reference) and ours == reference
        return OutputDifference(name, None, type(ours).__name__, 0.0 if same else np.inf, 0.0, 0.0 if same else np.inf,
                                tolerance, exact=True, problem=None if same else f"{ours!r} vs {reference!r}"[:120])
    a, b = np.asarray(ours), np.asarray(reference)
    shape, dtype = tuple(a.shape), a.dtype.name
    if a.dtype.kind in "US" and b.dtype.kind in "US":  # arrays of strings: equal or not
        if a.shape != b.shape:
            return _problem(name, reference, tolerance, f"shape {list(a.shape)}, reference {list(b.shape)}", ours)
        same = bool(np.array_equal(a, b))
        return OutputDifference(name, shape, dtype, 0.0 if same else np.inf, 0.0, 0.0 if same else np.inf,
                                tolerance, exact=True, problem=None if same else "the strings differ")
    if a.dtype.kind not in "biufc" or b.dtype.kind not in "biufc":
        return _problem(name, reference, tolerance, f"cannot compare {a.dtype} with {b.dtype}", ours)
    if a.shape != b.shape:
        return _problem(name, reference, tolerance, f"shape {list(a.shape)}, reference {list(b.shape)}", ours)
    if a.dtype != b.dtype:
        return _problem(name, reference, tolerance, f"dtype {a.dtype}, reference {b.dtype}", ours)
    exact = a.dtype.kind in "biu"
    if a.size == 0:
        return OutputDifference(name, shape, dtype, 0.0, 0.0, 0.0, tolerance, exact)
    if exact:
        max_abs = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
        if max_abs == 0 and not np.array_equal(a, b):  # integers beyond 2**53 that float64 rounds alike
            max_abs = float(np.max(np.abs(a.astype(object) - b.astype(object))))
        scale = float(np.max(np.abs(b.astype(np.float64))))
        return OutputDifference(name, shape, dtype, max_abs, scale, max_abs / scale if scale else max_abs,
                                tolerance, exact)
    wide = np.complex128 if a.dtype.kind == "c" else np.float64
    u, v = np.atleast_1d(a.astype(wide)), np.atleast_1d(b.astype(wide))  # 0-d: numbers
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.abs(u - v)
    same = (u == v) | (np.isnan(u) & np.isnan(v))  # equal infinities and NaN in the same places count as equal
    d[same] = 0.0
    d[np.isnan(d)] = np.inf  # NaN or an infinity on one side only
    finite = np.abs(v[np.isfinite(v)])
    scale = float(finite.max()) if finite.size else 0.0
    max_abs = float(d.max())
    return OutputDifference(name, shape, dtype, max_abs, scale, max_abs / scale if scale else max_abs, tolerance)


def _problem(name: str, reference: Any, tolerance: float, why: str, ours: Any = None) -> OutputDifference:
    value = ours if ours is not None else reference
    array = value if isinstance(value, np.ndarray) else None
    return OutputDifference(name, None if array is None else tuple(array.shape),
                            None if array is None else array.dtype.name, np.inf, 0.0, np.inf, tolerance, problem=why)


def summary(differences: list[OutputDifference]) -> str:
    """One line: every output matches, or which do not and by how much."""
    bad = [d for d in differences if not d.ok]
    if not differences:
        return "no outputs to compare (neither side returned a value)"
    if not bad:
        return f"all {len(differences)} output(s) match"
    parts = [f"{d.name} ({d.problem})" if d.problem else
             f"{d.name} ({'not equal' if d.exact else f'relative difference {d.relative:.2e} > {d.tolerance:g}'})"
             for d in bad[:5]]
    more = f", and {len(bad) - 5} more" if len(bad) > 5 else ""
    return f"{len(bad)} of {len(differences)} output(s) differ: {', '.join(parts)}{more}"


def format_table(differences: list[OutputDifference], reference_title: str) -> list[str]:
    """The report's table: one line per output."""
    rows = [("output", "shape", "dtype", f"max |ptlite - {reference_title}|", f"max |{reference_title}|",
             "relative", "")]
    for d in differences:
        shape = "-" if d.shape is None else "[" + ", ".join(map(str, d.shape)) + "]"
        verdict = "ok" if d.ok else ("DIFFERS: " + d.problem if d.problem else "DIFFERS")
        rows.append((d.name, shape, d.dtype or "-", f"{d.max_abs:.3g}", f"{d.scale:.3g}",
                     "-" if d.problem or d.exact else f"{d.relative:.2e}", verdict))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  " + "  ".join(cell.ljust(w) if i < 3 else cell.rjust(w) for i, (cell, w) in
                             enumerate(zip(row[:-1], widths))) + ("  " + row[-1] if row[-1] else "")
            for row in rows]


# ----------------------------------------------------------------------------------------------------
# the PyTorch side (imports torch)


def run_reference(reference: str, inputs: list[Any], method: str = "forward") -> tuple[Any, str]:
    """Run PyTorch on `inputs` (NumPy arrays and numbers, as ptlite takes them) and return its result, with tensors as
    NumPy arrays, and a title for the report.

    reference: 'module:function' (or 'file.py:function') returning the nn.Module, as `ptlite convert` takes it, run
    eagerly under torch.inference_mode(); a file torch.jit.load reads (TorchScript); or a PyTorch Mobile .ptl file,
    run on PyTorch's lite interpreter (torch.jit.mobile._load_for_lite_interpreter).
    """
    import warnings

    from ptlite.format.ptl import is_pytorch_mobile

    from .errors import ToolError
    from .models import import_torch, load_torchscript, make_model

    torch = import_torch()
    args = [torch.from_numpy(np.array(v)) if isinstance(v, np.ndarray) else v for v in inputs]
    with warnings.catch_warnings():  # TorchScript's and the lite interpreter's deprecation notices
        warnings.filterwarnings("ignore", message=r".*torch\.jit\..*deprecated", category=FutureWarning)
        warnings.filterwarnings("ignore", message=r"Lite Interpreter is deprecated")
        if os.path.isfile(reference) and is_pytorch_mobile(reference):
            from torch.jit.mobile import _load_for_lite_interpreter

            model, title = _load_for_lite_interpreter(reference), "lite interpreter"
            run = (lambda *a: model(*a)) if method == "forward" else (lambda *a: model.run_method(method, *a))
        else:
            if os.path.isfile(reference):
                model, title = load_torchscript(reference, torch), "TorchScript"
            elif ":" in reference:
                model, title = make_model(reference, torch, "--with")[0].eval(), "eager PyTorch"
            else:
                raise ToolError(f"{reference}: no such file, and not 'module:function'")
            if not hasattr(model, method):
                raise ToolError(f"{reference} has no method '{method}'")
            run = getattr(model, method)
        title = f"{title} (PyTorch {torch.__version__.split('+')[0]})"
        try:
            with torch.inference_mode():
                result = run(*args)
        except Exception as exc:  # PyTorch's side: say so, in one line (TorchScript's errors run to dozens)
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            raise ToolError(f"the reference, {reference} on {title}, failed on these inputs: "
                           f"{type(exc).__name__}: {first}") from None
    return result_to_numpy(result, torch), title


def result_to_numpy(value: Any, torch: Any) -> Any:
    """PyTorch's result with every tensor as a NumPy array (a namedtuple becomes a tuple)."""
    if isinstance(value, torch.Tensor):
        tensor = value.detach().cpu()
        if tensor.dtype == torch.bfloat16:
            tensor = tensor.float()
        return tensor.resolve_conj().resolve_neg().numpy()
    if isinstance(value, dict):
        return {k: result_to_numpy(v, torch) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        items = [result_to_numpy(v, torch) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value
