"""The ATen schema parser behind the operator table."""

import pytest

from ptlite.ops.schema import parse_schema


def test_parses_overload_kwargs_and_defaults():
    s = parse_schema("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
    assert s.key == "aten::add.Tensor"
    assert [a.name for a in s.arguments] == ["self", "other", "alpha"]
    assert s.arguments[2].kwarg_only and s.arguments[2].default == 1
    assert not s.arguments[0].has_default


def test_list_defaults_and_multiple_returns():
    s = parse_schema("aten::max_pool2d(Tensor self, int[2] kernel_size, int[2] stride=[], int[2] padding=0, "
                     "int[2] dilation=1, bool ceil_mode=False) -> Tensor")
    assert [a.default for a in s.arguments[2:]] == [[], 0, 1, False]
    m = parse_schema("aten::max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)")
    assert m.returns == ("Tensor", "Tensor")


def test_alias_annotations_are_dropped():
    s = parse_schema("aten::split.Tensor(Tensor(a -> *) self, SymInt split_size, int dim=0) -> Tensor(a)[]")
    assert s.arguments[0].type == "Tensor" and s.returns == ("Tensor[]",)


def test_named_defaults():
    s = parse_schema("aten::contiguous(Tensor(a) self, *, MemoryFormat memory_format=contiguous_format) -> Tensor(a)")
    assert s.arguments[1].default == 0
    g = parse_schema("aten::gelu(Tensor self, *, str approximate='none') -> Tensor")
    assert g.arguments[1].default == "none"


@pytest.mark.parametrize("text, value", [("0", 0), ("-1", -1), ("20", 20), ("1_0", 10), ("0.01", 0.01), ("0.", 0.0),
                                         ("1.0000000000000001e-05", 1e-05), ('"valid"', "valid"), ("''", ""),
                                         ('"a\\"b"', 'a"b'), ('" \\n\\t"', " \n\t"), ("[1, -2]", [1, -2]),
                                         ('["a,b", "c]"]', ["a,b", "c]"])])
def test_default_values_read_as_python_literals(text, value):
    """Ints and plain strings take a short path; whatever it reads must be what ast.literal_eval reads."""
    s = parse_schema(f"test::f(Scalar x={text}) -> Tensor")
    assert s.arguments[0].default == value and type(s.arguments[0].default) is type(value), (text, s.arguments[0])


@pytest.mark.parametrize("text", ["01", "--1", "-", '"', "'a\"", "1e"])
def test_malformed_default_values_are_refused(text):
    with pytest.raises(ValueError, match="default"):
        parse_schema(f"test::f(Scalar x={text}) -> Tensor")


def test_brackets_and_quotes_nest_when_splitting_arguments():
    s = parse_schema('test::f(Dict(str, Tensor(a)) d, int[2] k=[1, 2], str s="x,]", Tensor(a!)[] t) -> '
                     '(Tensor(a), Tensor[])')
    assert [(a.name, a.type) for a in s.arguments] == [("d", "Dict(str, Tensor)"), ("k", "int[2]"), ("s", "str"),
                                                        ("t", "Tensor[]")]
    assert s.arguments[1].default == [1, 2] and s.arguments[2].default == "x,]"
    assert s.returns == ("Tensor", "Tensor[]")


def test_fill_defaults_appends_trailing_defaults():
    s = parse_schema("aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor")
    assert s.fill_defaults(["a", "b"]) == ["a", "b", 1]
    with pytest.raises(TypeError, match="other"):
        s.fill_defaults(["a"])


def test_variadic():
    s = parse_schema("prim::ListConstruct(...) -> ...")
    assert s.variadic and s.key == "prim::ListConstruct"


def test_rejects_malformed():
    with pytest.raises(ValueError):
        parse_schema("add(Tensor self) -> Tensor")
    with pytest.raises(ValueError):
        parse_schema("aten::add(Tensor self -> Tensor")


def test_every_declared_schema_parses():
    from ptlite import ops

    bad = []
    for key, op in ops.all_ops().items():
        try:
            assert op.schema.key == key
        except Exception as exc:  # collect them all
            bad.append(f"{key}: {exc}")
    assert not bad, "schemas that do not parse:\n" + "\n".join(bad)
