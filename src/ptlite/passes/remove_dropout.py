"""Remove inference-time dropout: a dropout whose `train` argument is the constant False returns its input."""

from __future__ import annotations

from ptlite.ir.graph import Graph, Program

from .base import Pass, blocks, constant_value, replace_all_uses, uses

# Dropout operators; each takes (input, p, train). In-place ones return their (unchanged) input too.
DROPOUTS = frozenset({
    "aten::dropout", "aten::dropout_", "aten::feature_dropout", "aten::feature_dropout_",
    "aten::alpha_dropout", "aten::alpha_dropout_", "aten::feature_alpha_dropout", "aten::feature_alpha_dropout_",
    "aten::native_dropout",  # -> (output, mask): removable only when the mask is unused
})


class RemoveDropout(Pass):
    name = "remove_dropout"

    def run(self, graph: Graph, program: Program) -> bool:
        users = uses(graph)
        changed = False
        for block in blocks(graph):
            for node in list(block.nodes):
                if node.op not in DROPOUTS or constant_value(node.inputs[2]) is not False:
                    continue
                if any(v.id in users for v in node.outputs[1:]):
                    continue
                replace_all_uses(graph, node.outputs[0], node.inputs[0], users)
                block.nodes.remove(node)
                changed = True
        return changed
