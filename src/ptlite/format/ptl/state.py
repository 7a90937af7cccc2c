"""Module attributes that a .ptl file's bytecode changes while running (SET_ATTR): which they are, their types, and
how the translation finds them.

Attributes are constants of the program (weights and values read while loading) unless some method sets them;
those become entries of the loaded Module's state (ptlite/ops/state.py), read and written with
`ptlite::get_attr` / `ptlite::set_attr` and named by attribute path. Which attributes a method sets is known only
once its bytecode has been translated (the object a SET_ATTR writes is whatever the stack holds), so translation
runs again from the start whenever it meets a SET_ATTR to an attribute not known to be state yet, or one whose
type it must widen (an Optional attribute set to a tensor): reads translated before it would otherwise have become
constants. Each rerun adds an attribute or widens a type, so there are few reruns, and none in files without
SET_ATTR.
"""

from __future__ import annotations

from dataclasses import dataclass
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
