"""`ptlite demo`: trains, captures two ways, shows ptlite's accuracy equals PyTorch's, also without torch."""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pytest

from ptlite.tools import demo
from ptlite.tools.cli import main

pytest.importorskip("torch")
pytest.importorskip("sklearn")

pytestmark = pytest.mark.filterwarnings("ignore:.*torch.jit.*deprecated:FutureWarning")

ROW = re.compile(r"^\s+(PyTorch eager|ptlite \(\w+\)(?:, no torch)?)\s+(\d+\.\d\d) %\s+(\S+)")


@pytest.fixture(scope="module")
def quick_demo(tmp_path_factory):
    """Run `ptlite demo --quick` once for the module: (exit status, stdout, output folder)."""
    out_dir = tmp_path_factory.mktemp("demo")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["demo", "--quick", "--out-dir", str(out_dir)])
    return code, buffer.getvalue(), out_dir


def test_quick_demo_shows_equal_accuracy(quick_demo):
    code, out, _ = quick_demo
    assert code == 0, out
    rows = {m.group(1): (float(m.group(2)), m.group(3)) for m in map(ROW.match, out.splitlines()) if m}
    expected = {"PyTorch eager", "ptlite (script)", "ptlite (export)", "ptlite (script), no torch"}
    assert set(rows) == expected, out
    accuracies = {name: acc for name, (acc, _) in rows.items()}
    assert len(set(accuracies.values())) == 1, f"accuracies differ: {accuracies}"
    assert accuracies["PyTorch eager"] > 80.0, "the quick training should already classify most digits"
    for name in ("ptlite (script)", "ptlite (export)"):
        assert float(rows[name][1]) <= 1e-4, f"{name}: max |logit diff| {rows[name][1]}"
    assert "result: ptlite matches PyTorch" in out
    assert "'import torch' fails" in out
    optimized = [line for line in out.splitlines() if line.strip().startswith("optimized:")]
    assert len(optimized) == 2 and all("fold_conv_bn" in line for line in optimized), out  # the optimized file


def test_quick_demo_leaves_files_to_try_next(quick_demo, capsys):
    _, out, out_dir = quick_demo
    for name in ("digits_script.ptlite", "digits_export.ptlite"):
        assert (out_dir / name).is_file(), name
    suggestion = next(line.strip() for line in out.splitlines() if line.strip().startswith("ptlite run "))
    for line in out.splitlines():
        if line.strip().startswith(("ptlite inspect", "ptlite ops")):
            assert main(line.split()[1:]) == 0, line
    capsys.readouterr()
    assert main(suggestion.split()[1:]) == 0
    run_out = capsys.readouterr().out
    assert "output: shape (1, 10) float32" in run_out
    assert re.search(r"1\. class \d  (zero|one|two|three|four|five|six|seven|eight|nine)", run_out), run_out


def test_agreement_needs_same_accuracy_and_predictions():
    same = {"a": np.array([1, 2, 3]), "b": np.array([1, 2, 3])}
    rows = [demo.Row("a", 0.5), demo.Row("b", 0.5)]
    assert demo.agreement(rows, same)
    assert not demo.agreement(rows, {"a": np.array([1, 2, 3]), "b": np.array([1, 2, 4])})
    assert not demo.agreement([demo.Row("a", 0.5), demo.Row("b", 0.75)], same)


def test_table_is_aligned():
    rows = [demo.Row("PyTorch eager", 0.98, file_bytes=2048, load_ms=10.0, latency_ms=0.25, notes=["file"]),
            demo.Row("ptlite (script)", 0.98, max_diff=1e-6, file_bytes=1024, load_ms=1.0, latency_ms=0.3)]
    lines = demo.format_table(rows).splitlines()
    assert len(lines) == 3
    assert "2.0 KB*" in lines[1] and "1.0 KB" in lines[2] and "1.0e-06" in lines[2]
    assert lines[1].index("98.00 %") == lines[2].index("98.00 %")


def test_digits_split_is_fixed():
    first, second = demo.load_digits_split(), demo.load_digits_split()
    assert first.x_train.shape == (1797 - demo.TEST_SIZE, 1, 8, 8) and first.x_test.dtype == np.float32
    np.testing.assert_array_equal(first.y_test, second.y_test)
    assert 0.0 <= first.x_train.min() and first.x_train.max() <= 1.0
