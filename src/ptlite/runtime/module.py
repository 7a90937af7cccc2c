"""The loaded model as users see it: methods taking and returning NumPy arrays, with checked inputs."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import numpy as np

from ptlite.errors import InputError
from ptlite.ir import memory_plan
from ptlite.ir.graph import BLOCKLIST_KEY, Graph, Program, ValueSpec
from ptlite.ir.memory_plan import MemoryPlanSummary

from .interpreter import CompiledGraph, check_operators

_SCALAR_TYPES = {"int": (int, np.integer), "float": (float, int, np.floating, np.integer), "bool": (bool, np.bool_),
                 "str": (str,)}


def _check_tensor(spec: ValueSpec, value: Any, method: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        if hasattr(value, "__array__") or isinstance(value, (list, tuple, int, float)):
            value = np.asarray(value)
        else:
            raise InputError(f"{method}: input '{spec.name}' must be a NumPy array, got {type(value).__name__}")
    if spec.dtype is not None and value.dtype != np.dtype(spec.dtype):
        raise InputError(f"{method}: input '{spec.name}' must have dtype {spec.dtype}, got {value.dtype} "
                         f"(convert it with .astype(np.{spec.dtype}))")
    if spec.shape is not None:
        if value.ndim != len(spec.shape):
            raise InputError(f"{method}: input '{spec.name}' must have {len(spec.shape)} dimensions "
                             f"{_shape_text(spec.shape)}, got {value.ndim}: {tuple(value.shape)}")
        bad = [i for i, (want, got) in enumerate(zip(spec.shape, value.shape)) if want is not None and want != got]
        if bad:
            raise InputError(f"{method}: input '{spec.name}' must have shape {_shape_text(spec.shape)}, got "
                             f"{tuple(value.shape)} (dimension {bad[0]} differs); this program was captured with "
                             f"static shapes: capture again with dynamic shapes or use the captured size")
    return value


def _shape_text(shape: tuple) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


def _check_union(spec: ValueSpec, value: Any, method: str) -> Any:
    """An Optional or Union input: the value must have one of the types (arrays from other libraries become NumPy
    arrays); types ptlite cannot check pass unchecked."""
    from ptlite.backends.numpy.kernels.script_types import check_type, isinstance_

    try:
        check_type(spec.type)
    except ValueError:
        return value
    if value is not None and not isinstance(value, (np.ndarray, np.generic, int, float, str, list, tuple, dict)) \
            and hasattr(value, "__array__"):
        value = np.asarray(value)
    if not isinstance_(value, [spec.type]):
        raise InputError(f"{method}: input '{spec.name}' must be {spec.type}, got {type(value).__name__}")
    return value


def _check_scalar(spec: ValueSpec, value: Any, method: str) -> Any:
    kinds = _SCALAR_TYPES.get(spec.type)
    if kinds is not None and not isinstance(value, kinds):
        raise InputError(f"{method}: input '{spec.name}' must be {spec.type}, got {type(value).__name__}")
    if spec.type == "int" and isinstance(value, (bool, np.bool_)):
        raise InputError(f"{method}: input '{spec.name}' must be int, got bool")
    return value


class Method:
    """One callable method of a loaded program.

    A method without a memory plan in the file (input shapes not fixed at capture, a .ptl file, a program not
    optimized) whose inputs are all tensors is specialized at its first call for that call's shapes and dtypes:
    the program is copied with those input shapes; if it was optimized, the shape-dependent passes that could not
    run without shapes run now (WINOGRAD, which picks Winograd for large 3x3 convolutions from a run on zeros);
    then it is planned like the MEMORY_PLAN pass does (ptlite.backends.numpy.lower.plan_memory), so later calls with the
    same shapes allocate nothing for their intermediates. Calls with other shapes run the program as loaded. The first
    call costs one or two more runs. Skipped: what the optimization's blocklist named; methods with loops (a run
    on zeros might not end) and methods keeping values in the Module's state are not planned; a specialization
    that fails leaves the method as loaded."""

    def __init__(self, graph: Graph, program: Program, state: dict[str, Any] | None = None) -> None:
        self.name = graph.name
        self.input_specs: list[ValueSpec] = list(graph.input_specs)
        self.output_specs: list[ValueSpec] = list(graph.output_specs)
        self.program = program  # what the compiled graph runs: the module's program, or a copy planned at first call
        self._state = state
        self._compiled = CompiledGraph(graph, program, state=state)
        self._single_output = len(graph.outputs) == 1
        self._plan_at_first_call = self._compiled.arena is None and bool(graph.inputs) \
            and all(spec.type == "Tensor" for spec in self.input_specs) \
            and "MEMORY_PLAN" not in program.metadata.get(BLOCKLIST_KEY, ()) \
            and not any(node.op == "prim::Loop" for node in graph.walk())
        self._planning = threading.Lock()

    def signature(self) -> str:
        return f"{self.name}(" + ", ".join(s.describe() for s in self.input_specs) + ")"

    def check_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """Bind positional and keyword arguments to the method's inputs, fill defaults and check each one."""
        specs = self.input_specs
        if len(args) > len(specs):
            raise InputError(f"{self.signature()} takes {len(specs)} input(s), got {len(args)}")
        bound: list[Any] = list(args)
        names = [s.name for s in specs]
        for key in kwargs:
            if key not in names:
                raise InputError(f"{self.signature()} has no input named '{key}'")
        for spec in specs[len(args):]:
            if spec.name in kwargs:
                bound.append(kwargs[spec.name])
            elif spec.has_default:
                bound.append(spec.default)
            else:
                raise InputError(f"{self.signature()}: missing input '{spec.name}'")
        checked = []
        for spec, value in zip(specs, bound):
            if spec.type == "Tensor":
                checked.append(_check_tensor(spec, value, self.name))
            elif spec.type in _SCALAR_TYPES:
                checked.append(_check_scalar(spec, value, self.name))
            elif spec.type.startswith(("Optional[", "Union[")):
                checked.append(_check_union(spec, value, self.name))
            else:
                checked.append(value)
        return checked

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        checked = self.check_args(args, kwargs)
        self.prepare(checked)
        outputs = self._compiled(*checked)
        return outputs[0] if self._single_output else tuple(outputs)

    def prepare(self, args: list[Any]) -> None:
        """What the first call does before running: plan memory for these (checked) arguments' shapes, if the
        method is planned at its first call and has not been yet."""
        if self._plan_at_first_call:
            self._plan_for(args)

    def _plan_for(self, args: list[Any]) -> None:
        """Make a memory plan for these arguments' shapes (once; a call racing this one runs unplanned)."""
        if not self._planning.acquire(blocking=False):
            return
        try:
            if not self._plan_at_first_call:
                return
            self._plan_at_first_call = False
            if not all(isinstance(a, np.ndarray) and a.flags.c_contiguous for a in args):
                return
            from ptlite.backends.numpy.lower.plan_memory import plan_method
            from ptlite.passes.base import copy_program

            program = copy_program(self.program)
            graph = program.methods[self.name]
            graph.input_specs = [replace(spec, dtype=a.dtype.name, shape=tuple(a.shape))
                                 for spec, a in zip(graph.input_specs, args)]
            try:
                if "passes" in program.metadata and "WINOGRAD" not in program.metadata.get(BLOCKLIST_KEY, ()):
                    from ptlite.backends.numpy.lower.winograd import Winograd
                    from ptlite.passes.dead_code import DeadCode

                    if Winograd().run(graph, program):
                        DeadCode().run(graph, program)
                plan = plan_method(graph, program)
                if plan is None:
                    return
                program.metadata.setdefault(memory_plan.METADATA_KEY, {})[self.name] = plan
                compiled = CompiledGraph(graph, program, state=self._state)
            except Exception:  # no plan rather than a failed call: the call itself runs as it would have
                return
            self._compiled, self.program = compiled, program
        finally:
            self._planning.release()

    def input_index(self, name_or_index: str | int) -> int:
        """The position of an input given by name or position."""
        names = [s.name for s in self.input_specs]
        if isinstance(name_or_index, str):
            if name_or_index not in names:
                raise InputError(f"{self.signature()} has no input named '{name_or_index}'")
            return names.index(name_or_index)
        if not isinstance(name_or_index, int) or not -len(names) <= name_or_index < len(names):
            raise InputError(f"{self.signature()} has no input {name_or_index!r}")
        return name_or_index % len(names)

    def input_buffer(self, name_or_index: str | int = 0) -> np.ndarray:
        """The array to fill with an input and pass back (see Module.input_buffer)."""
        i = self.input_index(name_or_index)
        spec = self.input_specs[i]
        arena = self._compiled.arena
        if arena is not None and arena.inputs[i] is not None:
            return arena.inputs[i]
        if spec.type != "Tensor":
            raise InputError(f"{self.signature()}: input '{spec.name}' is a {spec.type}, not a tensor")
        if spec.shape is None or any(d is None for d in spec.shape):
            raise InputError(f"{self.signature()}: input '{spec.name}' has no fixed shape "
                             f"({spec.describe()}); make an array of the shape you need instead")
        return np.zeros(spec.shape, dtype=spec.dtype or np.float32)


