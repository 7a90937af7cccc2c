"""TorchScript-level operators (lists, tuples, dicts, strings, scalar math, None checks) against PyTorch."""

from __future__ import annotations

import math
import warnings

import pytest

torch = pytest.importorskip("torch")

from oracle import op, torch_op, torch_schema  # noqa: E402

from ptlite.backends.numpy.prim import ScriptError, script_str  # noqa: E402
from ptlite.ops import all_ops  # noqa: E402
from ptlite.ops.schema import parse_schema  # noqa: E402

_OUR_MODULES = ("prim", "containers", "strings", "scalars", "tensor_meta", "rnn", "attention")


def test_schemas_match_torch():
    """Every operator these families declare has PyTorch's schema, except the variadic prim nodes."""
    mismatched, unknown = [], []
    for key, entry in all_ops().items():
        if entry.family not in _OUR_MODULES:
            continue
        theirs = torch_schema(key)
        if theirs is None:
            unknown.append(key)
        elif not entry.schema.variadic and parse_schema(str(theirs)) != entry.schema:
            mismatched.append(f"{key}: ours {entry.schema}, torch {theirs}")
    assert not mismatched, "schemas differ from torch's:\n" + "\n".join(mismatched)
    assert set(unknown) <= {"prim::ListConstruct", "prim::ListUnpack", "prim::TupleConstruct",
                            "prim::DictConstruct", "prim::TupleSlice"}, f"not torch operators: {unknown}"


