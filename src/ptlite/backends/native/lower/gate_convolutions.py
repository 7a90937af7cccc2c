"""Give a squeeze-and-excitation block's gate to the 1x1 convolution after it (GATE_CONVOLUTIONS):

    g = aten::mul.Tensor(x, s)          # s: (N, C, 1, 1) factors, x: an (N, C, H, W) image; g read by the conv alone
    y = ptlite::conv2d_packed(g, W, b, [1, 1], [1, 1], [0, 0, 0, 0], dilation, O, act, args)
 -> y = ptlite::conv2d_packed_gated(x, s, W, b, [1, 1], [1, 1], [0, 0, 0, 0], dilation, O, act, args)

The native kernel scales a copy of the weight by each image's factors instead of making the product (a pass over
the image saved: EfficientNet has sixteen such blocks). Done here, before the memory plan, the plan keeps x apart
from y; the executor's own fusion of a multiply and the convolution after it (at load, for files without this pass)
must give up wherever the plan put y over x. Taken where the shapes are known and the image has at least twice as
many pixels as the weight has (padded) output columns: scaling the weight costs a pass over it per image, which a
small late-stage image (7x7 before 320 outputs) does not repay. The multiply must be in the convolution's block,
with nothing between them writing the image or the factors (the convolution reads them where the multiply did).
"""

from __future__ import annotations

from ptlite.backends.numpy.packed import PANEL
from ptlite.ir.graph import Graph, Node, Program, Value
from ptlite.ops import CONV2D_PACKED, CONV2D_PACKED_GATED
from ptlite.passes.base import ConstantPool, Pass, blocks, constant_value, rewrite_nodes, uses
from ptlite.passes.mutation import Mutations

# taken where the image has this many pixels per (padded) output column, or more (the executor's own folding,
# executor._scaled_inputs, for files converted without this pass, applies the same rule)
MIN_PIXELS_PER_COLUMN = 2


class GateConvolutions(Pass):
    name = "gate_convolutions"

    def run(self, graph: Graph, program: Program) -> bool:
        users = uses(graph)
        mutations: Mutations | None = None  # made when first needed
        gated: dict[int, tuple[Value, Value]] = {}  # id(convolution) -> (image, gate)
        dropped: set[int] = set()  # id(multiply) of each taken
        for block in blocks(graph):
            position = {id(n): i for i, n in enumerate(block.nodes)}
            for node in block.nodes:
                found = _gated_input(node, users) if node.op == CONV2D_PACKED else None
                if found is None or id(found[0]) not in position:  # the multiply in another block: not taken
                    continue
                mul, image, gate = found
                # the convolution reads image and gate where the multiply did: nothing in between may write them
                mutations = Mutations(graph) if mutations is None else mutations
                between = block.nodes[position[id(mul)] + 1:position[id(node)]]
                if mutations.written_by(image, between) or mutations.written_by(gate, between):
                    continue
                gated[id(node)] = (image, gate)
                dropped.add(id(mul))
        if not gated:
            return False

        def rewrite(node: Node, memo: dict, pool: ConstantPool) -> list[Node] | None:
            if id(node) in dropped:
                return []
            if id(node) in gated:
                image, gate = gated[id(node)]
                return [Node(CONV2D_PACKED_GATED, [image, gate, *node.inputs[1:]], node.outputs, source=node.source)]
            return None

        return rewrite_nodes(graph, rewrite)


def _gated_input(conv: Node, users: dict) -> tuple[Node, Value, Value] | None:
    """(the multiply, its image, its factors) when the convolution's input is such a product that it alone reads."""
    product = conv.inputs[0]
    mul = product.node
    if mul is None or mul.op != "aten::mul.Tensor" or len(mul.inputs) != 2 or len(users.get(product.id, ())) != 1:
        return None
    image, gate = mul.inputs
    first = _shape(image)
    if first is not None and len(first) == 4 and first[2:] == (1, 1):  # torchvision writes `scale * input`
        image, gate = gate, image
    if gate.node is not None and gate.node.op == "prim::Constant":
        return None  # constant factors: the executor's steps take no constant gate (the convolution would leave them)
    shape, factors = _shape(image), _shape(gate)
    if shape is None or len(shape) != 4 or factors != (shape[0], shape[1], 1, 1) or _shape(product) != shape \
            or shape[2] * shape[3] == 1:
        return None
    kernel, stride, padding, out_channels = (constant_value(v) for v in (*conv.inputs[3:6], conv.inputs[7]))
    if kernel != [1, 1] or stride != [1, 1] or padding != [0, 0, 0, 0] or type(out_channels) is not int:
        return None
    if shape[2] * shape[3] < MIN_PIXELS_PER_COLUMN * -(-out_channels // PANEL) * PANEL:
        return None
    return mul, image, gate


def _shape(v: Value) -> tuple[int, ...] | None:
    """A float32 tensor's static shape, or None."""
    if v.type != "Tensor" or v.dtype != "float32" or v.shape is None or not all(type(d) is int for d in v.shape):
        return None
    return v.shape
