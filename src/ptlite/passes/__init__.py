"""Rewrites between capture and save: the pass contract, one pass per module, and the default pipeline.

    optimized = optimize(program)                                # a new Program; `program` is left as it was
    optimized = optimize(program, blocklist={"CONV_BN_FUSION"})  # skip a pass, by its blocklist name

A blocklist (`optimize_for_mobile`'s `optimization_blocklist`) holds names, as strings or enum members (by `.name`:
torch.utils.mobile_optimizer.MobileOptimizerType's work): a key of PIPELINE skips that pass; a key of NOTHING_TO_SKIP
is accepted and skips nothing, for the reason given there (so that blocklists written for PyTorch work); any other
name raises ValueError listing the valid ones. PyTorch's names are CONV_BN_FUSION, INSERT_FOLD_PREPACK_OPS,
REMOVE_DROPOUT, FUSE_ADD_RELU, HOIST_CONV_PACKED_PARAMS and VULKAN_AUTOMATIC_GPU_TRANSFER (CONV_1X1_TO_LINEAR is in
its C++ enum only); the others are ptlite's. docs/architecture.md has the table (a test keeps it in step).
Adding a pass is one line in PIPELINE (a name there wins over the same name in NOTHING_TO_SKIP).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ptlite.backends.numpy.lower.fuse_activations import FuseActivations
from ptlite.backends.numpy.lower.fuse_pointwise_depthwise import FusePointwiseDepthwise
from ptlite.backends.numpy.lower.fuse_squeeze_excite import FuseSqueezeExcite
from ptlite.backends.numpy.lower.plan_memory import PlanMemory
from ptlite.backends.numpy.lower.prepack import Prepack
from ptlite.backends.numpy.lower.winograd import Winograd
from ptlite.ir.graph import BLOCKLIST_KEY, Program
from ptlite.ir.memory_plan import drop_memory_plan
from ptlite.ir.verifier import verify

from .base import Pass, PassResult, copy_program
from .dead_code import DeadCode
from .fold_constants import FoldConstants
from .fold_conv_bn import FoldConvBatchNorm
from .fuse_add_relu import FuseAddRelu
from .remove_dropout import RemoveDropout
from .remove_noops import RemoveNoops

__all__ = ["PIPELINE", "NOTHING_TO_SKIP", "Pass", "PassResult", "DeadCode", "FoldConstants", "FoldConvBatchNorm",
           "FuseActivations", "FuseAddRelu", "FusePointwiseDepthwise", "FuseSqueezeExcite",
           "Prepack", "RemoveDropout", "RemoveNoops", "Winograd", "optimize",
           "blocklist_names", "accepted_names", "copy_program"]

# The default pipeline in order, keyed by the name a blocklist uses to skip the pass.
PIPELINE: dict[str, Pass] = {
    "REMOVE_DROPOUT": RemoveDropout(),
    "REMOVE_NOOPS": RemoveNoops(),
    "FOLD_CONSTANTS": FoldConstants(),
    "CONV_BN_FUSION": FoldConvBatchNorm(),
    "INSERT_FOLD_PREPACK_OPS": Prepack(),
    "WINOGRAD": Winograd(),
    "FUSE_ACTIVATIONS": FuseActivations(),
    "FUSE_POINTWISE_DEPTHWISE": FusePointwiseDepthwise(),
    "FUSE_SQUEEZE_EXCITE": FuseSqueezeExcite(),
    "FUSE_ADD_RELU": FuseAddRelu(),
    "DEAD_CODE": DeadCode(),
    "MEMORY_PLAN": PlanMemory(),  # last: a plan holds only for the graph it was made for
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


def accepted_names() -> dict[str, str]:
    """Every name a blocklist may hold -> what blocking it skips: the pipeline's names first, in order."""
    skipped = {name: f"the {p.name} pass" for name, p in PIPELINE.items()}
    return {**skipped, **{name: f"nothing ({why})" for name, why in NOTHING_TO_SKIP.items() if name not in PIPELINE}}


def blocklist_names(blocklist: Iterable[Any] | str) -> set[str]:
    """Blocklist entries as names: strings, or enum members such as torch's MobileOptimizerType (by `.name`).
    Raises ValueError naming the valid names if an entry is unknown."""
    items = [blocklist] if isinstance(blocklist, str) else list(blocklist)
    names = {getattr(item, "name", item) for item in items}
    valid = accepted_names()
    unknown = sorted(str(n) for n in names if n not in valid)
    if unknown:
        raise ValueError(f"unknown optimization(s) in the blocklist: {', '.join(unknown)}; "
                         f"valid names: {', '.join(valid)}")
    return names


def optimize(program: Program, blocklist: Iterable[Any] | str = ()) -> Program:
    """Run the default pipeline (PIPELINE, in order, without the blocked passes) on a copy of `program` until no pass
    changes it; return the copy, with the names of the passes that changed something appended to
    metadata["passes"]. Weight arrays are shared with `program` (passes never write into them)."""
    skipped = blocklist_names(blocklist)
    passes = [p for key, p in PIPELINE.items() if key not in skipped]
    result = copy_program(program)
    drop_memory_plan(result)  # an earlier plan is stale once a pass changes the graph
    applied: list[str] = []
    for _ in range(MAX_ROUNDS):
        modified = False
        for p in passes:
            if p(result).modified:
                modified = True
                if p.name not in applied:
                    applied.append(p.name)
        if not modified:
            break
    verify(result)
    result.metadata["passes"] = [*result.metadata.get("passes", []), *applied]
    result.metadata[BLOCKLIST_KEY] = sorted(skipped & PIPELINE.keys())  # also skipped at first calls (Method)
    return result
