"""Per-node dispatch across backends, with toy backends of the tests' own: the first backend that accepts a node
runs it, a declined node falls back to the reference, a backend may run a run of nodes as one delegate step, and the
module, `ptlite inspect` and the profile say which backend ran what."""

from __future__ import annotations

import sys
import types
import warnings

import numpy as np
import pytest

import ptlite
from ptlite import backends, ops
from ptlite.backends import BackendUnavailable
from ptlite.backends.base import Backend, Delegate, Kernel
from ptlite.ir import verify
from ptlite.ir.graph import Block, Graph, Node, Program, Value, ValueSpec
from ptlite.ir.liveness import region_values
from ptlite.ops import MODULE_STATE
from ptlite.runtime.profile import profile
from ptlite.tools.cli import main


class ReluOnly(Backend):
    """Runs aten::relu on float32 tensors, and counts the calls; declines everything else."""

    name = "toy"

    def __init__(self) -> None:
        self.calls = 0

    def kernel(self, op, node):
        if op.key != "aten::relu" or (node is not None and node.inputs[0].dtype != "float32"):
            return None

        def relu(x):
            self.calls += 1
            return np.maximum(x, np.float32(0))
        return Kernel(relu, self.name)


class ElementwiseDelegate(Backend):
    """Takes every run of two or more consecutive aten::relu / aten::neg nodes as one step, counting its calls."""

    name = "fused"
    OPS = ("aten::relu", "aten::neg")

    def __init__(self) -> None:
        self.calls = 0

    def delegates(self, graph, program, kernels):
        runs, current = [], []
        for node in graph.nodes:
            if node.op in self.OPS:
                current.append(node)
                continue
            if node.op == "prim::Constant":
                continue
            runs.append(current)
            current = []
        runs.append(current)
        found = []
        for nodes in (r for r in runs if len(r) >= 2):
            inputs, outputs = region_values(graph, nodes)
            found.append(Delegate(self.name, nodes, inputs, outputs, self._runner(nodes, inputs, outputs)))
        return found

    def _runner(self, nodes, inputs, outputs):
        def run(*values):
            self.calls += 1
            env = {v.id: a for v, a in zip(inputs, values)}
            for node in nodes:
                x = env[node.inputs[0].id]
                env[node.outputs[0].id] = np.maximum(x, 0) if node.op == "aten::relu" else -x
            return [env[v.id] for v in outputs]
        return run


def _program() -> Program:
    """forward(x: float32, i: int64) = (neg(relu(x)), relu(i), relu(neg(x)) + 1)."""
    x, i = Value("x", "Tensor", "float32", (2, 3)), Value("i", "Tensor", "int64", (4,))
    a, b, c = Value("a", "Tensor", "float32"), Value("b", "Tensor", "float32"), Value("c", "Tensor", "int64")
    d, e, f = Value("d", "Tensor", "float32"), Value("e", "Tensor", "float32"), Value("f", "Tensor", "float32")
    one, alpha = Value("one", "Tensor", "float32", (3,)), Value("alpha", "int")
    nodes = [Node("prim::Constant", [], [one], {"weight": "one"}), Node("prim::Constant", [], [alpha], {"value": 1}),
             Node("aten::relu", [x], [a]), Node("aten::neg", [a], [b]), Node("aten::relu", [i], [c]),
             Node("aten::neg", [x], [d]), Node("aten::relu", [d], [e]), Node("aten::add.Tensor", [e, one, alpha], [f])]
    graph = Graph("forward", [x, i], nodes, [b, c, f])
    graph.input_specs = [ValueSpec("x", "Tensor", "float32", (2, 3)), ValueSpec("i", "Tensor", "int64", (4,))]
    graph.output_specs = [ValueSpec("b"), ValueSpec("c"), ValueSpec("f")]
    return Program({"forward": graph}, {"one": np.ones(3, np.float32)})


X = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], np.float32)
I = np.array([-2, 0, 3, -1], np.int64)


def _expected():
    return -np.maximum(X, 0), np.maximum(I, 0), np.maximum(-X, 0) + 1


def _check(outputs) -> None:
    for got, want in zip(outputs, _expected(), strict=True):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype


