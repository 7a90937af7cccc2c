"""capture(method="auto"): the order it tries the capture methods in, and how it reports what each one did.

Order: torch.export first (a complete ATen graph with static shapes), then torch.jit.script (keeps Python control
flow), then torch.jit.trace (last: it records one run; a trace that froze a branch or a tensor-derived value is
refused). Without example inputs only script can run; with preserved_methods only script keeps them. The first
method that works is kept; the program's metadata["capture"] names it and metadata["capture_attempts"] has one
line per method that failed before it. When every method fails, the CaptureError lists each one's reason in one
line, the most telling first (identical reasons merged), then that failure in full.
"""

from __future__ import annotations

from dataclasses import dataclass

from ptlite.errors import CaptureError

from .common import MethodFailure, Relevance, one_line

ORDER = ("export", "script", "trace")


@dataclass
class Failure:
    """One method auto tried, and its error."""

    method: str
    error: CaptureError

    @property
    def reason(self) -> str:
        return self.error.reason if isinstance(self.error, MethodFailure) else one_line(str(self.error))

    @property
    def relevance(self) -> Relevance:
        return self.error.relevance if isinstance(self.error, MethodFailure) else Relevance.OTHER

    def line(self) -> str:
        return f"{self.method}: {self.reason}"


def plan(has_examples: bool, preserved_methods: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """The methods auto tries, in order, and a line for each group it skips, saying why."""
    if preserved_methods:
        return ["script"], ["export, trace: not tried: only script keeps preserved_methods"]
    if not has_examples:
        return ["script"], ["export, trace: not tried: they need example_inputs (a tuple of tensors)"]
    return list(ORDER), []


def ranked(failures: list[Failure]) -> list[Failure]:
    """The most telling failure first; among equals, the order they were tried in."""
    return sorted(failures, key=lambda f: f.relevance)


def report(model_name: str, tried: list[str], failures: list[Failure], skipped: list[str]) -> str:
    """The message of auto's CaptureError when no method worked."""
    by_reason: dict[str, list[str]] = {}
    for f in ranked(failures):
        by_reason.setdefault(f.reason, []).append(f.method)
    order = f"{', '.join(tried)}, in this order" if len(tried) > 1 else tried[0]
    lines = [f"cannot capture {model_name}: no capture method worked (auto tried {order}; the most telling "
             f"failure first):"]
    lines += [f"  {', '.join(methods)}: {reason}" for reason, methods in by_reason.items()]
    lines += [f"  {line}" for line in skipped]
    best = ranked(failures)[0]
    detail = str(best.error).strip().splitlines()
    if detail and best.reason in detail[0]:  # the first line is the reason just listed: not again
        detail = detail[1:]
    if detail:
        lines.append(f"{best.method}, in full:")
        lines += [f"  {ln}" if ln else "" for ln in detail]
    return "\n".join(lines)
