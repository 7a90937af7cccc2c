"""Fuse an addition and the relu that follows it into aten::_add_relu (PyTorch's FUSE_ADD_RELU), the residual
connection of ResNet-style blocks: one pass over memory instead of two.

    z = aten::add.Tensor(a, b, alpha);  y = aten::relu(z)    ->   y = aten::_add_relu.Tensor(a, b, alpha)
    z = aten::add_.Tensor(a, b, alpha); y = aten::relu_(z)   ->   y = aten::_add_relu_.Tensor(a, b, alpha)

(the second is how torch.export writes `out += identity; out = relu(out)`: both write into `a`, and so does the
fused in-place operator). Only when the relu is the sum's only user; an in-place add is fused only with an
in-place relu, which leaves `a` holding what it would hold unfused.
"""

from __future__ import annotations

from ptlite.ir.graph import Graph, Node, Program

from .base import Pass, blocks, owners, uses

RELUS = frozenset({"aten::relu", "aten::relu_"})


class FuseAddRelu(Pass):
    name = "fuse_add_relu"

    def run(self, graph: Graph, program: Program) -> bool:
        users = uses(graph)
        where = owners(graph)
        changed = False
        for block in list(blocks(graph)):
            for relu in list(block.nodes):
                add = relu.inputs[0].node if relu.op in RELUS else None
                if add is None or users.get(add.outputs[0].id) != [relu]:
                    continue
                if add.op == "aten::add.Tensor":
                    op = "aten::_add_relu.Tensor"
                elif add.op == "aten::add_.Tensor" and relu.op == "aten::relu_":
                    op = "aten::_add_relu_.Tensor"
                else:
                    continue
                fused = Node(op, list(add.inputs), list(relu.outputs), source=add.source)
                home = where[id(add)]
                home.nodes = [fused if n is add else n for n in home.nodes]
                block.nodes = [n for n in block.nodes if n is not relu]
                changed = True
        return changed
