"""For the fuzz tests (test_format's, test_ptl's): random edits of a nested structure of dicts and lists."""

from __future__ import annotations

import copy
from collections.abc import Sequence
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


def random_edits(tree: dict | list, rng: np.random.Generator, words: Sequence[str], others: Sequence[Any]) -> Any:
    """A copy of `tree` with one to three edits, each at a random_place: an int moved by a little, a string swapped
    for one of `words`, the node dropped (a dict entry) or dropped or repeated (a list item), or the node replaced
    by one of `others` (values of other kinds)."""
    tree = copy.deepcopy(tree)
    for _ in range(int(rng.integers(1, 4))):
        parent, key = random_place(tree, rng)
        current, r = parent[key], rng.random()
        if type(current) is int and r < 0.5:
            parent[key] = current + int(rng.choice([-2, -1, 1, 2, 50]))
        elif type(current) is str and r < 0.5:
            parent[key] = words[int(rng.integers(len(words)))]
        elif r < 0.75:
            if isinstance(parent, dict) or rng.random() < 0.5:
                parent.pop(key)
            else:
                parent.insert(key, copy.deepcopy(current))
        else:
            parent[key] = copy.deepcopy(others[int(rng.integers(len(others)))])
    return tree
