"""Target-independent rewrites between capture and save: the pass contract, one pass per module, the pipeline.

    optimized = optimize(program, evaluate=reference.evaluate)                  # a new Program; `program` is kept
    optimized = optimize(program, {"CONV_BN_FUSION"}, evaluate=..., lowering=backend_lowering)

The pipeline runs PIPELINE's passes until none changes the program, then the lowering it is handed (a backend's:
ptlite.backends), then verifies the result. What runs an operator at optimize time (constant folding) is handed in
too, so that this package imports no backend. A blocklist (`optimize_for_mobile`'s `optimization_blocklist`) holds
names, as strings or enum members (by `.name`: torch.utils.mobile_optimizer.MobileOptimizerType's work): a key of
PIPELINE or of the lowering's passes skips that pass; a key of NOTHING_TO_SKIP is accepted and skips nothing, for
the reason given there (so that blocklists written for PyTorch work); any other name raises ValueError listing the
valid ones. PyTorch's names are CONV_BN_FUSION, INSERT_FOLD_PREPACK_OPS, REMOVE_DROPOUT, FUSE_ADD_RELU,
HOIST_CONV_PACKED_PARAMS and VULKAN_AUTOMATIC_GPU_TRANSFER (CONV_1X1_TO_LINEAR is in its C++ enum only); the others
are ptlite's. docs/architecture.md has the table (a test keeps it in step). Adding a pass is one line in PIPELINE.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from ptlite.ir.copy import copy_program
from ptlite.ir.graph import BACKEND_KEY, BLOCKLIST_KEY, Program
from ptlite.ir.memory_plan import drop_memory_plan
from ptlite.ir.verifier import verify
from ptlite.ops import Evaluate

from .base import Pass, PassResult
from .dead_code import DeadCode
from .fold_constants import FoldConstants
from .fold_conv_bn import FoldConvBatchNorm
from .fuse_add_relu import FuseAddRelu
from .remove_dropout import RemoveDropout
from .remove_noops import RemoveNoops

__all__ = ["PIPELINE", "NOTHING_TO_SKIP", "Pass", "PassResult", "DeadCode", "FoldConstants", "FoldConvBatchNorm",
           "FuseAddRelu", "RemoveDropout", "RemoveNoops", "Lowering", "optimize", "run_to_fixpoint",
           "blocklist_names", "accepted_names", "copy_program"]

# The target-independent pipeline in order, keyed by the name a blocklist uses to skip the pass.
PIPELINE: dict[str, type[Pass]] = {
    "REMOVE_DROPOUT": RemoveDropout,
    "REMOVE_NOOPS": RemoveNoops,
    "FOLD_CONSTANTS": FoldConstants,  # takes the evaluator
    "CONV_BN_FUSION": FoldConvBatchNorm,
    "FUSE_ADD_RELU": FuseAddRelu,
    "DEAD_CODE": DeadCode,
}

# Names a blocklist may hold that skip no pass of ptlite, and why (so that blocklists written for PyTorch work).
NOTHING_TO_SKIP: dict[str, str] = {
    "CHANNELS_LAST": "channels-last is the layout the prepacked convolutions compute in and the layout-preserving "
                     "kernels keep; block INSERT_FOLD_PREPACK_OPS to run convolutions NCHW",
    "HOIST_CONV_PACKED_PARAMS": "ptlite's weights are constants of the file, packed ahead of time: nothing to hoist",
    "CONV_1X1_TO_LINEAR": "ptlite has no such rewrite (the name is in PyTorch's C++ enum, not its Python one)",
    "VULKAN_AUTOMATIC_GPU_TRANSFER": "ptlite has no Vulkan backend",
}

MAX_ROUNDS = 10  # the pipeline normally settles in two rounds; this only bounds a pass that keeps "changing"

class Lowering(NamedTuple):
    """A backend's lowering, as the pipeline is handed it (ptlite.optimize_for_mobile makes it)."""

    backend: str  # recorded in the program's metadata
    passes: Mapping[str, str]  # its passes' blocklist names -> what blocking each skips
    lower: Callable[[Program, frozenset[str]], list[str]]  # (program, blocked names) -> the passes that changed it


def accepted_names(lowering_passes: Mapping[str, str] | None = None) -> dict[str, str]:
    """Every name a blocklist may hold -> what blocking it skips: the pipeline's names first, in order, then the
    lowering's passes (a backend's: `Backend.lowering_passes()`), then NOTHING_TO_SKIP's."""
    skipped = {name: f"the {p.name} pass" for name, p in PIPELINE.items()}
    skipped.update(lowering_passes or {})
    return {**skipped, **{name: f"nothing ({why})" for name, why in NOTHING_TO_SKIP.items() if name not in skipped}}


def blocklist_names(blocklist: Iterable[Any] | str, lowering_passes: Mapping[str, str] | None = None) -> set[str]:
    """Blocklist entries as names: strings, or enum members such as torch's MobileOptimizerType (by `.name`).
    Raises ValueError naming the valid names if an entry is unknown."""
    items = [blocklist] if isinstance(blocklist, str) else list(blocklist)
    names = {getattr(item, "name", item) for item in items}
    valid = accepted_names(lowering_passes)
    unknown = sorted(str(n) for n in names if n not in valid)
    if unknown:
        raise ValueError(f"unknown optimization(s) in the blocklist: {', '.join(unknown)}; "
                         f"valid names: {', '.join(valid)}")
    return names


def run_to_fixpoint(program: Program, passes: list[Pass]) -> list[str]:
    """Run the passes in order, again and again until none changes the program (at most MAX_ROUNDS rounds);
    the names of those that changed something, in the order they first did."""
    applied: list[str] = []
    for _ in range(MAX_ROUNDS):
        modified = False
        for p in passes:
            if p(program).modified:
                modified = True
                if p.name not in applied:
                    applied.append(p.name)
        if not modified:
            break
    return applied


def optimize(program: Program, blocklist: Iterable[str] = (), *, evaluate: Evaluate,
             lowering: Lowering | None = None) -> Program:
    """Run PIPELINE (without the blocked passes) on a copy of `program` until no pass changes it, then the
    lowering, if one is given; verify and return the copy, with the names of the passes that changed something
    appended to metadata["passes"], the blocked names in metadata["optimization_blocklist"] and the lowering
    backend's name in metadata["backend"]. `blocklist` holds checked names (blocklist_names). Weight arrays are
    shared with `program` (passes never write into them)."""
    skipped = frozenset(blocklist)
    passes = [FoldConstants(evaluate) if p is FoldConstants else p() for key, p in PIPELINE.items()
              if key not in skipped]
    result = copy_program(program)
    drop_memory_plan(result)  # an earlier plan is stale once a pass changes the graph
    applied = run_to_fixpoint(result, passes)
    lowered_names: set[str] = set()
    if lowering is not None:
        applied += [p for p in lowering.lower(result, skipped) if p not in applied]
        result.metadata[BACKEND_KEY] = lowering.backend
        lowered_names = set(lowering.passes)
    verify(result)
    result.metadata["passes"] = [*result.metadata.get("passes", []), *applied]
    # also skipped at first calls (runtime/module.py's Method)
    result.metadata[BLOCKLIST_KEY] = sorted(skipped & (PIPELINE.keys() | lowered_names))
    return result
