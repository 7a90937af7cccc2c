"""Remove nodes that return their input unchanged, making their users read the input instead.

Two kinds, by what PyTorch promises about the result:
- views and casts whose result *is* the input when nothing changes (aten::detach, aten::alias, aten::lift_fresh;
  aten::view / reshape / flatten / expand / ..._as to the input's own static shape; aten::to without copy=True and
  aten::type_as to the dtype the input already has, on the CPU, strided): always removed;
- copies (aten::clone, aten::contiguous (PyTorch copies a non-contiguous input), aten::_to_copy, aten::to with
  copy=True, aten::lift_fresh_copy): removed only when neither the input nor the copy, nor anything sharing
  memory with them, is ever written in place (mutation.py), so nobody could tell the two apart; and not when the
  copy of a weight is returned (a weight is read-only).
Dropout with train=False is remove_dropout's.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ptlite.ir.dtypes import SCALAR_TYPES
from ptlite.ir.graph import Graph, Node, Program

from .base import NOT_CONSTANT, Pass, blocks, constant_value, replace_all_uses, uses
from .facts import TensorFacts
from .mutation import Mutations

ALIAS, COPY = "alias", "copy"


class RemoveNoops(Pass):
    name = "remove_noops"

    def run(self, graph: Graph, program: Program) -> bool:
        facts = TensorFacts(graph)
        mutations: Mutations | None = None
        users = uses(graph)
        changed = False
        for block in list(blocks(graph)):
            for node in list(block.nodes):
                check = NOOPS.get(node.op)
                kind = check(node, facts) if check is not None else None
                if kind is None:
                    continue
                if kind == COPY:
                    mutations = mutations or Mutations(graph)
                    if not _copy_is_invisible(node, mutations):
                        continue
                replace_all_uses(graph, node.outputs[0], node.inputs[0], users)
                block.nodes.remove(node)
                mutations = None  # uses moved
                changed = True
        return changed


def _copy_is_invisible(node: Node, mutations: Mutations) -> bool:
    found = mutations.alias_class(node.inputs[:1] + node.outputs[:1])
    if found.mutated:
        return False
    weight = any(v.node is not None and v.node.op == "prim::Constant" for v in found.values)
    return not (found.returned and weight)


# ---------------------------------------------------------------------------------------------- the checks
# Each takes the node and the method's tensor facts and returns ALIAS or COPY if the node is a no-op, else None.

Check = Callable[[Node, TensorFacts], str | None]


def _always(kind: str) -> Check:
    return lambda node, facts: kind


def _same_shape_as_target(node: Node, facts: TensorFacts) -> str | None:
    """view / reshape / _unsafe_view (self, shape): the target, -1 resolved, is the input's static shape."""
    shape, target = facts.static_shape(node.inputs[0]), constant_value(node.inputs[1])
    if shape is None or not _int_list(target):
        return None
    return ALIAS if _resolve(target, math.prod(shape)) == list(shape) else None


def _same_shape_as_other(node: Node, facts: TensorFacts) -> str | None:
    """view_as / reshape_as / expand_as (self, other): both have the same static shape."""
    shape = facts.static_shape(node.inputs[0])
    return ALIAS if shape is not None and shape == facts.static_shape(node.inputs[1]) else None


def _flatten_keeps_shape(node: Node, facts: TensorFacts) -> str | None:
    """flatten.using_ints (self, start_dim, end_dim): flattening the input's static shape leaves it as it is (the
    range holds one dimension)."""
    shape = facts.static_shape(node.inputs[0])
    start, end = constant_value(node.inputs[1]), constant_value(node.inputs[2])
    if shape is None or not shape or not all(_is_int(d) for d in (start, end)):
        return None
    rank = len(shape)
    start, end = start % rank if -rank <= start < rank else None, end % rank if -rank <= end < rank else None
    if start is None or end is None or start > end:
        return None
    flat = [*shape[:start], math.prod(shape[start:end + 1]), *shape[end + 1:]]
    return ALIAS if flat == list(shape) else None


