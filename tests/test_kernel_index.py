"""Lazy kernel loading: the generated index is current, and loading a program imports only the kernel families
that its operators need (structural checks, in fresh processes; no timing)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np

import ptlite
from ptlite.backends.numpy.kernels import INDEX_COMMAND, family_names
from ptlite.backends.numpy.kernels._index import FAMILY_OPERATORS
from ptlite.ir import registry
from ptlite.ir.graph import Graph, Node, Program, Value, ValueSpec
from ptlite.runtime.interpreter import INTERPRETED_OPS

KERNELS = "ptlite.backends.numpy.kernels"


def _fresh(code: str) -> str:
    """Run code in a new Python process; its stdout (fails the test, with stderr, if the process fails)."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, f"fresh process failed:\n{result.stderr}"
    return result.stdout


def test_kernel_index_is_current():
    registered = registry.kernel_index()
    stored = {key: family for family, keys in FAMILY_OPERATORS.items() for key in keys.split()}
    differing = sorted(key for key in registered.keys() | stored.keys() if registered.get(key) != stored.get(key))
    examples = ", ".join(f"{k} (registered by {registered.get(k)}, index says {stored.get(k)})" for k in differing[:5])
    assert not differing, (f"ptlite/backends/numpy/kernels/_index.py is stale for {len(differing)} operator(s), e.g. "
                           f"{examples}; regenerate it with `{INDEX_COMMAND}`")
    duplicated = sum(len(keys.split()) for keys in FAMILY_OPERATORS.values()) - len(stored)
    assert duplicated == 0, f"_index.py lists {duplicated} operator(s) under two families; run `{INDEX_COMMAND}`"


def test_registry_finds_each_operators_family_in_the_index():
    found = {key: registry._family_of(key) for keys in FAMILY_OPERATORS.values() for key in keys.split()}
    stored = {key: family for family, keys in FAMILY_OPERATORS.items() for key in keys.split()}
    wrong = {key: (found[key], stored[key]) for key in stored if found[key] != stored[key]}
    assert not wrong, f"the registry's search of the index finds the wrong family (found, listed) for {wrong}"
    assert registry._family_of("aten::add.Tens") is None and registry._family_of("::add.Tensor") is None  # whole keys


def test_every_family_registers_kernels():
    families = set(registry.kernel_index().values())
    empty = [name for name in family_names() if name not in families]
    assert not empty, f"kernel family modules that register no operator (rename them with a leading '_'): {empty}"


def _relu_plus_one() -> Program:
    """forward(x) = relu(x) + 1: aten::relu (activation), aten::add.Tensor (elementwise), and constants, which the
    interpreter runs itself (their placeholder family, control, is not needed)."""
    x, r, one, alpha, y = (Value("x", "Tensor", "float32", (2, 3)), Value("r"), Value("one"), Value("alpha", "int"),
                           Value("y"))
    nodes = [Node("prim::Constant", [], [one], {"weight": "one"}),
             Node("prim::Constant", [], [alpha], {"value": 1}),
             Node("aten::relu", [x], [r]),
             Node("aten::add.Tensor", [r, one, alpha], [y])]
    graph = Graph("forward", [x], nodes, [y])
    graph.input_specs = [ValueSpec("x", "Tensor", "float32", (2, 3))]
    graph.output_specs = [ValueSpec("y")]
    return Program({"forward": graph}, {"one": np.ones(3, np.float32)})


def test_loading_imports_only_the_kernel_families_its_operators_use(tmp_path):
    path = tmp_path / "relu_plus_one.ptlite"
    program = _relu_plus_one()
    ptlite.save(program, path)
    modules = sorted({registry.get(op).module for op in program.operator_names() if op not in INTERPRETED_OPS}
                     | {f"{KERNELS}._index"})
    list_kernel_modules = f"print(json.dumps(sorted(m for m in sys.modules if m.startswith('{KERNELS}.'))))"
    loaded = json.loads(_fresh(f"""
        import json, sys
        import numpy as np, ptlite
        y = ptlite.load({str(path)!r})(np.array([[-1.0, 0.0, 2.0]] * 2, np.float32))
        assert y.tolist() == [[1.0, 1.0, 3.0]] * 2, y
        {list_kernel_modules}
    """))
    needed = json.loads(_fresh(f"""
        import importlib, json, sys
        for name in {modules!r}:
            importlib.import_module(name)
        {list_kernel_modules}
    """))
    assert loaded == needed, (f"loading a program that uses {program.operator_names()} imported kernel modules "
                              f"{sorted(set(loaded) - set(needed))} beyond those its operators need ({needed})")
    assert f"{KERNELS}.rnn" not in loaded and f"{KERNELS}.control" not in loaded


def test_stale_or_missing_index_entries_still_find_every_kernel():
    out = _fresh("""
        from ptlite.ir import registry
        from ptlite.backends.numpy.kernels._index import FAMILY_OPERATORS
        registry._INDEX = {"aten::relu": "linalg", "aten::conv2d": "no_such_family"}  # stale on purpose
        assert registry.lookup("aten::relu").impl.__module__.endswith(".activation")
        assert registry.lookup("aten::conv2d") is not None
        assert registry.lookup("aten::no_such_operator") is None
        every = registry.all_ops()
        missing = [key for keys in FAMILY_OPERATORS.values() for key in keys.split() if key not in every]
        print(len(missing))
    """)
    assert out.split() == ["0"], f"operators the table lacks after importing every family: {out}"


def test_user_kernel_clashing_with_a_family_not_yet_imported_is_refused():
    out = _fresh("""
        import sys
        from ptlite.ir.registry import kernel
        try:
            kernel("aten::relu(Tensor self) -> Tensor")(lambda x: x)
        except ValueError as exc:
            print(exc)
    """)
    assert "registered twice" in out, f"registering a second aten::relu was not refused: {out!r}"


def test_rows_registered_but_not_looked_up_behave_as_rows():
    """A registration is stored as it came until the first lookup makes its OpDef: a clash is refused either way,
    registering the same function again is allowed, and listing the table makes every row."""
    from ptlite.ir.registry import kernel

    def first(x):
        return x

    def second(x):
        return x

    kernel("test::lazy_row(Tensor self) -> Tensor", out=True)(first)
    kernel("test::lazy_row(Tensor self) -> Tensor", out=True)(first)  # the same function: allowed
    try:
        kernel("test::lazy_row(Tensor self) -> Tensor")(second)
        raise AssertionError("a second kernel for test::lazy_row was not refused before its first lookup")
    except ValueError as exc:
        assert "registered twice" in str(exc)
    op = registry.get("test::lazy_row")
    assert (op.key, op.impl, op.accepts_out) == ("test::lazy_row", first, True)
    assert op.schema.arguments[0].name == "self" and registry.get("test::lazy_row") is op
    try:
        kernel("test::lazy_row(Tensor self) -> Tensor")(second)
        raise AssertionError("a second kernel for test::lazy_row was not refused after its first lookup")
    except ValueError as exc:
        assert "registered twice" in str(exc)
    assert registry.all_ops()["test::lazy_row"] is op
