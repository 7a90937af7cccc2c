"""Capture front ends: what they accept, what they refuse, and how they say so."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import ptlite
from ptlite.ir import format_graph


class UsesExoticOps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.special.bessel_j0(self.conv(x))
        z = torch.special.erfcx(y)
        return torch.special.bessel_j0(z) + torch.relu(z)


@pytest.mark.parametrize("method", ["export", "script", "trace"])
def test_unsupported_operators_listed_together_with_places(method):
    with pytest.raises(ptlite.CaptureError) as info:
        ptlite.capture(UsesExoticOps().eval(), (torch.randn(1, 3, 8, 8),), method=method)
    text = str(info.value)
    assert "2 operator(s)" in text
    assert "bessel_j0" in text and "erfcx" in text
    assert "test_capture.py" in text  # where in the user's code
    assert "aten::relu" not in text and "conv2d" not in text


def test_auto_falls_back_to_script_for_data_dependent_branch():
    from ptlite.tools.zoo import MyDecisionGate

    program = ptlite.capture(MyDecisionGate(), (torch.ones(1, 4),))
    assert program.metadata["capture"] == "script"
    (export,) = program.metadata["capture_attempts"]  # why export, tried first, failed: the branch, at its line
    assert export.startswith("export: the model branches on") and "`if x.sum() > 0:`" in export, export
    m = ptlite.Module(program)
    x = np.ones((1, 4), np.float32)
    np.testing.assert_array_equal(m(-x), x)


def test_accepts_script_module_and_exported_program():
    model = nn.Sequential(nn.Linear(4, 3), nn.ReLU()).eval()
    x = torch.randn(2, 4)
    with torch.inference_mode():
        ref = model(x).numpy()
    scripted = ptlite.capture(torch.jit.script(model))
    exported = ptlite.capture(torch.export.export(model, (x,)))
    assert scripted.metadata["capture"] == "script" and exported.metadata["capture"] == "export"
    for program in (scripted, exported):
        np.testing.assert_allclose(ptlite.Module(program)(x.numpy()), ref, rtol=1e-5, atol=1e-6)


def test_preserved_methods_are_runnable():
    class TwoMethods(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * 2

        @torch.jit.export
        def halve(self, x: torch.Tensor) -> torch.Tensor:
            return x / 2

    program = ptlite.capture(TwoMethods(), method="script", preserved_methods=("halve",))
    m = ptlite.Module(program)
    assert m.method_names == ["forward", "halve"]
    np.testing.assert_array_equal(m.run_method("halve", np.full((2,), 4.0, np.float32)), [2.0, 2.0])


def test_export_specs_are_static_and_named():
    model = nn.Linear(4, 3).eval()
    program = ptlite.capture(model, (torch.randn(2, 4),), method="export")
    (spec,) = program.forward.input_specs
    assert (spec.name, spec.dtype, spec.shape) == ("input", "float32", (2, 4))
    assert program.forward.output_specs[0].shape == (2, 3)


class SelfNamedMe(nn.Module):
    def forward(me, image: torch.Tensor, scale: float = 2.0) -> torch.Tensor:  # noqa: N805 (the point of the test)
        return image * scale


def test_script_inputs_are_named_after_the_parameters_whatever_self_is_called():
    """The module argument is the schema's first (a class type), not one named `self`: `forward(me, image)` takes
    `image`, and `scale` keeps its type and default."""
    program = ptlite.capture(SelfNamedMe(), (torch.ones(2),), method="script")
    specs = program.forward.input_specs
    assert [(s.name, s.type, s.default) for s in specs] == [("image", "Tensor", None), ("scale", "float", 2.0)], specs
    module = ptlite.Module(program)
    np.testing.assert_array_equal(module(image=np.ones(2, np.float32)), [2, 2])
    np.testing.assert_array_equal(module(np.ones(2, np.float32), scale=3.0), [3, 3])


def test_export_dynamic_batch():
    model = nn.Linear(4, 3).eval()
    batch = torch.export.Dim("batch")
    program = ptlite.capture(model, (torch.randn(2, 4),), method="export", dynamic_shapes=({0: batch},))
    assert program.forward.input_specs[0].shape == (None, 4)
    m = ptlite.Module(program)
    x = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    with torch.inference_mode():
        ref = model(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(m(x), ref, rtol=1e-5, atol=1e-6)


def test_bad_arguments_are_clear():
    with pytest.raises(ptlite.CaptureError, match="method must be one of"):
        ptlite.capture(nn.Linear(2, 2), method="onnx")
    with pytest.raises(ptlite.CaptureError, match="needs example_inputs"):
        ptlite.capture(nn.Linear(2, 2), method="export")
    with pytest.raises(ptlite.CaptureError, match="fails on the example inputs"):
        ptlite.capture(nn.Linear(2, 2), (torch.randn(3, 5),), method="script")


def test_script_compile_error_is_reported():
    class NotScriptable(nn.Module):
        def forward(self, x):
            return x.numpy()

    with pytest.raises(ptlite.CaptureError, match="torch.jit.script could not compile"):
        ptlite.capture(NotScriptable(), method="script")


def test_printer_shows_nested_blocks():
    from ptlite.tools.zoo import MyDecisionGate

    text = format_graph(ptlite.capture(MyDecisionGate(), method="script").forward)
    assert "prim::If" in text and "block0" in text and "block1" in text and "aten::neg" in text


def test_script_error_message_reaches_the_caller():
    class Raises(nn.Module):
        def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
            if n > 3:
                raise ValueError(f"n too big: {n}")
            return x + n

    m = ptlite.Module(ptlite.capture(Raises(), method="script"))
    np.testing.assert_array_equal(m(np.zeros(2, np.float32), 1), [1.0, 1.0])
    with pytest.raises(ptlite.ScriptError, match="n too big: 7"):
        m(np.zeros(2, np.float32), 7)


def test_set_num_threads_round_trip():
    before = ptlite.get_num_threads()
    try:
        ptlite.set_num_threads(1)
        assert ptlite.get_num_threads() == 1
        with pytest.raises(ValueError, match="at least 1"):
            ptlite.set_num_threads(0)
    finally:
        ptlite.set_num_threads(before)


def test_a_function_is_refused_with_how_to_wrap_it():
    expected = "must be a torch.nn.Module, a ScriptModule or an ExportedProgram, got function; wrap a function"
    with pytest.raises(ptlite.CaptureError, match=expected):
        ptlite.capture(lambda x: x + 1, (torch.randn(2),))