def _expand_keeps_shape(node: Node, facts: TensorFacts) -> str | None:
    """expand (self, size, implicit): each size is -1 or the input's static size, for every dimension."""
    shape, size = facts.static_shape(node.inputs[0]), constant_value(node.inputs[1])
    if shape is None or not _int_list(size) or len(size) != len(shape):
        return None
    return ALIAS if all(s in (-1, d) for s, d in zip(size, shape)) else None


def _cast(dtype: int | None = None, other: int | None = None, device: int | None = None, layout: int | None = None,
          pin_memory: int | None = None, copy: int | None = None, memory_format: int | None = None,
          always_copies: bool = False) -> Check:
    """A check for an aten::to-like operator, given the positions of its arguments: a no-op when the dtype it asks
    for is None or the input's, the device is None or the CPU, the layout strided, memory not pinned. It copies
    when copy=True, when it always does, or when it asks for a memory format."""

    def check(node: Node, facts: TensorFacts) -> str | None:
        args = [constant_value(v) for v in node.inputs]
        have = facts.dtype(node.inputs[0])
        if dtype is not None and args[dtype] is not None and (have is None or SCALAR_TYPES.get(args[dtype]) != have):
            return None
        if other is not None and (have is None or facts.dtype(node.inputs[other]) != have):
            return None
        if device is not None and not (args[device] is None or str(args[device]).split(":")[0] == "cpu"):
            return None
        if layout is not None and args[layout] not in (None, 0):
            return None
        if pin_memory is not None and args[pin_memory] not in (None, False):
            return None
        if copy is not None and args[copy] not in (True, False):
            return None
        copies = always_copies or (copy is not None and args[copy]) or \
            (memory_format is not None and args[memory_format] not in (None, 1))  # 1: preserve_format
        return COPY if copies else ALIAS

    return check


NOOPS: dict[str, Check] = {
    "aten::detach": _always(ALIAS),
    "aten::alias": _always(ALIAS),
    "aten::lift_fresh": _always(ALIAS),
    "aten::clone": _always(COPY),
    "aten::lift_fresh_copy": _always(COPY),
    "aten::contiguous": _always(COPY),
    "aten::view": _same_shape_as_target,
    "aten::reshape": _same_shape_as_target,
    "aten::_unsafe_view": _same_shape_as_target,
    "aten::view_as": _same_shape_as_other,
    "aten::reshape_as": _same_shape_as_other,
    "aten::expand_as": _same_shape_as_other,
    "aten::flatten.using_ints": _flatten_keeps_shape,
    "aten::expand": _expand_keeps_shape,
    "aten::to.dtype": _cast(dtype=1, copy=3, memory_format=4),
    "aten::to.device": _cast(device=1, dtype=2, copy=4, memory_format=5),
    "aten::to.dtype_layout": _cast(dtype=1, layout=2, device=3, pin_memory=4, copy=6, memory_format=7),
    "aten::to.other": _cast(other=1, copy=3, memory_format=4),
    "aten::to.prim_Device": _cast(device=1, dtype=2, copy=4),
    "aten::to.prim_dtype": _cast(dtype=1, copy=3),
    "aten::to.prim_other": _cast(copy=2),
    "aten::_to_copy": _cast(dtype=1, layout=2, device=3, pin_memory=4, memory_format=6, always_copies=True),
    "aten::type_as": _cast(other=1),
}


# ---------------------------------------------------------------------------------------------- helpers

def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _int_list(v: Any) -> bool:
    return v is not NOT_CONSTANT and isinstance(v, (list, tuple)) and all(_is_int(d) for d in v)


def _resolve(target: list[int], numel: int) -> list[int] | None:
    """A view's target shape with its one -1 replaced by what the element count implies (None if impossible)."""
    target = list(target)
    if target.count(-1) > 1:
        return None
    if -1 in target:
        rest = math.prod(d for d in target if d != -1)
        if rest == 0 or numel % rest:
            return None
        target[target.index(-1)] = numel // rest
    return target
