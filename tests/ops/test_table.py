"""The operator table: declared apart from kernels, generated table current, ptlite's own operators named by
constants, and the lookups a program's loading makes."""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

from ptlite import ops
from ptlite.ops import TABLE_COMMAND
from ptlite.ops.__main__ import TABLE_PATH, declaration_lines, family_modules, table_source

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "ptlite"


def test_generated_table_is_current():
    assert table_source(family_modules()) == TABLE_PATH.read_text(), (
        f"ptlite/ops/_table.py differs from the declarations in ptlite/ops/<family>.py; run `{TABLE_COMMAND}`")


def test_lookup_finds_every_declaration_in_its_family_and_whole_keys_only():
    for family, text in family_modules().items():
        for line in declaration_lines(text):
            key = ops.key_of(line)
            assert ops.lookup(key) is not None and ops.lookup(key).family == family, key
    assert ops.lookup("aten::add.Tens") is None and ops.lookup("::add.Tensor") is None
    assert ops.lookup("aten::no_such_operator") is None
    with pytest.raises(KeyError, match="no operator aten::nope"):
        ops.get("aten::nope")
    assert {op.key for op in ops.overloads("aten::add")} >= {"aten::add.Tensor", "aten::add.Scalar", "aten::add.int"}


def test_ptlite_operators_are_declared_and_named_by_a_constant_each():
    constants = {value: name for name, value in vars(ops).items()
                 if name.isupper() and isinstance(value, str) and value.startswith("ptlite::")}
    declared = {key for key in ops.all_ops() if key.startswith("ptlite::")}
    assert declared == set(constants), (f"ptlite operators without a constant in ptlite.ops: "
                                        f"{declared - set(constants)}; constants naming no declared operator: "
                                        f"{set(constants) - declared}")


def test_no_ptlite_operator_is_spelled_out_outside_its_declaration():
    """Code that emits or recognises ptlite's operators imports their constants (ops/<family>.py)."""
    literal = re.compile(r"""["']ptlite::\w+""")
    offenders = [f"{path.relative_to(SRC)}:{n}: {line.strip()}"
                 for path in SRC.rglob("*.py") if path.parent.name != "ops"
                 for n, line in enumerate(path.read_text().splitlines(), 1) if literal.search(line)]
    assert not offenders, "ptlite operators named by string literals:\n" + "\n".join(offenders)


def test_reading_the_table_imports_no_kernel():
    code = textwrap.dedent("""
        import sys
        from ptlite import ops
        ops.all_ops()
        print(" ".join(sorted(m for m in sys.modules if m.startswith("ptlite.backends.numpy"))))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert not result.stdout.split(), f"reading the operator table imported {result.stdout}"


def test_declare_your_own_operator():
    key = ops.declare("test::twice(Tensor self) -> Tensor", ("out",))
    assert key == "test::twice" and ops.get(key).out and ops.get(key).family == "user"
    assert ops.declare("test::twice(Tensor self) -> Tensor", ("out",)) == key  # the same again: allowed
    with pytest.raises(ValueError, match="declared already"):
        ops.declare("test::twice(Tensor self, int k) -> Tensor")
    with pytest.raises(ValueError, match="declared already"):
        ops.declare("aten::relu(Tensor self) -> Tensor")
    assert key in ops.all_ops()
