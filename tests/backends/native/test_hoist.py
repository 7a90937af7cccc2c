"""HOIST_NON_FLOAT: work on integers and booleans moves up to where its inputs are made, so that it does not cut the
native executor's float32 regions, and never past a node that writes what it reads."""

from __future__ import annotations

import torch
from conftest import assert_close
from torch import nn

import ptlite
from ptlite.backends.native.lower.hoist import HoistNonFloat


class Pooled(nn.Module):
    """Float layers with a bool mask's pooling weights made between them (the zoo transformer's pattern)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 16)
        self.b = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.a(x))
        keep = (~padding).unsqueeze(-1).to(y.dtype)
        y = self.b(y)
        return (y * keep).sum(1) / keep.sum(1)


def _inputs():
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(0))
    padding = torch.zeros(2, 5, dtype=torch.bool)
    padding[1, 3:] = True
    return x, padding


def test_mask_work_moves_up_and_the_floats_run_in_one_region(lib, tmp_path):
    torch.manual_seed(0)
    model = Pooled().eval()
    x, padding = _inputs()
    program = ptlite.optimize_for_mobile(ptlite.capture(model, (x, padding)), backend="native")
    assert "hoist_non_float" in program.metadata["passes"]
    ops = [n.op for n in program.methods["forward"].nodes if n.op != "prim::Constant"]
    first_float = next(i for i, op in enumerate(ops) if op.startswith("ptlite::linear"))
    assert "aten::bitwise_not" in ops[:first_float], ops
    path = tmp_path / "pooled.ptlite"
    ptlite.save(program, path)
    module = ptlite.load(path)
    regions = {id(p.delegate) for p in module.placements() if p.delegate}
    assert len(regions) == 1, [(p.node.op, p.delegate) for p in module.placements()]
    with torch.inference_mode():
        want = model(x, padding).numpy()
    assert_close(module(x.numpy(), padding.numpy()), want, what="pooled model after hoisting", rtol=1e-5)


def test_a_reader_of_a_written_value_stays_below_the_write():
    from irbuild import GraphBuilder

    b = GraphBuilder("x", "m")
    x, m = b.inputs
    m.dtype = "bool"
    y = b.op("aten::relu", x)
    z = b.op("aten::clone", m, None)
    z.dtype = "bool"
    b.op("aten::masked_fill_.Scalar", z, m, True).dtype = "bool"  # writes z in place
    t = b.op("aten::relu", y)
    w = b.op("aten::to.dtype", z, 6, False, False, None)  # reads z: not above the write
    w.dtype = "float32"
    k = b.op("aten::gt.Scalar", x, 0.0)  # reads only the input
    k.dtype = "bool"
    program = b.ret(t, w, k)
    assert HoistNonFloat()(program).modified
    ops = [n.op for n in program.methods["forward"].nodes if n.op != "prim::Constant"]
    # clone to the top; to.dtype above the second relu but not above the write; gt.Scalar up to to.dtype (such nodes
    # keep their order)
    assert ops == ["aten::clone", "aten::relu", "aten::masked_fill_.Scalar", "aten::to.dtype", "aten::gt.Scalar",
                   "aten::relu"], ops
    assert not HoistNonFloat()(program).modified  # a second run changes nothing