# (key, arguments) evaluated by both ptlite and torch.ops
SCALAR_CASES = [
    ("aten::add.int", (3, -5)), ("aten::add.float", (1.5, 2.25)), ("aten::add.int_float", (1, 0.5)),
    ("aten::add", (2, 3.5)), ("aten::sub.int", (3, 10)), ("aten::sub.float_int", (1.5, 2)),
    ("aten::mul.int", (-4, 6)), ("aten::mul.float", (1.5, -2.0)), ("aten::mul", (3, 4)),
    ("aten::div.int", (7, 2)), ("aten::div.float", (-7.0, 2.0)), ("aten::div", (1, 4)),
    ("aten::floordiv.int", (-7, 2)), ("aten::floordiv.int", (7, -2)), ("aten::floordiv.float", (-7.5, 2.0)),
    ("aten::remainder.int", (-7, 3)), ("aten::remainder.int", (7, -3)),
    ("aten::remainder.float", (-7.5, 2.0)), ("aten::remainder.float_int", (5.5, -2)),
    ("aten::neg.int", (4,)), ("aten::neg.float", (-0.5,)), ("aten::floor.float", (-2.5,)),
    ("aten::floor.float", (2.5,)), ("aten::ceil.float", (2.1,)), ("aten::ceil.float", (-2.1,)),
    ("aten::round.float", (2.5,)), ("aten::round.float", (-3.5,)), ("aten::round.float", (0.49,)),
    ("aten::sqrt.float", (2.0,)), ("aten::sqrt.int", (9,)), ("aten::exp.float", (0.5,)),
    ("aten::log.float", (3.0,)), ("aten::pow.int", (2, -1)), ("aten::pow.float", (2.0, 0.5)),
    ("aten::divmod.int", (-7, 2)), ("prim::min.int", (3, -1)), ("prim::max.int_float", (1, 2.5)),
    ("prim::max.float", (1.0, -2.0)), ("prim::min.self_int", ([3, 1, 2],)),
    ("prim::max.self_float", ([0.5, 2.5],)), ("prim::max.int_list", ([1, 5], [1, 4])),
    ("prim::min.int_list", ([1, 5], [1, 4, 0])), ("prim::abs.int", (-3,)), ("prim::abs.float", (-2.5,)),
    ("aten::eq.int", (3, 3)), ("aten::ne.int", (3, 3)), ("aten::lt.int", (2, 3)),
    ("aten::gt.float", (2.0, 3.0)), ("aten::le.int_float", (2, 2.0)), ("aten::ge.float_int", (2.5, 3)),
    ("aten::eq.str", ("a", "a")), ("aten::lt.str", ("ab", "b")), ("aten::eq.int_list", ([1, 2], [1, 2])),
    ("aten::ne.int_list", ([1, 2], [1])), ("aten::eq.bool", (True, False)),
    ("aten::eq.str_list", (["a"], ["a"])), ("aten::eq", (1, 1.0)), ("aten::__and__.bool", (True, False)),
    ("aten::__or__.int", (5, 2)), ("aten::__xor__.int", (7, 2)), ("aten::__lshift__.int", (1, 5)),
    ("aten::__rshift__.int", (-64, 3)), ("aten::__not__", (True,)), ("aten::Int.float", (-2.7,)),
    ("aten::Int.bool", (True,)), ("aten::Int.str", ("42",)), ("aten::Int.Scalar", (3.9,)),
    ("aten::Float.int", (3,)), ("aten::Float.str", ("1.5",)), ("aten::Float.Scalar", (2,)),
    ("aten::Bool.int", (0,)), ("aten::Bool.float", (0.1,)), ("aten::len.str", ("hello",)),
    ("aten::__getitem__.str", ("hello", 1)), ("aten::__contains__.int_list", ([1, 2], 2)),
    ("aten::__contains__.str_list", (["a", "b"], "c")), ("aten::add.str", ("ab", "cd")),
    ("aten::list", ("abc",)), ("aten::slice.str", ("hello", 1, 3, 1)), ("aten::sum.int", ([1, 2, 3],)),
    ("aten::sum.float", ([0.5, 0.25],)), ("aten::sum.bool", ([True, True],)),
    ("aten::any.bool", ([False, True],)), ("aten::all.bool", ([True, False],)),
    ("aten::any.int", ([0, 0],)), ("aten::all.int", ([],)), ("aten::count.int", ([1, 2, 1], 1)),
    ("aten::index.list_int", ([4, 5, 6], 6)), ("aten::sorted.int", ([3, 1, 2],)),
    ("aten::startswith", ("hello", "ll", 2, -1)), ("aten::startswith", ("hello", "he", 0, 1)),
    ("aten::endswith", ("hello", "lo", 0, -1)), ("aten::endswith", ("hello", "ll", 0, 4)),
    ("aten::endswith", ("hello", "ll", 0, -2)), ("aten::count", ("aaaa", "a", 1, 3)),
    ("aten::index.str", ("hello", "l", 0, -1)), ("aten::replace", ("aaa", "a", "b", 2)),
    ("aten::split.str", ("a,b,,c", ",", -1)), ("aten::split.str", ("a b  c", None, -1)),
    ("aten::join", ("-", ["a", "b"])), ("aten::strip", ("  x \n", " \n\t\x0c\x0b")),
    ("aten::lower", ("AbC",)), ("aten::upper", ("AbC",)), ("aten::ord", ("a",)), ("aten::chr", (98,)),
    ("aten::__range_length", (0, 10, 3)), ("aten::__range_length", (10, 0, -3)),
    ("aten::__range_length", (5, 0, 1)), ("aten::__derive_index", (2, 1, 3)), ("aten::is_grad_enabled", ()),
    ("aten::is_autocast_enabled", ()),
]


@pytest.mark.parametrize("key,args", SCALAR_CASES, ids=[f"{k}{a}" for k, a in SCALAR_CASES])
def test_scalar_op_matches_torch(key, args):
    with torch.no_grad():
        want = torch_op(key)(*args)
    got = op(key)(*args)
    if isinstance(want, torch.Tensor):  # torch.ops returns a tensor for the generic Scalar overloads
        want = want.item()
    if isinstance(want, float) and isinstance(got, float) and math.isnan(want):
        assert math.isnan(got), f"{key}{args}: ptlite {got!r}, torch nan"
        return
    assert got == want and type(got) is type(want), f"{key}{args}: ptlite {got!r}, torch {want!r}"