def test_a_node_runs_on_the_first_backend_that_accepts_it(tmp_path):
    ptlite.save(_program(), tmp_path / "m.ptlite")
    toy = ReluOnly()
    module = ptlite.load(tmp_path / "m.ptlite", backends=[toy])
    assert [b.name for b in module.backends] == ["toy", "numpy"], "the reference is added last"
    _check(module(X, I))
    _check(module(X, I))
    assert toy.calls == 4, "each call runs the two float32 relus on the toy backend"
    placed = {(p.node.op, p.node.outputs[0].name): p.backend for p in module.placements()}
    assert placed == {("aten::relu", "a"): "toy", ("aten::neg", "b"): "numpy", ("aten::relu", "c"): "numpy",
                      ("aten::neg", "d"): "numpy", ("aten::relu", "e"): "toy", ("aten::add.Tensor", "f"): "numpy"}
    assert module.backend_counts() == {"toy": 2, "numpy": 4}
    # without the toy, the reference runs everything, with the same results
    _check(ptlite.load(tmp_path / "m.ptlite", backends=["numpy"])(X, I))


def test_profile_reports_time_per_backend(tmp_path):
    ptlite.save(_program(), tmp_path / "m.ptlite")
    module = ptlite.load(tmp_path / "m.ptlite", backends=[ReluOnly()])
    prof = profile(module, (X, I), runs=3)
    by_backend = {b.backend: b.nodes for b in prof.by_backend()}
    assert by_backend == {"toy": 2, "numpy": 4}
    assert {n.backend for n in prof.nodes if n.op == "aten::relu"} == {"toy", "numpy"}
    assert "toy" in prof.format() and sum(b.share for b in prof.by_backend()) == pytest.approx(1.0)


def test_a_delegate_runs_consecutive_nodes_as_one_step(tmp_path):
    ptlite.save(_program(), tmp_path / "m.ptlite")
    fused = ElementwiseDelegate()
    module = ptlite.load(tmp_path / "m.ptlite", backends=[fused])
    _check(module(X, I))
    _check(module(X, I))
    assert fused.calls == 2, "the five relu/neg nodes (constants aside) run as one step, once a call"
    delegated = [p for p in module.placements() if p.delegate]
    assert len(delegated) == 5 and {(p.backend, p.delegate) for p in delegated} == {("fused", "fused::delegate")}
    assert module.backend_counts() == {"fused": 5, "numpy": 1}
    prof = profile(module, (X, I), runs=2)
    assert [n.op for n in prof.nodes] == ["fused::delegate", "aten::add.Tensor"]
    assert {b.backend: b.nodes for b in prof.by_backend()} == {"fused": 1, "numpy": 1}


def test_a_delegate_returning_too_few_values_fails_naming_the_delegate():
    class Short(ElementwiseDelegate):
        def _runner(self, nodes, inputs, outputs):
            run = super()._runner(nodes, inputs, outputs)
            return lambda *values: run(*values)[:-1]

    module = ptlite.Module(_program(), [Short()])
    with pytest.raises(ptlite.ExecutionError, match=r"fused::delegate.* failed: ValueError: returned \d+ values, "
                                                     r"the graph expects \d+"):
        module(X, I)


def test_a_delegate_that_is_not_a_run_of_top_level_nodes_is_refused(tmp_path):
    class Scattered(ElementwiseDelegate):
        def delegates(self, graph, program, kernels):
            nodes = [n for n in graph.nodes if n.op == "aten::relu"]  # not consecutive
            inputs, outputs = region_values(graph, nodes)
            return [Delegate(self.name, nodes, inputs, outputs, lambda *v: v)]

    with pytest.raises(ValueError, match="consecutive top-level nodes"):
        ptlite.Module(_program(), [Scattered()])


def test_a_program_lowered_for_a_missing_backend_runs_on_the_reference_with_one_warning():
    program = _program()
    program.metadata["backend"] = "tpu"
    with pytest.warns(RuntimeWarning, match="lowered for the 'tpu' backend, which this ptlite does not have"):
        module = ptlite.Module(program)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning per call
        _check(module(X, I))
        _check(module(X, I))


