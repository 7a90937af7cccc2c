"""TorchScript front end: a scripted or traced module, frozen and inlined, translated node by node into the IR."""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from collections.abc import Iterator
from typing import Any

import torch

from ptlite.errors import CaptureError
from ptlite.ir.dtypes import normalize_dtype_name
from ptlite.ir.graph import Block, Graph, Node, Program, Value, ValueSpec
from ptlite.ir.types import check_type
from ptlite.ops import CREATE_OBJECT, GET_ATTR, ISINSTANCE, MODULE_STATE, SET_ATTR

from .common import WeightStore, module_path, python_constant, tensor_spec
from .torch_quantized import QuantizedGraph, summary

# TorchScript's scalar type names (TensorType.scalarType()) -> ptlite dtype names
_TS_DTYPES = {"Float": "float32", "Double": "float64", "Half": "float16", "Long": "int64", "Int": "int32",
              "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool", "BFloat16": "bfloat16"}

# isinstance() candidates as TorchScript prints them -> the IR's type strings that ptlite::isinstance checks
_RUNTIME_TYPES = {"list": "List[Any]", "dict": "Dict[Any, Any]"}

# Nodes that survive freezing only when the model does something ptlite cannot express.
_EXPLAIN = {
    "prim::GetAttr": "reads a module attribute that freezing could not turn into a constant (is it mutated?)",
    "prim::CallMethod": "calls a method that could not be inlined",
    "prim::CallFunction": "calls a function that could not be inlined",
}


@contextlib.contextmanager
def _forget_failed_types() -> Iterator[None]:
    """After a failed torch.jit.script, drop the module types it half built: scripting the same class again would
    otherwise fail with "Can't redefine method: forward on class ...", hiding the real error."""
    store = getattr(getattr(torch.jit, "_recursive", None), "concrete_type_store", None)
    known = getattr(store, "type_store", None)
    before = {cls: list(types) for cls, types in known.items()} if isinstance(known, dict) else None
    try:
        yield
    except Exception:
        if before is not None:
            for cls in list(known):
                if cls in before:
                    known[cls][:] = before[cls]
                else:
                    del known[cls]
        raise


def script(model: torch.nn.Module) -> torch.jit.ScriptModule:
    """torch.jit.script without its deprecation notice; a failure leaves no half-compiled types behind."""
    with warnings.catch_warnings(), _forget_failed_types():
        warnings.filterwarnings("ignore", message=".*torch.jit.script.*deprecated", category=FutureWarning)
        return torch.jit.script(model)


def _type_of(tv: torch._C.Value) -> tuple[str, str | None, tuple | None]:
    ty = tv.type()
    if isinstance(ty, torch._C.TensorType):
        st = ty.scalarType()
        return "Tensor", (_TS_DTYPES.get(st, normalize_dtype_name(st)) if st else None), None
    return str(ty), None, None


def _op_key(tn: torch._C.Node) -> str:
    schema = tn.schema()
    if schema == "(no schema)":
        return tn.kind()
    return schema.split("(", 1)[0]


_OWN_DIR = os.path.dirname(os.path.abspath(__file__))  # frames of ptlite's capture code are not the user's
_TRACE_FRAME = re.compile(r"^(.*)\((\d+)\): \S+$")


def _code_location(source_range: str) -> str:
    """'file:line' of a node: TorchScript's 'File "f", line n' header, or, for traced nodes, the first frame of
    the recorded Python stack that lies outside torch itself (the user's code)."""
    lines = [ln.strip() for ln in source_range.strip().splitlines() if ln.strip()]
    if not lines:
        return ""
    if lines[0].startswith("File "):
        return lines[0].replace('File "', "").replace('", line ', ":")
    frames = [m.groups() for m in map(_TRACE_FRAME.match, lines) if m]
    user = [f for f in frames if f"{os.sep}torch{os.sep}" not in f[0] and not f[0].startswith(_OWN_DIR)]
    chosen = (user or frames or [("", "")])[0]
    return f"{chosen[0]}:{chosen[1]}" if chosen[0] else ""