# operators on generic containers (torch.ops cannot take them): (key, TorchScript signature, expression, args)
GENERIC_CASES = [
    ("aten::len.t", "a: List[int]", "len(a)", ([1, 2, 3],)),
    ("aten::len.Dict_str", "a: Dict[str, int]", "len(a)", ({"a": 1},)),
    ("aten::__getitem__.t", "a: List[int], i: int", "a[i]", ([1, 2, 3], -1)),
    ("aten::__getitem__.Dict_str", "a: Dict[str, int], k: str", "a[k]", ({"a": 1, "b": 2}, "b")),
    ("aten::__getitem__.Dict_int", "a: Dict[int, float], k: int", "a[k]", ({3: 1.5}, 3)),
    ("aten::__contains__.str", "a: Dict[str, int], k: str", "k in a", ({"a": 1}, "a")),
    ("aten::__contains__.int", "a: Dict[int, int], k: int", "k in a", ({1: 2}, 2)),
    ("aten::add.t", "a: List[int], b: List[int]", "a + b", ([1], [2, 3])),
    ("aten::list.t", "a: List[int]", "list(a)", ([1, 2],)),
    ("aten::slice.t", "a: List[int]", "a[1:]", ([1, 2, 3, 4],)),
    ("aten::slice.t", "a: List[int]", "a[::-1]", ([1, 2, 3, 4],)),
    ("aten::slice.t", "a: List[int]", "a[-2:10]", ([1, 2, 3, 4],)),
    ("aten::slice.t", "a: List[int]", "a[-1:0:-2]", ([1, 2, 3, 4, 5],)),
    ("aten::mul.left_t", "a: List[int], n: int", "a * n", ([1, 2], 2)),
    ("aten::mul.right_", "a: List[int], n: int", "n * a", ([0], 3)),
    ("aten::keys.str", "a: Dict[str, int]", "a.keys()", ({"b": 1, "a": 2},)),
    ("aten::values.str", "a: Dict[str, int]", "a.values()", ({"b": 1, "a": 2},)),
    ("aten::items.str", "a: Dict[str, int]", "a.items()", ({"b": 1, "a": 2},)),
    ("aten::get.str", "a: Dict[str, int], k: str", "a.get(k)", ({"a": 1}, "z")),
    ("aten::get.default_str", "a: Dict[str, int], k: str", "a.get(k, 7)", ({"a": 1}, "z")),
]


@pytest.mark.parametrize("key,signature,expr,args", GENERIC_CASES,
                         ids=[f"{c[0]}:{c[2]}" for c in GENERIC_CASES])
def test_container_op_matches_torchscript(key, signature, expr, args):
    fn = torch.jit.CompilationUnit(f"def fn({signature}):\n    return {expr}\n").fn
    nodes = [n for n in fn.graph.nodes() if n.kind() != "prim::Constant"]
    assert len(nodes) == 1, f"{expr} compiles to {[n.kind() for n in nodes]}"
    schema = nodes[0].schema()
    assert parse_schema(schema).key == key, f"{expr} compiles to {schema}, not {key}"
    inputs = [n for n in nodes[0].inputs()]
    arg_of = dict(zip([i.debugName().split(".")[0] for i in fn.graph.inputs()], args, strict=True))
    call = [arg_of[i.debugName().split(".")[0]] if i.node().kind() == "prim::Param" else i.toIValue()
            for i in inputs]
    want = fn(*args)
    got = op(key)(*call)
    assert got == want and type(got) is type(want), (
        f"{key} ({expr}) on {args}: ptlite {got!r}, torch {want!r}")


def test_pow_int_to_int_returns_int():
    # torch's implementation returns a float although its schema says int; ptlite keeps the schema's type
    assert op("aten::pow.int_to_int")(3, 4) == 81 and isinstance(op("aten::pow.int_to_int")(3, 4), int)


