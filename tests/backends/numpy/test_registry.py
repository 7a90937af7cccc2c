"""The NumPy backend is the reference: a kernel for every declared operator, each in the kernel family named like
its operator's family, out variants where the table says so; and loading a program imports only the families its
operators need (structural checks, in fresh processes; no timing)."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ptlite
from ptlite import ops
from ptlite.backends import numpy as numpy_backend
from ptlite.ir.graph import Graph, Node, Program, Value, ValueSpec

KERNELS = "ptlite.backends.numpy"


def _fresh(code: str) -> str:
    """Run code in a new Python process; its stdout (fails the test, with stderr, if the process fails)."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, f"fresh process failed:\n{result.stderr}"
    return result.stdout


def test_every_declared_operator_has_a_kernel_in_its_family():
    registered = numpy_backend.registered()
    declared = {key: op for key, op in ops.all_ops().items() if op.family != "user"}
    missing = sorted(key for key, op in declared.items() if not op.structural and key not in registered)
    assert not missing, f"declared operators without a NumPy kernel (the reference must run them all): {missing}"
    misplaced = sorted(f"{key} (declared in {op.family}, kernel in {registered[key]})" for key, op in declared.items()
                       if key in registered and registered[key] != f"{KERNELS}.{op.family}")
    assert not misplaced, f"kernels outside the family module of their operator: {misplaced}"
    undeclared = sorted(key for key, module in registered.items() if module.startswith(KERNELS) and key not in declared)
    assert not undeclared, f"NumPy kernels for operators ptlite.ops does not declare: {undeclared}"
    structural = sorted(key for key, op in declared.items() if op.structural and key in registered)
    assert not structural, f"kernels for operators the interpreter runs itself: {structural}"


def test_every_family_module_registers_kernels_and_declares_its_family():
    registered = set(numpy_backend.registered().values())
    empty = [name for name in numpy_backend.family_names() if f"{KERNELS}.{name}" not in registered]
    assert not empty, f"kernel family modules that register no operator (rename them with a leading '_'): {empty}"
    undeclared = [name for name in numpy_backend.family_names() if name not in ops.families()]
    assert not undeclared, f"kernel families with no ptlite/ops/<family>.py: {undeclared}"


def test_out_variants_take_out():
    for key, op in ops.all_ops().items():
        if op.out and op.family != "user":  # ptlite's own (a test may declare others)
            parameters = inspect.signature(numpy_backend.implementation(key)).parameters
            assert "out" in parameters and parameters["out"].kind == inspect.Parameter.KEYWORD_ONLY, (
                f"{key} has the out trait; its NumPy kernel must take a keyword out=")


def _relu_plus_one() -> Program:
    """forward(x) = relu(x) + 1: aten::relu (activation), aten::add.Tensor (elementwise), and constants, which the
    interpreter runs itself."""
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
    modules = sorted({f"{KERNELS}.{ops.get(op).family}" for op in program.operator_names()
                      if not ops.get(op).structural})
    list_kernel_modules = (f"print(json.dumps(sorted(m for m in sys.modules if m.startswith('{KERNELS}.') and not "
                           f"m.startswith('{KERNELS}.lower'))))")  # a first call's specialization lowers
    loaded = json.loads(_fresh(f"""
        import json, sys
        import numpy as np, ptlite
        y = ptlite.load({str(path)!r}, backends=("numpy",))(np.array([[-1.0, 0.0, 2.0]] * 2, np.float32))
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
    assert f"{KERNELS}.rnn" not in loaded


def test_user_kernel_clashing_with_a_family_not_yet_imported_is_refused():
    out = _fresh("""
        from ptlite.backends.numpy import kernel
        try:
            kernel("aten::relu")(lambda x: x)
        except ValueError as exc:
            print(exc)
    """)
    assert "two NumPy kernels" in out, f"registering a second aten::relu was not refused: {out!r}"


def test_kernels_for_your_own_operator():
    """An operator declared with ptlite.ops.declare gets its NumPy kernel from ptlite.backends.numpy.kernel; the
    same function again is allowed, another refused."""
    from ptlite.backends.numpy import kernel

    key = ops.declare("test::lazy_row(Tensor self) -> Tensor")

    def first(x):
        return x

    def second(x):
        return x

    kernel(key)(first)
    kernel(key)(first)
    with pytest.raises(ValueError, match="two NumPy kernels"):
        kernel(key)(second)
    assert numpy_backend.implementation(key) is first
    assert ptlite.backends.reference().kernel(ops.get(key), None).fn is first
