"""The NumPy backend's lowering: the passes that rewrite a program for its kernels, after the target-independent
ones (ptlite.passes).

Convolution and linear weights are prepacked into the layouts the kernels read (prepack), large 3x3 convolutions
go to Winograd (winograd), activations join the convolution producing them (fuse_activations), and MobileNet's and
EfficientNet's blocks become single operators (fuse_pointwise_depthwise, fuse_squeeze_excite); dead code goes after
them, and the memory plan (plan_memory) comes last: a plan holds only for the graph it was made for. Where Winograd
takes the outputs too far from exact arithmetic, the lowering is done again with fewer Winograd layers
(winograd_budget).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ptlite.backends.base import LoweringContext, Runner
from ptlite.ir.graph import Program
from ptlite.ir.memory_plan import METADATA_KEY
from ptlite.passes import run_to_fixpoint
from ptlite.passes.base import Pass
from ptlite.passes.dead_code import DeadCode

from .fuse_activations import FuseActivations
from .fuse_pointwise_depthwise import FusePointwiseDepthwise
from .fuse_squeeze_excite import FuseSqueezeExcite
from .plan_memory import PlanMemory, plan_method
from .prepack import Prepack
from .winograd import Winograd
from .winograd_budget import within_budget

# The lowering passes in order, keyed by the name a blocklist uses to skip each.
PASSES: dict[str, type[Pass]] = {
    "INSERT_FOLD_PREPACK_OPS": Prepack,
    "WINOGRAD": Winograd,  # takes the runner: it runs the method on zeros to see output sizes
    "FUSE_ACTIVATIONS": FuseActivations,
    "FUSE_POINTWISE_DEPTHWISE": FusePointwiseDepthwise,
    "FUSE_SQUEEZE_EXCITE": FuseSqueezeExcite,
    "MEMORY_PLAN": PlanMemory,  # last; takes the runner
}


def lower(program: Program, context: LoweringContext) -> list[str]:
    """Run the lowering passes (without the blocked ones; dead code too, unless DEAD_CODE is blocked) until none
    changes the program, then plan memory, keeping Winograd within its error budget (winograd_budget.py); the names
    of the passes that changed it."""
    return within_budget(program, context.run, context.blocklist, lambda p: _lower_once(p, context))


def _lower_once(program: Program, context: LoweringContext) -> list[str]:
    blocked = context.blocklist
    passes = [_make(cls, context) for name, cls in PASSES.items() if name not in blocked and cls is not PlanMemory]
    if "DEAD_CODE" not in blocked:
        passes.append(DeadCode())
    applied = run_to_fixpoint(program, passes)
    if "MEMORY_PLAN" not in blocked:
        PlanMemory(_runner(context))(program)
    return applied


def specialize(program: Program, method: str, context: LoweringContext,
               shape_passes: Mapping[str, Callable[[Runner], Pass]] | None = None) -> bool:
    """At a first call (the method's input specs hold its shapes): run the passes that needed them, if this backend
    lowered the program (`shape_passes`, by blocklist name; default: Winograd where the shapes say it wins), then
    plan the method's memory. Whether it made a plan (without one, the method runs as loaded)."""
    def choose(program: Program) -> bool:
        graph = program.methods[method]
        changed = False
        for name, make in (shape_passes or {"WINOGRAD": Winograd}).items():
            if name not in context.blocklist:
                changed = make(_runner(context)).run(graph, program) or changed
        if changed:
            DeadCode().run(graph, program)
        return changed

    if context.lowered:  # Winograd within its error budget, as at lowering
        within_budget(program, context.run, context.blocklist, choose)
    graph = program.methods[method]
    plan = plan_method(graph, program, _runner(context))
    if plan is None:
        return False
    program.metadata.setdefault(METADATA_KEY, {})[method] = plan
    return True


def _make(cls: type[Pass], context: LoweringContext) -> Pass:
    return cls(_runner(context)) if cls in (Winograd, PlanMemory) else cls()


def _runner(context: LoweringContext):  # noqa: ANN202
    if context.run is None:
        raise ValueError("the NumPy backend's lowering runs methods on zeros: its LoweringContext needs a runner")
    return context.run