def test_list_ops_mutate_the_shared_list():
    lst = op("prim::ListConstruct")(1, 2)
    alias = lst
    assert op("aten::append.t")(lst, 3) is lst
    op("aten::_set_item.t")(lst, -1, 9)
    op("aten::insert.t")(lst, 0, 0)
    op("aten::extend.t")(lst, [7])
    assert alias == [0, 1, 2, 9, 7]
    assert op("aten::pop.t")(lst, -1) == 7 and op("aten::pop.t")(lst, 0) == 0
    op("aten::reverse.t")(lst)
    op("aten::sort.int")(lst, True)
    assert alias == [9, 2, 1]
    copy = op("aten::list.t")(lst)
    copy.append(5)
    assert lst == [9, 2, 1], "aten::list.t must copy"
    op("aten::clear.t")(lst)
    assert alias == []


def test_list_index_out_of_range_raises():
    with pytest.raises(IndexError):
        op("aten::__getitem__.t")([1, 2], 2)
    with pytest.raises(IndexError):
        op("aten::_set_item.t")([1, 2], -3, 0)


def test_tuple_and_dict_construction():
    tup = op("prim::TupleConstruct")(1, "a", None)
    assert tup == (1, "a", None)
    assert op("prim::TupleIndex")(tup, -2) == "a"
    assert op("prim::TupleUnpack")(tup) == (1, "a", None)
    assert op("prim::ListUnpack")([4, 5]) == (4, 5)
    assert op("prim::TupleSlice")((1, 2, 3, 4), 1, 3) == (2, 3)
    d = op("prim::DictConstruct")("a", 1, "b", 2)
    assert list(d.items()) == [("a", 1), ("b", 2)]
    op("aten::_set_item.str")(d, "c", 3)
    assert op("aten::items.str")(d) == [("a", 1), ("b", 2), ("c", 3)]
    assert op("aten::setdefault.str")(d, "a", 9) == 1 and op("aten::setdefault.str")(d, "z", 9) == 9
    assert op("aten::pop.Dict_str")(d, "z") == 9 and op("aten::pop.Dict_default_str")(d, "z", 0) == 0
    assert op("aten::dict")() == {} and op("aten::dict.Dict_str")(d) is not d
    with pytest.raises(KeyError, match="nope"):
        op("aten::__getitem__.Dict_str")(d, "nope")


def test_is_and_isnot_follow_torchscript():
    import numpy as np

    a = np.zeros(2)
    assert op("aten::__is__")(None, None) and not op("aten::__is__")(a, None)
    assert op("aten::__is__")(a, a) and not op("aten::__is__")(a, a.copy())
    assert op("aten::__isnot__")(a, None) and not op("aten::__isnot__")(None, None)
    assert op("aten::__is__")(3, 3) and not op("aten::__is__")(1, True)
    assert op("prim::unchecked_cast")(a) is a and op("prim::Uninitialized")() is None


# values whose TorchScript text is checked against str() of a scripted function, by type annotation
FORMAT_VALUES = [
    ("float", [1.0, -5.0, 1.5, 0.1, 1e10, 1e20, 2.0**63, -2.0**63, 1e-5, 1e-300, -0.0, math.inf, -math.inf,
               math.nan, 123456789.0, 1 / 3]),
    ("int", [0, -3, 2**40]),
    ("bool", [True, False]),
    ("str", ["", "x y"]),
    ("List[float]", [[1.5, 2.0], []]),
    ("List[str]", [["a", ""]]),
    ("Tuple[int, float]", [(1, 2.0)]),
    ("Tuple[int]", [(1,)]),
    ("Dict[str, int]", [{"a": 1, "b": 2}]),
    ("Dict[int, List[float]]", [{1: [1.0]}]),
    ("Optional[int]", [None, 4]),
    ("List[List[int]]", [[[1, 2], [3]]]),
]


def _scripted_str(annotation: str):
    source = f"def fn(v: {annotation}) -> str:\n    return str(v) + '|{{}}|'.format(v)\n"
    return torch.jit.CompilationUnit(source).fn


