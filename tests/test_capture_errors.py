"""Capture failures explained: TorchScript's common errors with their fix, auto's order and its refusal of a trace
that froze a branch, and failed attempts that print nothing and say each thing once."""

from __future__ import annotations

import inspect
import logging
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import ptlite


def _line(obj, text: str) -> int:
    """The file line number of the first source line of `obj` that contains `text`."""
    lines, start = inspect.getsourcelines(obj)
    for i, line in enumerate(lines):
        if text in line:
            return start + i
    raise AssertionError(f"{text!r} is not in {obj.__name__}'s source")


def _where(obj, text: str) -> str:
    return f"{inspect.getsourcefile(obj)}:{_line(obj, text)}"


class Offset(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


OFFSET = Offset()  # a sub-model held in a global: TorchScript cannot look it up
SCALE = torch.tensor(2.0)  # a tensor held in a global: TorchScript cannot use it as a value


class UsesGlobalSubmodel(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return OFFSET.forward(x) * 2


class UsesGlobalTensor(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * SCALE


class RangeOfUnannotated(nn.Module):
    def forward(self, x, n):
        for _ in range(n):
            x = x + 1
        return x


def _scale(x: torch.Tensor) -> torch.Tensor:
    return x * SCALE


class CallsFunctionUsingGlobal(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _scale(x)


class GateWithGlobal(nn.Module):
    """The tutorial's data-dependent branch, unscriptable (a global tensor): export fails, script fails, and a trace
    freezes the branch."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * SCALE
        return -x


def _script_error(model: nn.Module) -> ptlite.CaptureError:
    with pytest.raises(ptlite.CaptureError) as info:
        ptlite.capture(model, method="script")
    return info.value


def _after(text: str) -> str:
    """The 'after' snippet of an explanation."""
    assert "  after:" in text, text
    return text.split("  after:", 1)[1].split("torch.jit.script's message:", 1)[0]


def test_global_submodel_is_explained_with_the_line_and_the_constructor_fix():
    error = _script_error(UsesGlobalSubmodel())
    text = str(error)
    first = text.splitlines()[0]
    assert first.startswith("torch.jit.script could not compile the model: "), first
    assert _where(UsesGlobalSubmodel, "OFFSET.forward") in first, first
    assert "`return OFFSET.forward(x) * 2`" in first and "a global Offset" in first, first
    assert "pass the sub-model in the constructor" in text, text
    after = _after(text)
    for expected in ("def __init__(self, offset: Offset):", "self.offset = offset",
                     "return self.offset.forward(x) * 2"):
        assert expected in after, f"{expected!r} not in the after snippet:\n{after}"
    assert "attribute lookup is not defined on python value of type 'Offset'" in text  # torch's own words, after
    assert isinstance(error.__cause__, RuntimeError) and "attribute lookup" in str(error.__cause__)


def test_global_value_is_explained_with_the_line_and_the_attribute_fix():
    text = str(_script_error(UsesGlobalTensor()))
    first = text.splitlines()[0]
    assert _where(UsesGlobalTensor, "* SCALE") in first and "reads SCALE, a global Tensor" in first, first
    assert "store the global as an attribute" in text, text
    after = _after(text)
    for expected in ('self.register_buffer("scale", SCALE)', "return torch.relu(x) * self.scale"):
        assert expected in after, f"{expected!r} not in the after snippet:\n{after}"
    assert "python value of type 'Tensor' cannot be used as a value" in text


def test_global_value_in_a_function_is_passed_in_as_an_argument():
    text = str(_script_error(CallsFunctionUsingGlobal()))
    assert _where(_scale, "* SCALE") in text.splitlines()[0], text
    assert "the module that calls this function (CallsFunctionUsingGlobal.forward)" in text, text
    after = _after(text)
    assert "def _scale(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:" in after, after
    assert "return x * scale" in after, after


class Settings:
    gain = 3.0


SETTINGS = Settings()  # a plain Python object in a global: its value is read once, in the constructor


class UsesGlobalSettings(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * SETTINGS.gain


def test_attribute_of_a_global_object_is_read_in_the_constructor():
    text = str(_script_error(UsesGlobalSettings()))
    assert _where(UsesGlobalSettings, "SETTINGS.gain") in text.splitlines()[0], text
    assert "read the value once in the constructor" in text, text
    after = _after(text)
    assert "self.gain = SETTINGS.gain" in after and "return x * self.gain" in after, after


def test_unannotated_range_argument_is_explained_with_the_annotation_fix():
    text = str(_script_error(RangeOfUnannotated()))
    first = text.splitlines()[0]
    assert _where(RangeOfUnannotated, "range(n)") in first and "`for _ in range(n):`" in first, first
    assert "passes n to range()" in first and "without a type annotation" in first, first
    assert "annotate the argument's type (n: int)" in text, text
    before, after = text.split("  before:", 1)[1].split("  after:", 1)
    assert "def forward(self, x, n):" in before, before
    assert "def forward(self, x, n: int):" in after, after
    assert "all inputs of range must be ints, found Tensor" in text


class RangeOfTensor(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.sum()
        for _ in range(n):
            x = x + 1
        return x


def test_tensor_given_to_range_is_converted_in_the_fix():
    text = str(_script_error(RangeOfTensor()))
    assert _where(RangeOfTensor, "range(n)") in text.splitlines()[0] and "passes n, a Tensor" in text, text
    assert "for _ in range(int(n)):" in _after(text), text


def test_scripting_the_same_failing_class_again_gives_the_same_explanation():
    """torch leaves the half-compiled type behind; a second attempt would say "Can't redefine method: forward"."""

    class Fresh(nn.Module):
        def forward(self, x, n):
            for _ in range(n):
                x = x + 1
            return x

    first = str(_script_error(Fresh()))
    second = str(_script_error(Fresh()))
    assert "Can't redefine method" not in second, second
    assert first.splitlines()[0] == second.splitlines()[0]


def test_auto_refuses_a_trace_that_freezes_a_branch(capfd):
    with pytest.raises(ptlite.CaptureError) as info:
        ptlite.capture(GateWithGlobal(), (torch.ones(1, 4),))
    text = str(info.value)
    branch = f"{_where(GateWithGlobal, 'if x.sum() > 0')} `if x.sum() > 0:`"
    lines = text.splitlines()
    assert lines[0].startswith("cannot capture GateWithGlobal: no capture method worked (auto tried export, "
                               "script, trace"), lines[0]
    by_method = {line.split(":", 1)[0].strip(): line for line in lines[1:4]}
    assert sorted(by_method) == ["export", "script", "trace"], lines[:4]
    assert lines[1].lstrip().startswith("script:"), "the explained script error comes first:\n" + text
    assert "the trace would freeze the model's control flow" in by_method["trace"], by_method["trace"]
    assert branch in by_method["trace"] and 'method="trace"' in by_method["trace"], by_method["trace"]
    assert branch in by_method["export"], by_method["export"]
    assert "store the global as an attribute" in text  # the script fix, in full, once
    for line in lines[1:4]:
        assert text.count(line.split(": ", 1)[1]) == 1, f"repeated: {line}"
    out, err = capfd.readouterr()
    assert out == "" and err == "", f"a failed capture printed:\nstdout: {out[:500]}\nstderr: {err[:500]}"


def test_explicit_trace_keeps_the_frozen_branch_and_says_so_at_the_line():
    with pytest.warns(Warning) as caught:
        program = ptlite.capture(GateWithGlobal(), (torch.ones(1, 4),), method="trace")
    tracer = [w for w in caught if issubclass(w.category, torch.jit.TracerWarning)]
    ours = [w for w in caught if w.category is UserWarning and str(w.message).startswith("ptlite:")]
    assert tracer and "Python boolean" in str(tracer[0].message), [str(w.message) for w in caught]
    assert len(ours) == 1, [str(w.message) for w in caught]
    message = str(ours[0].message)
    assert "froze the model's control flow" in message and "`if x.sum() > 0:`" in message, message
    assert (ours[0].filename, ours[0].lineno) == (inspect.getsourcefile(GateWithGlobal),
                                                  _line(GateWithGlobal, "if x.sum() > 0"))
    assert program.metadata["capture"] == "trace" and program.metadata["capture_warnings"] == [message]
    module = ptlite.Module(program)
    x = np.ones((1, 4), np.float32)
    np.testing.assert_array_equal(module(x), 2 * x)
    np.testing.assert_array_equal(module(-x), -2 * x)  # the frozen branch, as torch's trace does


class SliceByValueWithGlobal(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = int(x.max())
        return x[:, :n] * SCALE


def test_auto_refuses_a_trace_that_freezes_a_value():
    with pytest.raises(ptlite.CaptureError) as info:
        ptlite.capture(SliceByValueWithGlobal(), (torch.full((1, 4), 2.0),))
    trace = next(line for line in str(info.value).splitlines() if line.lstrip().startswith("trace:"))
    assert "values the model computes from tensors" in trace, trace
    assert f"{_where(SliceByValueWithGlobal, 'int(x.max())')} `n = int(x.max())`" in trace, trace
    assert "Converting a tensor to a Python integer" in trace, trace


class ConstantTensorWithGlobal(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        bias = torch.tensor([1.0, 2.0, 3.0, 4.0])  # a constant: torch's TracerWarning about it is harmless
        return x * SCALE + bias


def test_auto_falls_back_to_a_safe_trace_and_records_why(monkeypatch, caplog):
    def no_export(*args, **kwargs):
        raise RuntimeError("export is unavailable here")

    monkeypatch.setattr(torch.export, "export", no_export)
    with caplog.at_level(logging.INFO, logger="ptlite"), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        program = ptlite.capture(ConstantTensorWithGlobal(), (torch.ones(1, 4),))
    assert program.metadata["capture"] == "trace"
    attempts = program.metadata["capture_attempts"]
    assert [a.split(":", 1)[0] for a in attempts] == ["export", "script"], attempts
    assert "export is unavailable here" in attempts[0] and "reads SCALE, a global Tensor" in attempts[1], attempts
    records = [r for r in caplog.records if r.name.startswith("ptlite")]
    assert [r.levelname for r in records] == ["INFO"], [(r.levelname, r.getMessage()) for r in records]
    assert "captured ConstantTensorWithGlobal with trace (auto)" in records[0].getMessage()
    assert attempts[1] in records[0].getMessage()
    x = np.ones((1, 4), np.float32)
    np.testing.assert_array_equal(ptlite.Module(program)(-x), [[-1.0, 0.0, 1.0, 2.0]])


def test_auto_on_a_plain_model_uses_export_and_logs_it_at_info(caplog):
    with caplog.at_level(logging.DEBUG, logger="ptlite"):
        program = ptlite.capture(nn.Linear(4, 2), (torch.randn(3, 4),))
    assert program.metadata["capture"] == "export" and program.metadata["capture_attempts"] == []
    records = [(r.levelname, r.getMessage()) for r in caplog.records if r.name.startswith("ptlite")]
    assert records == [("INFO", "captured Linear with export (auto)")], records


class Structured(nn.Module):
    def forward(self, x: torch.Tensor):
        return x + 1, {"double": x * 2, "pair": [x, -x]}


def test_export_capture_raises_no_future_warning_from_ptlite():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = ptlite.capture(Structured(), (torch.ones(2),), method="export")
    ours = [f"{w.filename}:{w.lineno}: {w.message}" for w in caught
            if issubclass(w.category, (FutureWarning, DeprecationWarning)) and "/ptlite/" in w.filename]
    assert not ours, "\n".join(ours)
    got = ptlite.Module(program)(np.ones(2, np.float32))
    assert isinstance(got, tuple) and list(got[1]) == ["double", "pair"]


def test_failed_export_prints_no_graph_and_names_the_line(capfd):
    class Gate(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.sum() > 0:
                return x
            return -x

    with pytest.raises(ptlite.CaptureError) as info:
        ptlite.capture(Gate(), (torch.ones(1, 4),), method="export")
    text = str(info.value)
    assert text.startswith("torch.export could not capture the model: the model branches on"), text
    assert f"{_where(Gate, 'if x.sum() > 0')} `if x.sum() > 0:`" in text, text
    out, err = capfd.readouterr()
    assert out == "" and err == "", f"a failed export printed:\nstdout: {out[:500]}\nstderr: {err[:500]}"


class UsesExoticOps(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.erfcx(x) + 1


def test_the_same_reason_from_every_method_is_said_once(capfd):
    with pytest.raises(ptlite.CaptureError) as info:
        ptlite.capture(UsesExoticOps(), (torch.ones(3),))
    text = str(info.value)
    reason = "uses 1 operator(s) that ptlite cannot run: aten::special_erfcx"
    assert f"  export, script, trace: {reason}" in text, text
    assert text.count(reason) == 1, text
    assert text.count("it uses 1 operator(s)") == 1, text  # the places, in full, once
    out, err = capfd.readouterr()
    assert out == "" and err == "", f"a failed capture printed:\nstdout: {out[:500]}\nstderr: {err[:500]}"


def test_auto_stops_at_a_model_that_fails_on_its_examples():
    with pytest.raises(ptlite.CaptureError) as info:
        ptlite.capture(nn.Linear(2, 3), (torch.randn(3, 5),))
    text = str(info.value)
    assert text.startswith("the model fails on the example inputs"), text
    assert "export" not in text and "script" not in text, text


def test_auto_without_examples_says_which_methods_it_could_not_try():
    with pytest.raises(ptlite.CaptureError) as info:
        ptlite.capture(UsesGlobalTensor())
    text = str(info.value)
    assert "  export, trace: not tried: they need example_inputs" in text, text
    assert "  script: " in text and "reads SCALE" in text, text


def test_auto_with_preserved_methods_uses_script_which_keeps_them():
    class TwoMethods(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2

        @torch.jit.export
        def halve(self, x: torch.Tensor) -> torch.Tensor:
            return x / 2

    program = ptlite.capture(TwoMethods(), (torch.ones(2),), preserved_methods=("halve",))
    assert program.metadata["capture"] == "script" and sorted(program.methods) == ["forward", "halve"]
