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
    assert [b.name for b in ptlite.backends()] == ["native", "numpy"]


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


def test_numpy_runs_everything_when_native_is_missing():
    code = ("import numpy as np, ptlite; from ptlite.ir import graph; "
            "print(ptlite.backends()[0].available)")
    assert _python(code, PTLITE_DISABLE_NATIVE="1") == "False"


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
    from ptlite.backends.numpy.lower.prepack import pack_conv2d_weight

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