def _source(tn: torch._C.Node) -> str:
    where = module_path(tn.getModuleHierarchy()) if tn.getModuleHierarchy() else ""
    if not where and tn.scopeName():
        where = tn.scopeName().split("/")[-1].replace("__module.", "")
    line = _code_location(tn.sourceRange())
    if where and line:
        return f"{where} at {line}"
    return where or line


class _Translator:
    def __init__(self, program: Program, weights: WeightStore) -> None:
        self.program = program
        self.weights = weights
        self.values: dict[int, Value] = {}
        self.objects: dict[int, Any] = {}  # module-typed TorchScript values, resolved at capture time
        self.paths: dict[int, str] = {}  # their attribute paths from the root module ("" for the root)
        self.state: set[str] = set()  # paths of module attributes the method sets: module state (_state_paths)
        self.state_value: Value | None = None  # the method's ptlite::module_state value, made when first needed
        self.unsupported: list[tuple[str, str]] = []
        self.quantized = QuantizedGraph(lambda array, hint: weights.add(torch.from_numpy(array), hint))

    def define(self, tv: torch._C.Value) -> Value:
        ty, dtype, shape = _type_of(tv)
        v = Value(name=tv.debugName(), type=ty, dtype=dtype, shape=shape)
        self.values[tv.unique()] = v
        return v

    def use(self, tv: torch._C.Value) -> Value:
        try:
            return self.values[tv.unique()]
        except KeyError:
            if tv.unique() in self.objects:
                raise CaptureError(f"the model passes the module object %{tv.debugName()} around at run time; "
                                   "ptlite needs calls on submodules to be inlined") from None
            raise CaptureError(f"TorchScript value %{tv.debugName()} is used before it is defined") from None

    def get_attr(self, tn: torch._C.Node) -> list[Node]:
        """Read an attribute of a (frozen) module object now: freezing leaves some, e.g. in unrolled loops."""
        owner = self.objects[tn.input().unique()]
        name = tn.s("name")
        value = owner.getattr(name)
        out = tn.output()
        path = _join(self.paths[tn.input().unique()], name)
        if isinstance(value, torch._C.ScriptModule):
            self.objects[out.unique()] = value
            self.paths[out.unique()] = path
            return []
        if path in self.state:  # an attribute the model sets while running: read from the module's state
            initial = Value(name=f"{out.debugName()}.initial", type=str(out.type()))
            nodes = self.constant_nodes(value, initial, path, tn)
            read = Node(GET_ATTR, [self.module_state(), self.string(nodes, path), initial], [self.define(out)],
                        source=_source(tn))
            return [*nodes, read]
        if self.quantized.constant(out, value, _source(tn)):  # a quantized layer's packed weights
            self.define(out)
            return []
        return self.constant_nodes(value, self.define(out), out.debugName(), tn)

    def module_state(self) -> Value:
        """The method's ptlite::module_state value (its node is put first in the method when translated)."""
        if self.state_value is None:
            self.state_value = Value(name="module_state", type="Any")
        return self.state_value

    @staticmethod
    def string(nodes: list[Node], text: str) -> Value:
        """A str constant, its node appended to `nodes`."""
        v = Value(type="str")
        nodes.append(Node("prim::Constant", [], [v], {"value": text}))
        return v

    def set_attr(self, tn: torch._C.Node) -> list[Node]:
        """prim::SetAttr: on a module, of an attribute of its state; on an object the model created, of it."""
        target, value = tn.inputs()
        name, nodes = tn.s("name"), []
        if target.unique() in self.objects:
            path = _join(self.paths[target.unique()], name)
            if value.unique() in self.objects:
                self.unsupported.append(("prim::SetAttr", f"{_source(tn)}: the model sets {path} to a module, "
                                                          "which ptlite resolves at capture and cannot change"))
                return []
            write = Node(SET_ATTR, [self.module_state(), self.string(nodes, path), self.use(value)], [],
                         source=_source(tn))
        else:
            write = Node(SET_ATTR, [self.use(target), self.string(nodes, name), self.use(value)], [],
                         source=_source(tn))
        return [*nodes, write]

    def object_attr(self, tn: torch._C.Node) -> list[Node]:
        """prim::GetAttr on an object the model created while running (not a module)."""
        nodes: list[Node] = []
        missing = Value(type="NoneType")
        nodes.append(Node("prim::Constant", [], [missing], {"value": None}))
        read = Node(GET_ATTR, [self.use(tn.input()), self.string(nodes, tn.s("name")), missing],
                    [self.define(tn.output())], source=_source(tn))
        return [*nodes, read]

    def create_object(self, tn: torch._C.Node) -> list[Node]:
        nodes: list[Node] = []
        ty = tn.output().type()
        name = ty.qualified_name() if hasattr(ty, "qualified_name") else str(ty)
        create = Node(CREATE_OBJECT, [self.string(nodes, name.removeprefix("__torch__."))],
                      [self.define(tn.output())], source=_source(tn))
        return [*nodes, create]

    def isinstance_(self, tn: torch._C.Node) -> list[Node]:
        """prim::isinstance: decided now from the value's static type, or, for an Optional, Union or Any value, at
        run time (ptlite::isinstance) where ptlite can check the types."""
        ty, candidates = tn.input().type(), tn.tys("types")
        if not isinstance(ty, (torch._C.UnionType, torch._C.OptionalType, torch._C.AnyType)):
            value = any(ty.isSubtypeOf(c) for c in candidates)
            return [Node("prim::Constant", [], [self.define(tn.output())], {"value": value})]
        names = [_RUNTIME_TYPES.get(str(c), str(c)) for c in candidates]
        try:
            for name in names:
                check_type(name)
        except ValueError:
            self.unsupported.append(("prim::isinstance", f"{_source(tn)}: isinstance() of a value of type {ty} "
                                                         f"against {', '.join(map(str, candidates))}, which ptlite "
                                                         "cannot check at run time"))
            return [Node(tn.kind(), [self.use(tn.input())], [self.define(tn.output())], source=_source(tn))]
        nodes: list[Node] = []
        types = Value(type="List[str]")
        nodes.append(Node("prim::Constant", [], [types], {"value": names}))
        check = Node(ISINSTANCE, [self.use(tn.input()), types], [self.define(tn.output())], source=_source(tn))
        return [*nodes, check]

    def block(self, tb: Any, params: list[Value] | None = None) -> Block:
        inputs = params if params is not None else [self.define(i) for i in tb.inputs()]
        nodes: list[Node] = []
        for tn in tb.nodes():
            nodes.extend(self.node(tn))
        return Block(inputs, nodes, [self.use(o) for o in tb.outputs()])

    def constant_nodes(self, value: Any, v: Value, hint: str, where: torch._C.Node) -> list[Node]:
        """Nodes defining v as `value`: a weight for a tensor, a construct node over weights for a list or
        tuple holding tensors (e.g. an LSTM's flat weights), a plain constant otherwise."""
        if isinstance(value, torch.Tensor):
            v.type, v.dtype, v.shape = "Tensor", normalize_dtype_name(str(value.dtype)), tuple(value.shape)
            return [Node("prim::Constant", [], [v], {"weight": self.weights.add(value, hint)})]
        if isinstance(value, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in value):
            nodes, items = [], []
            for i, x in enumerate(value):
                item = Value(type="Tensor" if isinstance(x, torch.Tensor) else "Any")
                nodes.extend(self.constant_nodes(x, item, f"{hint}.{i}", where))
                items.append(item)
            op = "prim::ListConstruct" if isinstance(value, list) else "prim::TupleConstruct"
            return [*nodes, Node(op, items, [v])]
        script_class = torch.jit._state._get_script_class(type(value))
        if script_class is not None:  # an object of a TorchScript class (made by running the model before capture)
            nodes: list[Node] = []
            create = Node(CREATE_OBJECT, [self.string(nodes, script_class.qualified_name().removeprefix(
                "__torch__."))], [v])
            nodes.append(create)
            for name, item in vars(value).items():
                attr = Value(type="Any")
                nodes.extend(self.constant_nodes(item, attr, f"{hint}.{name}", where))
                write = Node(SET_ATTR, [v, self.string(nodes, name), attr], [])
                nodes.append(write)
            return nodes
        value = python_constant(value)
        if isinstance(value, (torch._C.ScriptObject, torch._C.ScriptFunction)) or callable(value):
            self.unsupported.append(("prim::Constant", f"{_source(where)}: constant of type {type(value).__name__}"))
        return [Node("prim::Constant", [], [v], {"value": value})]

    def constant(self, tn: torch._C.Node) -> list[Node]:
        out = tn.output()
        value = out.toIValue() if tn.hasAttribute("value") else None
        if self.quantized.constant(out, value, _source(tn)):  # a quantized layer's packed weights
            self.define(out)
            return []
        return self.constant_nodes(value, self.define(out), out.debugName().removeprefix("self."), tn)

    def node(self, tn: torch._C.Node) -> list[Node]:
        kind = tn.kind()
        if kind == "prim::Constant":
            return self.constant(tn)
        if kind == "prim::GetAttr" and tn.input().unique() in self.objects:
            return self.get_attr(tn)
        if kind == "prim::GetAttr" and isinstance(tn.input().type(), torch._C.ClassType):
            return self.object_attr(tn)
        if kind == "prim::SetAttr":
            return self.set_attr(tn)
        if kind == "prim::CreateObject":
            return self.create_object(tn)
        if kind == "prim::isinstance":
            return self.isinstance_(tn)
        inputs = [self.use(i) for i in tn.inputs()]
        if kind == "prim::If":
            blocks = [self.block(b) for b in tn.blocks()]
            node = Node(kind, inputs, [self.define(o) for o in tn.outputs()], blocks=blocks, source=_source(tn))
            self.quantized.control_flow(node)
            return [node]
        if kind == "prim::Loop":
            (body,) = tn.blocks()
            block = self.block(body)
            node = Node(kind, inputs, [self.define(o) for o in tn.outputs()], blocks=[block], source=_source(tn))
            self.quantized.control_flow(node)
            return [node]
        outputs = [self.define(o) for o in tn.outputs()]
        translated = self.quantized.translate(kind, _op_key(tn), tn, inputs, outputs, _source(tn))
        if translated is not None:  # a quantized model's operator, or one reading a quantized tensor
            return translated
        if kind in _EXPLAIN:
            self.unsupported.append((kind, f"{_source(tn)}: the model {_EXPLAIN[kind]}"))
        return [Node(_op_key(tn), inputs, outputs, source=_source(tn))]


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _state_paths(graph: torch._C.Graph, root: torch._C.ScriptModule) -> set[str]:
    """Attribute paths ("rpn.anchor_generator.cell_anchors") of the module attributes the method sets
    (prim::SetAttr): freezing leaves them attributes, and ptlite keeps them as the loaded module's state."""
    modules = {next(graph.inputs()).unique(): (root, "")}
    found: set[str] = set()

    def walk(block: Any) -> None:
        for tn in block.nodes():
            target = next(tn.inputs(), None)
            owner = modules.get(target.unique()) if target is not None else None
            if owner is not None and tn.kind() == "prim::GetAttr":
                value = owner[0].getattr(tn.s("name"))
                if isinstance(value, torch._C.ScriptModule):
                    modules[tn.output().unique()] = (value, _join(owner[1], tn.s("name")))
            elif owner is not None and tn.kind() == "prim::SetAttr":
                found.add(_join(owner[1], tn.s("name")))
            for inner in tn.blocks():
                walk(inner)
    walk(graph)
    return found


