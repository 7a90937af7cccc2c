"""Capture front ends: the only package of ptlite that imports torch. PyTorch models in, ptlite Programs out."""

from __future__ import annotations

import logging
from typing import Any

import torch

from ptlite.errors import CaptureError
from ptlite.ir.graph import Program, ValueSpec
from ptlite.ir.verifier import verify

from . import auto, tracing
from .common import MethodFailure, Relevance, check_operators, dtype_name, one_line, user_line
from .explain import script_failure
from .export import export_failure, translate_exported
from .pt2e import lower_decomposed
from .quiet import quiet_torch
from .torchscript import script, translate_script_module

METHODS = ("auto", *auto.ORDER)
_NOT_RUN = object()  # the eager outputs, before the model has run on the example inputs
log = logging.getLogger("ptlite.frontend")


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
            with quiet_torch("torch.export"):
                ep = torch.export.export(model, example_inputs, dynamic_shapes=dynamic_shapes, strict=strict)
        except Exception as exc:
            raise export_failure(exc) from exc
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
            with quiet_torch("torch.jit.script"):
                sm = script(model)
        except Exception as exc:
            raise script_failure(exc) from exc
    how = "trace" if isinstance(sm, torch.jit.TopLevelTracedModule) else "script"
    return translate_script_module(sm, example_inputs, preserved_methods, how=how)


def _capture_trace(model: Any, example_inputs: tuple | None, refuse_frozen: bool) -> tuple[Program, tracing.Trace]:
    """A traced program; with refuse_frozen, a MethodFailure instead when the trace froze a branch or a value."""
    if example_inputs is None:
        raise CaptureError("method='trace' needs example_inputs (a tuple of tensors, as for torch.jit.trace)")
    if isinstance(model, torch.nn.Module):
        model = model.eval()
    try:
        with quiet_torch("torch.jit.trace"):
            traced = tracing.trace(model, example_inputs)
    except Exception as exc:
        where = user_line(exc)
        reason = f"{type(exc).__name__}: {one_line(str(exc))}" + (f" at {where}" if where else "")
        raise MethodFailure(f"torch.jit.trace could not trace the model: {type(exc).__name__}: "
                            f"{str(exc).strip()[:2000]}", reason=reason) from exc
    if traced.frozen and refuse_frozen:
        raise MethodFailure(tracing.refusal(traced.frozen), reason=tracing.refusal_reason(traced.frozen),
                            relevance=Relevance.FROZEN)
    program = translate_script_module(traced.module, example_inputs, how="trace")
    if traced.frozen:
        program.metadata["capture_warnings"] = [tracing.flagged(traced.frozen)]
    return program, traced


def _capture_with(model: Any, example_inputs: tuple | None, method: str, options: dict[str, Any],
                  refuse_frozen: bool = False) -> Program:
    """One capture method, its operators checked and its graphs verified. A trace that froze something is refused
    with refuse_frozen (auto); otherwise it is kept, and torch's warnings are shown again with ptlite's."""
    traced = None
    if method == "export":
        program = _capture_export(model, example_inputs, options["dynamic_shapes"], options["strict"])
    elif method == "script":
        program = _capture_script(model, example_inputs, options["preserved_methods"])
    else:
        program, traced = _capture_trace(model, example_inputs, refuse_frozen)
    check_operators(program, program.metadata.get("capture", method))
    verify(program)
    if traced is not None:
        tracing.reissue(traced.records, traced.frozen)
    return program


def _capture_auto(model: Any, example_inputs: tuple | None, options: dict[str, Any]) -> tuple[Program, Any]:
    """The first capture method that works, in auto.ORDER, and the eager outputs when they were computed already."""
    name = type(model).__name__
    order, skipped = auto.plan(example_inputs is not None, options["preserved_methods"])
    failures: list[auto.Failure] = []
    outputs = _NOT_RUN
    for method in order:
        try:
            program = _capture_with(model, example_inputs, method, options, refuse_frozen=True)
        except CaptureError as exc:
            failures.append(auto.Failure(method, exc))
            log.debug("capture of %s with %s failed: %s", name, method, exc)
            if outputs is _NOT_RUN:  # a model that fails on its examples: that one error, not one per method
                outputs = _run_eager(model, example_inputs)
            continue
        program.metadata["capture_attempts"] = [f.line() for f in failures]
        if failures:
            log.info("captured %s with %s (auto); before it: %s", name, method, "; ".join(f.line() for f in failures))
        else:
            log.info("captured %s with %s (auto)", name, method)
        return program, outputs
    best = auto.ranked(failures)[0].error
    raise CaptureError(auto.report(name, order, failures, skipped)) from best


def capture(model: Any, example_inputs: Any = None, method: str = "auto", *, dynamic_shapes: Any = None,
            strict: bool = False, preserved_methods: tuple[str, ...] = ()) -> Program:
    """Capture a PyTorch model into a ptlite Program.

    model: an nn.Module, a ScriptModule (scripted or traced), or a torch.export.ExportedProgram.
    example_inputs: a tuple of tensors, as for torch.export (needed by "export" and "trace").
    method: "export" (torch.export), "script" (torch.jit.script), "trace" (torch.jit.trace), or "auto": use what
        an already captured model is; otherwise try export, then script, then trace, and keep the first that works
        (only script without example_inputs or with preserved_methods). auto refuses a trace that froze a branch
        or a value computed from a tensor (torch's TracerWarning), as the program would be silently wrong for other
        inputs; method="trace" keeps it, with torch's warning repeated and ptlite's naming the line.
        program.metadata["capture"] names the method used; after auto, metadata["capture_attempts"] has one line
        per method that failed before it, and the "ptlite.frontend" logger says the same at INFO.
    dynamic_shapes: passed to torch.export; without it an exported program accepts only the example shapes.
    preserved_methods: further methods of a scripted module to keep (callable with Module.run_method).

    Raises CaptureError naming every operator ptlite cannot run and where it is used in the model; a TorchScript
    compile error is explained (the line in the model, the fix, a before/after snippet); when auto finds no method
    that works, the error lists each method's reason in one line, the most telling first. A failed attempt prints
    nothing (torch's graph dumps and logs are kept back, logged at DEBUG).
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
    options = {"dynamic_shapes": dynamic_shapes, "strict": strict, "preserved_methods": preserved_methods}
    outputs = _NOT_RUN
    if method == "auto":
        program, outputs = _capture_auto(model, example_inputs, options)
    else:
        program = _capture_with(model, example_inputs, method, options)
        log.info("captured %s with %s", type(model).__name__, program.metadata.get("capture", method))
    if outputs is _NOT_RUN:
        eager = model.module() if isinstance(model, torch.export.ExportedProgram) else model
        outputs = _run_eager(eager, example_inputs)
    if outputs is not None:
        static = program.metadata.get("capture") == "export" and dynamic_shapes is None
        program.forward.output_specs = output_specs_from_example(outputs, static)
    program.metadata["torch_version"] = torch.__version__
    return program
