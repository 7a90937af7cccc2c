"""Module state: the attributes a model changes while running (`self.calls += 1` in a legacy .ptl file), kept by
the loaded Module across calls and shared by its methods.

ptlite's IR is functional; mutable attributes are explicit. `ptlite::module_state()` stands for the state of the
Module running the graph (the interpreter puts the Module's one `Module.state` dict there, as it puts constants,
so every call and every method sees the same dict). `ptlite::get_attr(state, name, initial)` reads attribute
`name` (an attribute path such as "calls" or "encoder.steps"); until something sets it, the attribute holds a copy
of `initial`, the value it had when the model was saved, which the graph keeps as an ordinary constant or weight.
`ptlite::set_attr(state, name, value)` replaces it. The schemas' alias annotations tell the passes that the state
outlives the call, that get_attr's result belongs to it, and that set_attr writes it.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.ops import GET_ATTR, SET_ATTR


@kernel(GET_ATTR)
def get_attr(state: dict[str, Any], name: str, initial: Any) -> Any:
    try:
        return state[name]
    except KeyError:
        value = state[name] = _owned(initial)
        return value


@kernel(SET_ATTR)
def set_attr(state: dict[str, Any], name: str, value: Any) -> None:
    # An array is copied: it may live in a buffer of the memory plan (or the caller's input), which the next
    # call overwrites, while the attribute must keep its value.
    state[name] = np.array(value, copy=True) if isinstance(value, np.ndarray) else value


def _owned(initial: Any) -> Any:
    """The state's own copy of an initial value: weights are read-only and shared, containers belong to the
    program; in-place changes to the attribute must change neither."""
    if isinstance(initial, np.ndarray):
        return np.array(initial, copy=True)
    if isinstance(initial, (list, dict, tuple)):
        return copy.deepcopy(initial)
    return initial
