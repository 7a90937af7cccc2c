"""torch.export front end: an ExportedProgram's ATen graph translated into the IR.

Parameters, buffers and lifted constants become weights; every call's arguments are normalised against the
operator's schema so that IR nodes carry all arguments positionally; the output pytree (tuples, lists, dicts)
is rebuilt with prim:: construct nodes.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.utils import _pytree as pytree

from ptlite.errors import CaptureError
from ptlite.ir.graph import Graph, Node, Program, Value, ValueSpec

from .common import MethodFailure, WeightStore, dtype_name, python_constant, user_line

# Python-level callables that appear in exported graphs with dynamic shapes, as IR operators.
_PYTHON_OPS = {
    operator.add: "aten::add.int", operator.sub: "aten::sub.int", operator.mul: "aten::mul.int",
    operator.floordiv: "aten::floordiv.int", operator.mod: "aten::remainder.int",
    operator.eq: "aten::eq.int", operator.ne: "aten::ne.int", operator.lt: "aten::lt.int",
    operator.le: "aten::le.int", operator.gt: "aten::gt.int", operator.ge: "aten::ge.int",
}


# Checks torch.export inserts to validate its own tracing assumptions; they compute nothing, so they are dropped.
_TRACING_ASSERTIONS = {"aten::_assert_tensor_metadata", "aten::_assert_async", "aten::_assert_async.msg",
                       "aten::_assert_scalar", "aten::sym_constrain_range", "aten::sym_constrain_range_for_size",
                       "aten::_functional_assert_async.msg"}


def _children(spec: pytree.TreeSpec) -> list[pytree.TreeSpec]:
    """A tree spec's children: `children()` where torch has it (`children_specs` is deprecated there)."""
    children = getattr(type(spec), "children", None)
    return list(spec.children()) if callable(children) else list(spec.children_specs)


def export_failure(exc: BaseException) -> MethodFailure:
    """torch.export's exception as one line: what went wrong, at which line of the user's model."""
    text = str(exc).strip()
    first = text.splitlines()[0].strip() if text else ""
    where = user_line(exc)
    at = f" at {where}" if where else ""
    if type(exc).__name__ == "GuardOnDataDependentSymNode" or "data-dependent" in first:
        reason = (f"the model branches on, or sizes a tensor by, a tensor's value{at} ({type(exc).__name__}); "
                  f"torch.export needs torch.cond for a branch")
    else:
        reason = f"{type(exc).__name__}: {first}{at}"
    return MethodFailure(f"torch.export could not capture the model: {reason}", reason=reason)


def op_key(target: Any) -> str:
    """'aten::add.Tensor' for torch.ops.aten.add.Tensor; the 'default' overload has no suffix."""
    schema = target._schema
    return f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name


def _meta(node: torch.fx.Node) -> tuple[str, str | None, tuple | None]:
    val = node.meta.get("val")
    if isinstance(val, torch.Tensor):
        shape = tuple(int(d) if isinstance(d, int) or d.node.is_constant() else None for d in val.shape)
        return "Tensor", dtype_name(val.dtype), shape
    if isinstance(val, (list, tuple)) and val and all(isinstance(v, torch.Tensor) for v in val):
        return "List[Tensor]", None, None
    if isinstance(val, (int, torch.SymInt)):
        return "int", None, None
    if isinstance(val, (float, torch.SymFloat)):
        return "float", None, None
    if isinstance(val, (bool, torch.SymBool)):
        return "bool", None, None
    return "Any", None, None


def _source(node: torch.fx.Node) -> str:
    stack = node.meta.get("nn_module_stack")
    where = ""
    if stack:
        path, kind = list(stack.values())[-1]
        path = path.replace("L['self'].", "").replace("L__self__.", "")
        kind = kind.__name__ if isinstance(kind, type) else str(kind).rsplit(".", 1)[-1].rstrip("'>")
        where = f"{path} ({kind})" if path else kind
    trace = node.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in trace.strip().splitlines() if ln.strip().startswith("File ")]
    if lines:
        loc = lines[-1].replace('File "', "").replace('", line ', ":").split(",")[0]
        return f"{where} at {loc}" if where else loc
    return where


