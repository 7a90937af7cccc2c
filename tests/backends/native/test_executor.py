"""The whole-graph executor: regions of a method the native backend takes completely run as one call into C,
over the arena its memory plan lays out. Their results match the node-by-node kernels and PyTorch; a call the plan
is not for runs node by node; a file whose plan does not add up is refused at load; threads get arenas of their
own."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch
from conftest import assert_close
from test_format import _rewrite_program
from torch import nn

import ptlite
from ptlite.runtime.interpreter import DelegateStep


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
