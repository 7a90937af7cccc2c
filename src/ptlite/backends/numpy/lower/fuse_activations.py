"""Fuse an activation into the prepacked convolution or linear layer that feeds it (FUSE_ACTIVATIONS): the kernel
applies it to each block of its output while the block is still in cache, instead of another pass over memory.

    y = ptlite::conv2d_prepacked(x, W, b, ..., "none", []);  z = aten::relu6(y)
 -> z = ptlite::conv2d_prepacked(x, W, b, ..., "clamp", [0.0, 6.0])

Fused: relu, relu6, hardtanh, clamp (constant bounds; a None bound is infinite), hardswish and silu, and their in-place
forms, and gelu (either form: "gelu", "gelu_tanh"), when the activation is the producer's only user. Runs after
INSERT_FOLD_PREPACK_OPS.
"""

from __future__ import annotations

import math
from typing import Any

from ptlite.ir.graph import Graph, Node, Program, Value
from ptlite.ops import (
    CONV2D_PACKED,
    CONV2D_PACKED_GATED,
    CONV2D_PREPACKED,
    CONV2D_WINOGRAD,
    CONV2D_WINOGRAD_2X2,
    CONV2D_WINOGRAD_V2,
    LINEAR_PACKED,
    LINEAR_PREPACKED,
)
from ptlite.passes.base import NOT_CONSTANT, ConstantPool, Pass, blocks, constant_value, owners, replace_all_uses, uses

# every operator whose last two arguments are a fused activation and its arguments
PRODUCERS = frozenset({CONV2D_PREPACKED, CONV2D_WINOGRAD, CONV2D_WINOGRAD_V2, CONV2D_WINOGRAD_2X2, LINEAR_PREPACKED,
                       CONV2D_PACKED, CONV2D_PACKED_GATED, LINEAR_PACKED})


def fused_activation(node: Node) -> tuple[str, list[float]] | None:
    """The (activation, args) a prepacked kernel can apply instead of this node, or None."""
    op = node.op.removesuffix("_")
    if op == "aten::relu":
        return "relu", []
    if op == "aten::relu6":
        return "clamp", [0.0, 6.0]
    if op == "aten::hardswish":
        return "hardswish", []
    if op == "aten::silu":
        return "silu", []
    if node.op == "aten::gelu" and len(node.inputs) <= 2:  # (the in-place form stays apart: rarely written)
        approximate = constant_value(node.inputs[1]) if len(node.inputs) == 2 else "none"
        return {"none": ("gelu", []), "tanh": ("gelu_tanh", [])}.get(approximate) \
            if isinstance(approximate, str) else None
    if op in ("aten::hardtanh", "aten::clamp"):
        bounds = [_bound(v, default) for v, default in zip(node.inputs[1:3], (-math.inf, math.inf))]
        if len(node.inputs) != 3 or any(b is None for b in bounds) or bounds[0] > bounds[1]:
            return None
        return "clamp", bounds
    return None


def _bound(v: Value, default: float) -> float | None:
    value: Any = constant_value(v)
    if value is None:
        return default
    if value is NOT_CONSTANT or isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


class FuseActivations(Pass):
    name = "fuse_activations"

    def run(self, graph: Graph, program: Program) -> bool:
        users = uses(graph)
        where = owners(graph)
        pools: dict[int, ConstantPool] = {}  # new constants go to the start of the producer's block
        changed = False
        for block in list(blocks(graph)):
            for node in list(block.nodes):
                fused = fused_activation(node)
                producer = node.inputs[0].node if node.inputs else None
                if fused is None or producer is None or producer.op not in PRODUCERS:
                    continue
                if constant_value(producer.inputs[-2]) != "none" or users.get(producer.outputs[0].id) != [node]:
                    continue
                activation, args = fused
                pool = pools.setdefault(id(where[id(producer)]), ConstantPool(where[id(producer)]))
                producer.inputs[-2], producer.inputs[-1] = pool.get(activation, "str"), pool.get(args, "List[float]")
                replace_all_uses(graph, node.outputs[0], producer.outputs[0], users)
                block.nodes = [n for n in block.nodes if n is not node]
                changed = True
        for pool in pools.values():
            pool.flush()
        return changed