def _prepare_graph(frozen: torch._C.ScriptModule, name: str) -> torch._C.Graph:
    graph = frozen._get_method(name).graph
    torch._C._jit_pass_inline(graph)
    torch._C._jit_pass_remove_mutation(graph)
    torch._C._jit_pass_dce(graph)
    return graph


def _method_specs(sm: torch.jit.ScriptModule, name: str, graph: Graph, example_inputs: tuple | None
                  ) -> list[ValueSpec]:
    schema = getattr(sm, name).schema
    args = list(schema.arguments)
    if args and isinstance(args[0].type, torch._C.ClassType):  # the module itself, whatever it is called
        args = args[1:]
    specs = []
    for i, (arg, value) in enumerate(zip(args, graph.inputs)):
        example = example_inputs[i] if example_inputs is not None and i < len(example_inputs) else None
        if value.type == "Tensor":
            spec = tensor_spec(arg.name, example, static_shape=False)
        else:
            spec = ValueSpec(name=arg.name, type=value.type)
        if arg.has_default_value():
            spec.default, spec.has_default = python_constant(arg.default_value), True
        value.name = arg.name
        specs.append(spec)
    return specs


def _output_specs(graph: Graph, example_outputs: Any) -> list[ValueSpec]:
    specs = []
    for i, v in enumerate(graph.outputs):
        spec = ValueSpec(name=f"output{i}" if len(graph.outputs) > 1 else "output", type=v.type)
        if isinstance(example_outputs, torch.Tensor) and v.type == "Tensor":
            # a quantized result is returned dequantized (QuantizedGraph.outputs)
            spec.dtype = "float32" if example_outputs.is_quantized else normalize_dtype_name(str(example_outputs.dtype))
            spec.shape = tuple(None for _ in example_outputs.shape)
        specs.append(spec)
    return specs


