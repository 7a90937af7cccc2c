"""The kernel tests' oracle: run an operator in ptlite and in PyTorch (torch.ops.<namespace>.<name>.<overload>)
on the same arguments and compare what they give.

The test files import it as a plain module (`from oracle import check`): pytest puts this folder, which has no
__init__.py, on sys.path before it imports the test files in it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from kernel_backend import kernel  # noqa: E402

from ptlite import ops  # noqa: E402
from ptlite.ops.schema import parse_schema  # noqa: E402

# ----------------------------------------------------------------------------------------------------
# Operators
# ----------------------------------------------------------------------------------------------------

def op(key: str) -> Any:
    """The kernel for operator key ("aten::add.Tensor") of the backend under test (kernel_backend.py)."""
    return kernel(key)


def torch_op(key: str) -> Any:
    """PyTorch's operator for a table key: "aten::add.Tensor" -> torch.ops.aten.add.Tensor."""
    namespace, _, rest = key.partition("::")
    name, _, overload = rest.partition(".")
    return getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")


def torch_schema(key: str) -> Any:
    """PyTorch's schema registered under a table key, or None when PyTorch has none (prim::ListConstruct)."""
    name, _, overload = key.partition(".")
    for schema in torch._C._jit_get_schemas_for_operator(name):
        if schema.overload_name == overload:
            return schema
    return None


def check_schemas(keys: list[str]) -> None:
    """ptlite's schema for each key is PyTorch's, parsed."""
    for key in keys:
        theirs = parse_schema(str(torch_op(key)._schema))
        assert ops.get(key).schema == theirs, f"{key}: schema differs from torch's {theirs}"


# ----------------------------------------------------------------------------------------------------
# Values
# ----------------------------------------------------------------------------------------------------

def to_torch(x: Any) -> Any:
    """Arrays (also inside lists and tuples, which become lists) as tensors on copies; the rest unchanged."""
    if isinstance(x, np.ndarray):
        return torch.from_numpy(np.array(x, copy=True))
    if isinstance(x, (list, tuple)):
        return [to_torch(v) for v in x]
    return x


def to_numpy(x: Any) -> Any:
    """Tensors (also inside lists and tuples) as arrays; None stays None."""
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return type(x)(to_numpy(v) for v in x)
    return x.detach().numpy()


def copy_args(x: Any) -> Any:
    """Copies of the arrays (also inside lists and tuples, which become lists) with the same memory order
    and the same writeable flag, so that a kernel sees what it would have seen but cannot change the caller's."""
    if isinstance(x, np.ndarray):
        copy = np.array(x, copy=True)  # order "K": a transposed array stays transposed
        copy.flags.writeable = x.flags.writeable
        return copy
    if isinstance(x, (list, tuple)):
        return [copy_args(v) for v in x]
    return x


def rand(rng: np.random.Generator, *shape: int, dtype: Any = np.float32, low: float = -3,
         high: float = 3) -> np.ndarray:
    """Uniform values in [low, high] (integers: low..high inclusive; bool: fair coin) of the given dtype."""
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) > 0.5
    if dt.kind in "iu":
        return rng.integers(int(low), int(high) + 1, shape).astype(dt)
    return rng.uniform(low, high, shape).astype(dt)


