"""The interpreter drops every value after its last use (so peak memory is what is live at once), keeps outputs,
and keeps everything when asked to (for debugging)."""

from __future__ import annotations

import numpy as np
from irbuild import GraphBuilder  # the hand-built-graph helper of the pass tests

from ptlite.runtime.interpreter import CompiledGraph


def test_values_are_dropped_after_their_last_use():
    b = GraphBuilder("x")
    a = b.op("aten::relu", b.inputs[0])
    c = b.op("aten::neg", a)
    b.op("aten::exp", b.inputs[0])  # never read: dropped right away
    with b.block() as then_block:
        inner = b.op("aten::mul.Tensor", c, a)  # `a` read inside a nested block: lives until the If
    then_block.outputs = [inner]
    with b.block() as else_block:
        pass
    else_block.outputs = [c]
    cond = b.op("aten::Bool.Tensor", b.op("aten::sum", b.inputs[0]), type="bool")
    out = b.op("prim::If", cond, blocks=[then_block, else_block])
    program = b.ret(out, c)
    compiled = CompiledGraph(program.forward, program)
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3) + 0.5
    (result, c_out), env = compiled.run((x,))
    live = [slot for slot, value in enumerate(env) if isinstance(value, np.ndarray)]
    assert sorted(live) == sorted(compiled.output_slots), "only the outputs are left in the registers"
    np.testing.assert_array_equal(c_out, -np.maximum(x, 0))
    expected = -np.maximum(x, 0) ** 2 if x.sum() != 0 else -np.maximum(x, 0)
    np.testing.assert_allclose(result, expected)
    _, kept = compiled.run((x,), keep=True)
    assert sum(isinstance(v, np.ndarray) for v in kept) >= 5  # x, a, c, unused, inner
