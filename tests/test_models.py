"""Every model of the foundation issue, through every capture method PyTorch can apply, matches eager PyTorch.

Tolerance: max |ptlite - torch| <= 1e-4 x max |torch| per output (float32 kernels summing in a different order
than PyTorch's; the models' outputs are O(1) thanks to ptlite.tools.zoo.calibrate).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_close
from models import CASES, flatten

import ptlite

RTOL = 1e-4

_programs: dict[tuple, ptlite.Module] = {}
_captured: dict[tuple, ptlite.Program] = {}
_models: dict[str, torch.nn.Module] = {}


def _model(name: str) -> torch.nn.Module:
    if name not in _models:
        _models[name] = CASES[name].build()
    return _models[name]


def _load(name: str, method: str, example: tuple, tmp_path_factory, **kwargs) -> ptlite.Module:
    key = (name, method, tuple(kwargs.get("tag", ())))
    if key not in _programs:
        kwargs.pop("tag", None)
        program = ptlite.capture(_model(name), example, method=method, **kwargs)
        _captured[key] = program
        path = tmp_path_factory.mktemp(name) / f"{name}.{method}.ptlite"
        ptlite.save(program, path)
        _programs[key] = ptlite.load(path)
    return _programs[key]


def _compare(name: str, method: str, module: ptlite.Module, inputs: tuple) -> None:
    with torch.inference_mode():
        expected = flatten(_model(name)(*inputs))
    actual = flatten(module(*[t.numpy() for t in inputs]))
    if method.startswith("script") and len(actual) != len(expected):
        # Some models return another structure when scripted (googlenet: GoogLeNetOutputs(logits, None, None));
        # then PyTorch's own answer for this capture is the scripted module's.
        with torch.inference_mode():
            expected = flatten(torch.jit.script(_model(name))(*inputs))
    assert len(actual) == len(expected), f"{name} ({method}): {len(actual)} outputs, torch gives {len(expected)}"
    for i, (a, e) in enumerate(zip(actual, expected)):
        if e is None or isinstance(e, (int, float, bool)):
            assert a == e, f"{name} ({method}) output {i}: {a!r} != {e!r}"
            continue
        try:
            assert_close(a, e, what=f"{name} ({method}) output {i} {tuple(e.shape)}", rtol=RTOL)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n  first divergent op: {_localize(name, inputs)}") from None


def _localize(name: str, inputs: tuple) -> str:
    """Where the export capture of the same model first departs from torch (names the operator)."""
    if "export" not in CASES[name].methods:
        return "unknown (the model cannot be exported)"
    from ptlite.frontend.debug import first_divergence

    try:
        program = ptlite.capture(_model(name), inputs, method="export")
        return first_divergence(_model(name), inputs, program, RTOL) or "none found in the export capture"
    except Exception as exc:  # localisation is a diagnostic; never mask the real failure
        return f"could not localise ({type(exc).__name__}: {exc})"


def _params():
    for case in CASES.values():
        marks = [pytest.mark.slow] if case.slow else []
        for method in case.methods:
            yield pytest.param(case.name, method, id=f"{case.name}-{method}", marks=marks)


@pytest.mark.parametrize("name,method", list(_params()))
def test_matches_torch(name, method, tmp_path_factory):
    case = CASES[name]
    size = case.sizes[0] or None
    one, four = case.inputs(1, size), case.inputs(4, size)
    if method == "export":
        module = _load(name, method, one, tmp_path_factory)
        _compare(name, method, module, one)
        with pytest.raises(ptlite.InputError, match="static shapes"):
            module(*[t.numpy() for t in four])
        module4 = _load(name, method, four, tmp_path_factory, tag=("b4",))
        _compare(name, method, module4, four)
    else:
        module = _load(name, method, one, tmp_path_factory)
        _compare(name, method, module, one)
        _compare(name, method, module, four)
        if method == "script" and len(case.sizes) > 1:
            _compare(name, f"{method}, size {case.sizes[1]}", module, case.inputs(1, case.sizes[1]))


# The backends a program is lowered for and run on: each available one (the native backend where its library
# was built), so that the model suite checks every backend's lowering and kernels.
LOWERED_FOR = [info.name for info in ptlite.backends() if info.available]


@pytest.mark.parametrize("backend", LOWERED_FOR)
@pytest.mark.parametrize("name,method", list(_params()))
def test_optimized_matches_torch(name, method, backend, tmp_path_factory):
    """What `ptlite convert` writes (optimize_for_mobile: folded, prepacked, fused, memory-planned) matches too,
    lowered for each backend and run on it (with the reference for what it declines)."""
    case = CASES[name]
    size = case.sizes[0] or None
    one, four = case.inputs(1, size), case.inputs(4, size)
    _load(name, method, one, tmp_path_factory)  # captures (once per session) and checks the capture loads
    program = ptlite.optimize_for_mobile(_captured[(name, method, ())], backend=backend)
    path = tmp_path_factory.mktemp(name) / f"{name}.{method}.{backend}.ptlite"
    ptlite.save(program, path)
    module = ptlite.load(path)
    assert module.backends[0].name == backend
    what = f"{method}, lowered for {backend} ({', '.join(program.metadata['passes'])})"
    _compare(name, what, module, one)
    _compare(name, what, module, one)  # a second call: the memory plan's buffers are reused
    if method != "export":
        _compare(name, what, module, four)


def test_decision_gate_script_follows_both_branches():
    module = ptlite.Module(ptlite.capture(CASES["decision_gate"].build(), method="script"))
    x = np.arange(1, 5, dtype=np.float32).reshape(1, 4)
    np.testing.assert_array_equal(module(x), x)
    np.testing.assert_array_equal(module(-x), x)


def test_decision_gate_trace_warns_and_freezes_branch():
    with pytest.warns(torch.jit.TracerWarning, match="Python boolean"):
        program = ptlite.capture(CASES["decision_gate"].build(), (torch.ones(1, 4),), method="trace")
    module = ptlite.Module(program)
    x = np.arange(1, 5, dtype=np.float32).reshape(1, 4)
    np.testing.assert_array_equal(module(-x), -x)  # the positive branch was frozen, as in torch


def test_control_flow_int_default_and_structures():
    model = CASES["control_flow"].build()
    module = ptlite.Module(ptlite.capture(model, method="script"))
    x = torch.randn(2, 8)
    for repeats in (None, 0, 5):
        args = (x,) if repeats is None else (x, repeats)
        with torch.inference_mode():
            expected = model(*args)
        got = module(x.numpy()) if repeats is None else module(x.numpy(), repeats)
        assert isinstance(got, tuple) and isinstance(got[1], dict) and list(got[1]) == ["first", "last"]
        for a, e in zip(flatten(got), flatten(expected)):
            assert_close(a, e, what=f"control_flow(repeats={repeats})", rtol=RTOL)
    assert module.input_specs[1].name == "repeats" and module.input_specs[1].default == 2
