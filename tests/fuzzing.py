"""For the fuzz tests (test_format's, test_ptl's): a place picked at random in a nested structure to edit."""

from __future__ import annotations

from typing import Any

import numpy as np


def random_place(tree: dict | list, rng: np.random.Generator) -> tuple[dict | list, Any]:
    """(container, key) of one node of `tree` other than the root, picked uniformly among all its dict values and
    list items, at any depth: `container[key]` is the node, to replace, drop or repeat."""
    places: list[tuple[dict | list, Any]] = []
    stack: list[Any] = [tree]
    while stack:
        node = stack.pop()
        children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, child in children:
            places.append((node, key))
            stack.append(child)
    return places[int(rng.integers(len(places)))]
