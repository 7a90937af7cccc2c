"""The straight-line instructions of PyTorch Mobile bytecode and its operator calls, as IR nodes: the handlers
`op_<OPCODE>(frame, pc, X, N)` that `Translator` (translate.py, which owns the stack, registers and blocks) runs."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ptlite import ops
from ptlite.errors import FormatError, UnsupportedOperatorError
from ptlite.ir.graph import Block, Node, Value
from ptlite.ir.types import check_type
from ptlite.ops import GET_ATTR, ISINSTANCE, SET_ATTR

from . import upgraders
from .bytecode import Operator
from .quantized import quantized_call, reads_quantized
from .state import StateChanged, StateSlot, widen
from .types import bind_type_variables, from_schema, list_element, parse_type, split_args, tuple_elements, type_of
from .unpickler import ScriptObject
from .values import CLEARED, Const, Frame, Static, entry_type, is_immutable, is_subtype, known_identity

_TENSOR_PREDICATES = {"DIM": "aten::dim", "DTYPE": "prim::dtype", "DEVICE": "prim::device", "IS_CUDA": "prim::is_cuda",
                      "NUM_TO_TENSOR": "prim::NumToTensor.Scalar"}
_DICT_INDEX = {"str": "aten::__getitem__.Dict_str", "int": "aten::__getitem__.Dict_int",
               "bool": "aten::__getitem__.Dict_bool", "float": "aten::__getitem__.Dict_float"}
_FIXED_LIST = re.compile(r"(?:int|SymInt|float|bool)\[(\d+)\]")


# A schema's scalar argument types -> the scalar types an argument of it may have (an int constant may stand for a
# float: TorchScript writes `2` for 2.0 in some constants tables; never the other way, and a bool is neither).
_SCALAR_ACCEPTS = {"int": {"int"}, "SymInt": {"int"}, "float": {"float", "int"}, "bool": {"bool"}}
_SCALAR_TYPES = {"int", "float", "bool"}

MAX_ATTRIBUTE_PATH = 4096  # characters of a dotted attribute path; real models use well under 200


def join_path(base: str, name: str) -> str:
    """base.name, refused past MAX_ATTRIBUTE_PATH characters: each path is a string of its own, so a file nesting
    thousands of modules with long (pickle-memoized, so cheap) names would otherwise build gigabytes of them."""
    if len(base) + len(name) + 1 > MAX_ATTRIBUTE_PATH:
        raise FormatError(f"an attribute path ({(base + '.' + name)[:80]}...) is longer than {MAX_ATTRIBUTE_PATH} "
                          "characters: the module nests too deeply or its names are too long; the file is crafted")
    return f"{base}.{name}" if base else name

class Instructions:
    """Instruction and operator handlers, mixed into Translator, whose stack and register helpers (pop, read,
    write), value helpers (materialize, python_entry, known_bool, module_state), state attributes (state_slots)
    and failure reporting (fail) they use."""

    # ------------------------------------------------------------------------------------------- instructions

    def instruction(self, frame: Frame, pc: int, op: str, x: int, n: int) -> None:
        handler = getattr(self, "op_" + op.strip("_"), None)
        if handler is None:
            self.fail(frame, pc, f"instruction {op} is not supported", unsupported=True)
        handler(frame, pc, x, n)

    def op_LOAD(self, frame: Frame, pc: int, x: int, n: int) -> None:
        frame.stack.append(self.read(frame, x, pc))

    def op_MOVE(self, frame: Frame, pc: int, x: int, n: int) -> None:
        frame.stack.append(self.read(frame, x, pc))
        self.write(frame, x, CLEARED, pc)

    def op_STORE(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.write(frame, x, self.pop(frame, pc), pc)

    def op_STOREN(self, frame: Frame, pc: int, x: int, n: int) -> None:
        for i, entry in enumerate(self.pop_n(frame, n, pc)):
            self.write(frame, x + i, entry, pc)

    def op_DROP(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.pop(frame, pc)

    def op_DROPR(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.write(frame, x, CLEARED, pc)

    def op_LOADC(self, frame: Frame, pc: int, x: int, n: int) -> None:
        constants = frame.fn.constants
        if not 0 <= x < len(constants):
            self.fail(frame, pc, f"constant {x} outside the table of {len(constants)}")
        hint = f"{frame.fn.qualname.removeprefix('__torch__.')}.constant{x}"
        frame.stack.append(self.python_entry(constants[x], hint, frame.fn, pc))

    def op_OP(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.operator_call(frame, pc, self.operator(frame, pc, x), None)

    def op_OPN(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.operator_call(frame, pc, self.operator(frame, pc, x), n)

    def operator(self, frame: Frame, pc: int, x: int) -> Operator:
        if not 0 <= x < len(frame.fn.operators):
            self.fail(frame, pc, f"operator {x} outside the table of {len(frame.fn.operators)}")
        return frame.fn.operators[x]

    def op_GET_ATTR(self, frame: Frame, pc: int, x: int, n: int) -> None:
        target = self.attribute_owner(frame, pc, x, self.pop(frame, pc))
        slot = self.state_slots.get((id(target), x))
        if slot is not None:  # an attribute some method sets: read from the module's state
            initial = self.python_entry(slot.initial, slot.path, frame.fn, pc)
            self.push_node(frame, pc, GET_ATTR, [self.module_state(), Const(slot.path), initial],
                           slot.type)
            return
        entry = self.python_entry(target.slots[x], self.attribute_path(target, x), frame.fn, pc)
        if isinstance(entry, Value):  # a weight, or a list of them: remember whose, in case it is written in place
            self.origins.setdefault(entry.id, (target, x))
        elif isinstance(entry, Const) and entry.state:  # a list or dict of plain values
            self.container_origins.setdefault(id(entry.value), (target, x))
        frame.stack.append(entry)

    def op_SET_ATTR(self, frame: Frame, pc: int, x: int, n: int) -> None:
        value = self.pop(frame, pc)
        target = self.attribute_owner(frame, pc, x, self.pop(frame, pc))
        if isinstance(value, Static) or isinstance(target.slots[x], ScriptObject):
            self.fail(frame, pc, f"sets the attribute {self.attribute_path(target, x)} to a module object; ptlite "
                                 "resolves module objects while loading and cannot change them", unsupported=True)
        key = (id(target), x)
        slot = self.state_slots.get(key)
        current = slot.type if slot is not None else type_of(target.slots[x])
        wanted = widen(current, entry_type(value))
        if slot is None or wanted != slot.type:
            self.state_slots[key] = StateSlot(self.attribute_path(target, x), wanted, target.slots[x])
            raise StateChanged  # attributes read before this point must be read from the state: start again
        self.emit(frame, pc, SET_ATTR, [self.module_state(), Const(slot.path), value], [])

    def make_state(self, target: ScriptObject, x: int) -> None:
        """Mark an attribute changed in place (`self.acc.add_(x)`, `self.items.append(x)`) as module state."""
        key = (id(target), x)
        if key not in self.state_slots:
            initial = target.slots[x]
            self.state_slots[key] = StateSlot(self.attribute_path(target, x), type_of(initial), initial)
            raise StateChanged  # reads translated before this point must be read from the state: start again

    def check_writes(self, op: str, entries: list[Any], values: list[Value], outputs: list[Value]) -> None:
        """Make attributes that a node writes in place module state (a weight is read-only and shared, and a
        constant list belongs to the program), and let its results that alias an attribute's value say so."""
        opdef = ops.lookup(op)
        if opdef is None:
            return
        written, aliased = opdef.writes, opdef.result_sources
        if op.startswith("prim::"):  # unpacking and indexing: results may be (parts of) any input
            aliased = tuple(tuple(range(len(values))) for _ in outputs)
        for i in written:
            if i < len(values):
                entry = entries[i]
                origin = self.origins.get(values[i].id) or (
                    self.container_origins.get(id(entry.value)) if isinstance(entry, Const) and entry.state else None)
                if origin is not None:
                    self.make_state(*origin)
        for out, sources in zip(outputs, aliased):
            for i in sources:
                if i < len(values) and values[i].id in self.origins:
                    self.origins.setdefault(out.id, self.origins[values[i].id])

    def attribute_owner(self, frame: Frame, pc: int, x: int, obj: Any) -> ScriptObject:
        """The module object a GET_ATTR / SET_ATTR of slot x works on, checked."""
        if not isinstance(obj, Static):
            self.fail(frame, pc, "an attribute of a value computed at run time (an object created or chosen while "
                                 "running), which ptlite cannot translate", unsupported=True)
        target = obj.obj
        if target.state is not None and not isinstance(target.state, dict):
            self.fail(frame, pc, f"{target.qualname} restores its state with __setstate__, which ptlite does "
                                 "not run yet", unsupported=True)
        if not 0 <= x < len(target.slots):
            self.fail(frame, pc, f"attribute slot {x} outside the {len(target.slots)} slots of {target.qualname}")
        return target

    def attribute_path(self, target: ScriptObject, x: int) -> str:
        path = self.paths.get(id(target), target.qualname)
        return join_path(path, target.names[x])

    def op_CREATE_OBJECT(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.fail(frame, pc, "the model creates a TorchScript object while running; ptlite cannot translate this "
                             "(PyTorch does not save such models for the lite interpreter either)", unsupported=True)

    def op_CALL(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.fail(frame, pc, "CALL is only created by PyTorch's loader (for upgraders) and never stored in a file")

    def op_INTERFACE_CALL(self, frame: Frame, pc: int, x: int, n: int) -> None:
        constants = frame.fn.constants
        if not 0 <= x < len(constants) or not isinstance(constants[x], str):
            self.fail(frame, pc, f"constant {x} is not a method name")
        if n < 1:
            self.fail(frame, pc, "INTERFACE_CALL needs at least the object")
        args = self.pop_n(frame, n, pc)
        receiver = args[0]
        if not isinstance(receiver, Static):
            self.fail(frame, pc, "calls a method on an object only known at run time", unsupported=True)
        qualname = f"{receiver.obj.qualname}.{constants[x]}"
        callee = self.functions.get(qualname)
        if callee is None:
            self.fail(frame, pc, f"the file has no function {qualname}")
        frame.stack.append(self.call(callee, args))

    def emit(self, frame: Frame, pc: int, op: str, inputs: list[Any], out_types: list[str]) -> list[Value]:
        """Append a node to the current block; its output values."""
        outputs = [Value(type=t) for t in out_types]
        values = [self.materialize(e, frame.fn, pc) for e in inputs]
        if self.quantized.qparams and not self.quantized.follow(op, values, outputs, self.source(frame, pc)) \
                and any(v.id in self.quantized.qparams for v in values):
            self.fail(frame, pc, f"{op} on a quantized tensor, which ptlite cannot run in int8", unsupported=True)
        if self.origins or self.container_origins:
            self.check_writes(op, inputs, values, outputs)
        self.block.nodes.append(Node(op, values, outputs, source=self.source(frame, pc)))
        return outputs

    def push_node(self, frame: Frame, pc: int, op: str, inputs: list[Any], out_type: str) -> None:
        frame.stack.append(self.emit(frame, pc, op, inputs, [out_type])[0])

    def op_LIST_CONSTRUCT(self, frame: Frame, pc: int, x: int, n: int) -> None:
        items = self.pop_n(frame, n, pc)
        self.push_node(frame, pc, "prim::ListConstruct", items, self.annotation(frame, pc, x))

    def op_LIST_UNPACK(self, frame: Frame, pc: int, x: int, n: int) -> None:
        lst = self.pop(frame, pc)
        if isinstance(lst, Const) and isinstance(lst.value, list):
            if len(lst.value) != x:
                self.fail(frame, pc, f"unpacks {x} values from a constant list of {len(lst.value)}")
            frame.stack.extend(Const(v) for v in lst.value)
            return
        element = list_element(entry_type(lst)) or "Any"
        frame.stack.extend(self.emit(frame, pc, "prim::ListUnpack", [lst], [element] * x))

    def op_TUPLE_CONSTRUCT(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.tuple_construct(frame, pc, self.pop_n(frame, x, pc))

    def op_NAMED_TUPLE_CONSTRUCT(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.annotation(frame, pc, x)
        self.tuple_construct(frame, pc, self.pop_n(frame, n, pc))

    def tuple_construct(self, frame: Frame, pc: int, items: list[Any]) -> None:
        if all(isinstance(e, Const) and not e.uninitialized and is_immutable(e.value) for e in items):
            frame.stack.append(Const(tuple(e.value for e in items)))
            return
        out_type = f"Tuple[{', '.join(entry_type(e) for e in items)}]"
        self.push_node(frame, pc, "prim::TupleConstruct", items, out_type)

    def op_TUPLE_SLICE(self, frame: Frame, pc: int, x: int, n: int) -> None:
        tup = self.pop(frame, pc)
        if isinstance(tup, Const) and isinstance(tup.value, tuple):
            frame.stack.append(Const(tup.value[x:x + n]))
            return
        elements = tuple_elements(entry_type(tup))
        out_type = f"Tuple[{', '.join(elements[x:x + n])}]" if elements is not None else "Any"
        self.push_node(frame, pc, "prim::TupleSlice", [tup, Const(x), Const(x + n)], out_type)

    def op_TUPLE_INDEX(self, frame: Frame, pc: int, x: int, n: int) -> None:
        index = self.pop(frame, pc)
        tup = self.pop(frame, pc)
        i = index.value if isinstance(index, Const) and type(index.value) is int else None
        if i is not None and isinstance(tup, Const) and isinstance(tup.value, tuple) \
                and -len(tup.value) <= i < len(tup.value):
            frame.stack.append(Const(tup.value[i]))
            return
        if i is not None and isinstance(tup, Value) and tup.node is not None \
                and tup.node.op == "prim::TupleConstruct" and -len(tup.node.inputs) <= i < len(tup.node.inputs):
            frame.stack.append(tup.node.inputs[i])  # the element itself: no tuple built just to be indexed
            return
        elements = tuple_elements(entry_type(tup))
        out_type = elements[i] if elements is not None and i is not None and -len(elements) <= i < len(elements) \
            else "Any"
        self.push_node(frame, pc, "prim::TupleIndex", [tup, index], out_type)

    def op_DICT_CONSTRUCT(self, frame: Frame, pc: int, x: int, n: int) -> None:
        if n % 2:
            self.fail(frame, pc, f"DICT_CONSTRUCT of {n} values (keys and values come in pairs)")
        items = self.pop_n(frame, n, pc)
        self.push_node(frame, pc, "prim::DictConstruct", items, self.annotation(frame, pc, x))

    def op_DICT_INDEX(self, frame: Frame, pc: int, x: int, n: int) -> None:
        key = self.pop(frame, pc)
        dct = self.pop(frame, pc)
        args = split_args(entry_type(dct), "Dict")
        key_type = args[0] if args and len(args) == 2 else entry_type(key)
        op = _DICT_INDEX.get(key_type, "aten::__getitem__.Dict_str")
        self.push_node(frame, pc, op, [dct, key], args[1] if args and len(args) == 2 else "Any")

    def op_ISINSTANCE(self, frame: Frame, pc: int, x: int, n: int) -> None:
        value = self.pop(frame, pc)
        types = [self.annotation(frame, pc, x + i) for i in range(n)]
        actual = entry_type(value)
        answers = [is_subtype(actual, t) for t in types]
        if True in answers:
            frame.stack.append(Const(True))
        elif all(a is False for a in answers):
            frame.stack.append(Const(False))
        else:  # an Optional, Union or Any value: asked at run time
            try:
                for t in types:
                    check_type(t)
            except ValueError as exc:
                self.fail(frame, pc, f"isinstance() of a value of type {actual}: {exc}", unsupported=True)
            frame.stack.extend(self.emit(frame, pc, ISINSTANCE, [value, self.const(types)], ["bool"]))

    def op_RAISE_EXCEPTION(self, frame: Frame, pc: int, x: int, n: int) -> None:
        cls = self.pop(frame, pc)
        msg = self.pop(frame, pc)
        self.emit(frame, pc, "prim::RaiseException", [msg, cls], [])

    def op_WARN(self, frame: Frame, pc: int, x: int, n: int) -> None:
        stacklevel = self.pop(frame, pc)
        msg = self.pop(frame, pc)
        self.emit(frame, pc, "aten::warn", [msg, stacklevel], [])

    def op_FORMAT(self, frame: Frame, pc: int, x: int, n: int) -> None:
        if x < 1:
            self.fail(frame, pc, "FORMAT needs at least the format string")
        self.apply(frame, pc, "aten::format", self.pop_n(frame, x, pc), ["str"])

    def op_IS(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.identity(frame, pc, negate=False)

    def op_ISNOT(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.identity(frame, pc, negate=True)

    def identity(self, frame: Frame, pc: int, negate: bool) -> None:
        b = self.pop(frame, pc)
        a = self.pop(frame, pc)
        result = known_identity(a, b)
        if result is not None:
            frame.stack.append(Const(result != negate))
        else:
            self.push_node(frame, pc, "aten::__isnot__" if negate else "aten::__is__", [a, b], "bool")

    def op_NOT(self, frame: Frame, pc: int, x: int, n: int) -> None:
        value = self.pop(frame, pc)
        known = self.known_bool(value)
        if known is not None:
            frame.stack.append(Const(not known))
        else:
            self.push_node(frame, pc, "aten::__not__", [value], "bool")

    def op_UN_INITIALIZED(self, frame: Frame, pc: int, x: int, n: int) -> None:
        frame.stack.append(Const(None, "Any", uninitialized=True))

    def op_UNCHECKED_CAST(self, frame: Frame, pc: int, x: int, n: int) -> None:
        frame.stack.append(self.pop(frame, pc))  # a cast changes nothing at run time

    def op_TO_LIST(self, frame: Frame, pc: int, x: int, n: int) -> None:
        elem = self.pop(frame, pc)
        dim = self.pop(frame, pc)
        tensor = self.pop(frame, pc)
        out_type = "Any"
        if isinstance(dim, Const) and isinstance(elem, Const) and type(elem.value) is int and elem.value in (0, 1, 2):
            if type(dim.value) is not int or not 0 <= dim.value <= 64:  # a tensor has at most 64 dimensions
                self.fail(frame, pc, f"TO_LIST of {repr(dim.value)[:20]} dimensions (an int from 0 to 64 expected)")
            out_type = ("int", "float", "bool")[elem.value]
            for _ in range(dim.value):
                out_type = f"List[{out_type}]"
        self.push_node(frame, pc, "prim::tolist", [tensor, dim, elem], out_type)

    def tensor_query(self, frame: Frame, pc: int, op: str) -> None:
        self.apply(frame, pc, _TENSOR_PREDICATES[op], [self.pop(frame, pc)], None)

    def op_DIM(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.tensor_query(frame, pc, "DIM")

    def op_DTYPE(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.tensor_query(frame, pc, "DTYPE")

    def op_DEVICE(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.tensor_query(frame, pc, "DEVICE")

    def op_IS_CUDA(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.tensor_query(frame, pc, "IS_CUDA")

    def op_NUM_TO_TENSOR(self, frame: Frame, pc: int, x: int, n: int) -> None:
        self.tensor_query(frame, pc, "NUM_TO_TENSOR")

    def annotation(self, frame: Frame, pc: int, x: int) -> str:
        types = frame.fn.types
        if not 0 <= x < len(types):
            self.fail(frame, pc, f"type {x} outside the table of {len(types)}")
        return parse_type(types[x])

    def emit_if(self, frame: Frame, pc: int, cond: Value, branches: list[Any], out_types: list[str]
                ) -> list[Value]:
        """Append a prim::If on cond whose two blocks are filled by the callables in `branches` (each emits its
        nodes into the current block and returns its result values); the If's outputs."""
        blocks = []
        for make in branches:
            outer, block = self.block, Block()
            self.block = block
            try:
                block.outputs = [self.materialize(e, frame.fn, pc) for e in make()]
            finally:
                self.block = outer
            blocks.append(block)
        outputs = [Value(type=t) for t in out_types]
        self.block.nodes.append(Node("prim::If", [cond], outputs, blocks=blocks, source=self.source(frame, pc)))
        return outputs

    # ------------------------------------------------------------------------------------------- operators

    def operator_call(self, frame: Frame, pc: int, operator: Operator, count: int | None) -> None:
        """OP / OPN: pop the arguments the file pushed, take the rest from the schema's defaults, apply."""
        if quantized_call(self, frame, pc, operator, count):  # type: ignore[arg-type]
            return
        key = operator.key
        opdef = ops.lookup(key)
        if opdef is None:
            self.missing_operator(frame, pc, operator, count)
            return
        schema = opdef.schema
        varargs = schema.variadic and not schema.arguments and "(...)" in opdef.schema_text.replace(" ", "")
        upgrade = upgraders.find(key, self.operator_version)
        if count is not None or varargs:
            pushed = count if count is not None else operator.nsa
            if pushed is None or pushed < 0:
                self.fail(frame, pc, f"{key} takes any number of arguments but the file gives no count")
        elif operator.nsa is None or operator.nsa < 0:
            pushed = upgrade.old_arity if upgrade is not None else len(schema.arguments)
        else:
            pushed = operator.nsa
        args = self.pop_n(frame, pushed, pc)
        if upgrade is not None:
            args = upgrade.adapt_arguments(args, Const)
        if not varargs:
            args = self.fill_defaults(frame, pc, opdef, args)
            self.check_scalars(frame, pc, opdef, args)
        if upgrade is not None and upgrade.rewrite is not None:
            upgrade.rewrite(self, frame, pc, key, args)
            return
        self.apply(frame, pc, key, args, None)

    def check_scalars(self, frame: Frame, pc: int, opdef: Any, args: list[Any]) -> None:
        """Refuse a scalar of another type where the schema wants an int, a float or a bool, as TorchScript's
        compiler would never pass one: bool is not int (a loop counter stepped by `add.int` with False never ends),
        and neither converts to the other implicitly."""
        for arg, entry in zip(opdef.schema.arguments, args):
            wanted = _SCALAR_ACCEPTS.get(arg.type)
            if wanted is None or isinstance(entry, Static):
                continue
            got = entry_type(entry)
            if got in _SCALAR_TYPES and got not in wanted:
                shown = f" ({str(entry.value)[:20]})" if isinstance(entry, Const) else ""
                self.fail(frame, pc, f"{opdef.key} argument '{arg.name}' is {arg.type}, the file passes a {got}"
                                     f"{shown}, which TorchScript never does: the file is corrupt or crafted")

    def fill_defaults(self, frame: Frame, pc: int, opdef: Any, args: list[Any]) -> list[Any]:
        arguments = opdef.schema.arguments
        if len(args) > len(arguments):
            self.fail(frame, pc, f"{opdef.key} gets {len(args)} arguments, but ptlite's schema {opdef.schema} "
                                 f"takes {len(arguments)}", unsupported=True)
        out = list(args)
        for arg in arguments[len(args):]:
            if not arg.has_default:
                self.fail(frame, pc, f"{opdef.key} gets {len(args)} arguments; argument '{arg.name}' has no "
                                     "default to fill in")
            default = arg.default
            fixed = _FIXED_LIST.fullmatch(arg.type.replace(" ", ""))
            if fixed and isinstance(default, (int, float)) and not isinstance(default, bool):
                default = [default] * int(fixed.group(1))  # 'int[2] padding=0' means [0, 0]
            out.append(Const(default))
        return out

    def apply(self, frame: Frame, pc: int, key: str, args: list[Any], out_types: list[str] | None) -> None:
        """Apply operator `key` to complete arguments: fold it when everything is known, else emit a node."""
        opdef = ops.get(key)
        if key in ("prim::unchecked_cast", "aten::_unwrap_optional", "prim::unchecked_unwrap_optional"):
            frame.stack.append(args[0])
            return
        if key in ("aten::__is__", "aten::__isnot__", "aten::__not__"):
            result = known_identity(*args) if key != "aten::__not__" else self.known_bool(args[0])
            if result is not None:
                frame.stack.append(Const((not result) if key != "aten::__is__" else result))
                return
        if key == "prim::TupleUnpack":
            self.tuple_unpack(frame, pc, args[0])
            return
        if out_types is None:
            out_types = self.result_types(opdef, args)
        if self.quantized.qparams and reads_quantized(self, frame, pc, key, args, out_types):  # type: ignore[arg-type]
            return
        folded = self.fold(opdef, args, len(out_types))
        if folded is not None:
            frame.stack.extend(folded)
            return
        frame.stack.extend(self.emit(frame, pc, key, args, out_types))

    def result_types(self, opdef: Any, args: list[Any]) -> list[str]:
        schema = opdef.schema
        if schema.returns == ("...",):
            return ["Any"]
        bound: dict[str, str] = {}
        for arg, entry in zip(schema.arguments, args):
            bind_type_variables(arg.type, entry_type(entry), bound)
        return [from_schema(r, bound) for r in schema.returns]

    def fold(self, opdef: Any, args: list[Any], n_out: int) -> list[Const] | None:
        """Results of a pure operator on known, immutable-enough arguments, computed now with its kernel."""
        if n_out == 0 or not opdef.pure:
            return None
        if not all(isinstance(a, Const) and not a.uninitialized for a in args):
            return None
        values = [a.value for a in args]
        if any(isinstance(v, (np.ndarray, dict)) for v in values):
            return None
        try:
            result = self.evaluate(opdef.key, values)
        except Exception:  # noqa: BLE001  (the node will raise the same error when it runs)
            return None
        results = list(result) if n_out > 1 else [result]
        if len(results) != n_out or not all(is_immutable(r) for r in results):
            return None
        return [Const(r) for r in results]

    def tuple_unpack(self, frame: Frame, pc: int, tup: Any) -> None:
        if isinstance(tup, Const) and isinstance(tup.value, tuple):
            frame.stack.extend(Const(v) for v in tup.value)
            return
        if isinstance(tup, Value) and tup.node is not None and tup.node.op == "prim::TupleConstruct":
            frame.stack.extend(tup.node.inputs)
            return
        elements = tuple_elements(entry_type(tup))
        if elements is None:
            self.fail(frame, pc, f"prim::TupleUnpack of a value of type {entry_type(tup)}: the number of "
                                 "elements is not known")
        frame.stack.extend(self.emit(frame, pc, "prim::TupleUnpack", [tup], elements))

    def missing_operator(self, frame: Frame, pc: int, operator: Operator, count: int | None) -> None:
        """An operator the table lacks: recorded; in lenient mode a placeholder node lets translation go on so
        that every missing operator is found."""
        self.missing.setdefault(operator.key, []).append(f"{frame.fn.qualname} instruction {pc}")
        if not self.lenient:
            raise UnsupportedOperatorError(f"{frame.fn.qualname}, instruction {pc}: ptlite has no operator "
                                           f"{operator.key}")
        pushed = count if count is not None else operator.nsa
        if pushed is None or pushed < 0:
            self.fail(frame, pc, f"{operator.key} (missing from ptlite) has an unknown number of arguments")
        code = frame.fn.instructions
        nxt = code[pc + 1] if pc + 1 < len(code) else ("", 0, 0)
        n_out = nxt[2] if nxt[0] == "STOREN" else 1
        args = self.pop_n(frame, pushed, pc)
        frame.stack.extend(self.emit(frame, pc, operator.key, args, ["Any"] * n_out))
