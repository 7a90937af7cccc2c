"""The whole-graph executor: regions of a method the native backend takes completely run as one call into C,
over the arena its memory plan lays out. Their results match the node-by-node kernels and PyTorch; a call the plan
is not for runs node by node; a file whose plan does not add up is refused at load; threads get arenas of their
own."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import assert_close
from test_format import _rewrite_program
from torch import nn

import ptlite
from ptlite import ops
from ptlite.runtime.interpreter import CompiledGraph, DelegateStep


class Net(nn.Module):
    """Dense, depthwise and 1x1 convolutions with fused activations, squeeze-and-excitation, a residual add, pooling
    and a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU6())
        self.block = nn.Sequential(nn.Conv2d(16, 48, 1), nn.ReLU6(), nn.Conv2d(48, 48, 3, 1, 1, groups=48),
                                   nn.Hardswish())
        self.excite = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(48, 12, 1), nn.ReLU(), nn.Conv2d(12, 48, 1),
                                    nn.Hardsigmoid())
        self.project = nn.Conv2d(48, 16, 1)
        self.head = nn.Sequential(nn.MaxPool2d(3, 2, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        z = self.block(y)
        z = self.project(self.excite(z) * z)
        return self.head(torch.relu(y + z))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    torch.manual_seed(0)
    model = Net().eval()
    x = torch.randn(2, 3, 20, 20)
    folder = tmp_path_factory.mktemp("executor")
    paths = {}
    for method in ("export", "script"):
        program = ptlite.optimize_for_mobile(ptlite.capture(model, (x,), method=method), backend="native")
        paths[method] = folder / f"net.{method}.ptlite"
        ptlite.save(program, paths[method])
    return model, x, paths


def _native(executor: bool):
    from ptlite.backends.native import NativeBackend, library

    return NativeBackend(library(), executor=executor)


def _check_in_regions(model: nn.Module, inputs: tuple, tmp_path, what: str):
    """Capture, lower for native and load `model`; every node (constants aside) must run in a region, and the
    result match eager PyTorch. Returns the module."""
    path = tmp_path / "model.ptlite"
    ptlite.save(ptlite.optimize_for_mobile(ptlite.capture(model, inputs), backend="native"), path)
    module = ptlite.load(path)
    outside = [p.node.op for p in module.placements() if not p.delegate and p.node.op != "prim::Constant"]
    assert not outside, f"{what}: every node runs in a region: {outside}"
    with torch.inference_mode():
        want = model(*inputs).numpy()
    assert_close(module(*(t.numpy() for t in inputs)), want, what=what, rtol=1e-5)
    return module


def test_regions_match_the_kernels_and_pytorch(lib, files):
    model, x, paths = files
    module = ptlite.load(paths["export"])
    regions = {p.delegate for p in module.placements() if p.delegate}
    assert regions, [p.node.op for p in module.placements()]
    outside = [p.node.op for p in module.placements() if not p.delegate]
    assert not outside, f"every node (the SE multiply and hardsigmoid too) runs in a region: {outside}"
    one_by_one = ptlite.load(paths["export"], backends=[_native(executor=False)])
    assert not any(p.delegate for p in one_by_one.placements())
    with torch.inference_mode():
        want = model(x).numpy()
    for call in range(3):  # the arena is reused
        got = module(x.numpy())
        np.testing.assert_allclose(got, one_by_one(x.numpy()), rtol=1e-6, atol=1e-6,
                                   err_msg=f"call {call + 1}: regions vs node by node")
        assert_close(got, want, what=f"executor, call {call + 1}", rtol=1e-4)


def test_the_stem_reads_an_nchw_input_as_it_is(lib, files):
    """The RGB stem copies its rows, so the region reads the caller's NCHW image without converting it; a
    channels-last image is converted to NCHW for it instead."""
    model, x, paths = files
    module = ptlite.load(paths["export"])
    compiled = module._method("forward").compile()
    region = [n.delegate for n in compiled.nodes if isinstance(n, DelegateStep)][0].node_timer
    assert len(region.planar) == 1
    with torch.inference_mode():
        want = model(x).numpy()
    channels_last = np.ascontiguousarray(x.numpy().transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    for given in (x.numpy(), channels_last):
        assert_close(compiled(given)[0], want, what="stem on an NCHW input", rtol=1e-4)


class Residuals(nn.Module):
    """Residual connections of every kind: x + conv(x) (the input itself added), out += identity (in place into the
    convolution's output) then relu, identity + conv (the convolution second), an addition in place into the other
    operand, and one whose other operand is made after the convolution (a downsampling shortcut). 20 channels: the
    tile's last columns are a partial vector; on a 21x23 image the 3x3 convolution `b` is Winograd's, its last tiles
    partly outside the image."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(20, 20, 1)
        self.b = nn.Conv2d(20, 20, 3, 1, 1)
        self.c = nn.Conv2d(20, 20, 1)
        self.d = nn.Conv2d(20, 20, 1)
        self.e = nn.Conv2d(20, 40, 3, 2, 1)
        self.shortcut = nn.Conv2d(20, 40, 1, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.a(x)
        out = self.b(y)
        out += y
        y = torch.relu(out)
        y = y + self.c(y)
        z = y * 0.5
        z += self.d(y)
        out = self.e(z)
        return out + self.shortcut(z)


@pytest.mark.parametrize("method", ["export", "script"])
@pytest.mark.parametrize("size,winograd", [((21, 23), "ptlite::conv2d_winograd_v2"),
                                           ((13, 11), "ptlite::conv2d_winograd_2x2")], ids=["4x4", "2x2"])
def test_residual_additions_are_done_by_the_convolution_before_them(lib, method, size, winograd, tmp_path):
    """A convolution whose output only an addition reads adds the other operand in its epilogue (then the
    addition's relu), where that operand exists before it runs and the memory plan allows; the results are the
    node-by-node kernels' and PyTorch's. The image's size makes `b` Winograd F(4x4, 3x3) or F(2x2, 3x3)."""
    torch.manual_seed(0)
    model = Residuals().eval()
    x = torch.randn(2, 20, *size)
    path = tmp_path / f"residuals.{method}.ptlite"
    compiled = _compiled_for_native(model, x, method, path)
    if method == "export":  # (a scripted method's regions are made at its first call, for the shapes it sees)
        assert winograd in ptlite.load(path).program.operator_names(), f"b is {winograd}"
        regions = [n.delegate.node_timer for n in compiled.nodes if isinstance(n, DelegateStep)]
        assert [r.fused_adds for r in regions] == [4], \
            "one region (y * 0.5 by a 0-d constant in it); x + conv(x), out += identity (Winograd), y + conv(y) and " \
            "out + shortcut(z) fused"
    else:  # TorchScript has no shapes at conversion: the first call chooses Winograd
        module = ptlite.load(path)
        module(x.numpy())
        assert winograd in module._method("forward").program.operator_names(), f"b is {winograd} after a call"
    _matches_node_by_node_and_torch(compiled, path, model, x, f"residual additions ({method}, {winograd})")


def _compiled_for_native(model: nn.Module, x: torch.Tensor, method: str, path) -> CompiledGraph:
    """The model captured by `method`, optimized for the native backend, saved at path, loaded: its forward."""
    ptlite.save(ptlite.optimize_for_mobile(ptlite.capture(model, (x,), method=method), backend="native"), path)
    return ptlite.load(path)._method("forward").compile()


def _matches_node_by_node_and_torch(compiled: CompiledGraph, path, model: nn.Module, x: torch.Tensor,
                                    what: str) -> None:
    """The regions' result is the node-by-node kernels' (to rounding) and PyTorch's."""
    one_by_one = ptlite.load(path, backends=(_native(executor=False),))
    with torch.inference_mode():
        want = model(x).numpy()
    got = compiled(x.numpy())[0]
    np.testing.assert_allclose(got, one_by_one(x.numpy()), rtol=1e-5, atol=1e-5,
                               err_msg=f"{what}: regions vs node by node")
    assert_close(got, want, what=what, rtol=1e-4)


class Excite(nn.Module):
    """A squeeze-and-excitation gate: (N, C, 1, 1) factors from the image's channel means, through two 1x1
    convolutions with SiLU (or ReLU) between them."""

    def __init__(self, channels: int, hidden: int, relu: bool = False) -> None:
        super().__init__()
        self.down, self.up, self.relu = nn.Conv2d(channels, hidden, 1), nn.Conv2d(hidden, channels, 1), relu

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        hidden = self.down(F.adaptive_avg_pool2d(image, 1))
        return torch.sigmoid(self.up(F.relu(hidden) if self.relu else F.silu(hidden)))


class GatedProjection(nn.Module):
    """EfficientNet's squeeze-and-excitation then projection, nothing reading the image after the product: the plan
    may put the projection's output where the image was, which stops the executor folding the multiply in; folded
    before the plan (GATE_CONVOLUTIONS), it cannot. `gate_first`: torchvision's `scale * input` order. The second
    block's 4x4 image is smaller than its weight's columns: its multiply stays."""

    def __init__(self, gate_first: bool) -> None:
        super().__init__()
        self.gate_first = gate_first
        self.dw = nn.Conv2d(32, 32, 3, 1, 1, groups=32)
        self.gate, self.project = Excite(32, 8), nn.Conv2d(32, 24, 1)
        self.gate2, self.project2 = Excite(24, 8, relu=True), nn.Conv2d(24, 48, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.silu(self.dw(x))
        s = self.gate(y)
        z = F.avg_pool2d(self.project(s * y if self.gate_first else y * s), 4)
        return self.project2(z * self.gate2(z))


@pytest.mark.parametrize("gate_first", [False, True])
def test_a_gate_is_given_to_its_convolution_before_the_memory_plan(lib, gate_first, tmp_path):
    torch.manual_seed(0)
    model = GatedProjection(gate_first).eval()
    x = torch.randn(2, 32, 16, 16)
    path = tmp_path / "gated.ptlite"
    compiled = _compiled_for_native(model, x, "export", path)
    program = ptlite.load_program(path)
    counts = Counter(n.op for n in program.methods["forward"].walk())
    assert counts[ops.CONV2D_PACKED_GATED] == 1 and counts["aten::mul.Tensor"] == 1, counts
    regions = [n.delegate.node_timer for n in compiled.nodes if isinstance(n, DelegateStep)]
    assert [r.fused_scales for r in regions] == [1], "project takes s * y; project2's 4x4 image is too small"
    _matches_node_by_node_and_torch(compiled, path, model, x, f"gated projection (gate first: {gate_first})")
    with pytest.warns(RuntimeWarning, match="lowered for the 'native' backend"):
        reference = ptlite.load(path, backends=("numpy",))
    with torch.inference_mode():
        want = model(x).numpy()
    assert np.abs(want).max() > 0.1, "outputs large enough to compare"
    assert_close(reference(x.numpy()), want, what="gated projection on the NumPy reference", rtol=1e-4)


class TwoGates(nn.Module):
    """An image times two sets of factors, then a 1x1 convolution, the image also returned (alive after it, so the
    plan keeps it apart): GATE_CONVOLUTIONS gives the second multiply to the convolution, and the executor must not
    fold the first one in as well (it would replace the factors, not multiply them)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Conv2d(32, 32, 1), nn.Conv2d(32, 32, 1)
        self.project = nn.Conv2d(32, 24, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = F.silu(x)
        pooled = F.adaptive_avg_pool2d(y, 1)
        s, t = torch.sigmoid(self.fc1(pooled)), torch.sigmoid(self.fc2(pooled))
        return self.project(y * s * t), y


def test_a_gated_convolution_takes_no_second_gate(lib, tmp_path):
    torch.manual_seed(0)
    model = TwoGates().eval()
    x = torch.randn(2, 32, 16, 16)
    path = tmp_path / "two_gates.ptlite"
    compiled = _compiled_for_native(model, x, "export", path)
    assert Counter(n.op for n in ptlite.load_program(path).methods["forward"].walk())[ops.CONV2D_PACKED_GATED] == 1
    with torch.inference_mode():
        want = [t.numpy() for t in model(x)]
    got = compiled(x.numpy())[0]
    for i, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, what=f"two gates before a convolution, output {i}", rtol=1e-4)


class ScalarArithmetic(nn.Module):
    """TorchScript writes arithmetic by a number as aten::*.Scalar (torch.export: a 0-d constant, *.Tensor); the
    addition with alpha 2 is not a step (its kernel runs it)."""

    def __init__(self) -> None:
        super().__init__()
        self.c, self.d = nn.Conv2d(3, 16, 3, 1, 1), nn.Conv2d(16, 16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.c(x) * 0.5 + 1.0
        z = self.d(y / 2.0 - 0.25)
        return torch.add(z, 1.0, alpha=2)


def test_scripted_arithmetic_by_a_number_stays_in_the_region(lib, tmp_path):
    torch.manual_seed(0)
    model = ScalarArithmetic().eval()
    x = torch.randn(2, 3, 16, 16)
    path = tmp_path / "scalar.ptlite"
    ptlite.save(ptlite.optimize_for_mobile(ptlite.capture(model, (x,), method="script"), backend="native"), path)
    module = ptlite.load(path)
    with torch.inference_mode():
        want = model(x).numpy()
    assert_close(module(x.numpy()), want, what="scripted arithmetic by a number", rtol=1e-5)  # (specializes it)
    placed = module.placements()
    scalar = [p for p in placed if p.node.op.endswith(".Scalar")]
    assert len(scalar) == 5 and all(p.backend == "native" for p in placed), [(p.node.op, p.backend) for p in placed]
    in_region = [p for p in scalar if p.delegate]
    assert len(in_region) == 4 and len({p.delegate for p in in_region}) == 1, [(p.node.op, p.delegate) for p in placed]
    assert [p.node.op for p in scalar if not p.delegate] == ["aten::add.Scalar"], "alpha 2: its kernel runs it"
    assert_close(module(x.numpy()), want, what="scripted arithmetic by a number, again", rtol=1e-5)


class ResidualAcrossSteps(nn.Module):
    """y + s where steps between the convolution making y and the addition make and use up values the plan may put
    at the addition's place: the sum must not be written there before they are done (a 3x3 `c1` is Winograd's)."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.c0, self.c1 = nn.Conv2d(16, 16, 1), nn.Conv2d(16, 16, k, 1, k // 2)
        self.c2, self.c3 = nn.Conv2d(16, 16, 1), nn.Conv2d(16, 16, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        s = self.c0(x)
        y = self.c1(x)
        t = self.c2(x) * 2.0
        u = t.mean((2, 3))
        return self.c3(y + s), u


@pytest.mark.parametrize("k", [1, 3])
def test_an_addition_after_other_steps_is_not_written_early(lib, k, tmp_path):
    torch.manual_seed(0)
    model = ResidualAcrossSteps(k).eval()
    x = torch.randn(1, 16, 20, 20)
    compiled = _compiled_for_native(model, x, "export", tmp_path / "across.ptlite")
    with torch.inference_mode():
        want = [t.numpy() for t in model(x)]
    got_all = compiled(x.numpy())[0]  # the method's one output, a tuple
    assert len(got_all) == 2
    for i, (got, expected) in enumerate(zip(got_all, want)):
        assert_close(got, expected, what=f"residual across steps, k={k}, output {i}", rtol=1e-4)


class GatedLinear(nn.Module):
    """A linear layer over an image's rows right after a multiply by per-image factors: not a 1x1 convolution of
    that image, so the multiply is not folded into it."""

    def __init__(self) -> None:
        super().__init__()
        self.c, self.lin = nn.Conv2d(8, 1, 3, 1, 1), nn.Linear(64, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.c(x))
        return self.lin(y * torch.sigmoid(y.mean((2, 3), keepdim=True)))


def test_a_gate_before_a_linear_layer_stays_a_multiply(lib, tmp_path):
    torch.manual_seed(0)
    model = GatedLinear().eval()
    x = torch.randn(2, 8, 64, 64)
    path = tmp_path / "gated.ptlite"
    compiled = _compiled_for_native(model, x, "export", path)
    assert all(n.delegate.node_timer.fused_scales == 0 for n in compiled.nodes if isinstance(n, DelegateStep))
    _matches_node_by_node_and_torch(compiled, path, model, x, "a gate before a linear layer")


class SqueezeExcite(nn.Module):
    """Squeeze-and-excitation blocks as EfficientNet's: the image times per-image channel factors, then a 1x1
    projection, with a residual added to it (the image read again after it: the plan cannot put the projection over
    it); then one on a 2x2 image whose weight is larger than the image. (An image from another region, where the
    plan may put the projection over it: EfficientNet-B0 scripted, tests/test_models.py.)"""

    def __init__(self) -> None:
        super().__init__()
        self.dw = nn.Conv2d(24, 24, 3, 1, 1, groups=24)
        self.gate, self.project = Excite(24, 8), nn.Conv2d(24, 24, 1)
        self.expand = nn.Conv2d(24, 48, 1)
        self.gate2, self.project2 = Excite(48, 8, relu=True), nn.Conv2d(48, 40, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.silu(self.dw(x))
        out = self.project(y * self.gate(y)) + x
        z = F.silu(self.expand(F.max_pool2d(out + y, 6)))
        return self.project2(z * self.gate2(z))


@pytest.mark.parametrize("method", ["export", "script"])
def test_channel_factors_are_applied_by_the_convolution_after_them(lib, method, tmp_path):
    """The squeeze-and-excitation multiply right before a 1x1 convolution is done on a copy of its weight (with
    the block's residual added by the same convolution) where the image is larger than the weight; the results are
    the node-by-node kernels' and PyTorch's, for two images with factors of their own."""
    torch.manual_seed(0)
    model = SqueezeExcite().eval()
    x = torch.randn(2, 24, 12, 13)
    path = tmp_path / f"se.{method}.ptlite"
    compiled = _compiled_for_native(model, x, method, path)
    if method == "export":  # (a scripted method's regions are made at its first call)
        regions = [n.delegate.node_timer for n in compiled.nodes if isinstance(n, DelegateStep)]
        assert [(r.fused_scales, r.fused_adds) for r in regions] == [(1, 1)], \
            "project takes y * s and adds x; project2's 2x2 image is smaller than its weight: its multiply stays"
    _matches_node_by_node_and_torch(compiled, path, model, x, f"squeeze-and-excitation ({method})")


def test_a_call_the_plan_is_not_for_runs_node_by_node(lib, files):
    model, x, paths = files
    module = ptlite.load(paths["script"])
    module(x.numpy())  # the first call plans memory for batch 2: the regions come with it
    assert any(p.delegate for p in module.placements())
    other = torch.randn(3, 3, 20, 20)
    with torch.inference_mode():
        want = model(other).numpy()
    assert_close(module(other.numpy()), want, what="batch 3 on a plan for batch 2", rtol=1e-4)
    channels_last = np.ascontiguousarray(x.numpy().transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    with torch.inference_mode():
        assert_close(module(channels_last), model(x).numpy(), what="a channels-last input", rtol=1e-4)


def test_threads_get_arenas_of_their_own(lib, files):
    model, _, paths = files
    module = ptlite.load(paths["export"])
    xs = [torch.randn(2, 3, 20, 20) for _ in range(6)]
    with torch.inference_mode():
        want = [model(x).numpy() for x in xs]
    with ThreadPoolExecutor(3) as pool:
        got = list(pool.map(lambda x: module(x.numpy()), xs * 3))
    for i, y in enumerate(got):
        assert_close(y, want[i % len(xs)], what=f"threaded call {i}", rtol=1e-4)


def _edited(path, tmp_path, edit):
    out = tmp_path / "edited.ptlite"
    out.write_bytes(path.read_bytes())
    _rewrite_program(out, edit)  # the program section replaced (checksum made valid) as a hostile writer would
    return out


def test_a_plan_whose_shapes_disagree_with_the_operators_is_refused(lib, files, tmp_path):
    _, _, paths = files

    def shrink(body):
        methods = body["methods"] if isinstance(body["methods"], list) else list(body["methods"].values())
        nodes = next(m for m in methods if m["name"] == "forward")["body"]["nodes"]
        planned = next(n for n in nodes if n.get("op") == "ptlite::conv2d_packed" and "out" in n.get("attrs", {})
                       and n["attrs"]["out"]["shape"][1] != n["attrs"]["out"]["shape"][2])
        shape = planned["attrs"]["out"]["shape"]
        shape[1], shape[2] = shape[2], shape[1]  # channels and rows swapped: the same bytes, the wrong shape
    with pytest.raises(ptlite.errors.FormatError, match="planned buffer has shape"):
        ptlite.load(_edited(paths["export"], tmp_path, shrink))


@pytest.mark.filterwarnings("ignore:this program was lowered")
def test_a_graph_reading_a_list_as_a_tensor_is_refused(lib, files, tmp_path):
    """A node whose tensor operand is a list's value (what a fuzzed file did): a FormatError naming the node, not a
    KeyError from the plan's layout, on the native backend and on the reference."""
    _, x, paths = files

    def list_as_tensor(body):
        methods = body["methods"] if isinstance(body["methods"], list) else list(body["methods"].values())
        forward = next(m for m in methods if m["name"] == "forward")
        nodes = forward["body"]["nodes"]
        at = next(i for i, n in enumerate(nodes) if n["op"] == "aten::flatten.using_ints")
        flatten = nodes[at]
        forward["values"].append(dict(forward["values"][flatten["in"][0]]))  # declared a tensor, of the right shape
        nodes.insert(at, {"op": "prim::ListConstruct", "in": flatten["in"][1:], "out": [len(forward["values"]) - 1]})
        flatten["in"][0] = len(forward["values"]) - 1

    path = _edited(paths["export"], tmp_path, list_as_tensor)
    with pytest.raises(ptlite.errors.FormatError, match=r"aten::flatten.using_ints \(head.2.*reads %.* as a tensor"):
        ptlite.load(path)
    with pytest.raises(ptlite.PtliteError, match="aten::flatten.using_ints"):
        ptlite.load(path, backends=("numpy",))(x.numpy())


def _step_of(op, *args):
    """The executor's step for one node on a (1, 4, 4, 4) input, the node built from `args` (arrays become weights)."""
    from irbuild import GraphBuilder

    from ptlite.backends.native.steps import Shapes, step_for

    b = GraphBuilder("x", shapes={"x": (1, 4, 4, 4)})
    values = [b.weight(f"w{i}", a) if isinstance(a, np.ndarray) else a for i, a in enumerate(args)]
    b.ret(b.op(op, b.inputs[0], *values))
    shapes = Shapes(b.graph, {"input_shapes": [[1, 4, 4, 4]], "input_dtypes": ["float32"]})
    return step_for(b.graph.nodes[-1], b.program, shapes)


def test_arguments_of_another_kind_are_left_to_the_kernel_or_refused(lib):
    """A tensor where the schema has a number (what a fuzzed file held): an addition whose alpha is an array is no
    step (its kernel decides); an argument no step can judge is a FormatError naming the node, never a ValueError
    from NumPy at load."""
    ones = np.ones(3, np.float32)
    assert _step_of("aten::add.Tensor", 1.0, 1).kind == lib.STEP_BINARY
    assert _step_of("aten::add.Tensor", 1.0, ones) is None
    assert _step_of("aten::sub.Tensor", 1.0, ones) is None
    weight = np.ones((3 * 3 * 4, 8), np.float32)  # rows of a 3x3 convolution from 4 channels to 8
    assert _step_of(ops.CONV2D_PREPACKED, weight, None, [3, 3], [1, 1], [1, 1, 1, 1], [1, 1], 1, "none", []).kind \
        == lib.STEP_CONV
    assert _step_of(ops.CONV2D_PREPACKED, weight, None, [3, 3], [0, 1], [1, 1, 1, 1], [1, 1], 1, "none", []) is None
    assert _step_of("aten::pad", [1, 1], "constant", 0.0) is not None
    with pytest.raises(ptlite.errors.FormatError, match=r"aten::pad .*not of the kind the operator takes"):
        _step_of("aten::pad", [1, 1], ones, 0.0)


def test_the_profile_times_each_node_inside_a_region(lib, files):
    """`ptlite bench --profile`: a region's nodes get a time each (the plan times its steps in C), plus one entry for
    what the region spends outside them; the nodes' times add up to the region's."""
    from ptlite.runtime.profile import profile

    model, x, paths = files
    module = ptlite.load(paths["export"])
    regions = {p.delegate for p in module.placements() if p.delegate}
    inside = sum(len(d.nodes) for d in regions_of(module))
    prof = profile(module, (x.numpy(),), runs=3)
    ops = [n.op for n in prof.nodes]
    assert not any(op.startswith("native::region") and not op.endswith("entry and exit") for op in ops), ops
    assert sum(op.endswith("entry and exit") for op in ops) == len(regions)
    timed = [n for n in prof.nodes if n.backend == "native" and not n.op.endswith("entry and exit")]
    assert len(timed) == inside
    convs = [n for n in timed if "conv2d" in n.op]
    assert convs and all(n.seconds > 0 and n.calls == 3 for n in convs), convs
    assert any(n.op == "aten::flatten.using_ints" and n.seconds == 0 for n in timed), "a view takes no time"
    assert "ptlite::conv2d_packed" in prof.format() or "ptlite::conv2d_prepacked" in prof.format()
    # a region's timer: on from start, off after stop
    compiled = module._method("forward").compile()
    timer = [n.delegate for n in compiled.nodes if isinstance(n, DelegateStep)][0].node_timer
    timer.start()
    compiled(x.numpy())
    assert sum(timer.seconds()) > 0
    timer.stop()
    assert sum(timer.seconds()) == 0


def regions_of(module):
    compiled = module._method("forward").compile()
    return [n.delegate for n in compiled.nodes if isinstance(n, DelegateStep)]


class Segmenter(nn.Module):
    """A segmentation head's shape: features, bilinear upsampling back to the input's size, then by a factor."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU(), nn.Conv2d(8, 5, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.interpolate(self.features(x), size=x.shape[-2:], mode="bilinear", align_corners=False)
        return nn.functional.interpolate(y, scale_factor=0.5, mode="bilinear")


def test_upsampling_runs_inside_a_region(lib, tmp_path):
    torch.manual_seed(0)
    model = Segmenter().eval()
    x = torch.randn(2, 3, 23, 17)
    path = tmp_path / "seg.ptlite"
    ptlite.save(ptlite.optimize_for_mobile(ptlite.capture(model, (x,)), backend="native"), path)
    module = ptlite.load(path)
    placed = {p.node.op: p.delegate for p in module.placements()}
    assert placed["aten::upsample_bilinear2d.vec"], placed
    with torch.inference_mode():
        want = model(x).numpy()
    assert_close(module(x.numpy()), want, what="upsampling in a region", rtol=1e-5)


class Encoder(nn.Module):
    """nn.TransformerEncoder (batch first, a padding mask) over float features, mean-pooled: attention, layer norm,
    linear layers and the reshapes and transposes between them."""

    def __init__(self, causal: bool = False) -> None:
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, dim_feedforward=48, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.causal = causal

    def forward(self, x: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        if self.causal:
            mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
            return self.encoder(x, mask=mask, is_causal=True).mean(1)
        return self.encoder(x, src_key_padding_mask=padding).mean(1)


@pytest.mark.parametrize("causal", [False, True], ids=["padding-mask", "causal"])
def test_a_transformer_encoder_runs_in_one_region(lib, tmp_path, causal):
    torch.manual_seed(0)
    model = Encoder(causal).eval()
    x = torch.randn(2, 9, 32)
    padding = torch.zeros(2, 9, dtype=torch.bool)
    padding[1, -3:] = True
    path = tmp_path / "encoder.ptlite"
    ptlite.save(ptlite.optimize_for_mobile(ptlite.capture(model, (x, padding)), backend="native"), path)
    module = ptlite.load(path)
    placements = module.placements()
    inside = {p.node.op for p in placements if p.delegate}
    for op in ("aten::scaled_dot_product_attention", "aten::layer_norm", "aten::transpose.int", "aten::view"):
        assert op in inside, f"{op} runs outside a region: {sorted(inside)}"
    assert len({id(p.delegate) for p in placements if p.delegate}) == 1, "one region"
    with torch.inference_mode():
        want = model(x, padding).numpy()
    for call in range(2):
        assert_close(module(x.numpy(), padding.numpy()), want, what=f"transformer encoder ({causal=}), call {call}",
                     rtol=1e-4)


class Views(nn.Module):
    """Views inside a region: select, slice, transpose, permute, expand and reshapes of row-major tensors between
    linear layers (one applied to a 4-D tensor, which must stay row-major), a softmax and a layer norm."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 24)
        self.b = nn.Linear(6, 5)
        self.norm = nn.LayerNorm(5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.a(x)                                    # (2, 7, 24)
        y = y.unflatten(-1, (4, 6)).permute(0, 2, 1, 3)  # (2, 4, 7, 6): a copy
        z = self.b(y)                                    # linear over a 4-D row-major tensor
        z = torch.softmax(z[:, 1:3], -1) + z[:, :2]      # slices: an offset alias and a strided copy
        w = z.transpose(1, 2).reshape(2, 7, 10)[:, :, 2:7]
        w = w + z[:, 0, :1].expand(2, 7, 5)              # a broadcast copy
        return self.norm(w).select(1, 3)


def test_views_run_inside_a_region(lib, tmp_path):
    torch.manual_seed(0)
    model = Views().eval()
    x = torch.randn(2, 7, 8)
    module = _check_in_regions(model, (x,), tmp_path, "views in a region")
    one_by_one = ptlite.load(tmp_path / "model.ptlite", backends=[_native(executor=False)])
    np.testing.assert_allclose(module(x.numpy()), one_by_one(x.numpy()), rtol=1e-6, atol=1e-6)


class Recurrent(nn.Module):
    """A recurrent layer then a head: its layers and directions are one step; the initial state is the module's
    zeros (constants after capture) or, for `given_state`, an input."""

    def __init__(self, cell: str, bidirectional: bool, batch_first: bool, given_state: bool) -> None:
        super().__init__()
        kind = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[cell]
        self.rnn = kind(6, 10, num_layers=2, batch_first=batch_first, bidirectional=bidirectional)
        self.head = nn.Linear(20 if bidirectional else 10, 3)
        self.batch_first, self.given_state = batch_first, given_state

    def forward(self, x: torch.Tensor, h0: torch.Tensor) -> torch.Tensor:
        y = self.rnn(x, h0)[0] if self.given_state else self.rnn(x)[0]
        return self.head(y[:, -1] if self.batch_first else y[-1])


@pytest.mark.parametrize("cell,bidirectional,batch_first,given_state", [
    ("lstm", False, True, False), ("gru", True, True, False), ("rnn", True, False, True), ("lstm", True, False, False)])
def test_recurrent_layers_run_in_the_region(lib, tmp_path, cell, bidirectional, batch_first, given_state):
    torch.manual_seed(0)
    model = Recurrent(cell, bidirectional, batch_first, given_state).eval()
    x = torch.randn(3, 7, 6) if batch_first else torch.randn(7, 3, 6)
    h0 = torch.randn(4 if bidirectional else 2, 3, 10)
    path = tmp_path / "rnn.ptlite"
    ptlite.save(ptlite.optimize_for_mobile(ptlite.capture(model, (x, h0)), backend="native"), path)
    module = ptlite.load(path)
    placed = {p.node.op: p.delegate for p in module.placements()}
    recurrent = next(op for op in placed if op.endswith(".input"))
    assert placed[recurrent], f"{recurrent} runs outside a region: {placed}"
    with torch.inference_mode():
        want = model(x, h0).numpy()
    assert_close(module(x.numpy(), h0.numpy()), want, what=f"{cell} in a region", rtol=1e-5)


class Concat(nn.Module):
    """Concatenations in a region: images along channels (an ASPP head's), row-major tensors along their last
    dimension and along the batch."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3, 1, 1)
        self.b = nn.Conv2d(3, 5, 1)
        self.project = nn.Conv2d(16, 4, 1)
        self.head = nn.Linear(4 * 6 * 6 + 7, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cat([torch.relu(self.a(x)), self.b(x), x], 1)        # 8 + 5 + 3 channels
        z = torch.flatten(self.project(y), 1)
        z = torch.cat([z, z[:, :7]], -1)
        return self.head(torch.cat([z, z * 2], 0))


def test_concatenations_run_inside_a_region(lib, tmp_path):
    torch.manual_seed(0)
    model = Concat().eval()
    _check_in_regions(model, (torch.randn(2, 3, 6, 6),), tmp_path, "concatenations in a region")


def test_average_pooling_runs_inside_a_region(lib, tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 12, 3, 1, 1), nn.AvgPool2d(3, 2, 1, ceil_mode=True, count_include_pad=False),
                          nn.ReLU(), nn.Conv2d(12, 8, 1), nn.AvgPool2d(2), nn.Flatten(), nn.Linear(8 * 4 * 4, 5)).eval()
    _check_in_regions(model, (torch.randn(2, 3, 15, 15),), tmp_path, "average pooling in a region")


class GeluBlock(nn.Module):
    """A ViT / BERT feed-forward block: layer norm, a linear layer with GELU (exact, or PyTorch's tanh form), a
    projection and the residual; then erf on its own, as older BERT code writes GELU."""

    def __init__(self, approximate: str) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(24)
        self.up, self.down = nn.Linear(24, 40), nn.Linear(40, 24)
        self.approximate = approximate

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x + self.down(F.gelu(self.up(self.norm(x)), approximate=self.approximate))
        return y * 0.5 * (1.0 + torch.erf(y * 0.7071067811865476))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_is_fused_and_runs_in_a_region(lib, tmp_path, approximate):
    torch.manual_seed(0)
    model = GeluBlock(approximate).eval()
    x = torch.randn(2, 5, 24) * 2
    module = _check_in_regions(model, (x,), tmp_path, f"GELU ({approximate}) in a region")
    ops_run = {p.node.op for p in module.placements()}
    assert "aten::gelu" not in ops_run, f"GELU is fused into the linear layer before it: {sorted(ops_run)}"
    assert "aten::erf" in ops_run, sorted(ops_run)


class HandAttention(nn.Module):
    """Attention written out as BERT and Swin write it: q @ k^T scaled, softmax, @ v, by torch.matmul over
    (batch, heads, tokens, dims); then a product with a parameter matrix (one for every batch entry)."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(16, 48)
        self.mix = nn.Parameter(torch.randn(16, 12) / 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        qkv = self.qkv(x).unflatten(-1, (3, 4, 4)).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = torch.matmul(q, k.transpose(-2, -1)) * 0.5
        y = torch.matmul(scores.softmax(-1), v).transpose(1, 2).flatten(2)
        return torch.matmul(y, self.mix)


def test_matrix_products_run_inside_a_region(lib, tmp_path):
    torch.manual_seed(0)
    module = _check_in_regions(HandAttention().eval(), (torch.randn(2, 11, 16),), tmp_path, "matmul in a region")
    assert "aten::matmul" in {p.node.op for p in module.placements() if p.delegate}


class Padded(nn.Module):
    """Explicit padding inside a network: an image padded asymmetrically (TensorFlow-style 'same' before a stride-2
    convolution) and with a constant on its channels, and a sequence padded and cropped along time."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2)
        self.head = nn.Linear(9, 4)

    def forward(self, x: torch.Tensor, seq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(self.conv(F.pad(x, (0, 1, 0, 1))))
        y = F.pad(y, (0, 0, 0, 0, 1, 2), value=0.5)
        s = F.pad(self.head(seq), (0, 0, 2, -1))
        return y, s


def test_padding_runs_inside_a_region(lib, tmp_path):
    torch.manual_seed(0)
    model = Padded().eval()
    inputs = (torch.randn(2, 3, 10, 12), torch.randn(2, 6, 9))
    path = tmp_path / "padded.ptlite"
    ptlite.save(ptlite.optimize_for_mobile(ptlite.capture(model, inputs), backend="native"), path)
    module = ptlite.load(path)
    placed = [p for p in module.placements() if p.node.op in ("aten::pad", "aten::constant_pad_nd")]
    assert len(placed) == 3 and all(p.delegate for p in placed), [(p.node.op, p.delegate) for p in placed]
    with torch.inference_mode():
        want = model(*inputs)
    for got, expected, name in zip(module(*(t.numpy() for t in inputs)), want, ("image", "sequence")):
        assert_close(got, expected.numpy(), what=f"padding in a region: the {name}", rtol=1e-5)


class Int8Net(nn.Module):
    """What int8_static makes int8: dense, depthwise and pointwise convolutions with relu, a residual addition, max
    pooling of uint8 images, a grouped convolution (no library kernel: the region ends before it and starts again
    after it, on its uint8 result) and an int8 classifier after float average pooling."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(16, 32, 1), nn.ReLU(), nn.Conv2d(32, 32, 3, 1, 1, groups=32), nn.ReLU(),
                                   nn.Conv2d(32, 16, 1))
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.grouped = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, groups=2), nn.ReLU())
        self.head = nn.Sequential(nn.Conv2d(16, 24, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(24, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        return self.head(self.grouped(self.pool(y + self.block(y))))


@pytest.mark.parametrize("method,grouped", [("export", False), ("export", True), ("script", True)])
def test_int8_programs_run_in_regions_bit_for_bit(lib, method, grouped, tmp_path):
    """An int8_static program runs in regions of int8 steps (uint8 values in the arena's bytes) with the kernels'
    results bit for bit: those of the same file run node by node, and of the NumPy reference. A grouped convolution
    the library has no kernel for cuts the region in two, the second starting from its uint8 result; a batch the plan
    is not for runs node by node (a scripted program's shapes are not fixed)."""
    torch.manual_seed(0)
    model = Int8Net().eval()
    if not grouped:
        model.grouped = nn.Identity()
    x = torch.randn(2, 3, 24, 24)
    program = ptlite.capture(model, (x,), method=method)
    calibration = [torch.randn(2, 3, 24, 24).numpy() for _ in range(4)]
    path = tmp_path / "int8.ptlite"
    ptlite.save(ptlite.optimize_for_mobile(ptlite.quantize(program, "int8_static", calibration), backend="native"),
                path)
    module = ptlite.load(path)
    got = module(x.numpy())
    placements = module.placements()
    outside = [p.node.op for p in placements if not p.delegate and p.node.op != "prim::Constant"]
    runs = [p.delegate is not None for p in placements if p.node.op != "prim::Constant"]
    regions = sum(1 for i, inside in enumerate(runs) if inside and (i == 0 or not runs[i - 1]))
    if method == "export":  # (a scripted program checks its pooled image's size in Python between them)
        assert Counter(outside) == (Counter({ops.CONV2D_INT8: 1}) if grouped else Counter()), \
            f"int8 net ({method}, grouped {grouped}): nodes outside the regions: {outside}"
        assert regions == (2 if grouped else 1), f"int8 net ({method}, grouped {grouped}): {regions} regions"
    assert {ops.CONV2D_INT8, ops.ADD_INT8, ops.LINEAR_INT8, ops.QUANTIZE_PER_TENSOR,
            ops.DEQUANTIZE_PER_TENSOR, "aten::max_pool2d"} <= {p.node.op for p in placements if p.delegate}
    node_by_node = ptlite.Module(ptlite.load_program(path), backends=[_native(False)])
    with pytest.warns(RuntimeWarning, match="lowered for the 'native' backend"):
        reference = ptlite.Module(ptlite.load_program(path), backends="numpy")
    for what, other in (("node by node", node_by_node), ("the NumPy reference", reference)):
        want = other(x.numpy())
        assert np.array_equal(got, want), f"int8 net (grouped {grouped}): regions differ from {what} by up to " \
                                          f"{np.abs(got - want).max():.3g}"
    with torch.inference_mode():
        assert_close(got, model(x).numpy(), what=f"int8 net (grouped {grouped}) against float PyTorch", rtol=0.1)
    if method == "script":
        other = torch.randn(3, 3, 24, 24).numpy()
        assert np.array_equal(module(other), reference(other)), "int8 net: batch 3 on a plan for batch 2"
    channels_last = np.ascontiguousarray(x.numpy().transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
    assert np.array_equal(module(channels_last), got), "int8 net: a channels-last input"
