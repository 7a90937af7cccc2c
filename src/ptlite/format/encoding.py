"""JSON encoding of IR graphs and constant values (the program section of a .ptlite file), and the parsing of that
JSON text."""

from __future__ import annotations

import math
from typing import Any

from ptlite.errors import FormatError
from ptlite.ir.dtypes import SUPPORTED_NUMPY
from ptlite.ir.graph import Block, Graph, Node, Value, ValueSpec


def encode_constant(value: Any) -> Any:
    """A Python constant as JSON: tuples, dicts and non-finite floats are tagged so they round-trip exactly."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, list):
        return [encode_constant(v) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [encode_constant(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[encode_constant(k), encode_constant(v)] for k, v in value.items()]}
    if hasattr(value, "item") and getattr(value, "ndim", 1) == 0:  # NumPy scalar
        return encode_constant(value.item())
    raise TypeError(f"cannot store constant of type {type(value).__name__}: {value!r}")


def decode_constant(data: Any) -> Any:
    if data is None or isinstance(data, (bool, str, int, float)):
        return data
    if isinstance(data, list):
        return [decode_constant(v) for v in data]
    if isinstance(data, dict) and len(data) == 1:
        (tag, body), = data.items()
        if tag == "float" and body in ("inf", "-inf", "nan"):
            return float(body)
        if tag == "tuple" and isinstance(body, list):
            return tuple(decode_constant(v) for v in body)
        if tag == "dict" and isinstance(body, list) and all(isinstance(p, list) and len(p) == 2 for p in body):
            pairs = [(decode_constant(k), decode_constant(v)) for k, v in body]
            if all(isinstance(k, (str, int, float, bool)) or k is None for k, _ in pairs):  # TorchScript's keys
                return dict(pairs)
    raise FormatError(f"invalid constant encoding: {str(data)[:80]}")


def _encode_spec(spec: ValueSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"name": spec.name, "type": spec.type}
    if spec.dtype is not None:
        out["dtype"] = spec.dtype
    if spec.shape is not None:
        out["shape"] = list(spec.shape)
    if spec.has_default:
        out["default"] = encode_constant(spec.default)
    return out


class GraphEncoder:
    """Numbers the values of one graph and writes nodes and blocks as nested JSON."""

    def __init__(self) -> None:
        self.ids: dict[int, int] = {}
        self.values: list[dict[str, Any]] = []

    def ref(self, v: Value) -> int:
        if v.id not in self.ids:
            self.ids[v.id] = len(self.values)
            entry: dict[str, Any] = {"type": v.type}
            if v.name:
                entry["name"] = v.name
            if v.dtype is not None:
                entry["dtype"] = v.dtype
            if v.shape is not None:
                entry["shape"] = list(v.shape)
            self.values.append(entry)
        return self.ids[v.id]

    def node(self, node: Node) -> dict[str, Any]:
        out: dict[str, Any] = {"op": node.op, "in": [self.ref(v) for v in node.inputs],
                               "out": [self.ref(v) for v in node.outputs]}
        if node.attrs:
            attrs = dict(node.attrs)
            if "value" in attrs:
                attrs["value"] = encode_constant(attrs["value"])
            out["attrs"] = attrs
        if node.blocks:
            out["blocks"] = [self.block(b) for b in node.blocks]
        if node.source:
            out["src"] = node.source
        return out

    def block(self, block: Block) -> dict[str, Any]:
        return {"in": [self.ref(v) for v in block.inputs], "nodes": [self.node(n) for n in block.nodes],
                "out": [self.ref(v) for v in block.outputs]}

    def graph(self, graph: Graph) -> dict[str, Any]:
        body = self.block(graph)
        return {"name": graph.name, "values": self.values, "body": body,
                "input_specs": [_encode_spec(s) for s in graph.input_specs],
                "output_specs": [_encode_spec(s) for s in graph.output_specs]}


def encode_graph(graph: Graph) -> dict[str, Any]:
    return GraphEncoder().graph(graph)


# ---------------------------------------------------------------- parsing the JSON text
# Parsed exactly as `json.loads` does, without importing the `json` package on the way: importing it compiles its
# module-level regular expressions, which costs about 2 ms, a fifth of the time `ptlite.load` may take. Its parser
# is the C scanner of CPython's `_json` extension, which needs none of them, so this drives that scanner directly
# (with the settings `json.loads` uses, `NaN` and `Infinity` included) and imports `json` only to report an error
# (or where `_json` does not exist: then it is `json.loads` itself).

_WHITESPACE = " \t\n\r"  # what JSON allows around the top-level value


class _Settings:
    """What `json.JSONDecoder()` passes to the C scanner (attributes it reads once, when the scanner is made)."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__


try:
    from _json import make_scanner as _make_scanner
except ImportError:  # not CPython
    _scan = None
else:
    _scan = _make_scanner(_Settings)


def parse_json(text: str) -> Any:
    """The value of a JSON document; raises what `json.loads(text)` raises (a ValueError, `json.JSONDecodeError`
    naming the position, for text that is not JSON; RecursionError for nesting too deep to parse)."""
    if _scan is not None:
        doc = text.strip(_WHITESPACE)
        try:
            value, end = _scan(doc, 0)
        except RecursionError:
            raise
        except (ValueError, StopIteration, SystemError):  # SystemError: the scanner's error report needs json
            pass
        else:
            if end == len(doc):
                return value
    import json  # not JSON (or no scanner): json.loads says what is wrong, or parses it after all

    return json.loads(text)


