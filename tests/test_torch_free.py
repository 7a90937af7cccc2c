"""The device side (import ptlite, load, run) works where torch cannot be imported."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import torch

import ptlite

BLOCK_TORCH = textwrap.dedent("""
    import sys
    class _NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("torch is not installed here (blocked by the test)")
    sys.meta_path.insert(0, _NoTorch())
""")

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "ptlite"


def _run_without_torch(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK_TORCH + textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)


def test_blocker_really_blocks_torch():
    result = _run_without_torch("import torch")
    assert result.returncode != 0 and "blocked by the test" in result.stderr


def test_load_and_run_without_torch(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
                                torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(8, 4)).eval()
    x = torch.randn(2, 3, 16, 16)
    path = tmp_path / "m.ptlite"
    ptlite.save(ptlite.capture(model, (x,), method="script"), path)
    np.save(tmp_path / "x.npy", x.numpy())
    with torch.inference_mode():
        np.save(tmp_path / "ref.npy", model(x).numpy())
    result = _run_without_torch(f"""
        import numpy as np, ptlite
        m = ptlite.load({str(path)!r})
        y = m(np.load({str(tmp_path / 'x.npy')!r}))
        ref = np.load({str(tmp_path / 'ref.npy')!r})
        assert "torch" not in sys.modules, "ptlite imported torch"
        print("maxdiff", float(np.abs(y - ref).max()), "scale", float(np.abs(ref).max()))
    """)
    assert result.returncode == 0, result.stderr
    diff, scale = (float(t) for t in result.stdout.split()[1::2])
    assert diff <= 1e-4 * scale, f"torch-free run differs from torch by {diff} (scale {scale})"


def test_device_side_sources_never_import_torch():
    offenders = []
    for package in ("ops", "ir", "passes", "format", "backends", "runtime"):
        for path in (SRC / package).rglob("*.py"):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                stripped = line.strip()
                if stripped.startswith(("import torch", "from torch")):
                    offenders.append(f"{path.relative_to(SRC)}:{n}: {stripped}")
    assert not offenders, "device-side modules import torch:\n" + "\n".join(offenders)
