"""The native backend as users see it: listed by ptlite.backends() with its instruction set, chosen by default,
replaced by the NumPy reference (saying why) where its library is missing or disabled, and its thread count set
by ptlite.set_num_threads."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import ptlite
from ptlite.backends import native


def test_listed_with_its_instruction_set(lib):
    info = {b.name: b for b in ptlite.backends()}
    assert info["native"].available and lib.isa() in info["native"].detail
    assert [b.name for b in ptlite.backends()] == ["native", "gpu", "numpy"]  # gpu: opt-in, listed all the same


def _python(code: str, **env: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_disabled_by_environment_variable_says_so():
    out = _python("import ptlite; print(ptlite.backends()[0])", PTLITE_DISABLE_NATIVE="1")
    assert "available=False" in out and "PTLITE_DISABLE_NATIVE" in out


def test_a_failed_build_is_explained(tmp_path, monkeypatch):
    failure = tmp_path / "_build_failure.txt"
    failure.write_text("CompileError: command 'gcc' failed: No such file or directory\n")
    monkeypatch.setattr(native, "FAILURE_FILE", str(failure))
    reason = native._why_missing(ImportError("No module named 'ptlite.backends.native._native'"))
    assert "gcc" in reason and "not built at install" in reason and "C compiler" in reason
    monkeypatch.setattr(native, "FAILURE_FILE", str(tmp_path / "absent.txt"))
    assert "cannot be imported" in native._why_missing(ImportError("x"))


def test_a_file_lowered_for_native_runs_on_numpy_where_native_is_missing(lib, tmp_path):
    """Packed weights, the executor's regions and all: without the library the reference runs the same file, with
    one warning, and gives the native backend's results."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 24, 3, 2, 1), nn.ReLU(), nn.Conv2d(24, 24, 3, 1, 1, groups=24),
                          nn.Conv2d(24, 32, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 20)).eval()
    x = torch.randn(1, 3, 16, 16)
    program = ptlite.optimize_for_mobile(ptlite.capture(model, (x,), method="export"), backend="native")
    assert "ptlite::conv2d_packed" in program.operator_names()
    path, inputs = tmp_path / "net.ptlite", tmp_path / "x.npy"
    ptlite.save(program, path)
    np.save(inputs, x.numpy())
    native = ptlite.load(path)(x.numpy())
    code = ("import sys, warnings, numpy as np, ptlite\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    m = ptlite.load(sys.argv[1])\n"
            "assert m.backend_counts() == {'numpy': sum(m.backend_counts().values())}, m.backend_counts()\n"
            "assert any('native' in str(x.message) for x in w), [str(x.message) for x in w]\n"
            "np.save(sys.argv[3], m(np.load(sys.argv[2])))")
    done = subprocess.run([sys.executable, "-c", code, str(path), str(inputs), str(tmp_path / "y.npy")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PTLITE_DISABLE_NATIVE": "1"})
    assert done.returncode == 0, done.stderr
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), native, rtol=1e-4, atol=1e-5,
                               err_msg="the reference on a native-lowered file")


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_set_num_threads_reaches_the_library(lib, threads):
    before = lib.get_num_threads()
    try:
        ptlite.set_num_threads(threads)
        assert lib.get_num_threads() == threads
    finally:
        ptlite.set_num_threads(before)


def test_concurrent_calls_from_python_threads_agree(lib):
    from concurrent.futures import ThreadPoolExecutor

    from ptlite.backends.native.kernels import conv2d_prepacked
    from ptlite.ops.layouts import pack_conv2d_weight

    rng = np.random.default_rng(0)
    weight = pack_conv2d_weight(rng.standard_normal((32, 16, 3, 3)).astype(np.float32), 1)
    xs = [rng.standard_normal((1, 16, 20, 20)).astype(np.float32) for _ in range(8)]

    def run(x):
        return conv2d_prepacked(x, weight, None, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1)

    alone = [run(x) for x in xs]
    with ThreadPoolExecutor(4) as pool:
        together = list(pool.map(run, xs * 4))
    for i, y in enumerate(together):
        np.testing.assert_array_equal(y, alone[i % len(xs)])


def test_the_operator_table_names_each_kernel_and_its_module(lib):
    """native.OPERATORS (what the backend answers for without importing its kernels) is exactly what the kernel
    modules register, each key under the module that registers it."""
    code = ("import importlib, json\n"
            "from ptlite.backends import native\n"
            "from ptlite.backends.native import kernels\n"
            "seen, found = set(), {}\n"
            "for module in ('kernels', 'attention', 'recurrent', 'quantized'):\n"
            "    importlib.import_module('ptlite.backends.native.' + module)\n"
            "    found.update((k, module) for k in set(kernels.KERNELS) - seen)\n"
            "    seen = set(kernels.KERNELS)\n"
            "print(json.dumps(found))")
    import json

    found = json.loads(_python(code))
    assert found == native.OPERATORS, {k: (found.get(k), native.OPERATORS.get(k))
                                       for k in set(found) | set(native.OPERATORS)
                                       if found.get(k) != native.OPERATORS.get(k)}


def test_a_load_run_by_regions_imports_no_per_node_kernels(lib, tmp_path):
    """The executor's regions run every node of a convolutional network: loading and running it imports none of the
    node-by-node kernel modules (they cost a millisecond or two of a first load), and a node outside a region
    (here, with the executor off) still gets its kernel."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU6(), nn.Conv2d(8, 8, 3, 1, 1, groups=8), nn.Hardswish(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5)).eval()
    x = torch.randn(1, 3, 16, 16)
    path = tmp_path / "net.ptlite"
    ptlite.save(ptlite.optimize_for_mobile(ptlite.capture(model, (x,), method="export"), backend="native"), path)
    np.save(tmp_path / "x.npy", x.numpy())
    expected = model(x).detach().numpy()
    code = ("import sys, numpy as np, ptlite\n"
            "m = ptlite.load(sys.argv[1])\n"
            "y = m(np.load(sys.argv[2]))\n"
            "per_node = sorted(k for k in sys.modules if k.startswith('ptlite.backends.native.')\n"
            "                  and k.rsplit('.', 1)[1] in ('kernels', 'elementwise', 'attention', 'recurrent'))\n"
            "print(per_node, m.backend_counts())\n"
            "np.save(sys.argv[3], y)")
    out = subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp_path / "x.npy"), str(tmp_path / "y.npy")],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("[] "), out.stdout
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), expected, rtol=1e-4, atol=1e-5, err_msg="regions")
    from ptlite.backends.native import NativeBackend

    by_node = ptlite.load(path, backends=[NativeBackend(lib, executor=False)])
    assert by_node.backend_counts().get("native", 0) >= 3, by_node.backend_counts()
    np.testing.assert_allclose(by_node(x.numpy()), expected, rtol=1e-4, atol=1e-5, err_msg="node by node")