@pytest.mark.parametrize("annotation,values", FORMAT_VALUES, ids=[a for a, _ in FORMAT_VALUES])
def test_str_and_format_text_match_torchscript(annotation, values):
    fn = _scripted_str(annotation)
    for value in values:
        want = fn(value)
        got = op("aten::add.str")(op("aten::str")(value), op("aten::format")("|{}|", value))
        assert got == want, (
            f"aten::str/aten::format of {value!r} ({annotation}): ptlite {got!r}, torch {want!r}")


def test_format_placeholders():
    fmt = op("aten::format")
    assert fmt("{}-{}", 1, "a") == "1-a"
    assert fmt("{}-", 1, 2) == "1-", "extra arguments are ignored"
    assert fmt("no placeholders") == "no placeholders"
    assert fmt("{x} {}", 2.0) == "{x} 2."
    with pytest.raises(RuntimeError, match="Too few arguments"):
        fmt("{} {}", 1)


def test_tensor_text_names_type_and_shape():
    import numpy as np

    assert script_str(np.asarray(1.5, dtype=np.float32)) == "1.5\n[ CPUFloatType{} ]"
    assert script_str(np.zeros((2, 3), dtype=np.int64)).endswith("[ CPULongType{2,3} ]")


def test_raise_exception_gives_class_name_and_message():
    with pytest.raises(ScriptError) as info:
        op("prim::RaiseException")("n too big: 7", "builtins.ValueError")
    assert str(info.value) == "ValueError: n too big: 7"
    assert info.value.qualified_class == "builtins.ValueError" and info.value.message == "n too big: 7"
    with pytest.raises(ScriptError, match="^Exception: oops$"):
        op("prim::RaiseException")("oops", None)


def test_warn_issues_python_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        op("aten::warn")("careful 3", 2)
    assert [str(w.message) for w in caught] == ["careful 3"]


def test_division_by_zero_raises():
    for key in ("aten::div.int", "aten::floordiv.int", "aten::remainder.int"):
        with pytest.raises(ZeroDivisionError):
            op(key)(1, 0)


def test_math_domain_gives_nan_not_error():
    assert math.isnan(op("aten::sqrt.float")(-1.0))
    assert op("aten::log.float")(0.0) == -math.inf
    assert math.isnan(op("aten::log.float")(-1.0))


def test_isinstance_at_run_time() -> None:
    """ptlite::isinstance: TorchScript types checked against run-time values (what .ptl files' isinstance() on
    Optional / Union / Any values becomes)."""
    import numpy as np

    isinstance_ = op("ptlite::isinstance")
    t = np.zeros(2, np.float32)
    cases = [(t, ["Tensor"], True), (None, ["Tensor"], False), (None, ["NoneType"], True), (3, ["int"], True),
             (True, ["int"], False), (True, ["bool"], True), (np.int64(3), ["int"], True), (2.5, ["int"], False),
             (2.5, ["float", "int"], True), (2.5, ["number"], True), ("a", ["str"], True),
             ([1, 2], ["List[int]"], True), ([1, 2.5], ["List[int]"], False), ([], ["List[Tensor]"], True),
             ((1, t), ["Tuple[int, Tensor]"], True), ((1,), ["Tuple[int, Tensor]"], False),
             ({"a": [t]}, ["Dict[str, List[Tensor]]"], True), ({"a": 1}, ["Dict[str,Tensor]"], False),
             (None, ["Optional[int]"], True), (t, ["Union[int, Optional[Tensor]]"], True), (t, ["Any"], True)]
    for value, types, expected in cases:
        assert isinstance_(value, types) is expected, (value, types)
    with pytest.raises(ValueError, match="cannot check it at run time"):
        isinstance_(t, ["__torch__.Point"])


def test_isinstance_types_checkable_at_translation() -> None:
    from ptlite.ir.types import check_type

    for ok in ("Tensor", "Optional[List[Tensor]]", "Union[int, float, Tensor]", "Dict[str, Tuple[int, float]]",
               "Tuple[()]", "NoneType"):
        check_type(ok)
    for bad in ("__torch__.Point", "Optional[Device]", "List[int, int]", "complex"):
        with pytest.raises(ValueError, match="cannot check it at run time"):
            check_type(bad)
