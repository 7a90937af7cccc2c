"""`ptlite ops --supported` and ptlite.backends.supported_operators: the operators each backend has kernels for (the
native backend a subset, the NumPy reference every declared one but the interpreter's structural ones), sorted and
counted; with a model, which backend runs each of its operators."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

import ptlite
from ptlite import ops
from ptlite.backends.base import Backend, Kernel
from ptlite.tools.cli import main

SRC = str(Path(__file__).resolve().parent.parent / "src")


def native_available() -> bool:
    return any(info.name == "native" and info.available for info in ptlite.backends())


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_reference_supports_every_declared_operator_but_the_structural_ones():
    names = ptlite.backends.supported_operators("numpy")
    declared = ops.all_ops()
    assert names == sorted(names)
    table = {k for k, op in declared.items() if not op.structural and op.family != "user"}  # not tests' own ops
    assert set(names) >= table, f"the reference lacks {sorted(table - set(names))[:10]}"
    assert all(declared[k].family == "user" for k in set(names) - table)  # extensions given a NumPy kernel
    assert "prim::If" not in names and "prim::Constant" not in names and "aten::conv2d" in names


@pytest.mark.skipif(not native_available(), reason="the native backend is not built here")
def test_the_native_backend_supports_its_table_a_subset_of_the_reference():
    from ptlite.backends import native

    names = ptlite.backends.supported_operators("native")
    assert names == sorted(native.OPERATORS)
    assert set(names) < set(ptlite.backends.supported_operators("numpy"))
    assert ptlite.backends.supported_operators("cpu") == names  # the alias


@pytest.mark.skipif(not native_available(), reason="the native backend is not built here")
def test_placements_agree_with_the_lists(tmp_path):
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 4 * 4, 3), torch.nn.LogSoftmax(dim=1)).eval()
    program = ptlite.capture(model, (torch.randn(1, 3, 6, 6),))
    module = ptlite.Module(program, ("native",))
    native = set(ptlite.backends.supported_operators("native"))
    placements = module.placements()
    assert placements
    for placed in placements:
        assert (placed.backend == "native") == (placed.node.op in native), placed


def test_a_backend_of_your_own_and_errors():
    class ReluOnly(Backend):
        name = "relu_only"

        def kernel(self, op, node=None):
            return Kernel(np.maximum, self.name) if op.key == "aten::relu" else None

    assert ptlite.backends.supported_operators(ReluOnly()) == ["aten::relu"]
    with pytest.raises(ValueError, match="no backend named 'nope'"):
        ptlite.backends.supported_operators("nope")


def test_cli_lists_each_backend_sorted_with_counts(capsys):
    code, out, err = cli(capsys, "ops", "--supported")
    assert code == 0, err
    lines = out.splitlines()
    for info in ptlite.backends():
        header = next(i for i, line in enumerate(lines) if line.startswith(f"{info.name}: "))
        if not info.available:
            assert "not available here" in lines[header]
            continue
        expected = ptlite.backends.supported_operators(info.name)
        assert lines[header].startswith(f"{info.name}: {len(expected)} operators (")
        listed = [line.strip() for line in lines[header + 1:header + 1 + len(expected)]]
        assert listed == expected
    assert "NumPy reference" in out and "prim::If" in out  # the note on declining and structural operators


def test_cli_yaml_maps_each_backend_to_its_list(capsys):
    code, out, err = cli(capsys, "ops", "--supported", "--yaml")
    assert code == 0, err
    parsed = yaml.safe_load(out)
    available = [info.name for info in ptlite.backends() if info.available]
    assert list(parsed) == available
    for name in available:
        assert parsed[name] == ptlite.backends.supported_operators(name)


def test_cli_with_a_model_tables_its_operators(capsys, tmp_path):
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(),
                                torch.nn.LogSoftmax(dim=1)).eval()
    path = tmp_path / "m.ptlite"
    ptlite.save(ptlite.optimize_for_mobile(ptlite.capture(model, (torch.randn(1, 3, 6, 6),))), path)
    wanted = ptlite.export_opnames(str(path))
    code, out, err = cli(capsys, "ops", str(path), "--supported")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"{path}: {len(wanted)} operators"
    numpy_line = next(line for line in lines if line.strip().startswith("numpy: "))
    assert numpy_line.strip().startswith(f"numpy: {len(wanted)} of {len(wanted)}")
    header = next(i for i, line in enumerate(lines) if line.startswith("operator "))
    rows = [line.split() for line in lines[header + 1:header + 1 + len(wanted)]]
    assert [row[0] for row in rows] == wanted
    columns = lines[header].split()[1:]
    for row in rows:
        for name, mark in zip(columns, row[1:]):
            assert mark == ("yes" if row[0] in ptlite.backends.supported_operators(name) else "-"), (row, name)
    code, out, err = cli(capsys, "ops", str(path), "--supported", "--yaml")
    assert code == 0 and yaml.safe_load(out)["numpy"] == wanted


def test_cli_without_a_model_or_supported_says_what_to_give(capsys):
    code, out, err = cli(capsys, "ops")
    assert code == 2 and "give a MODEL" in err and "--supported" in err


def test_cli_says_why_a_backend_is_missing():
    env = dict(os.environ, PTLITE_DISABLE_NATIVE="1",
               PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, "-c", "import sys; from ptlite.tools.cli import main; "
                           "sys.exit(main(['ops', '--supported']))"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "native: not available here: disabled by the PTLITE_DISABLE_NATIVE" in done.stdout
    assert "numpy: " in done.stdout