class Module:
    """A loaded ptlite program: call it like the PyTorch module it came from, with NumPy arrays."""

    def __init__(self, program: Program) -> None:
        self.program = program
        check_operators(program)  # one error naming every missing operator, whichever method uses it
        # Attributes the model changes while running (ptlite::set_attr), by attribute path; kept across calls and
        # shared by the methods. Attributes not set yet hold their initial values; clear() restores those.
        self.state: dict[str, Any] = {}
        self._methods: dict[str, Method] = {name: Method(g, program, self.state)
                                            for name, g in program.methods.items()}

    def _method(self, name: str) -> Method:
        if name not in self._methods:
            raise InputError(f"the program has no method '{name}'; it has {', '.join(self.method_names)}")
        return self._methods[name]

    @property
    def method_names(self) -> list[str]:
        """Names of the methods the program exposes ('forward' first)."""
        return list(self.program.methods)

    @property
    def input_specs(self) -> list[ValueSpec]:
        """What `forward` expects: name, type, dtype and shape of each input."""
        return self._method("forward").input_specs

    @property
    def output_specs(self) -> list[ValueSpec]:
        """What `forward` returns at each position."""
        return self._method("forward").output_specs

    @property
    def metadata(self) -> dict[str, Any]:
        return self.program.metadata

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run `forward`; returns an array, or the tuple/list/dict structure the model returns."""
        return self._method("forward")(*args, **kwargs)

    __call__ = forward

    def run_method(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Run the method called `name` with the given arguments."""
        return self._method(name)(*args, **kwargs)

    def input_buffer(self, name_or_index: str | int = 0, method: str = "forward") -> np.ndarray:
        """An array for one input of a method (by name or position) to be filled by the caller (preprocessing can
        write straight into it) and passed back as that input: no copy anywhere.

        With a memory plan it is a view of the module's arena where the plan puts that input, otherwise a new array
        of the input's shape (which must then be fixed). The buffer belongs to the module and is reused: a call of
        the method overwrites it once the input has been read, so fill it again before every call, pass it only as
        the input it was made for, and do not share one module between threads while using it."""
        return self._method(method).input_buffer(name_or_index)

    def memory_plan(self, method: str = "forward") -> MemoryPlanSummary | None:
        """What the method's memory plan does (arena size, planned and intermediate bytes, values), or None when it
        has no plan: none in the file (input shapes not fixed, an optimization that skipped MEMORY_PLAN, a program
        not optimized) and none made at its first call yet (see Method)."""
        return memory_plan.summary(self._method(method).program, method)

    def __repr__(self) -> str:
        return f"<ptlite.Module methods={self.method_names}>"