class _Translator:
    def __init__(self, ep: ExportedProgram, program: Program) -> None:
        self.ep = ep
        self.program = program
        self.weights = WeightStore(program)
        self.nodes: list[Node] = []
        self.env: dict[str, Any] = {}  # fx node name -> Value or tuple of Values
        self.unsupported: list[tuple[str, str]] = []

    def constant(self, value: Any, type_name: str) -> Value:
        v = Value(type=type_name)
        if isinstance(value, torch.Tensor):
            v.type, v.dtype, v.shape = "Tensor", dtype_name(value.dtype), tuple(value.shape)
            self.nodes.append(Node("prim::Constant", [], [v], {"weight": self.weights.add(value, "constant")}))
        else:
            self.nodes.append(Node("prim::Constant", [], [v], {"value": python_constant(value)}))
        return v

    def arg(self, value: Any, type_name: str) -> Value:
        """An IR value for one argument: fx nodes map to their values, lists of them to a ListConstruct."""
        if isinstance(value, torch.fx.Node):
            got = self.env[value.name]
            if isinstance(got, tuple):
                raise CaptureError(f"{value.name} has several outputs and is used whole")
            return got
        if isinstance(value, (list, tuple)) and any(isinstance(x, torch.fx.Node) for x in value):
            elem = "Tensor" if "Tensor" in type_name else "int"
            items = [self.arg(x, elem) for x in value]
            out = Value(type=type_name.replace("?", ""))
            self.nodes.append(Node("prim::ListConstruct", items, [out]))
            return out
        if isinstance(value, (list, tuple)):
            value = list(value)
        return self.constant(value, type_name)

    def call(self, node: torch.fx.Node) -> None:
        target = node.target
        if target is operator.getitem:
            base, index = node.args
            got = self.env[base.name]
            if isinstance(got, tuple):
                self.env[node.name] = got[index]
                return
            out = self._define(node)
            self.nodes.append(Node("aten::__getitem__.t", [got, self.constant(index, "int")], [out],
                                   source=_source(node)))
            return
        if target in _PYTHON_OPS:
            out = self._define(node)
            ins = [self.arg(a, "int") for a in node.args]
            self.nodes.append(Node(_PYTHON_OPS[target], ins, [out], source=_source(node)))
            return
        if not isinstance(target, torch._ops.OpOverload):
            self.unsupported.append((str(target), f"{_source(node)}: Python call in the exported graph"))
            self.env[node.name] = self._define(node)
            return
        if op_key(target) in _TRACING_ASSERTIONS:
            self.env[node.name] = None
            return
        schema = target._schema
        inputs = []
        for i, formal in enumerate(schema.arguments):
            if i < len(node.args) and not formal.kwarg_only:
                actual = node.args[i]
            elif formal.name in node.kwargs:
                actual = node.kwargs[formal.name]
            elif formal.default_value is not None or formal.has_default_value():
                actual = formal.default_value
            else:
                raise CaptureError(f"{op_key(target)} at {_source(node)}: argument '{formal.name}' is missing")
            inputs.append(self.arg(actual, str(formal.type)))
        if len(schema.returns) > 1:
            outs = tuple(Value(type=str(r.type)) for r in schema.returns)
            vals = node.meta.get("val")
            if isinstance(vals, (list, tuple)):
                for v, val in zip(outs, vals):
                    if isinstance(val, torch.Tensor):
                        v.dtype, v.shape = dtype_name(val.dtype), tuple(
                            d if isinstance(d, int) else None for d in val.shape)
            self.env[node.name] = outs
            self.nodes.append(Node(op_key(target), inputs, list(outs), source=_source(node)))
        else:
            out = self._define(node)
            self.nodes.append(Node(op_key(target), inputs, [out] if schema.returns else [],
                                   source=_source(node)))

    def _define(self, node: torch.fx.Node) -> Value:
        ty, dtype, shape = _meta(node)
        v = Value(name=node.name, type=ty, dtype=dtype, shape=shape)
        self.env[node.name] = v
        return v

    def rebuild(self, spec: pytree.TreeSpec, leaves: list[Value]) -> Value:
        """The output structure as construct nodes over the flat output values."""
        if spec.is_leaf():
            return leaves.pop(0)
        children = [self.rebuild(c, leaves) for c in _children(spec)]
        if spec.type is dict or spec.type.__name__ == "OrderedDict":
            keys = [self.constant(k, "str") for k in spec.context]
            pairs = [x for kv in zip(keys, children) for x in kv]
            out = Value(type="Dict(str, Tensor)")
            self.nodes.append(Node("prim::DictConstruct", pairs, [out]))
        elif spec.type is list:
            out = Value(type="List[Tensor]")
            self.nodes.append(Node("prim::ListConstruct", children, [out]))
        else:
            out = Value(type="Tuple")
            self.nodes.append(Node("prim::TupleConstruct", children, [out]))
        return out


