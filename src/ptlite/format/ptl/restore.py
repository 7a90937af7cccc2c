"""Objects that restore themselves while a .ptl file loads: classes with a TorchScript `__setstate__` (PyTorch's
quantized convolutions, which rebuild their packed weights with quantized::conv2d_prepack) and the native classes
ptlite reads itself (unpickler.NATIVE_CLASSES: a quantized linear layer's packed weights).

A `__setstate__` runs once, here, on the values the file holds: a small interpreter over the few instructions and
operators such functions use (attribute writes, tuple indexing, comparisons, the prepack operators), with budgets
shared by the file's objects (instructions, attribute slots) and a bounded stack. Anything else is refused naming
it; nothing from the file runs as Python. Packed weights become native objects whose state is a `Packed`
(ptlite.format.pytorch_quantized), which the translation turns into int8 nodes.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

from ptlite.errors import FormatError, UnsupportedOperatorError
from ptlite.format.pytorch_quantized import Packed, conv_packed, linear_packed, weight_scales

from .bytecode import Function
from .unpickler import NATIVE_CLASSES, ClassTable, QTensor, ScriptObject

MAX_TOTAL_STEPS = 1_000_000  # instructions all __setstate__ functions of a file may run: PyTorch's ~150 each
MAX_TOTAL_SLOTS = 1 << 20  # attribute slots they may create together
MAX_SLOTS = 4096  # the highest attribute index one may write
MAX_STACK = 1 << 16
MAX_OBJECTS = 1 << 20
CONV_PACKED = "__torch__.torch.classes.quantized.Conv2dPackedParamsBase"
LINEAR_PACKED = "__torch__.torch.classes.quantized.LinearPackedParamsBase"


def slot_name(index: int) -> str:
    """The name of an attribute a `__setstate__` creates (bytecode writes attributes by index, past the class's)."""
    return f"attr{index}"


def is_slot_name(name: str) -> bool:
    """Whether a name is one slot_name gives."""
    return name.startswith("attr") and name[4:].isdigit() and name[4:].isascii()


_CLASSES = ClassTable()


def restore_objects(root: Any, functions: dict[str, Function], name: str) -> None:
    """Run the `__setstate__` of every object reachable from root that has one, inner objects first (as PyTorch's
    unpickler does, at each object's BUILD), and read the native objects ptlite knows."""
    budget = _Budget()
    for obj in _post_order(root, name):
        if obj.qualname in NATIVE_CLASSES:
            _native(obj, name)
            continue
        fn = functions.get(f"{obj.qualname}.__setstate__")
        if fn is not None:
            state = obj.state
            obj.names, obj.slots = [], []
            _Interpreter(fn, name, budget).run([obj, state])
            obj.state = dict(zip(obj.names, obj.slots))


def is_packed(value: Any) -> bool:
    """Whether value is a packed weight object made while loading."""
    return isinstance(value, ScriptObject) and isinstance(value.state, Packed)


def _post_order(root: Any, name: str) -> list[ScriptObject]:
    """The ScriptObjects reachable from root through attributes and containers, each after those it holds."""
    order: list[ScriptObject] = []
    seen: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        value, done = stack.pop()
        if done:
            order.append(value)
            continue
        if id(value) in seen:
            continue
        if isinstance(value, ScriptObject):
            seen.add(id(value))
            stack.append((value, True))
            state = value.state
            children = state.values() if isinstance(state, dict) else state if isinstance(state, (list, tuple)) \
                else ()
        elif isinstance(value, (list, tuple)):
            seen.add(id(value))
            children = value
        elif isinstance(value, dict):
            seen.add(id(value))
            children = value.values()
        else:
            continue
        stack.extend((c, False) for c in children if isinstance(c, (ScriptObject, list, tuple, dict)))
        if len(seen) > MAX_OBJECTS:
            raise FormatError(f"{name}: more than {MAX_OBJECTS} objects and containers in the module's state")
    return order


def _native(obj: ScriptObject, name: str) -> None:
    where = f"{name}: a {obj.qualname.rsplit('.', 1)[-1]} object"
    state = obj.state
    if not (isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], QTensor)
            and (state[1] is None or isinstance(state[1], np.ndarray))):
        raise FormatError(f"{where} whose state is not (quantized weight, bias)")
    weight, bias = state
    obj.state = linear_packed(weight.values, _scales(weight, where), bias, where, UnsupportedOperatorError)
    obj.names, obj.slots = [], []


def _scales(weight: QTensor, where: str) -> np.ndarray:
    return weight_scales(weight.values, weight.scales, weight.zero_points, weight.axis, where,
                         UnsupportedOperatorError)


def _packed_object(qualname: str, packed: Packed) -> ScriptObject:
    obj = _CLASSES.get(qualname)()
    obj.state = packed
    return obj


class _Budget:
    """What all the `__setstate__` functions of one file may use together: instructions run, attribute slots."""

    def __init__(self) -> None:
        self.steps = MAX_TOTAL_STEPS
        self.slots = MAX_TOTAL_SLOTS