# ---------------------------------------------------------------- decoding (input is untrusted)
# Every field is checked; error messages are only formatted when a check fails (loading stays cheap).

def _expect(cond: bool, message: str) -> None:
    if not cond:
        raise FormatError(message)


def _shape(data: Any, where: str) -> tuple | None:
    if data is None:
        return None
    if type(data) is list:
        for d in data:
            if not (type(d) is int and d >= 0 or d is None):
                break
        else:
            return tuple(data)
    raise FormatError(f"{where}: invalid shape {str(data)[:60]}")


def _str(data: Any, where: str, optional: bool = False) -> str | None:
    if type(data) is str or (optional and data is None):
        return data
    raise FormatError(f"{where}: expected a string, got {type(data).__name__}")


def _decode_spec(data: Any, where: str) -> ValueSpec:
    _expect(isinstance(data, dict), f"{where}: spec must be an object")
    spec = ValueSpec(name=_str(data.get("name"), where), type=_str(data.get("type"), where),
                     dtype=_str(data.get("dtype"), where, optional=True), shape=_shape(data.get("shape"), where))
    _expect(spec.dtype is None or spec.dtype in SUPPORTED_NUMPY,
            f"{where}: spec {spec.name!r} has the dtype {str(spec.dtype)[:40]!r}, not one ptlite runs")
    if "default" in data:
        spec.default, spec.has_default = decode_constant(data["default"]), True
    return spec


_NO_ATTRS: dict[str, Any] = {}  # shared defaults, never modified (Node copies what it is given)
_NO_BLOCKS: list[Any] = []


class GraphDecoder:
    """Rebuilds one method's values, nodes and blocks from its JSON, checking every field and reference.

    Loading time is mostly spent here, so the checks are written inline and error messages are made only when a
    check fails."""

    def __init__(self, data: dict[str, Any], where: str) -> None:
        self.where = where
        raw = data.get("values")
        _expect(type(raw) is list, f"{where}: 'values' must be a list")
        value = self.value
        self.values = [value(entry, i) for i, entry in enumerate(raw)]

    def value(self, entry: Any, i: int) -> Value:
        if type(entry) is not dict:
            raise FormatError(f"{self.where}: value {i} must be an object")
        name, vtype, dtype, shape = entry.get("name", ""), entry.get("type"), entry.get("dtype"), entry.get("shape")
        if type(name) is not str or type(vtype) is not str or not (dtype is None or type(dtype) is str):
            raise FormatError(f"{self.where}: value {i} has a name, type or dtype that is not a string")
        return Value(name, vtype, dtype, None if shape is None else _shape(shape, f"{self.where} value {i}"))

    def refs(self, data: Any) -> list[Value]:
        if type(data) is not list:
            raise FormatError(f"{self.where}: value references must be a list")
        values, refs = self.values, []
        append = refs.append
        try:
            for i in data:
                if type(i) is not int or i < 0:
                    raise IndexError
                append(values[i])
        except IndexError:
            bad = next(i for i in data if type(i) is not int or not 0 <= i < len(values))
            raise FormatError(f"{self.where}: value reference {bad!r} out of range") from None
        return refs

    def node(self, data: Any, depth: int) -> Node:
        if type(data) is not dict:
            raise FormatError(f"{self.where}: node must be an object")
        op, source = data.get("op"), data.get("src", "")
        if type(op) is not str or type(source) is not str:
            raise FormatError(f"{self.where}: a node's op and src must be strings")
        attrs = data.get("attrs", _NO_ATTRS)
        if type(attrs) is not dict:
            raise FormatError(f"{self.where}: {op} attrs must be an object")
        if attrs:
            if "value" in attrs:
                attrs = {**attrs, "value": decode_constant(attrs["value"])}
            if "weight" in attrs:
                _str(attrs["weight"], self.where)
        blocks = data.get("blocks", _NO_BLOCKS)
        if type(blocks) is not list:
            raise FormatError(f"{self.where}: {op} blocks must be a list")
        if blocks:
            blocks = [self.block(b, depth + 1) for b in blocks]
        return Node(op, self.refs(data.get("in")), self.refs(data.get("out")), attrs, blocks, source)

    def block(self, data: Any, depth: int = 0) -> Block:
        _expect(depth < 64, f"{self.where}: blocks nested more than 64 deep")
        _expect(type(data) is dict, f"{self.where}: block must be an object")
        nodes = data.get("nodes")
        _expect(type(nodes) is list, f"{self.where}: block 'nodes' must be a list")
        node = self.node
        return Block(self.refs(data.get("in")), [node(n, depth) for n in nodes], self.refs(data.get("out")))


def decode_graph(data: Any, where: str) -> Graph:
    """A method's Graph from its JSON (untrusted: raises FormatError naming the first problem found)."""
    _expect(isinstance(data, dict), f"{where}: method must be an object")
    decoder = GraphDecoder(data, where)
    body = decoder.block(data.get("body"))
    graph = Graph(_str(data.get("name"), where), body.inputs, body.nodes, body.outputs)
    specs_in, specs_out = data.get("input_specs", []), data.get("output_specs", [])
    _expect(isinstance(specs_in, list) and isinstance(specs_out, list), f"{where}: specs must be lists")
    graph.input_specs = [_decode_spec(s, where) for s in specs_in]
    graph.output_specs = [_decode_spec(s, where) for s in specs_out]
    return graph