def translate_script_module(sm: torch.jit.ScriptModule, example_inputs: tuple | None = None,
                            preserved_methods: tuple[str, ...] = (), how: str = "script",
                            example_outputs: Any = None) -> Program:
    """Freeze a ScriptModule (weights become constants, calls are inlined) and translate its methods."""
    sm = sm.eval() if hasattr(sm, "eval") else sm
    methods = ["forward", *[m for m in preserved_methods if m != "forward"]]
    for m in methods:
        if not hasattr(sm, m):
            raise CaptureError(f"the model has no method '{m}' to capture")
    try:
        frozen = torch._C._freeze_module(sm._c, list(methods[1:]), True, False)
    except RuntimeError as exc:
        raise CaptureError(f"TorchScript could not freeze the model ({how}): {str(exc).splitlines()[0]}") from exc
    program = Program(metadata={"capture": how})
    weights = WeightStore(program)
    unsupported: list[tuple[str, str]] = []
    graphs = {name: _prepare_graph(frozen, name) for name in methods}
    state = set().union(*(_state_paths(tgraph, frozen) for tgraph in graphs.values()))  # shared by the methods
    for name, tgraph in graphs.items():
        tr = _Translator(program, weights)
        tinputs = list(tgraph.inputs())
        tr.objects[tinputs[0].unique()] = frozen
        tr.paths[tinputs[0].unique()] = ""
        tr.state = state
        params = [tr.define(i) for i in tinputs[1:]]
        body = tr.block(tgraph, params=params)
        if tr.state_value is not None:
            body.nodes.insert(0, Node(MODULE_STATE, [], [tr.state_value]))
        tail, results = tr.quantized.outputs(body.outputs)  # a quantized result is returned dequantized
        graph = Graph(name, body.inputs, body.nodes + tail, results)
        graph.input_specs = _method_specs(sm, name, graph, example_inputs if name == "forward" else None)
        graph.output_specs = _output_specs(graph, example_outputs if name == "forward" else None)
        program.methods[name] = graph
        unsupported.extend(tr.unsupported)
        if name == "forward" and (tr.quantized.qparams or tr.quantized.found):
            program.metadata["quantization"] = summary(graph.walk())
    if unsupported:
        lines = "\n".join(f"  {op}: {why}" for op, why in unsupported)
        raise CaptureError(f"cannot capture the model ({how}):\n{lines}")
    return program
