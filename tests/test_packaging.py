"""The package as pip builds it: a wheel carries the native library, the guarded file map and the memory budget,
compiled at build time, and runs from a fresh install; without a C compiler the build still succeeds, the install
runs on NumPy, reads model files into memory, does not cap a call's memory, and ptlite.backends() says why.
(Builds without isolation, from the test environment's setuptools, into temporary folders.)"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECK = ("import numpy as np, ptlite, ptlite.backends.native as n, ptlite.format.source as s; "
         "assert os.path.dirname(ptlite.__file__).startswith(sys.argv[1]), ptlite.__file__; "
         "print(ptlite.backends()[0].available, '|', ptlite.backends()[0].detail, '| guarded map:', "
         "s.map_file is not None, '| memory capped:', ptlite.Limits().memory_enforced)")


def _build_and_install(tmp_path: Path, env: dict[str, str]) -> tuple[Path, str]:
    """Build a wheel from a copy of the source tree (a build writes build/ beside its sources; nothing built in the
    checkout may leak in), install it into a folder of its own, and run CHECK from there."""
    source, wheels, target = tmp_path / "source", tmp_path / "wheels", tmp_path / "site"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info",
                                                                 "__pycache__", "*.so", "_build_failure.txt", "tests"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(wheels)], capture_output=True, text=True, timeout=600,
                           env={**os.environ, **env}, cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    wheel = next(wheels.glob("ptlite-*.whl"))
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                                str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    ran = subprocess.run([sys.executable, "-c", "import os, sys; " + CHECK, str(target)], capture_output=True,
                         text=True, timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(target)})
    assert ran.returncode == 0, ran.stderr
    return wheel, ran.stdout


@pytest.mark.slow
def test_a_wheel_carries_the_native_library(tmp_path):
    wheel, out = _build_and_install(tmp_path, {})
    names = zipfile.ZipFile(wheel).namelist()
    assert any(n.startswith("ptlite/backends/native/_native") for n in names), names
    assert any(n.startswith("ptlite/format/_mapped") for n in names), names
    assert any(n.startswith("ptlite/runtime/_budget") for n in names), names
    assert not any("/csrc/" in n for n in names), "the C sources are built, not installed"
    assert out.startswith("True |") and out.strip().endswith("guarded map: True | memory capped: True"), out


@pytest.mark.slow
def test_without_a_compiler_the_install_runs_on_numpy_and_says_why(tmp_path):
    wheel, out = _build_and_install(tmp_path, {"CC": str(tmp_path / "no-such-compiler")})
    assert not any(n.startswith(("ptlite/backends/native/_native", "ptlite/format/_mapped", "ptlite/runtime/_budget"))
                   for n in zipfile.ZipFile(wheel).namelist())
    assert out.startswith("False |") and "not built at install" in out and "no-such-compiler" in out, out
    assert out.strip().endswith("guarded map: False | memory capped: False"), out
