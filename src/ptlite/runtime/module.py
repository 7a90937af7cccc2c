"""The loaded model as users see it: methods taking and returning NumPy arrays, with checked inputs, running on
the backends it was loaded with."""

from __future__ import annotations

import threading
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from ptlite.backends import REFERENCE, resolve
from ptlite.backends.base import Backend, LoweringContext
from ptlite.errors import FormatError, InputError, UnsupportedOperatorError
from ptlite.ir import memory_plan
from ptlite.ir.graph import BLOCKLIST_KEY, BundledInput, Graph, Program, ValueSpec
from ptlite.ir.memory_plan import MemoryPlanSummary
from ptlite.ir.verifier import unknown_operators, unsupported_uses
from ptlite.ir.weights import seal, widened
from ptlite.preprocess.spec import Preprocessing, stored_labels, stored_preprocessing

from . import bundled
from .bundled import OutputCheck
from .dispatch import Dispatcher, Placement
from .inputs import check_args
from .interpreter import CompiledGraph, Instrument, reference_dispatcher, runner
from .limits import DEFAULT as DEFAULT_LIMITS
from .limits import CallGuard, Limits, check_arena


class Method:
    """One callable method of a loaded program.

    A method without a memory plan in the file (input shapes not fixed at capture, a .ptl file, a program not
    optimized) whose inputs are all tensors is specialized at its first call for that call's shapes and dtypes: the
    program is copied with those input shapes and handed to the backend that lowered it (or the reference, for a
    program no backend lowered), whose `specialize` lowers what needed the shapes (the NumPy backend: Winograd for
    large 3x3 convolutions, from a run on zeros) and plans memory, so later calls with the same shapes allocate
    nothing for their intermediates. Calls with other shapes run the program as loaded. The first call costs one or
    two more runs. Skipped: what the optimization's blocklist named; methods with loops (a run on zeros might not
    end), methods keeping values in the Module's state, programs lowered for a backend that is not here, and
    methods some of whose nodes run on another backend (a plan holds only for its maker's kernels: see
    runtime/interpreter.py, _arena); a specialization that fails leaves the method as loaded."""

    def __init__(self, graph: Graph, program: Program, state: dict[str, Any] | None = None,
                 dispatcher: Dispatcher | None = None, after_call: Callable[[], None] | None = None,
                 limits: Limits = DEFAULT_LIMITS) -> None:
        self.name = graph.name
        self._after_call = after_call  # see Module
        self.limits = limits
        plan = memory_plan.method_plan(program, self.name)
        if plan is not None and type(plan.get("arena_bytes")) is int and limits.max_bytes is not None \
                and plan["arena_bytes"] > limits.max_bytes and not memory_plan.plan_problems(graph, program):
            check_arena(plan["arena_bytes"], limits, f"method '{self.name}'")  # before anything allocates it
            # (a plan that does not add up is the compiled graph's FormatError)
        self.input_specs: list[ValueSpec] = list(graph.input_specs)
        self.output_specs: list[ValueSpec] = list(graph.output_specs)
        self.program = program  # what the compiled graph runs: the module's program, or a copy planned at first call
        self._state = state
        self._dispatcher = dispatcher or reference_dispatcher()
        self._compiled = CompiledGraph(graph, program, state=state, dispatcher=self._dispatcher)
        self._single_output = len(graph.outputs) == 1
        self._specializer = self._choose_specializer(program)
        self._plan_at_first_call = memory_plan.method_plan(program, self.name) is None and bool(graph.inputs) \
            and self._specializer is not None and self._compiled.runs_on_maker_of_plans(self._specializer.name) \
            and all(spec.type == "Tensor" for spec in self.input_specs) \
            and "MEMORY_PLAN" not in program.metadata.get(BLOCKLIST_KEY, ()) \
            and not any(node.op == "prim::Loop" for node in graph.walk())
        self._planning = threading.Lock()

    def _choose_specializer(self, program: Program) -> Backend | None:
        """The backend that lowered the program if it is one of ours, the reference if none lowered it."""
        wanted = program.lowered_for or REFERENCE
        return next((b for b in self._dispatcher.backends if b.name == wanted), None)

    def signature(self) -> str:
        return f"{self.name}(" + ", ".join(s.describe() for s in self.input_specs) + ")"

    def check_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """Bind positional and keyword arguments to the method's inputs, fill defaults and check each one."""
        return check_args(self.input_specs, args, kwargs, self.name, self.signature)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        checked = self.check_args(args, kwargs)
        try:
            if self._plan_at_first_call:
                with CallGuard(self.limits):  # its own: what specializing allocates or takes is not the call's
                    self.prepare(checked)
            with CallGuard(self.limits):
                outputs = self._compiled(*checked)
        except Exception:
            if self._after_call is not None:
                self._after_call()  # a file changed under the call explains its failure: say that instead
            raise
        if self._after_call is not None:
            self._after_call()
        return outputs[0] if self._single_output else tuple(outputs)

    def prepare(self, args: list[Any]) -> None:
        """What the first call does before running: specialize for these (checked) arguments' shapes, if the
        method is specialized at its first call and has not been yet."""
        if self._plan_at_first_call:
            self._plan_for(args)

    def compile(self, instrument: Instrument | None = None) -> CompiledGraph:
        """The method compiled again as it runs now (after a first call's specialization, that program), each
        operator step wrapped by `instrument` (see ptlite.runtime.profile)."""
        return CompiledGraph(self.program.methods[self.name], self.program, instrument, self._state, self._dispatcher)

    @property
    def placements(self) -> list[Placement]:
        """Where each operator node of the method runs now: its backend, and the delegate it is part of."""
        return self._compiled.placements

    def _plan_for(self, args: list[Any]) -> None:
        """Specialize for these arguments' shapes (once; a call racing this one runs unspecialized)."""
        if not self._planning.acquire(blocking=False):
            return
        try:
            if not self._plan_at_first_call:
                return
            self._plan_at_first_call = False
            if not all(isinstance(a, np.ndarray) and a.flags.c_contiguous for a in args):
                return
            from ptlite.ir.copy import copy_program  # here: only a first call that specializes needs it

            program = copy_program(self.program)
            graph = program.methods[self.name]
            graph.input_specs = [replace(spec, dtype=a.dtype.name, shape=tuple(a.shape))
                                 for spec, a in zip(graph.input_specs, args)]
            backend = self._specializer
            context = LoweringContext(frozenset(program.metadata.get(BLOCKLIST_KEY, ())), runner(backend),
                                      lowered=program.lowered_for == backend.name)
            try:
                if not backend.specialize(program, self.name, context):
                    return
                # the method's graph as specialized (Winograd's error budget may have replaced it: winograd_budget.py)
                compiled = CompiledGraph(program.methods[self.name], program, state=self._state,
                                         dispatcher=self._dispatcher)
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
    """A loaded ptlite program: call it like the PyTorch module it came from, with NumPy arrays.

    `backends` are the backends asked for each node, in order (names or Backend objects; the NumPy reference is
    always added last; None: every backend available here, the one the program was lowered for first: its lowering
    shaped the program for its kernels (weight layouts, fusions, the memory plan), so a program lowered for the
    reference runs on it alone). A program lowered for a backend that is not among them runs on the others
    (the reference runs every operator), with one warning saying so.

    `after_call`, if given, runs after each call of a method, before its results are returned: `ptlite.load` passes
    the check that raises FileChangedError when the file the weights are read from has changed under its map
    (ptlite.format.source).

    `limits` bound each call's memory, loop iterations and time (ptlite.Limits; None: the defaults); a call past
    one raises LimitError."""

    def __init__(self, program: Program, backends: Iterable[str | Backend] | str | None = None,
                 after_call: Callable[[], None] | None = None, limits: Limits | None = None) -> None:
        program = widened(program, seal)  # weights a quantization scheme stored narrower, as the kernels read them
        self.program = program
        self.limits = DEFAULT_LIMITS if limits is None else limits
        if not isinstance(self.limits, Limits):
            raise TypeError(f"limits must be a ptlite.Limits, got {type(limits).__name__}")
        _check_operators(program)  # one error naming every missing operator, whichever method uses it
        lowered = program.lowered_for
        self.backends: list[Backend] = resolve(backends)
        if backends is None:
            self.backends = _lowering_backend_first(self.backends, lowered)
        self._dispatcher = Dispatcher(self.backends)
        if lowered is not None and lowered not in self._dispatcher.names:
            warnings.warn(f"this program was lowered for the {lowered!r} backend, {_why_absent(lowered)}; it runs on "
                          f"{', '.join(self._dispatcher.names)} instead", RuntimeWarning, stacklevel=3)
        # Attributes the model changes while running (ptlite::set_attr), by attribute path; kept across calls and
        # shared by the methods. Attributes not set yet hold their initial values; clear() restores those.
        self.state: dict[str, Any] = {}
        self._methods: dict[str, Method] = {name: Method(g, program, self.state, self._dispatcher, after_call,
                                                         self.limits) for name, g in program.methods.items()}

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

    @property
    def preprocessing(self) -> Preprocessing | None:
        """How an image becomes forward's input, as the file records it (`ptlite convert --preprocess`), with the
        size taken from the input's shape when the file gives none; None when the file records none."""
        try:
            preprocessing = stored_preprocessing(self.program.metadata)
            if preprocessing is None:
                return None
            target = next((s for s in self.input_specs if s.name == preprocessing.input), None) \
                if preprocessing.input else (self.input_specs[0] if self.input_specs else None)
            return preprocessing.with_input_shape(target.shape if target is not None else None)
        except ValueError as exc:
            raise FormatError(f"the file's metadata 'preprocessing' is invalid: {exc}") from None

    @property
    def labels(self) -> list[str] | None:
        """The class names the file records (`ptlite convert --labels`), index by index; None when it has none."""
        try:
            return stored_labels(self.program.metadata)
        except ValueError as exc:
            raise FormatError(f"the file's metadata 'labels' is invalid: {exc}") from None

    def bundled_inputs(self) -> list[BundledInput]:
        """The example calls the file bundles (`ptlite convert --bundle-inputs`), each with PyTorch's outputs and
        their tolerances; [] when it has none."""
        return list(self.program.bundled_inputs)

    def check_bundled(self) -> list[OutputCheck]:
        """Run every bundled call and compare each output with PyTorch's (what `ptlite check` does): one OutputCheck
        per output, `passed` when every element is within its tolerance."""
        return bundled.check(self.program.bundled_inputs, lambda method, inputs: self.run_method(method, *inputs))

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run `forward`; returns an array, or the tuple/list/dict structure the model returns."""
        return self._method("forward")(*args, **kwargs)

    __call__ = forward

    def run_method(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Run the method called `name` with the given arguments."""
        return self._method(name)(*args, **kwargs)

    def placements(self, method: str = "forward") -> list[Placement]:
        """Where each operator node of a method runs: its backend (and the delegate it is part of, if any), as
        compiled now (a first call's specialization may change the nodes)."""
        return self._method(method).placements

    def backend_counts(self, method: str = "forward") -> dict[str, int]:
        """How many operator nodes of a method each backend runs, by backend name."""
        return dict(Counter(p.backend for p in self.placements(method)))

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