def randn(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Standard normal float32 values."""
    return rng.standard_normal(shape).astype(np.float32)


# ----------------------------------------------------------------------------------------------------
# Comparison
# ----------------------------------------------------------------------------------------------------

def compare(what: str, ours: Any, ref: Any, *, tol: float = 1e-5, float16_tol: float | None = None,
            finite: bool = False) -> None:
    """Assert that ptlite's result is PyTorch's; failure messages start with `what` (name the operator in it).

    - tuples and lists: the same kind of container, as long, compared element by element;
    - tensors (or arrays): an ndarray of the same dtype and shape; booleans and integers equal; floats with
      NaN and +-inf exactly where torch has them and max |diff| <= tol * max(1, max |finite reference|)
      elsewhere;
    - anything else: equal (==).

    float16_tol: the tolerance for float16 results is max(tol, float16_tol); None: tol applies to them too.
    finite: torch's values must all be finite (NaN or inf in the reference fails even where ptlite matches).
    """
    if isinstance(ref, (tuple, list)):
        kind = tuple if isinstance(ref, tuple) else list
        assert isinstance(ours, kind), (
            f"{what}: returned {type(ours).__name__}, torch gives a {kind.__name__} of {len(ref)}")
        assert len(ours) == len(ref), f"{what}: {len(ours)} results, torch gives {len(ref)}"
        for i, (o, r) in enumerate(zip(ours, ref, strict=True)):
            compare(f"{what} [{i}]", o, r, tol=tol, float16_tol=float16_tol, finite=finite)
        return
    if not isinstance(ref, (torch.Tensor, np.ndarray)):
        assert ours == ref, f"{what}: {ours!r} != torch {ref!r}"
        return
    want = ref.detach().numpy() if isinstance(ref, torch.Tensor) else ref
    assert isinstance(ours, np.ndarray), f"{what}: returned {type(ours).__name__}, not an ndarray"
    assert ours.dtype == want.dtype, f"{what}: dtype {ours.dtype} != torch {want.dtype}"
    assert ours.shape == want.shape, f"{what}: shape {ours.shape} != torch {want.shape}"
    if want.dtype.kind != "f":
        assert np.array_equal(ours, want), (
            f"{what}: {np.count_nonzero(ours != want)} of {want.size} values differ: {ours} != torch {want}")
        return
    if finite:
        assert np.isfinite(want).all(), f"{what}: torch's result is not finite: {want}"
    assert np.array_equal(np.isnan(ours), np.isnan(want)), f"{what}: NaNs differ from torch's"
    if not want.size:
        return
    if want.dtype == np.float16 and float16_tol is not None:
        tol = max(tol, float16_tol)
    ok = np.isfinite(want)
    assert np.array_equal(ours[~ok], want[~ok], equal_nan=True), f"{what}: inf/NaN entries differ from torch's"
    diff = float(np.abs(ours[ok].astype(np.float64) - want[ok]).max(initial=0.0))
    scale = max(1.0, float(np.abs(want[ok]).max(initial=0.0)))
    assert diff <= tol * scale, f"{what}: max |diff| {diff:.3g} > {tol:g} * {scale:.3g}"


def check(key: str, *args: Any, tol: float = 1e-5, float16_tol: float | None = None) -> tuple[Any, list]:
    """Run key on args in ptlite and in torch and compare the results (see compare); then, for an in-place
    operator (name ending in one "_"), compare self after the call too, and for any other whose schema
    declares no alias, assert that no result shares memory with an input array.

    Every argument must be given, positionally, in schema order (kwarg-only ones go to torch by name).
    Each side runs on its own copies of the arrays. Returns ptlite's result and the argument copies it ran on
    (so an in-place operator must return args[0]).
    """
    pos, kw = [], {}
    for arg, value in zip(ops.get(key).schema.arguments, args, strict=True):
        if arg.kwarg_only:
            kw[arg.name] = to_torch(value)
        else:
            pos.append(to_torch(value))
    ours_args = copy_args(list(args))
    ours = op(key)(*ours_args)
    ref_op = torch_op(key)
    ref = ref_op(*pos, **kw)
    what = f"{key} (input shapes {[a.shape for a in args if isinstance(a, np.ndarray)]})"
    compare(what, ours, ref, tol=tol, float16_tol=float16_tol)
    name = key.split("::")[1].split(".")[0]
    if name.endswith("_") and not name.endswith("__"):  # in-place (not a dunder such as __and__)
        compare(f"{what} self after", ours_args[0], pos[0], tol=tol, float16_tol=float16_tol)
    elif all(r.alias_info is None for r in ref_op._schema.returns) and "aliases" not in ops.get(key).traits:
        # (torch's unsafe views and dropout at inference return their input although their schemas do not say so;
        # the table's `aliases` trait says it, and ptlite does the same)
        for out in ours if isinstance(ours, (tuple, list)) else [ours]:
            for a in ours_args:
                if isinstance(a, np.ndarray) and isinstance(out, np.ndarray):
                    assert not np.shares_memory(out, a), f"{key}: result shares memory with an input"
    return ours, ours_args
