"""Traces that freeze what should vary: torch's TracerWarnings read, and the trace refused or flagged.

torch.jit.trace records the operations one run performs. Where the model turns a tensor into a Python value, the
trace keeps the value the example inputs gave: a Python boolean freezes a branch (`if x.sum() > 0:`), a number,
an index or a list freezes a value, iterating over a tensor or len() freezes a size. torch says so with a
TracerWarning; the program would silently give wrong outputs for other inputs. capture(method="auto") refuses
such a trace; method="trace", asked for explicitly, keeps it and repeats torch's warnings with ptlite's own,
naming the lines. Other TracerWarnings (e.g. torch.tensor results registered as constants) pass through.
"""

from __future__ import annotations

import linecache
import warnings
from dataclasses import dataclass
from typing import Any

import torch

# TracerWarnings whose message starts so: a tensor's value or size became a Python constant in the trace.
_FREEZES = ("Converting a tensor to a Python", "Converting a tensor to a NumPy", "Iterating over a tensor",
            "Using len to get tensor shape")
_BRANCH = "Converting a tensor to a Python boolean"
_SHOWN = 3  # lines quoted in a message; the rest are counted


@dataclass
class Frozen:
    """One place where the trace froze a tensor-derived value: the line, and torch's warning about it."""

    path: str
    line: int
    code: str
    warning: str  # torch's message, first sentence

    @property
    def branch(self) -> bool:
        return self.warning.startswith(_BRANCH)

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" + (f" `{self.code}`" if self.code else "")


@dataclass
class Trace:
    """A traced module, the warnings torch raised while tracing (in order) and the places they freeze."""

    module: Any
    records: list[warnings.WarningMessage]
    frozen: list[Frozen]


def _first_sentence(text: str) -> str:
    head = text.strip().split(". ", 1)[0].strip()
    return head if head.endswith(".") else head + "."


def trace(model: Any, example_inputs: tuple) -> Trace:
    """torch.jit.trace with its warnings recorded (not shown): torch's deprecation notice is dropped, the rest kept
    for `reissue`. TracerWarnings from torch's own modules (torch.*, not torch.jit) are ignored, as torch itself
    does; those from the model's code, torchvision's included, are all recorded, whatever the caller's filters."""
    tracer_warning = torch.jit.TracerWarning
    with warnings.catch_warnings(record=True) as records:
        warnings.filterwarnings("always", category=tracer_warning)
        warnings.filterwarnings("ignore", category=tracer_warning, module=r"torch\.(?!jit)")
        warnings.filterwarnings("ignore", message=".*torch.jit.trace.*deprecated", category=FutureWarning)
        module = torch.jit.trace(model, example_inputs, check_trace=False, strict=False)
    return Trace(module, list(records), frozen_places(records))


def frozen_places(records: list[warnings.WarningMessage]) -> list[Frozen]:
    """The places the trace froze, one per line, in the order torch warned about them."""
    places: dict[tuple[str, int], Frozen] = {}
    for record in records:
        if not issubclass(record.category, torch.jit.TracerWarning):
            continue
        text = str(record.message)
        if not text.startswith(_FREEZES):
            continue
        key = (record.filename, record.lineno)
        if key not in places:
            code = linecache.getline(record.filename, record.lineno).strip()
            places[key] = Frozen(record.filename, record.lineno, code, _first_sentence(text))
    return list(places.values())


def _quoted(frozen: list[Frozen]) -> str:
    shown = "; ".join(f.where for f in frozen[:_SHOWN])
    more = f" and {len(frozen) - _SHOWN} more line(s)" if len(frozen) > _SHOWN else ""
    return shown + more


def _what(frozen: list[Frozen]) -> tuple[str, list[Frozen]]:
    """What the trace froze (the branches first, the worst), and where."""
    branches = [f for f in frozen if f.branch]
    if branches:
        return "the model's control flow, which depends on tensor values", branches
    return "values the model computes from tensors (they become constants)", frozen


def refusal_reason(frozen: list[Frozen]) -> str:
    """One line: why auto does not use this trace."""
    what, places = _what(frozen)
    return (f"refused: the trace would freeze {what}, at {_quoted(places)} (TracerWarning: {places[0].warning}); "
            f"method=\"trace\" keeps it if that is the same for every input")


def refusal(frozen: list[Frozen]) -> str:
    """The whole story of a refused trace: what it would freeze, where, torch's words, and what to do."""
    what, places = _what(frozen)
    if places[0].branch:
        consequence = ("the trace records only the branch the example inputs took, so inputs that take another "
                       "branch would silently get wrong outputs")
        todo = ["make the model scriptable, so that TorchScript keeps every branch (fix the torch.jit.script error "
                "this message lists)",
                "or, if the branch is the same for every input you will run, capture with method=\"trace\" "
                "explicitly",
                "or write the branch with torch.cond, which torch.export captures"]
    else:
        consequence = ("the trace keeps the example inputs' values as constants, so other inputs (or other input "
                       "shapes) would silently get wrong outputs")
        todo = ["keep those values tensors (x.sum() rather than x.sum().item(), x.size(0) rather than "
                "int(x.size(0)))",
                "or make the model scriptable (fix the torch.jit.script error this message lists)",
                "or, if the values are the same for every input you will run (e.g. a fixed input shape), capture "
                "with method=\"trace\" explicitly"]
    lines = [f"torch.jit.trace would freeze {what}:"]
    lines += [f"  {f.where}  (TracerWarning: {f.warning})" for f in places[:_SHOWN]]
    if len(places) > _SHOWN:
        lines.append(f"  and {len(places) - _SHOWN} more line(s)")
    lines.append(f"{consequence[0].upper()}{consequence[1:]}; capture(method=\"auto\") does not use such a trace.")
    lines.append("What to do:")
    lines += [f"  - {item}" for item in todo]
    return "\n".join(lines)


def flagged(frozen: list[Frozen]) -> str:
    """ptlite's warning for a trace asked for explicitly that froze something."""
    what, places = _what(frozen)
    if places[0].branch:
        effect = ("the captured program always takes the branch the example inputs took: inputs that take "
                  "another branch get wrong outputs. Capture with method=\"script\" to keep every branch")
    else:
        effect = ("the captured program keeps the example inputs' values: other inputs (or input shapes) may get "
                  "wrong outputs. Keep those values tensors, or capture with method=\"script\"")
    return (f"ptlite: method=\"trace\" froze {what}, at {_quoted(places)} (torch's TracerWarning: "
            f"{places[0].warning}); {effect}.")


def reissue(records: list[warnings.WarningMessage], frozen: list[Frozen]) -> None:
    """Show torch's warnings as torch would have, then, when the trace froze something, ptlite's, at the line."""
    seen = set()
    for record in records:  # once per place and message, as Python's default filter shows them
        key = (record.category, str(record.message), record.filename, record.lineno)
        if key not in seen:
            seen.add(key)
            warnings.warn_explicit(record.message, record.category, record.filename, record.lineno)
    if frozen:
        first = _what(frozen)[1][0]
        warnings.warn_explicit(flagged(frozen), UserWarning, first.path, first.line)
