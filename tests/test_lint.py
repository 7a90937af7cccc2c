"""The code stays ruff-clean (the style rules are in pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_clean():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    result = subprocess.run([ruff, "check", "src", "tests", "benchmarks", "fuzz"], cwd=ROOT, capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stdout[-4000:]
