"""The native backend's lowering: convolution and linear weights prepacked (the reference's INSERT_FOLD_PREPACK_OPS),
3x3 convolutions to Winograd (the reference's WINOGRAD pass with its small tiles: F(4x4, 3x3) on large images,
F(2x2, 3x3) on smaller ones; the library has its own kernels), activations fused, the other dense weights packed
into the panels its GEMM micro-kernel reads (pack_panels), a squeeze-and-excitation gate given to the 1x1
convolution after it (gate_convolutions), work on integers and booleans moved up to where its inputs are made
(hoist: so that it does not cut the executor's float32 regions), dead code dropped, and memory planned. Not the
reference's NumPy-specific blocks (the fused pointwise-depthwise and squeeze-excite operators): the native kernels
do that work in C.
"""

from __future__ import annotations

from ptlite.backends.base import LoweringContext
from ptlite.backends.numpy.lower import specialize as reference_specialize
from ptlite.backends.numpy.lower.fuse_activations import FuseActivations
from ptlite.backends.numpy.lower.plan_memory import PlanMemory
from ptlite.backends.numpy.lower.prepack import Prepack
from ptlite.backends.numpy.lower.winograd import Observed, Winograd
from ptlite.backends.numpy.lower.winograd_budget import within_budget
from ptlite.ir.graph import Program
from ptlite.passes import run_to_fixpoint
from ptlite.passes.base import Pass
from ptlite.passes.dead_code import DeadCode

from .gate_convolutions import GateConvolutions
from .hoist import HoistNonFloat
from .pack_panels import PackPanels
from .winograd_2x2 import Winograd2x2

PASSES: dict[str, type[Pass]] = {
    "INSERT_FOLD_PREPACK_OPS": Prepack,
    "WINOGRAD": Winograd,  # takes the runner: it runs the method on zeros to see output sizes
    "WINOGRAD_2X2": Winograd2x2,  # likewise
    "FUSE_ACTIVATIONS": FuseActivations,
    "PACK_PANELS": PackPanels,
    "GATE_CONVOLUTIONS": GateConvolutions,
    "HOIST_NON_FLOAT": HoistNonFloat,
    "MEMORY_PLAN": PlanMemory,  # last; takes the runner
}


def lower(program: Program, context: LoweringContext) -> list[str]:
    """The passes, then the memory plan, with Winograd kept within its error budget (the reference's
    winograd_budget.py); the names of the passes that changed the program."""
    return within_budget(program, context.run, _blocked(context), lambda p: _lower_once(p, context))


def _lower_once(program: Program, context: LoweringContext) -> list[str]:
    blocked = _blocked(context)
    observed: Observed = Observed()  # the Winograd passes share one run on zeros
    passes: list[Pass] = [_make(cls, context, observed) for name, cls in PASSES.items()
                          if name not in blocked and cls is not PlanMemory]
    if "DEAD_CODE" not in blocked:
        passes.append(DeadCode())
    applied = run_to_fixpoint(program, passes)
    if "MEMORY_PLAN" not in blocked and context.run is not None:
        PlanMemory(context.run)(program)
    return applied


def specialize(program: Program, method: str, context: LoweringContext) -> bool:
    """At a first call: Winograd where that call's shapes say it wins, then memory planned for them (the
    reference's)."""
    if context.run is None:
        return False
    observed: Observed = Observed()
    shape_passes = {"WINOGRAD": lambda run: Winograd(run, observed),
                    "WINOGRAD_2X2": lambda run: Winograd2x2(run, observed)}
    context = LoweringContext(_blocked(context), context.run, context.lowered)
    return reference_specialize(program, method, context, shape_passes)


def _blocked(context: LoweringContext) -> frozenset[str]:
    """The blocklist, with WINOGRAD_2X2 where WINOGRAD is (a user who blocks Winograd for its rounding error means
    both)."""
    blocked = frozenset(context.blocklist)
    return blocked | {"WINOGRAD_2X2"} if "WINOGRAD" in blocked else blocked


def _make(cls: type[Pass], context: LoweringContext, observed: Observed) -> Pass:
    if cls not in (Winograd, Winograd2x2):
        return cls()
    if context.run is None:
        raise ValueError("the native backend's lowering runs methods on zeros: its LoweringContext needs a runner")
    return cls(context.run, observed)