class _Interpreter:
    """Runs one `__setstate__` function on concrete values."""

    def __init__(self, fn: Function, name: str, budget: _Budget) -> None:
        self.fn = fn
        self.where = f"{name}: {fn.qualname}"
        self.budget = budget
        self.stack: list[Any] = []

    def fail(self, pc: int, message: str, unsupported: bool = False) -> NoReturn:
        error = UnsupportedOperatorError if unsupported else FormatError
        raise error(f"{self.where}, instruction {pc}: {message}")

    def pop_n(self, pc: int, n: int) -> list[Any]:
        """The top n entries of the stack, removed."""
        stack = self.stack
        if not 0 <= n <= len(stack):
            self.fail(pc, f"takes {n} values from a stack of {len(stack)}")
        values = stack[len(stack) - n:]
        del stack[len(stack) - n:]
        return values

    def pop(self, pc: int) -> Any:
        return self.pop_n(pc, 1)[0]

    def push(self, pc: int, *values: Any) -> None:
        if len(self.stack) + len(values) > MAX_STACK:
            self.fail(pc, f"grows its stack past {MAX_STACK} values while loading; the file is crafted")
        self.stack.extend(values)

    def run(self, args: list[Any]) -> Any:
        fn = self.fn
        code, constants = fn.instructions, fn.constants
        self.stack = list(args)
        regs: dict[int, Any] = {}
        pc = 0
        while True:
            if not 0 <= pc < len(code):
                self.fail(pc, "jumps outside the function")
            self.budget.steps -= 1
            if self.budget.steps < 0:
                self.fail(pc, f"runs more than {MAX_TOTAL_STEPS} instructions while loading (all __setstate__ "
                              "functions together); the file is crafted")
            op, x, n = code[pc]
            pc_next = pc + 1
            if op == "STORE":
                regs[x] = self.pop(pc)
            elif op == "STOREN":
                for i, v in enumerate(self.pop_n(pc, n)):
                    regs[x + i] = v
            elif op in ("LOAD", "MOVE"):
                if x not in regs:
                    self.fail(pc, f"reads register {x} before it is written")
                self.push(pc, regs.pop(x) if op == "MOVE" else regs[x])
            elif op == "DROP":
                self.pop(pc)
            elif op == "DROPR":
                regs.pop(x, None)
            elif op == "LOADC":
                if not 0 <= x < len(constants):
                    self.fail(pc, f"constant {x} outside the table of {len(constants)}")
                self.push(pc, constants[x])
            elif op == "GET_ATTR":
                obj = self.object(pc, self.pop(pc))
                if not 0 <= x < len(obj.slots):
                    self.fail(pc, f"reads attribute {x} of a {obj.qualname} with {len(obj.slots)}")
                self.push(pc, obj.slots[x])
            elif op == "SET_ATTR":
                value = self.pop(pc)
                self.set_attr(pc, self.object(pc, self.pop(pc)), x, value)
            elif op == "TUPLE_INDEX":
                tup, index = self.pop_n(pc, 2)
                self.push(pc, self.index(pc, tup, index, tuple))
            elif op in ("TUPLE_CONSTRUCT", "LIST_CONSTRUCT"):
                items = self.pop_n(pc, x if op == "TUPLE_CONSTRUCT" else n)
                self.push(pc, tuple(items) if op == "TUPLE_CONSTRUCT" else items)
            elif op == "JF":
                cond = self.pop(pc)
                if not isinstance(cond, bool):
                    self.fail(pc, "branches on a value that is not a bool")
                pc_next = pc + 1 if cond else pc + x
            elif op == "JMP":
                pc_next = pc + x
            elif op == "RET":
                return self.pop(pc) if self.stack else None
            elif op in ("OP", "OPN"):
                self.operator(pc, x, n if op == "OPN" else None)
            elif op in ("__IS__", "__ISNOT__"):
                a, b = self.pop_n(pc, 2)
                same = a is b or (a is None and b is None)
                self.push(pc, same if op == "__IS__" else not same)
            elif op == "__NOT__":
                value = self.pop(pc)
                if not isinstance(value, bool):
                    self.fail(pc, "negates a value that is not a bool")
                self.push(pc, not value)
            elif op == "UNCHECKED_CAST":
                pass
            elif op == "WARN":
                self.pop(pc)
            else:
                self.fail(pc, f"instruction {op}, which ptlite does not run while loading", unsupported=True)
            pc = pc_next

    def index(self, pc: int, seq: Any, i: Any, kind: type | tuple[type, ...]) -> Any:
        if not isinstance(seq, kind) or type(i) is not int or not -len(seq) <= i < len(seq):
            self.fail(pc, f"indexes a {type(seq).__name__} with {type(i).__name__} {str(i)[:20]}, not a "
                          "sequence with an index inside it")
        return seq[i]

    def object(self, pc: int, value: Any) -> ScriptObject:
        if not isinstance(value, ScriptObject) or not isinstance(value.slots, list) or is_packed(value):
            self.fail(pc, f"reads or writes an attribute of a {type(value).__name__}, not a module object")
        return value

    def set_attr(self, pc: int, obj: ScriptObject, x: int, value: Any) -> None:
        if not 0 <= x < MAX_SLOTS:
            self.fail(pc, f"writes attribute {x}; TorchScript classes have far fewer")
        if len(obj.slots) <= x:
            grow = x + 1 - len(obj.slots)
            self.budget.slots -= grow
            if self.budget.slots < 0:
                self.fail(pc, f"writes more than {MAX_TOTAL_SLOTS} attributes while loading (all objects "
                              "together); the file is crafted")
            obj.slots = obj.slots + [None] * grow
            obj.names = obj.names + [slot_name(i) for i in range(len(obj.names), x + 1)]
        obj.slots[x] = value

    def operator(self, pc: int, x: int, count: int | None) -> None:
        if not 0 <= x < len(self.fn.operators):
            self.fail(pc, f"operator {x} outside the table of {len(self.fn.operators)}")
        operator = self.fn.operators[x]
        key = operator.key
        arities = _ARITY.get(key)
        if arities is None:
            self.fail(pc, f"operator {key}, which ptlite does not run while loading", unsupported=True)
        pushed = count if count is not None else operator.nsa
        if pushed is None:
            pushed = arities[-1]
        if pushed not in arities:
            self.fail(pc, f"{key} given {pushed} arguments; it takes {' or '.join(map(str, arities))}")
        args = self.pop_n(pc, pushed)
        name = key.partition(".")[0]
        if name == "prim::TupleUnpack":
            if not isinstance(args[0], tuple):
                self.fail(pc, "unpacks something that is not a tuple")
            self.push(pc, *args[0])
        elif name == "prim::RaiseException":
            message = args[0] if isinstance(args[0], str) else f"(a {type(args[0]).__name__}, not a message)"
            self.fail(pc, f"raises while loading: {message[:200]}")
        elif name in ("aten::eq", "aten::ne"):
            a, b = args
            if not all(type(v) in (int, float, str, bool) or v is None for v in (a, b)):
                self.fail(pc, f"{key} on values that are not scalars or strings")
            self.push(pc, (a == b) if name == "aten::eq" else (a != b))
        elif name == "prim::TupleIndex":  # an instruction (TUPLE_INDEX) from bytecode 8 on
            self.push(pc, self.index(pc, args[0], args[1], tuple))
        elif name == "aten::__getitem__":
            self.push(pc, self.index(pc, args[0], args[1], (list, tuple)))
        elif name == "aten::len":
            if not isinstance(args[0], (list, tuple, str)):
                self.fail(pc, "takes the length of something that is not a list")
            self.push(pc, len(args[0]))
        elif name == "quantized::conv2d_prepack":
            self.push(pc, self.conv2d_prepack(pc, *args))
        else:  # quantized::linear_prepack
            self.push(pc, self.linear_prepack(pc, *args))

    def _weight_bias(self, pc: int, w: Any, b: Any) -> tuple[QTensor, np.ndarray | None]:
        if not isinstance(w, QTensor) or not (b is None or isinstance(b, np.ndarray)):
            self.fail(pc, "prepacks weights that are not a quantized tensor and an optional float tensor")
        return w, b

    def conv2d_prepack(self, pc: int, w: Any, b: Any, stride: Any, padding: Any, dilation: Any, groups: Any
                       ) -> ScriptObject:
        w, b = self._weight_bias(pc, w, b)
        for what, value in (("stride", stride), ("padding", padding), ("dilation", dilation)):
            if not isinstance(value, list) or len(value) != 2 or any(type(v) is not int for v in value):
                self.fail(pc, f"prepacks a convolution whose {what} is not a list of two ints")
        if type(groups) is not int:
            self.fail(pc, "prepacks a convolution whose groups is not an int")
        packed = conv_packed(w.values, _scales(w, self.where), b, stride, padding, dilation, groups, self.where,
                             UnsupportedOperatorError)
        return _packed_object(CONV_PACKED, packed)

    def linear_prepack(self, pc: int, w: Any, b: Any) -> ScriptObject:
        w, b = self._weight_bias(pc, w, b)
        return _packed_object(LINEAR_PACKED, linear_packed(w.values, _scales(w, self.where), b, self.where,
                                                           UnsupportedOperatorError))


# The operators a __setstate__ may use, and how many arguments each takes when the file does not say (before
# bytecode 6).
_ARITY: dict[str, tuple[int, ...]] = {
    "prim::TupleUnpack": (1,), "prim::TupleIndex": (2,), "prim::RaiseException": (1, 2),
    "aten::__getitem__.t": (2,), "aten::len.t": (1,), "aten::len.str": (1,), "quantized::conv2d_prepack": (6,),
    "quantized::linear_prepack": (2,),
    **{f"aten::{op}{overload}": (2,) for op in ("eq", "ne") for overload in ("", ".str", ".int", ".float", ".bool")},
}
