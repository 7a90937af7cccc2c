"""TorchScript type strings for the values a .ptl file's bytecode computes: parsing the file's annotations
(`'Dict[str,int]'`, named tuples), typing Python values, and typing operator results from ATen schemas."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ptlite.ir.types import type_arguments

from .unpickler import Device, ScriptObject

_TOKEN = re.compile(r"\s*([A-Za-z_][\w.]*|\[|\]|,|\(|\))")
_MAX_DEPTH = 32
_TYPE_VARIABLES = frozenset({"t", "t1", "t2", "tVal", "K", "V", "T"})


class _Parser:
    def __init__(self, text: str, named_tuples: dict[str, str], keep_unions: bool = False) -> None:
        self.tokens = _TOKEN.findall(text)
        self.keep_unions = keep_unions
        if "".join(self.tokens) != re.sub(r"\s+", "", text):
            raise ValueError(f"unexpected characters in type {text!r}")
        self.pos = 0
        self.named_tuples = named_tuples

    def peek(self) -> str:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if not token or (expected is not None and token != expected):
            raise ValueError(f"expected {expected or 'a type'} at token {self.pos}")
        self.pos += 1
        return token

    def type(self, depth: int = 0) -> str:
        if depth > _MAX_DEPTH:
            raise ValueError("type nests too deeply")
        name = self.take()
        if self.peek() != "[":
            return self.named_tuples.get(name, name)
        self.take("[")
        if self.peek() == "NamedTuple":
            return self.named_tuple(name, depth)
        args = [self.type(depth + 1)]
        while self.peek() == ",":
            self.take(",")
            args.append(self.type(depth + 1))
        self.take("]")
        if name == "Union" and not self.keep_unions:
            return "Any"
        return f"{name}[{', '.join(args)}]"

    def named_tuple(self, name: str, depth: int) -> str:
        """`__torch__.Pt[NamedTuple, [[x, int], [y, Tensor]]]`: a tuple type, remembered for bare references."""
        self.take("NamedTuple")
        self.take(",")
        self.take("[")
        fields = []
        while self.peek() == "[":
            self.take("[")
            self.take()
            self.take(",")
            fields.append(self.type(depth + 1))
            self.take("]")
            if self.peek() == ",":
                self.take(",")
        self.take("]")
        self.take("]")
        rendered = f"Tuple[{', '.join(fields)}]"
        self.named_tuples[name] = rendered
        return rendered


def parse_type(text: str, named_tuples: dict[str, str] | None = None, keep_unions: bool = False) -> str:
    """A .ptl type annotation in ptlite's spelling ('Dict[str,int]' -> 'Dict[str, int]'); named tuples become
    tuples; text that does not parse becomes 'Any'. Unions become 'Any' (the translation types them by the values
    they hold) unless keep_unions (a method input's spec, checked when the method is called)."""
    try:
        parser = _Parser(text, named_tuples if named_tuples is not None else {}, keep_unions)
        result = parser.type()
        return result if parser.pos == len(parser.tokens) else "Any"
    except ValueError:
        return "Any"


def split_args(type_: str, head: str) -> list[str] | None:
    """The parameters of `head[...]` ('Tuple', 'List', 'Dict', 'Optional'), or None if type_ is not one."""
    name, args = type_arguments(type_)
    return args if name == head and type_.endswith("]") else None


def tuple_elements(type_: str) -> list[str] | None:
    return split_args(type_, "Tuple")


def list_element(type_: str) -> str | None:
    args = split_args(type_, "List")
    return args[0] if args and len(args) == 1 else None


def type_of(value: Any, depth: int = 0) -> str:
    """The TorchScript type of a Python value read from the file."""
    if value is None:
        return "NoneType"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, complex):
        return "complex"
    if isinstance(value, Device):
        return "Device"
    if isinstance(value, str):
        return "str"
    if isinstance(value, np.ndarray):
        return "Tensor"
    if isinstance(value, ScriptObject):
        return value.qualname
    if depth > _MAX_DEPTH:
        return "Any"
    if isinstance(value, tuple):
        return f"Tuple[{', '.join(type_of(v, depth + 1) for v in value)}]"
    if isinstance(value, list):
        return f"List[{_common(type_of(v, depth + 1) for v in value)}]"
    if isinstance(value, dict):
        keys = _common(type_of(k, depth + 1) for k in value)
        return f"Dict[{keys}, {_common(type_of(v, depth + 1) for v in value.values())}]"
    return "Any"


def _common(types: Any) -> str:
    kinds = set(types)
    return kinds.pop() if len(kinds) == 1 else "Any"


def unify(a: str, b: str) -> str:
    """The type of a value that is either of type a or of type b."""
    if a == b:
        return a
    if a == "NoneType":
        a, b = b, a
    if b == "NoneType":
        return a if a.startswith("Optional[") else f"Optional[{a}]"
    return "Any"


_ALIAS = re.compile(r"\((?:[a-z*!|]|\s|->)*\)")


def strip_alias(type_: str) -> str:
    """'t[](a!)' -> 't[]', 't(*)' -> 't' (alias annotations of ATen schema types)."""
    return _ALIAS.sub("", type_)


def bind_type_variables(pattern: str, actual: str, out: dict[str, str]) -> None:
    """Match an ATen schema argument type ('t[]', 'Dict(str, t)') against a value's type, binding 't'."""
    pattern = strip_alias(pattern).strip().removesuffix("?")
    if pattern in _TYPE_VARIABLES:
        out.setdefault(pattern, actual)
    elif pattern.endswith("[]"):
        element = list_element(actual)
        if element is not None:
            bind_type_variables(pattern[:-2], element, out)
    elif pattern.startswith("Dict(") and pattern.endswith(")"):
        args = split_args(actual, "Dict")
        parts = pattern[5:-1].split(",", 1)
        if args and len(args) == 2 and len(parts) == 2:
            bind_type_variables(parts[0], args[0], out)
            bind_type_variables(parts[1], args[1], out)


_SCHEMA_NAMES = {"SymInt": "int", "ScalarType": "int", "Layout": "int", "MemoryFormat": "int", "number": "Scalar",
                 "SymFloat": "float", "SymBool": "bool", "QScheme": "int"}


def from_schema(type_: str, bound: dict[str, str] | None = None) -> str:
    """An ATen schema type ('int[]', 'Tensor?', 'Dict(str, t)', 't') as a TorchScript type string."""
    bound = bound or {}
    type_ = strip_alias(type_).strip()
    if type_.endswith("?"):
        inner = from_schema(type_[:-1], bound)
        return inner if inner in ("Any", "NoneType") or inner.startswith("Optional[") else f"Optional[{inner}]"
    match = re.fullmatch(r"(.*)\[\d*\]", type_)
    if match:
        return f"List[{from_schema(match.group(1), bound)}]"
    if type_.startswith("Dict(") and type_.endswith(")"):
        key, _, value = type_[5:-1].partition(",")
        return f"Dict[{from_schema(key, bound)}, {from_schema(value, bound)}]"
    if type_.startswith("(") and type_.endswith(")"):
        return f"Tuple[{', '.join(from_schema(p, bound) for p in type_[1:-1].split(','))}]"
    if type_ in _TYPE_VARIABLES:
        return bound.get(type_, "Any")
    return _SCHEMA_NAMES.get(type_, type_)
