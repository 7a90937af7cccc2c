"""An operator's row: traits parsed from its declaration, and what its alias annotations say it writes and aliases."""

from __future__ import annotations

import pytest

from ptlite import ops
from ptlite.ops import OpDef


def test_declaration_line_gives_schema_traits_and_dtypes():
    op = OpDef.parse("ptlite::thing(Tensor x, int k=2) -> Tensor  @out @dtypes(float16,float32)", "fam")
    assert (op.key, op.family, op.out, op.dtypes) == ("ptlite::thing", "fam", True, frozenset({"float16", "float32"}))
    assert op.schema.arguments[1].default == 2 and op.pure
    with pytest.raises(ValueError, match="unknown trait @fast"):
        OpDef.parse("ptlite::thing(Tensor x) -> Tensor  @fast")


def test_rank_trait_names_a_rule():
    assert OpDef.parse("ptlite::thing(Tensor x) -> Tensor  @out @rank(input)").rank == "input"
    assert OpDef.parse("ptlite::thing(Tensor x, Tensor y) -> Tensor  @rank(broadcast)").rank == "broadcast"
    assert OpDef.parse("ptlite::thing(Tensor x) -> Tensor  @out").rank is None
    with pytest.raises(ValueError, match="unknown rule 4 in @rank"):
        OpDef.parse("ptlite::thing(Tensor x) -> Tensor  @rank(4)")
    assert ops.get(ops.CONV2D_INT8).rank == "input" and ops.get(ops.ADD_INT8).rank == "broadcast"


def test_written_arguments_read_from_schemas():
    def writes(text: str) -> tuple[int, ...]:
        return OpDef(text).writes

    assert writes("aten::relu_(Tensor(a!) self) -> Tensor(a!)") == (0,)
    assert writes("aten::relu(Tensor self) -> Tensor") == ()
    assert writes("aten::_set_item.str(Dict(str, t)(a!) l, str(b -> *) idx, t(c -> *) v) -> ()") == (0,)
    assert writes("aten::foo(Tensor a, *, Tensor(b!) out) -> Tensor(b!)") == (1,)


def test_results_alias_what_their_annotations_name():
    view = ops.get("aten::view")
    assert view.result_aliases and view.result_sources == ((0,),) and view.annotated_arguments == (0,)
    assert not ops.get("aten::add.Tensor").result_aliases
    split = ops.get("aten::split.Tensor")
    assert split.result_aliases and split.result_sources == ((0,),)
    getitem = ops.get("aten::__getitem__.t")
    assert getitem.result_sources == ((0,),)  # t(*) may be any annotated argument


def test_unannotated_aliases_are_a_trait():
    """PyTorch's unsafe views and dropout at inference return their input although their schemas do not say so."""
    for key in ("aten::type_as", "aten::_unsafe_view", "aten::dropout", "aten::unsafe_chunk"):
        assert ops.get(key).result_aliases, key
        assert "aliases" in ops.get(key).traits, key


def test_purity_follows_the_traits():
    assert ops.get("aten::add.Tensor").pure and ops.get("aten::size.int").pure
    impure = {"prim::RaiseException": "effects", "aten::warn": "effects", "aten::set_grad_enabled": "effects",
              "aten::dropout": "random", "aten::empty.memory_format": "random", "prim::Uninitialized": "random",
              "aten::hash.generic": "random", "prim::If": "structural", "aten::add_.Tensor": "writes"}
    for key, why in impure.items():
        op = ops.get(key)
        assert not op.pure, f"{key} is pure, but it {why}"
        assert (why in op.traits) if why != "writes" else op.writes, key


def test_dtypes_trait_names_the_irs_dtypes_and_the_verifier_holds_it():
    import numpy as np

    from ptlite.ir.dtypes import SUPPORTED_NUMPY
    from ptlite.ir.graph import Graph, Node, Program, Value, ValueSpec
    from ptlite.ir.verifier import verify_graph
    from ptlite.ops.opdef import DTYPES

    assert DTYPES == SUPPORTED_NUMPY
    assert ops.get(ops.LINEAR_PREPACKED).dtypes == {"float16", "float32", "float64"}

    def program(dtype: str) -> Program:
        x = Value("x", "Tensor", dtype, (2, 3))
        w, none, act, args, y = (Value("w", "Tensor", "float32", (3, 4)), Value("b", "NoneType"), Value("a", "str"),
                                 Value("args", "List[float]"), Value("y"))
        nodes = [Node("prim::Constant", [], [w], {"weight": "w"}),
                 Node("prim::Constant", [], [none], {"value": None}),
                 Node("prim::Constant", [], [act], {"value": "none"}),
                 Node("prim::Constant", [], [args], {"value": []}),
                 Node(ops.LINEAR_PREPACKED, [x, w, none, act, args], [y])]
        graph = Graph("forward", [x], nodes, [y])
        graph.input_specs, graph.output_specs = [ValueSpec("x", "Tensor", dtype, (2, 3))], [ValueSpec("y")]
        return Program({"forward": graph}, {"w": np.zeros((3, 4), np.float32)})

    assert verify_graph(program("float32").forward, program("float32")) == []
    bad = program("int64")
    problems = verify_graph(bad.forward, bad)
    assert len(problems) == 1 and "is int64; the operator takes float16, float32, float64 tensors" in problems[0]
