"""Capture front ends: the only package of ptlite that imports torch. PyTorch models in, ptlite Programs out."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from ptlite.errors import CaptureError
from ptlite.ir.graph import Program, ValueSpec
from ptlite.ir.verifier import verify

from .common import check_operators, dtype_name
from .export import translate_exported
from .pt2e import lower_decomposed
from .torchscript import translate_script_module

METHODS = ("auto", "export", "script", "trace")


def _as_tuple(example_inputs: Any) -> tuple | None:
    if example_inputs is None:
        return None
    if isinstance(example_inputs, torch.Tensor):
        return (example_inputs,)
    if not isinstance(example_inputs, (tuple, list)):
        raise CaptureError(f"example_inputs must be a tuple of tensors, got {type(example_inputs).__name__}")
    return tuple(example_inputs)


def _flat_outputs(outputs: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(outputs, dict):
        return [leaf for k, v in outputs.items() for leaf in _flat_outputs(v, f"{prefix}{k}" if not prefix
                                                                           else f"{prefix}.{k}")]
    if isinstance(outputs, (list, tuple)):
        return [leaf for i, v in enumerate(outputs) for leaf in _flat_outputs(v, f"{prefix}{i}" if not prefix
                                                                              else f"{prefix}.{i}")]
    return [(prefix or "output", outputs)]


def output_specs_from_example(outputs: Any, static_shape: bool) -> list[ValueSpec]:
    """One spec per leaf of the model's output structure, named by its path ('out', '0', '1.aux', ...)."""
    specs = []
    leaves = _flat_outputs(outputs)
    for name, leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            shape = tuple(leaf.shape) if static_shape else tuple(None for _ in leaf.shape)
            specs.append(ValueSpec(name if len(leaves) > 1 or name != "" else "output", "Tensor",
                                   dtype_name(leaf.dtype), shape))
        else:
            specs.append(ValueSpec(name, type(leaf).__name__))
    return specs


def _run_eager(model: Any, example_inputs: tuple | None) -> Any:
    if example_inputs is None or not callable(model):
        return None
    with torch.inference_mode():
        try:
            return model(*example_inputs)
        except Exception as exc:  # the model itself rejects the examples: report that, clearly
            raise CaptureError(f"the model fails on the example inputs: {type(exc).__name__}: {exc}") from exc


def _capture_export(model: Any, example_inputs: tuple | None, dynamic_shapes: Any, strict: bool) -> Program:
    if isinstance(model, torch.export.ExportedProgram):
        ep = model
        names = None
    else:
        if example_inputs is None:
            raise CaptureError("method='export' needs example_inputs (a tuple of tensors, as for torch.export)")
        if isinstance(model, torch.nn.Module):
            try:
                model = model.eval()
            except NotImplementedError:  # a PT2E-quantized graph module refuses eval(): it is in eval mode already
                pass
        try:
            ep = torch.export.export(model, example_inputs, dynamic_shapes=dynamic_shapes, strict=strict)
        except Exception as exc:
            raise CaptureError(f"torch.export could not capture the model: {type(exc).__name__}: "
                               f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}") from exc
        import inspect

        try:
            params = list(inspect.signature(model.forward).parameters)
        except (TypeError, ValueError):
            params = []
        names = params[: len(example_inputs)] or None
    program = translate_exported(ep, names)
    lower_decomposed(program)  # a PT2E-quantized model's quantize/dequantize pairs
    return program


def _capture_script(model: Any, example_inputs: tuple | None, preserved_methods: tuple[str, ...]) -> Program:
    if isinstance(model, torch.jit.ScriptModule):
        sm = model
    else:
        if isinstance(model, torch.nn.Module):
            model = model.eval()
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=".*torch.jit.script.*deprecated", category=FutureWarning)
                sm = torch.jit.script(model)
        except Exception as exc:
            raise CaptureError(f"torch.jit.script could not compile the model: {type(exc).__name__}: "
                               f"{str(exc).strip()[:2000]}") from exc
    how = "trace" if isinstance(sm, torch.jit.TopLevelTracedModule) else "script"
    return translate_script_module(sm, example_inputs, preserved_methods, how=how)


def _capture_trace(model: Any, example_inputs: tuple | None) -> Program:
    if example_inputs is None:
        raise CaptureError("method='trace' needs example_inputs (a tuple of tensors, as for torch.jit.trace)")
    if isinstance(model, torch.nn.Module):
        model = model.eval()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*torch.jit.trace.*deprecated", category=FutureWarning)
            tm = torch.jit.trace(model, example_inputs, check_trace=False, strict=False)
    except Exception as exc:
        raise CaptureError(f"torch.jit.trace could not trace the model: {type(exc).__name__}: "
                           f"{str(exc).strip()[:2000]}") from exc
    return translate_script_module(tm, example_inputs, how="trace")


def capture(model: Any, example_inputs: Any = None, method: str = "auto", *, dynamic_shapes: Any = None,
            strict: bool = False, preserved_methods: tuple[str, ...] = ()) -> Program:
    """Capture a PyTorch model into a ptlite Program.

    model: an nn.Module, a ScriptModule (scripted or traced), or a torch.export.ExportedProgram.
    example_inputs: a tuple of tensors, as for torch.export (needed by "export" and "trace").
    method: "export" (torch.export), "script" (torch.jit.script), "trace" (torch.jit.trace), or "auto": use what
        an already captured model is; otherwise try export, then script, then trace, and keep the first that works.
    dynamic_shapes: passed to torch.export; without it an exported program accepts only the example shapes.
    preserved_methods: further methods of a scripted module to keep (callable with Module.run_method).

    Raises CaptureError naming every operator ptlite cannot run and where it is used in the model.
    """
    if method not in METHODS:
        raise CaptureError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if not isinstance(model, (torch.nn.Module, torch.export.ExportedProgram)):  # ScriptModules are nn.Modules
        raise CaptureError(f"the model must be a torch.nn.Module, a ScriptModule or an ExportedProgram, got "
                           f"{type(model).__name__}; wrap a function in an nn.Module whose forward calls it")
    example_inputs = _as_tuple(example_inputs)
    if method == "auto":
        if isinstance(model, torch.export.ExportedProgram):
            method = "export"
        elif isinstance(model, torch.jit.ScriptModule):
            method = "script"
    if method == "auto":
        failures = []
        order = ["export", "script", "trace"] if example_inputs is not None else ["script"]
        for attempt in order:
            try:
                return capture(model, example_inputs, attempt, dynamic_shapes=dynamic_shapes, strict=strict,
                               preserved_methods=preserved_methods)
            except CaptureError as exc:
                failures.append(f"{attempt}: {exc}")
        raise CaptureError("no capture method worked:\n" + "\n".join(failures))

    if method == "export":
        program = _capture_export(model, example_inputs, dynamic_shapes, strict)
    elif method == "script":
        program = _capture_script(model, example_inputs, preserved_methods)
    else:
        program = _capture_trace(model, example_inputs)
    check_operators(program, program.metadata.get("capture", method))
    verify(program)
    eager = model.module() if isinstance(model, torch.export.ExportedProgram) else model
    outputs = _run_eager(eager, example_inputs)
    if outputs is not None:
        static = program.metadata.get("capture") == "export" and dynamic_shapes is None
        program.forward.output_specs = output_specs_from_example(outputs, static)
    program.metadata["torch_version"] = torch.__version__
    return program