def test_backends_are_listed_with_why_one_is_not_available(monkeypatch):
    listed = {info.name: info for info in ptlite.backends()}
    assert listed["numpy"].available and "NumPy" in listed["numpy"].detail
    gone = types.ModuleType("ptlite_test_gone_backend")

    def create():
        raise BackendUnavailable("library not built")
    gone.create = create
    monkeypatch.setitem(sys.modules, gone.__name__, gone)
    monkeypatch.setitem(backends.BUILTIN, "gone", gone.__name__)
    monkeypatch.setattr(backends, "_CREATED", {})
    info = {i.name: i for i in ptlite.backends()}["gone"]
    assert (info.available, info.detail) == (False, "library not built")
    with pytest.raises(ValueError, match="backend 'gone' is not available here: library not built"):
        backends.get("gone")
    assert [b.name for b in backends.resolve()] == [i.name for i in ptlite.backends() if i.available], \
        "an unavailable backend is skipped by default"
    assert "gone" not in [b.name for b in backends.resolve()]


def test_selection_errors_name_the_choices(tmp_path):
    ptlite.save(_program(), tmp_path / "m.ptlite")
    with pytest.raises(ValueError, match="no backend named 'nope'; ptlite has (native, )?gpu, numpy"):
        ptlite.load(tmp_path / "m.ptlite", backends=["nope"])
    with pytest.raises(ValueError, match="selected twice"):
        ptlite.load(tmp_path / "m.ptlite", backends=["numpy", "numpy"])
    with pytest.raises(ValueError, match="not a backend"):
        ptlite.load(tmp_path / "m.ptlite", backends=[object()])
    with pytest.raises(ValueError, match="cannot optimize for backend 'nope'"):
        ptlite.optimize_for_mobile(_program(), backend="nope")
    assert ptlite.optimize_for_mobile(_program(), backend="numpy").metadata["backend"] == "numpy"
    assert ptlite.optimize_for_mobile(_program()).lowered_for == backends.get("cpu").name


def test_inspect_shows_where_the_nodes_run(tmp_path, capsys):
    path = tmp_path / "m.ptlite"
    ptlite.save(ptlite.optimize_for_mobile(_program(), backend="numpy"), path)
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "lowered:    for numpy" in out and "runs on:    forward: numpy 6 node(s)" in out, out
    assert main(["inspect", str(path), "--backends", "nope"]) == 2
    assert "unknown backend(s) nope" in capsys.readouterr().err


def test_reference_declines_only_structural_and_undeclared_operators():
    reference = backends.reference()
    assert reference.kernel(ops.get("aten::relu"), None) is not None
    assert reference.kernel(ops.get("prim::If"), None) is None
    assert reference.kernel(ops.get(MODULE_STATE), None) is None
    assert reference.kernel(ops.OpDef("test::undeclared(Tensor self) -> Tensor"), None) is None


def _values(program: Program) -> list[tuple[Value, Node | None]]:
    return [(v, v.node) for node in program.forward.walk() for v in node.outputs]


def test_compiling_leaves_the_program_as_it_was():
    program = _program()
    text, producers = str(program), _values(program)
    for chosen in ([ReluOnly()], [ElementwiseDelegate()], None):
        ptlite.Module(program, chosen)(X, I)
        assert str(program) == text and all(v.node is node for v, node in producers), chosen
    verify(program)


def test_a_memory_plan_is_used_only_where_its_maker_runs_every_node(tmp_path):
    """A plan reuses memory by the aliasing of the kernels it was made with: with a node elsewhere, the method runs
    its plain steps, with the same results."""
    optimized = ptlite.optimize_for_mobile(_program(), backend="numpy")
    assert optimized.metadata.get("memory_plan"), "the static-shaped program gets a plan"
    path = tmp_path / "m.ptlite"
    ptlite.save(optimized, path)
    alone = ptlite.load(path)
    assert alone._method("forward")._compiled.arena is not None
    for chosen in ([ReluOnly()], [ElementwiseDelegate()]):
        mixed = ptlite.load(path, backends=chosen)
        compiled = mixed._method("forward")._compiled
        assert compiled.arena is None and compiled.runs_on is None, chosen
        _check(mixed(X, I))
        assert mixed._method("forward")._compiled.arena is None, "no plan is made at the first call either"


