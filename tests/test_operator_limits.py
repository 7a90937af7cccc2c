"""What the operator table says ptlite's kernels cannot take (@ranks, @dtypes) is refused before running: at capture,
in the one error that lists every problem with the model's line, and at load (issue 20)."""

from __future__ import annotations

import pytest

import ptlite
from ptlite import ops
from ptlite.errors import UnsupportedOperatorError
from ptlite.ir.graph import Graph, Node, Program, Value, ValueSpec
from ptlite.ir.verifier import unsupported_uses


def one_node_program(op: ops.OpDef, rank: int) -> Program:
    """forward(x, a1, a2, ...) running `op` once, its first tensor argument `x` of `rank` dimensions (the other
    arguments are inputs of their schema's types: nothing runs, the checks read the node alone)."""
    schema = op.schema
    inputs, first = [], True
    for arg in schema.arguments:
        is_tensor = arg.type.startswith("Tensor") and not arg.type.startswith("Tensor[")
        shape = (2,) * rank if is_tensor and first else None
        inputs.append(Value(arg.name, "Tensor" if is_tensor else "Any", "float32" if is_tensor else None, shape))
        first = first and not is_tensor
    outputs = [Value(f"out{i}", "Tensor") for i in range(max(1, len(schema.returns)))]
    graph = Graph("forward", inputs, [Node(op.key, list(inputs), outputs, source="model.py:7 `y = layer(x)`")],
                  outputs)
    graph.input_specs = [ValueSpec(v.name, v.type, v.dtype, v.shape) for v in inputs]
    graph.output_specs = [ValueSpec(v.name, "Tensor") for v in outputs]
    return Program(methods={"forward": graph})


@pytest.fixture(scope="module")
def limited() -> list[ops.OpDef]:
    """Every declared operator with a rank limit, and one of the tests' own (so that the walk is never empty)."""
    ops.declare("test::rank_limited(Tensor x, int k=1) -> Tensor", ("ranks(3,4)",))
    return [op for op in ops.all_ops().values() if op.ranks]


def test_every_declared_rank_limit_is_refused_at_load_naming_the_models_line(limited):
    for op in limited:
        bad = max(op.ranks) + 1
        program = one_node_program(op, bad)
        found = unsupported_uses(program)
        assert op.key in found, f"{op.key} @ranks({sorted(op.ranks)}): a {bad}-D argument was not flagged"
        assert f"has {bad} dimensions" in found[op.key][0] and "model.py:7" in found[op.key][0], found[op.key]
        with pytest.raises(UnsupportedOperatorError, match=rf"in ways this ptlite cannot run:\n  {op.key}: model"):
            ptlite.Module(program)
        for good in op.ranks:  # the ranks it declares pass the check
            assert op.key not in unsupported_uses(one_node_program(op, good)), f"{op.key} refused {good}-D"


def test_unknown_ranks_are_not_refused(limited):
    program = one_node_program(ops.get("test::rank_limited"), 6)
    program.forward.inputs[0].shape = None
    assert "test::rank_limited" in unsupported_uses(program), "the input's spec still says 6 dimensions"
    program.forward.input_specs[0].shape = None
    assert not unsupported_uses(program), "a rank nothing records is not refused"


def test_a_rank_declaration_must_name_ranks():
    with pytest.raises(ValueError, match="@ranks needs ranks such as 3,4"):
        ops.OpDef.parse("aten::relu(Tensor self) -> Tensor @ranks(four)")


@pytest.mark.parametrize("method", ["export", "trace"])
def test_capture_refuses_a_declared_limit_naming_the_models_line(method):
    """roi_align on a 5-D tensor: torchvision's kernel runs it (it reads the first four sizes and strides), ptlite's
    takes 4-D (@ranks(4)); capture says so, with the line, instead of handing back a program that fails at its first
    call."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchvision")  # registers torchvision's operators with torch

    class Pool(torch.nn.Module):
        def forward(self, x, boxes):
            return torch.ops.torchvision.roi_align(x, boxes, 1.0, 2, 2, 2, False)

    x, boxes = torch.randn(1, 2, 3, 8, 8), torch.tensor([[0.0, 1.0, 1.0, 5.0, 5.0]])
    torch.ops.torchvision.roi_align(x, boxes, 1.0, 2, 2, 2, False)  # torch itself runs it
    with pytest.raises(ptlite.CaptureError) as caught:
        ptlite.capture(Pool(), (x, boxes), method=method)
    text = str(caught.value)
    assert "in ways ptlite cannot run" in text, text
    assert "torchvision::roi_align" in text, text
    assert "has 5 dimensions; ptlite runs torchvision::roi_align on 4-D inputs" in text, text
    assert "test_operator_limits.py:" in text, f"the model's line is not named: {text}"


@pytest.mark.filterwarnings("ignore:`create_unbacked_symint` is deprecated:FutureWarning")  # torchvision's nms
def test_export_refuses_a_declared_dtype_limit_naming_the_models_line():
    """nms on float16 boxes: export runs torchvision's shape function only, which takes any dtype; ptlite's kernel
    takes float32 and float64 (@dtypes), as torchvision's CPU kernel does (a trace fails in torchvision itself)."""
    torch = pytest.importorskip("torch")
    torchvision = pytest.importorskip("torchvision")

    class Keep(torch.nn.Module):
        def forward(self, boxes, scores):
            return torchvision.ops.nms(boxes, scores, 0.5)

    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [20.0, 20.0, 30.0, 30.0]]).half()
    with pytest.raises(ptlite.CaptureError) as caught:
        ptlite.capture(Keep(), (boxes, torch.tensor([0.9, 0.8, 0.7]).half()), method="export")
    text = str(caught.value)
    assert "torchvision::nms" in text and "is float16; the operator takes float32, float64 tensors" in text, text
    assert "test_operator_limits.py:" in text, f"the model's line is not named: {text}"


@pytest.mark.parametrize("method", ["export", "trace"])
@pytest.mark.parametrize("mode,padding,align_corners", [("bilinear", "zeros", False), ("nearest", "reflection", True),
                                                        ("bilinear", "border", True)])
def test_a_volume_grid_sample_converts_and_matches_torch(method, mode, padding, align_corners):
    """F.grid_sample on a 5-D volume (aten::grid_sampler, @ranks(4,5)) is no longer refused: captured by export
    and by trace, it runs and gives torch's result."""
    torch = pytest.importorskip("torch")
    import numpy as np
    import torch.nn.functional as F

    class Volume(torch.nn.Module):
        def forward(self, x, grid):
            return F.grid_sample(x, grid, mode=mode, padding_mode=padding, align_corners=align_corners) * 2

    generator = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 3, 5, 4, generator=generator)
    grid = torch.rand(2, 4, 3, 6, 3, generator=generator) * 2.6 - 1.3  # inside and outside the volume
    program = ptlite.capture(Volume(), (x, grid), method=method)
    assert any(node.op == "aten::grid_sampler" for node in program.forward.walk())
    ours = ptlite.Module(program)(x.numpy(), grid.numpy())
    want = Volume()(x, grid).numpy()
    assert ours.shape == want.shape == (2, 3, 4, 3, 6)
    np.testing.assert_allclose(ours, want, rtol=1e-6, atol=1e-6)
