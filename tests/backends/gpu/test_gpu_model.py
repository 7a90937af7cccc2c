"""A small CNN captured from PyTorch and run on the GPU backend: it matches torch, runs as one region in one submit
per forward, uploads its weights once, and hands nodes it has no kernel for to the reference. Also: the GPU backend
is opt-in (never chosen by default)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import ptlite
from ptlite import backends

torch = pytest.importorskip("torch")


class SmallCNN(torch.nn.Module):
    def __init__(self, middle: str = "relu") -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2)
        self.c3 = torch.nn.Conv2d(8, 8, 1)
        self.fc = torch.nn.Linear(24, 10)
        self.middle = middle
        gen = torch.Generator().manual_seed(0)
        for m in self.modules():  # weights that keep the outputs O(1)
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                fan_in = m.weight[0].numel()
                m.weight.data = torch.randn(m.weight.shape, generator=gen) * (2.0 / fan_in) ** 0.5
                m.bias.data = torch.randn(m.bias.shape, generator=gen) * 0.1

    def forward(self, x):
        x = torch.relu(self.c1(x))
        x = torch.nn.functional.max_pool2d(x, 2)
        y = torch.tanh(x) if self.middle == "tanh" else torch.nn.functional.hardswish(x)
        x = torch.relu(self.c2(x))
        y = torch.nn.functional.relu6(self.c3(y))
        y = torch.nn.functional.max_pool2d(y, 3, stride=2, padding=1)
        x = torch.cat([x, y], 1) * 1.5 + x.sum() * 0  # (the sum: a node without a GPU kernel at the end)
        x = torch.nn.functional.adaptive_avg_pool2d(x, 1)
        return self.fc(torch.flatten(x, 1))


def _capture(middle: str = "relu"):
    model = SmallCNN(middle).eval()
    x = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(x).numpy()
    return ptlite.capture(model, (x,)), x.numpy(), ref


def test_small_cnn_matches_torch_in_one_submit(gpu):
    program, x, ref = _capture()
    module = ptlite.Module(program, backends=(gpu,))
    device = gpu.device
    weights = len(gpu.weights)
    before = device.submits
    out = module(x)
    assert device.submits - before == 2, "one submit a region: before the sum and after it"
    err = float(np.abs(out - ref).max())
    assert err <= 1e-4 * float(np.abs(ref).max()), err
    uploaded = len(gpu.weights) - weights
    assert uploaded == 8  # the weights and biases of the 3 convolutions and the linear layer
    before = device.submits
    np.testing.assert_array_equal(module(x), out)
    assert device.submits - before == 2 and len(gpu.weights) - weights == uploaded  # weights are not uploaded again
    placed = module.placements()
    on_gpu = [p for p in placed if p.backend == "gpu"]
    assert {p.delegate for p in on_gpu} == {"gpu::region[12]", "gpu::region[5]"}, [(p.node.op, p.delegate)
                                                                                  for p in placed]
    assert [p.node.op for p in placed if p.backend != "gpu"] == ["aten::sum"]


def test_a_node_without_a_gpu_kernel_splits_the_region(gpu):
    program, x, ref = _capture("tanh")
    module = ptlite.Module(program, backends=("gpu",))  # (by name: the process's GPU backend)
    before = gpu.device.submits
    out = module(x)
    assert gpu.device.submits - before == 3
    assert float(np.abs(out - ref).max()) <= 1e-4 * float(np.abs(ref).max())
    placed = module.placements()
    assert [p.node.op for p in placed if p.backend != "gpu"] == ["aten::tanh", "aten::sum"]
    assert [p.delegate for p in placed if p.backend == "gpu"] == \
        ["gpu::region[3]"] * 3 + ["gpu::region[8]"] * 8 + ["gpu::region[5]"] * 5


def test_small_cnn_in_fp16_storage(gpu16):
    program, x, ref = _capture()
    module = ptlite.Module(program, backends=(gpu16,))
    out = module(x)
    assert float(np.abs(out - ref).max()) <= 1e-2 * float(np.abs(ref).max())


def test_the_device_is_vulkan_or_another_compute_api_and_said(gpu):
    assert gpu.device.backend_type in ("Vulkan", "Metal", "D3D12")
    line = gpu.describe()
    assert gpu.device.backend_type in line and ("shader-f16" in line)
    assert gpu.device is backends.get("gpu").device  # one device a process


def test_gpu_is_opt_in(gpu):
    assert "gpu" in backends.BUILTIN and "gpu" in backends.OPT_IN
    assert "gpu" not in [b.name for b in backends.resolve(None)]
    assert [b.name for b in backends.resolve(["gpu"])] == ["gpu", "numpy"]
    assert "gpu" in [info.name for info in backends.available()]


def test_import_ptlite_and_listing_do_not_start_the_gpu():
    code = ("import sys, ptlite; infos = ptlite.backends(); "
            "assert 'wgpu' not in sys.modules, 'wgpu imported'; "
            "gpu = [i for i in infos if i.name == 'gpu'][0]; assert not gpu.available and 'opt-in' in gpu.detail; "
            "assert 'gpu' not in [b.name for b in ptlite.backends.resolve(None)]")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