def test_the_reference_is_asked_last_wherever_it_is_named(tmp_path):
    ptlite.save(_program(), tmp_path / "m.ptlite")
    toy = ReluOnly()
    module = ptlite.load(tmp_path / "m.ptlite", backends=["numpy", toy])
    assert [b.name for b in module.backends] == ["toy", "numpy"]
    _check(module(X, I))
    assert toy.calls == 2 and module.backend_counts()["toy"] == 2


def test_a_delegate_may_take_an_operator_no_backend_has_a_kernel_for():
    key = ops.declare("test::scale_by_two(Tensor self) -> Tensor")

    class Doubler(ElementwiseDelegate):
        name = "doubler"

        def delegates(self, graph, program, kernels):
            nodes = [n for n in graph.nodes if n.op == key]
            assert all(kernels[id(n)] is None for n in nodes), "no backend has a kernel for it"
            inputs, outputs = region_values(graph, nodes)
            return [Delegate(self.name, nodes, inputs, outputs, lambda x: [x * 2])]

    x, y = Value("x", "Tensor", "float32", (2, 3)), Value("y", "Tensor", "float32")
    graph = Graph("forward", [x], [Node(key, [x], [y])], [y])
    graph.input_specs, graph.output_specs = [ValueSpec("x", "Tensor", "float32", (2, 3))], [ValueSpec("y")]
    program = Program({"forward": graph})
    np.testing.assert_array_equal(ptlite.Module(program, [Doubler()])(X), X * 2)
    with pytest.raises(ptlite.UnsupportedOperatorError,
                       match="none of the backends (native, )?numpy has a kernel for test::"):
        ptlite.Module(program)


def test_delegates_that_break_the_rules_are_refused():
    class Claims(ElementwiseDelegate):
        def __init__(self, name, pick, shift=0):
            super().__init__()
            self.name, self.pick, self.shift = name, pick, shift

        def delegates(self, graph, program, kernels):
            nodes = self.pick(graph)
            inputs, outputs = region_values(graph, nodes)
            return [Delegate(self.name, nodes, inputs[self.shift:], outputs, lambda *v: v)]

    first_two = lambda graph: [n for n in graph.nodes if n.op != "prim::Constant"][:2]  # noqa: E731
    with pytest.raises(ValueError, match="claims nodes backend one claimed"):
        ptlite.Module(_program(), [Claims("one", first_two), Claims("two", first_two)])
    with pytest.raises(ValueError, match="must be ptlite.ir.liveness.region_values"):
        ptlite.Module(_program(), [Claims("one", first_two, shift=1)])
    branch = _program()
    x = branch.forward.inputs[0]
    cond, out = Value("c", "bool"), Value("o", "Tensor", "float32")
    then_block, else_block = Block([], [], [x]), Block([], [], [x])
    branch.forward.nodes[2:2] = [Node("aten::Bool.Tensor", [x], [cond]),
                                 Node("prim::If", [cond], [out], blocks=[then_block, else_block])]
    with_if = lambda graph: [n for n in graph.nodes if n.op in ("aten::Bool.Tensor", "prim::If")]  # noqa: E731
    with pytest.raises(ValueError, match="cannot hold prim::If or prim::Loop"):
        ptlite.Module(branch, [Claims("one", with_if)])


def test_a_plan_entry_on_a_node_without_an_out_variant_is_left_unused():
    """A newer producer's or a hostile file's plan may put a buffer on any top-level node (prim::If, an operator
    without an out variant): the node then allocates as usual, and the program still loads and runs."""
    program = _program()
    relu = next(n for n in program.forward.nodes if n.op == "aten::neg")
    relu.attrs["out"] = {"offset": 0, "shape": [2, 3], "dtype": "float32", "channels_last": False}
    program.metadata["memory_plan"] = {"forward": {
        "arena_bytes": 64, "intermediate_bytes": 24, "planned_bytes": 24, "input_shapes": [[2, 3], [4]],
        "input_dtypes": ["float32", "int64"], "inputs": [None, None]}}
    verify(program)
    module = ptlite.Module(program, ["numpy"])
    assert module._method("forward")._compiled.arena is not None
    _check(module(X, I))