def translate_exported(ep: ExportedProgram, input_names: list[str] | None = None) -> Program:
    """Translate an ExportedProgram's graph into a Program with one method, forward."""
    program = Program(metadata={"capture": "export"})
    tr = _Translator(ep, program)
    sig = ep.graph_signature
    state = {**ep.state_dict, **ep.constants}
    user_inputs: list[Value] = []
    input_specs: list[ValueSpec] = []
    lifted = {spec.arg.name: spec.target for spec in sig.input_specs if spec.target is not None}
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            if node.name in lifted:
                if not node.users:  # e.g. batch norm's num_batches_tracked: never read at inference
                    continue
                tensor = state[lifted[node.name]]
                v = Value(name=node.name, type="Tensor", dtype=dtype_name(tensor.dtype), shape=tuple(tensor.shape))
                if isinstance(tensor, torch.Tensor):
                    tr.nodes.append(Node("prim::Constant", [], [v], {"weight": tr.weights.add(tensor,
                                                                                            lifted[node.name])}))
                else:
                    tr.nodes.append(Node("prim::Constant", [], [v], {"value": python_constant(tensor)}))
                tr.env[node.name] = v
            else:
                v = tr._define(node)
                name = node.name
                if input_names and len(user_inputs) < len(input_names):
                    name = input_names[len(user_inputs)]
                v.name = name
                user_inputs.append(v)
                input_specs.append(ValueSpec(name=name, type=v.type, dtype=v.dtype, shape=v.shape))
        elif node.op == "call_function":
            tr.call(node)
        elif node.op == "output":
            flat = [a for a in node.args[0]]
            n_user = sum(1 for s in sig.output_specs if s.kind == torch.export.graph_signature.OutputKind.USER_OUTPUT)
            user_flat = [flat[i] for i, s in enumerate(sig.output_specs)
                         if s.kind == torch.export.graph_signature.OutputKind.USER_OUTPUT]
            assert len(user_flat) == n_user
            leaves = [tr.arg(a, "Tensor") if isinstance(a, torch.fx.Node) else tr.constant(a, "Any")
                      for a in user_flat]
            out_spec = ep.call_spec.out_spec
            result = tr.rebuild(out_spec, list(leaves)) if out_spec is not None else leaves[0]
            graph = Graph("forward", user_inputs, tr.nodes, [result])
            graph.input_specs = input_specs
            graph.output_specs = _output_specs(out_spec, leaves, result)
            program.methods["forward"] = graph
        else:
            raise CaptureError(f"unexpected node kind {node.op} in the exported graph")
    if tr.unsupported:
        lines = "\n".join(f"  {op}: {why}" for op, why in tr.unsupported)
        raise CaptureError(f"cannot capture the model (export):\n{lines}")
    return program


def _output_specs(spec: Any, leaves: list[Value], result: Value) -> list[ValueSpec]:
    if spec is None or spec.is_leaf():
        return [ValueSpec("output", result.type, result.dtype, result.shape)]
    if spec.type is dict or spec.type.__name__ == "OrderedDict":
        return [ValueSpec(str(k), v.type, v.dtype, v.shape) for k, v in zip(spec.context, leaves)]
    return [ValueSpec(f"output{i}", v.type, v.dtype, v.shape) for i, v in enumerate(leaves)]
