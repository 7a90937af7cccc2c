"""Use Winograd F(4x4, 3x3) for the convolutions where it wins (WINOGRAD): a prepacked 3x3, stride-1, undilated,
dense float32 (or float64) convolution with at least MIN_CHANNELS input and output channels whose output is known
to be at least MIN_SIZE pixels high and wide becomes ptlite::conv2d_winograd_v2, its weight stored already
transformed (36, C, O); one whose weight the native lowering already put in panels (ptlite::conv2d_packed, when a
first call tells the sizes) likewise. The native backend's lowering adds F(2x2, 3x3) for smaller outputs (its
lower/winograd_2x2.py, a subclass choosing other sizes).
The output size is known from the capture's shape annotations or, where those are missing (TorchScript, .ptl
files) but the method's input shapes are static, from a run on zeros (observe.py): both kernels are exact for any
shape, so a shape that depends on the data can only make the choice slower, never wrong.

The price is a 4x larger weight (36 instead of 9 values per channel pair) and a larger rounding error, so the
thresholds take it where the time saved is large and the weight small: large images (docs/decisions.md, Winograd,
has the measurements; `python benchmarks/bench_winograd.py` repeats them); and the error budget
(winograd_budget.py) keeps the convolutions named in metadata["exact_convolutions"] on im2col.
"""

from __future__ import annotations

import weakref

import numpy as np

from ptlite.backends.base import Runner
from ptlite.ir.graph import Graph, Node, Program
from ptlite.ops import CONV2D_PACKED, CONV2D_PREPACKED, CONV2D_WINOGRAD_V2
from ptlite.ops.layouts import unpack_dense_conv2d_weight
from ptlite.passes.base import ConstantPool, Pass, blocks, constant_value, weight_constant, weight_of

from .observe import observed_shapes
from .winograd_budget import base_weight_name, exact_convolutions

MIN_SIZE = 20  # output height and width (pixels) from which Winograd is used
MIN_CHANNELS = 16


Observed = weakref.WeakKeyDictionary  # Graph -> {value id: shape} seen in a run on zeros


class Winograd(Pass):
    name = "winograd"

    def __init__(self, run: Runner, observed: Observed | None = None) -> None:
        self.run_method = run  # compiles a method for the run on zeros that observes shapes
        # Shapes seen in a graph's run on zeros, kept for the pipeline's later rounds (which would otherwise run the
        # method again for the candidates left too small) and for another pass given the same mapping (the native
        # lowering's F(2x2) pass); redone once per round if a candidate is missing.
        self._observed: Observed = weakref.WeakKeyDictionary() if observed is None else observed

    def run(self, graph: Graph, program: Program) -> bool:
        changed = False
        refreshed = False
        exact = exact_convolutions(program)  # those the error budget keeps on im2col (winograd_budget.py)
        for block in list(blocks(graph)):
            pool = ConstantPool(block)
            rewritten: list[Node] = []
            for node in block.nodes:
                new = None
                if node.op in (CONV2D_PREPACKED, CONV2D_PACKED) and _candidate(node, program) \
                        and base_weight_name(node.inputs[1].node.attrs["weight"]) not in exact:
                    shape = node.outputs[0].shape
                    if shape is None:
                        hints = self._observed.get(graph)
                        if not refreshed and (hints is None or node.outputs[0].id not in hints):
                            hints = self._observed[graph] = observed_shapes(graph, program, self.run_method)
                            refreshed = True
                        shape = None if hints is None else hints.get(node.outputs[0].id)
                    new = self._rewrite(node, program, pool, shape)
                rewritten.extend(new or [node])
                changed = changed or new is not None
            block.nodes = rewritten
            pool.flush()
        return changed

    def variant(self, height: int, width: int) -> tuple[str, np.ndarray, str] | None:
        """For an output of this size: the operator, the G that transforms its weight and the weight's name
        suffix; None to leave the convolution as it is."""
        from ptlite.backends.numpy.winograd import G

        return (CONV2D_WINOGRAD_V2, G, "winograd") if min(height, width) >= MIN_SIZE else None

    def _rewrite(self, node: Node, program: Program, pool: ConstantPool, shape) -> list[Node] | None:
        from ptlite.backends.numpy.packed import unpack_panels
        from ptlite.backends.numpy.winograd import pack_winograd_weight

        if shape is None or len(shape) != 4 or not all(isinstance(s, int) for s in shape[2:]):
            return None
        chosen = self.variant(*shape[2:])
        if chosen is None:
            return None
        op, g, suffix = chosen
        weight = weight_of(program, node.inputs[1])
        if node.op == CONV2D_PACKED:
            weight = unpack_panels(weight, constant_value(node.inputs[7]))
        padding = constant_value(node.inputs[5])
        dense = unpack_dense_conv2d_weight(weight, (3, 3))
        name = base_weight_name(node.inputs[1].node.attrs["weight"])
        const = weight_constant(program, f"{name}.{suffix}", pack_winograd_weight(dense, g), node.source)
        inputs = [node.inputs[0], const.outputs[0], node.inputs[2], pool.get(list(padding), "List[int]"),
                  node.inputs[8], node.inputs[9]]
        return [const, Node(op, inputs, node.outputs, source=node.source)]


def _candidate(node: Node, program: Program) -> bool:
    """A prepacked 3x3, stride-1, undilated, dense convolution with enough channels (its size is checked after); or
    such a convolution with its weight in panels (ptlite::conv2d_packed: the native lowering packs them before a
    first call tells the sizes of a file that had none)."""
    weight = weight_of(program, node.inputs[1])
    kernel, stride, _, dilation, last = (constant_value(v) for v in node.inputs[3:8])
    if weight is None or kernel != [3, 3] or stride != [1, 1] or dilation != [1, 1]:
        return False
    if node.op == CONV2D_PREPACKED:  # last: groups
        if weight.ndim != 2 or last != 1:
            return False
        channels, outputs = weight.shape[0] // 9, weight.shape[1]
    else:  # last: the output channels
        from ptlite.backends.numpy.packed import PANEL

        if weight.ndim != 3 or type(last) is not int or weight.shape[0] != -(-last // PANEL) or last < 1:
            return False
        channels, outputs = weight.shape[1] // 9, last
    if weight.dtype not in (np.float32, np.float64):  # float16: its transformed weight alone errs by ~4e-3
        return False
    return channels >= MIN_CHANNELS and outputs >= MIN_CHANNELS

