"""torchvision's video classifiers (r3d_18, mc3_18, r2plus1d_18), through every capture method PyTorch can apply
(export, script, trace), match eager PyTorch: the captured program written and loaded, and what `ptlite convert`
writes (optimize_for_mobile: batch norms folded into the 3-D convolutions, ...) lowered for each backend.

Same criterion as tests/test_models.py: max |ptlite - torch| <= 1e-4 x max |torch| per output. The models run on
NumPy's 3-D kernels (the native backend declines 3-D convolutions and pooling, node by node), about 3 s a call at
their 1x3x8x112x112 clip on two cores, so most checks use a clip of 4 frames at 56x56; the script capture (sizes
stay dynamic) is checked at the full clip too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import assert_close

import ptlite
from ptlite.passes.fold_conv_bn import BATCH_NORMS
from ptlite.tools import zoo

RTOL = 1e-4
SMALL = (4, 56)  # frames, size: most checks
FULL = (zoo.CLIP_FRAMES, zoo.CLIP_SIZE)  # the models' own clip: 1x3x8x112x112
METHODS = ("export", "script", "trace")
BACKENDS = [info.name for info in ptlite.backends() if info.available]
CONVOLUTIONS_3D = {"aten::conv3d", "aten::_convolution"}  # what export / script, and trace, record

_models: dict[str, torch.nn.Module] = {}
# captures, written once per session and kept as files (their weights mapped when loaded, not held in memory)
_files: dict[tuple[str, str], Path] = {}
_loaded: dict[tuple[str, str], ptlite.Module] = {}
_expected: dict[tuple, np.ndarray] = {}


def clip(batch: int, frames_size: tuple[int, int], offset: int = 0) -> torch.Tensor:
    """Panning clips of the sample photographs, not those the batch norms were calibrated on (offset 100 on)."""
    frames, size = frames_size
    return zoo.sample_clips(batch, size, offset=offset, frames=frames)


def model(name: str) -> torch.nn.Module:
    if name not in _models:
        _models[name] = zoo.VIDEO[name]()
    return _models[name]


def expected(name: str, x: torch.Tensor, key: tuple) -> np.ndarray:
    if (name, *key) not in _expected:
        with torch.inference_mode():
            _expected[(name, *key)] = model(name)(x).numpy()
    return _expected[(name, *key)]


def captured(name: str, method: str, tmp_path_factory) -> tuple[Path, ptlite.Module]:
    """The model captured on a batch-1 small clip and written (once per session), and that file loaded."""
    key = (name, method)
    if key not in _files:
        program = ptlite.capture(model(name), (clip(1, SMALL),), method=method)
        assert program.metadata["capture"] == method
        used = {node.op for node in program.forward.walk()}
        assert used & CONVOLUTIONS_3D and "aten::adaptive_avg_pool3d" in used, \
            f"{name} ({method}): the capture has no 3-D convolution or pooling: {sorted(used)}"
        path = tmp_path_factory.mktemp(name) / f"{name}.{method}.ptlite"
        ptlite.save(program, path)
        _files[key], _loaded[key] = path, ptlite.load(path)
    return _files[key], _loaded[key]


def compare(name: str, what: str, module: ptlite.Module, x: torch.Tensor, key: tuple) -> None:
    actual = np.asarray(module(x.numpy()))
    assert_close(actual, expected(name, x, key), what=f"{name} ({what}, input {tuple(x.shape)})", rtol=RTOL)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", list(zoo.VIDEO))
def test_captured_matches_torch(name, method, tmp_path_factory):
    _, module = captured(name, method, tmp_path_factory)
    compare(name, method, module, clip(1, SMALL), ("small", 1))
    two = clip(2, SMALL, offset=1)
    if method == "export":  # static shapes: another batch is refused, naming the input
        with pytest.raises(ptlite.InputError, match="static shapes"):
            module(two.numpy())
    else:
        compare(name, method, module, two, ("small", 2))


@pytest.mark.parametrize("name", list(zoo.VIDEO))
def test_script_capture_runs_the_full_clip(name, tmp_path_factory):
    """Captured on the small clip, the scripted program runs the models' own 1x3x8x112x112 clip too."""
    _, module = captured(name, "script", tmp_path_factory)
    compare(name, "script", module, clip(1, FULL, offset=3), ("full", 1))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", list(zoo.VIDEO))
def test_optimized_matches_torch(name, method, backend, tmp_path_factory):
    """What `ptlite convert` writes, lowered for each backend and run on it: the batch norms are folded into the 3-D
    convolutions, and a backend without 3-D kernels (native) hands those nodes to the reference."""
    path, _ = captured(name, method, tmp_path_factory)
    optimized = ptlite.optimize_for_mobile(ptlite.load_program(path), backend=backend)
    ops_left = {node.op for node in optimized.forward.walk()}
    assert not ops_left & set(BATCH_NORMS), (
        f"{name} ({method}, {backend}): batch norms left unfolded: {sorted(ops_left)}")
    path = tmp_path_factory.mktemp(name) / f"{name}.{method}.{backend}.ptlite"
    ptlite.save(optimized, path)
    module = ptlite.load(path)
    assert module.backends[0].name == backend
    what = f"{method}, lowered for {backend}"
    compare(name, what, module, clip(1, SMALL), ("small", 1))
    compare(name, what, module, clip(1, SMALL), ("small", 1))  # a second call: the memory plan's buffers reused
    if backend != "numpy":
        counts = module.backend_counts()
        assert counts.get("numpy") and counts.get(backend), f"{name} ({what}): nodes by backend {counts}"


def test_models_md_lists_them():
    """docs/models.md's video table has a row per zoo.VIDEO model, saying yes for each method tested here."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text()
    section = doc.split("## Video classifiers")[1].split("\n## ")[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[0] in zoo.VIDEO:
            rows[cells[0]] = cells[1:4]
    assert rows == {name: ["yes"] * len(METHODS) for name in zoo.VIDEO}, f"docs/models.md's video rows: {rows}"
