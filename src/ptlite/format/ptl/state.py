"""Module attributes that a .ptl file's bytecode changes while running (SET_ATTR): which they are, their types, and
how the translation finds them.

Attributes are constants of the program (weights and values read while loading) unless some method sets them;
those become entries of the loaded Module's state (`ptlite.backends.numpy.kernels.state`), read and written with
`ptlite::get_attr` / `ptlite::set_attr` and named by attribute path. Which attributes a method sets is known only
once its bytecode has been translated (the object a SET_ATTR writes is whatever the stack holds), so translation
runs again from the start whenever it meets a SET_ATTR to an attribute not known to be state yet, or one whose
type it must widen (an Optional attribute set to a tensor): reads translated before it would otherwise have become
constants. Each rerun adds an attribute or widens a type, so there are few reruns, and none in files without
SET_ATTR.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

from .types import unify


@dataclass
class StateSlot:
    """An attribute that changes while running: where it is, its type, and the value it was saved with."""

    path: str  # attribute path from the root module, e.g. "calls" or "encoder.steps"
    type: str  # TorchScript type of every value it holds
    initial: Any


class StateChanged(Exception):  # noqa: N818  (control flow of the translation, not an error)
    """Raised by the translation when it finds a new state attribute (or widens one's type): translate again."""


def widen(current: str, assigned: str) -> str:
    """The type of an attribute of type `current` after a value of type `assigned` is stored in it. TorchScript
    types attributes statically, so a value of unknown type ('Any') keeps the attribute's type."""
    if assigned in (current, "Any") or current == "Any":
        return current
    if current == f"Optional[{assigned}]" or (assigned == "NoneType" and current.startswith("Optional[")):
        return current
    return unify(current, assigned)


def max_reruns(attribute_count: int) -> int:
    """Translations needed at most: each rerun makes an attribute state or widens its type (at most twice:
    T, Optional[T], Any)."""
    return 3 * attribute_count + 1


_ANNOTATION = re.compile(r"\(([a-z*](?:!)?)(?:\s*->\s*[a-z*]+)?\)")


@cache
def alias_positions(schema_text: str) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """From an ATen schema's alias annotations: the positions of the arguments the operator writes (`Tensor(a!)`),
    and for each result the positions of the arguments it may be (part of) (`Tensor(a)` returning `Tensor(a)`,
    `t[](a)` returning `t(*)`)."""
    head, _, returns = schema_text.rpartition("->")
    arguments = _split(head[head.index("(") + 1:head.rindex(")")])
    returns = returns.strip()
    if returns.startswith("(") and returns.endswith(")"):
        returns = returns[1:-1]
    letters = [_letter(a) for a in arguments]
    written = tuple(i for i, a in enumerate(arguments) if "!" in (_annotation(a) or ""))
    aliased = []
    for result in _split(returns):
        letter = _letter(result)
        if letter is None:
            aliased.append(())
        elif letter == "*":
            aliased.append(tuple(i for i, mine in enumerate(letters) if mine is not None))
        else:
            aliased.append(tuple(i for i, mine in enumerate(letters) if mine == letter))
    return written, tuple(aliased)


def _split(text: str) -> list[str]:
    """Top-level comma-separated parts (the keyword-only marker '*' dropped)."""
    parts, depth, current = [], 0, ""
    for ch in text + ",":
        depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            if current.strip() and current.strip() != "*":
                parts.append(current.strip())
            current = ""
        else:
            current += ch
    return parts


def _annotation(part: str) -> str | None:
    """'a!' of 'Tensor(a!) self', 'a' of 'Tensor(a -> *) self' or of the return 'Tensor(a)[]', else None."""
    kind = part.split("=", 1)[0].strip()
    if kind.count(" ") and not kind.endswith(")") and not kind.endswith("]"):
        kind = kind.rsplit(" ", 1)[0]  # drop the argument's name
    match = _ANNOTATION.search(kind)
    return match.group(1) if match else None


def _letter(part: str) -> str | None:
    annotation = _annotation(part)
    return annotation.rstrip("!") if annotation else None
