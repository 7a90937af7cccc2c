"""The ATen schema parser behind the operator table."""

import pytest

from ptlite.ir.schema import parse_schema


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


def test_every_registered_schema_parses():
    from ptlite.ir import registry

    bad = []
    for key, op in registry.all_ops().items():
        try:
            assert op.schema.key == key
        except Exception as exc:  # collect them all
            bad.append(f"{key}: {exc}")
    assert not bad, "schemas that do not parse:\n" + "\n".join(bad)