def _check_operators(program: Program) -> None:
    """Raise one UnsupportedOperatorError listing every operator the table lacks, and every node whose arguments the
    kernels cannot take (the table's @dtypes and @ranks), in every method."""
    unknown = unknown_operators(program)
    misused = unsupported_uses(program)
    if unknown or misused:
        lines = [f"  {op}  (used at {', '.join(sorted(set(where))[:5])})" for op, where in sorted(unknown.items())]
        head = f"the program uses {len(unknown)} operator(s) that this ptlite cannot run:\n" if unknown else ""
        if misused:
            head += "\n".join(lines) + ("\n" if lines else "")
            head += f"the program uses {len(misused)} operator(s) in ways this ptlite cannot run:\n"
            lines = [f"  {op}: {'; '.join(list(dict.fromkeys(where))[:3])}" for op, where in sorted(misused.items())]
        raise UnsupportedOperatorError(head + "\n".join(lines) + "\nUpgrade ptlite, or change the model to avoid "
                                       "these operators.")


def _why_absent(name: str) -> str:
    """Why a backend a program was lowered for is not running it."""
    from ptlite.backends import available

    for info in available():
        if info.name == name:
            return f"which is not available here ({info.detail})" if not info.available else \
                "which is not among the backends selected"
    return "which this ptlite does not have"


def _lowering_backend_first(selected: list[Backend], lowered: str | None) -> list[Backend]:
    """The selected backends with the one the program was lowered for first (alone, if that is the reference: it
    accepts every node, so none after it would be asked)."""
    first = next((b for b in selected if b.name == lowered), None)
    if first is None:
        return selected
    if first.name == REFERENCE:
        return [first]
    return [first] + [b for b in selected if b is not first]
