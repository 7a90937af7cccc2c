"""Rewrites between capture and save: the pass contract, one pass per module, and the default pipeline.

    optimized = optimize(program)                                # a new Program; `program` is left as it was
    optimized = optimize(program, blocklist={"CONV_BN_FUSION"})  # skip a pass, by its blocklist name
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ptlite.ir.graph import Program
from ptlite.ir.verifier import verify

from .base import Pass, PassResult, copy_program
from .dead_code import DeadCode
from .fold_conv_bn import FoldConvBatchNorm
from .remove_dropout import RemoveDropout

__all__ = ["PIPELINE", "Pass", "PassResult", "DeadCode", "FoldConvBatchNorm", "RemoveDropout", "optimize",
           "blocklist_names"]

# The default pipeline in order, keyed by the names a blocklist uses (PyTorch's MobileOptimizerType names for the
# optimisations PyTorch's optimize_for_mobile has).
PIPELINE: dict[str, Pass] = {
    "REMOVE_DROPOUT": RemoveDropout(),
    "CONV_BN_FUSION": FoldConvBatchNorm(),
    "DEAD_CODE": DeadCode(),
}

MAX_ROUNDS = 10  # the pipeline normally settles in two rounds; this only bounds a pass that keeps "changing"


def blocklist_names(blocklist: Iterable[Any] | str) -> set[str]:
    """Blocklist entries as names: strings, or enum members such as torch's MobileOptimizerType (by `.name`).
    Raises ValueError naming the valid names if an entry is unknown."""
    items = [blocklist] if isinstance(blocklist, str) else list(blocklist)
    names = {getattr(item, "name", item) for item in items}
    unknown = sorted(str(n) for n in names if n not in PIPELINE)
    if unknown:
        raise ValueError(f"unknown optimization(s) in the blocklist: {', '.join(unknown)}; "
                         f"valid names: {', '.join(PIPELINE)}")
    return names


def optimize(program: Program, blocklist: Iterable[Any] | str = ()) -> Program:
    """Run the default pipeline (remove_dropout, fold_conv_bn, dead_code) on a copy of `program` until no pass
    changes it; return the copy, with the names of the passes that changed something appended to
    metadata["passes"]. Weight arrays are shared with `program` (passes never write into them)."""
    skipped = blocklist_names(blocklist)
    passes = [p for key, p in PIPELINE.items() if key not in skipped]
    result = copy_program(program)
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
    return result
