"""Objects that restore themselves while a .ptl file loads: classes with a TorchScript `__setstate__` (PyTorch's
quantized convolutions, which rebuild their packed weights with quantized::conv2d_prepack) and the native classes
ptlite reads itself (unpickler.NATIVE_CLASSES: a quantized linear layer's packed weights).

A `__setstate__` runs once, here, on the values the file holds: a small interpreter over the few instructions and
operators such functions use (attribute writes, tuple indexing, comparisons, the prepack operators), with a step
budget. Anything else is refused naming it; nothing from the file runs as Python. Packed weights become native
objects whose state is a `Packed` (ptlite.format.pytorch_quantized), which the translation turns into int8 nodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ptlite.errors import FormatError, UnsupportedOperatorError
from ptlite.format.pytorch_quantized import Packed, conv_packed, linear_packed, weight_scales

from .bytecode import Function
from .unpickler import NATIVE_CLASSES, ClassTable, QTensor, ScriptObject

MAX_STEPS = 100_000  # instructions one __setstate__ may run: PyTorch's run ~150
MAX_OBJECTS = 1 << 20
CONV_PACKED = "__torch__.torch.classes.quantized.Conv2dPackedParamsBase"
LINEAR_PACKED = "__torch__.torch.classes.quantized.LinearPackedParamsBase"
_CLASSES = ClassTable()


def restore_objects(root: Any, functions: dict[str, Function], name: str) -> None:
    """Run the `__setstate__` of every object reachable from root that has one, inner objects first (as PyTorch's
    unpickler does, at each object's BUILD), and read the native objects ptlite knows."""
    for obj in _post_order(root, name):
        if obj.qualname in NATIVE_CLASSES:
            _native(obj, name)
            continue
        fn = functions.get(f"{obj.qualname}.__setstate__")
        if fn is not None:
            state = obj.state
            obj.names, obj.slots = [], []
            _Interpreter(fn, name).run([obj, state])
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


class _Interpreter:
    """Runs one `__setstate__` function on concrete values."""

    def __init__(self, fn: Function, name: str) -> None:
        self.fn = fn
        self.where = f"{name}: {fn.qualname}"

    def fail(self, pc: int, message: str, unsupported: bool = False) -> None:
        error = UnsupportedOperatorError if unsupported else FormatError
        raise error(f"{self.where}, instruction {pc}: {message}")

    def run(self, args: list[Any]) -> Any:
        fn = self.fn
        code, constants = fn.instructions, fn.constants
        stack: list[Any] = list(args)
        regs: dict[int, Any] = {}
        pc = steps = 0
        while True:
            if not 0 <= pc < len(code):
                self.fail(pc, "jumps outside the function")
            steps += 1
            if steps > MAX_STEPS:
                self.fail(pc, f"runs more than {MAX_STEPS} instructions while loading; the file is crafted")
            op, x, n = code[pc]
            pc_next = pc + 1
            try:
                if op == "STORE":
                    regs[x] = stack.pop()
                elif op == "STOREN":
                    if n > len(stack) or n < 0:
                        self.fail(pc, f"stores {n} values from a stack of {len(stack)}")
                    values = stack[len(stack) - n:]
                    del stack[len(stack) - n:]
                    for i, v in enumerate(values):
                        regs[x + i] = v
                elif op in ("LOAD", "MOVE"):
                    if x not in regs:
                        self.fail(pc, f"reads register {x} before it is written")
                    stack.append(regs.pop(x) if op == "MOVE" else regs[x])
                elif op == "DROP":
                    stack.pop()
                elif op == "DROPR":
                    regs.pop(x, None)
                elif op == "LOADC":
                    if not 0 <= x < len(constants):
                        self.fail(pc, f"constant {x} outside the table of {len(constants)}")
                    stack.append(constants[x])
                elif op == "GET_ATTR":
                    obj = self.object(pc, stack.pop())
                    if not 0 <= x < len(obj.slots):
                        self.fail(pc, f"reads attribute {x} of a {obj.qualname} with {len(obj.slots)}")
                    stack.append(obj.slots[x])
                elif op == "SET_ATTR":
                    value = stack.pop()
                    self.set_attr(pc, self.object(pc, stack.pop()), x, value)
                elif op == "TUPLE_INDEX":
                    index, tup = stack.pop(), stack.pop()
                    if not isinstance(tup, tuple) or type(index) is not int or not -len(tup) <= index < len(tup):
                        self.fail(pc, "indexes something that is not a tuple, or outside it")
                    stack.append(tup[index])
                elif op in ("TUPLE_CONSTRUCT", "LIST_CONSTRUCT"):
                    count = x if op == "TUPLE_CONSTRUCT" else n
                    if not 0 <= count <= len(stack):
                        self.fail(pc, f"builds a container of {count} from a stack of {len(stack)}")
                    items = stack[len(stack) - count:]
                    del stack[len(stack) - count:]
                    stack.append(tuple(items) if op == "TUPLE_CONSTRUCT" else items)
                elif op == "JF":
                    cond = stack.pop()
                    if not isinstance(cond, bool):
                        self.fail(pc, "branches on a value that is not a bool")
                    pc_next = pc + 1 if cond else pc + x
                elif op == "JMP":
                    pc_next = pc + x
                elif op == "RET":
                    return stack.pop() if stack else None
                elif op in ("OP", "OPN"):
                    self.operator(pc, x, n if op == "OPN" else None, stack)
                elif op in ("__IS__", "__ISNOT__"):
                    b, a = stack.pop(), stack.pop()
                    same = a is b or (a is None and b is None)
                    stack.append(same if op == "__IS__" else not same)
                elif op == "__NOT__":
                    stack.append(not stack.pop())
                elif op in ("UNCHECKED_CAST", "WARN"):
                    if op == "WARN":
                        stack.pop()
                else:
                    self.fail(pc, f"instruction {op}, which ptlite does not run while loading", unsupported=True)
            except IndexError:
                self.fail(pc, "pops an empty stack")
            pc = pc_next

    def object(self, pc: int, value: Any) -> ScriptObject:
        if not isinstance(value, ScriptObject) or not isinstance(value.slots, list):
            self.fail(pc, f"reads or writes an attribute of a {type(value).__name__}, not a module object")
        return value

    def set_attr(self, pc: int, obj: ScriptObject, x: int, value: Any) -> None:
        if not 0 <= x < 4096:
            self.fail(pc, f"writes attribute {x}; TorchScript classes have far fewer")
        if len(obj.slots) <= x:
            obj.slots = obj.slots + [None] * (x + 1 - len(obj.slots))
            obj.names = obj.names + [f"attr{i}" for i in range(len(obj.names), x + 1)]
        obj.slots[x] = value

    def operator(self, pc: int, x: int, count: int | None, stack: list[Any]) -> None:
        if not 0 <= x < len(self.fn.operators):
            self.fail(pc, f"operator {x} outside the table of {len(self.fn.operators)}")
        operator = self.fn.operators[x]
        key = operator.key
        pushed = count if count is not None else operator.nsa
        arity = _ARITY.get(key)
        if pushed is None:
            pushed = arity
        if arity is None or pushed is None or not 0 <= pushed <= len(stack):
            self.fail(pc, f"operator {key}, which ptlite does not run while loading", unsupported=True)
        args = stack[len(stack) - pushed:]
        del stack[len(stack) - pushed:]
        name = key.partition(".")[0]
        if name == "prim::TupleUnpack":
            if not isinstance(args[0], tuple):
                self.fail(pc, "unpacks something that is not a tuple")
            stack.extend(args[0])
        elif name == "prim::RaiseException":
            self.fail(pc, f"raises while loading: {str(args[0])[:200]}")
        elif name in ("aten::eq", "aten::ne"):
            a, b = args[:2]
            if not all(isinstance(v, (int, float, str, bool)) or v is None for v in (a, b)):
                self.fail(pc, f"{key} on values that are not scalars or strings")
            stack.append((a == b) if name == "aten::eq" else (a != b))
        elif name == "prim::TupleIndex":  # an instruction (TUPLE_INDEX) from bytecode 8 on
            tup, i = args
            if not isinstance(tup, tuple) or type(i) is not int or not -len(tup) <= i < len(tup):
                self.fail(pc, "indexes something that is not a tuple, or outside it")
            stack.append(tup[i])
        elif name == "aten::__getitem__":
            seq, i = args
            if not isinstance(seq, (list, tuple)) or type(i) is not int or not -len(seq) <= i < len(seq):
                self.fail(pc, "indexes something that is not a list, or outside it")
            stack.append(seq[i])
        elif name == "aten::len":
            if not isinstance(args[0], (list, tuple, str)):
                self.fail(pc, "takes the length of something that is not a list")
            stack.append(len(args[0]))
        elif name == "quantized::conv2d_prepack":
            stack.append(self.conv2d_prepack(pc, *args))
        elif name == "quantized::linear_prepack":
            stack.append(self.linear_prepack(pc, *args))

    def _weight_bias(self, pc: int, w: Any, b: Any) -> tuple[QTensor, np.ndarray | None]:
        if not isinstance(w, QTensor) or not (b is None or isinstance(b, np.ndarray)):
            self.fail(pc, "prepacks weights that are not a quantized tensor and an optional float tensor")
        return w, b

    def conv2d_prepack(self, pc: int, w: Any, b: Any, stride: Any, padding: Any, dilation: Any, groups: Any
                       ) -> ScriptObject:
        w, b = self._weight_bias(pc, w, b)
        packed = conv_packed(w.values, _scales(w, self.where), b, stride, padding, dilation, groups, self.where,
                             UnsupportedOperatorError)
        return _packed_object(CONV_PACKED, packed)

    def linear_prepack(self, pc: int, w: Any, b: Any) -> ScriptObject:
        w, b = self._weight_bias(pc, w, b)
        return _packed_object(LINEAR_PACKED, linear_packed(w.values, _scales(w, self.where), b, self.where,
                                                           UnsupportedOperatorError))


# The operators a __setstate__ may use, and how many arguments each takes when the file does not say (before
# bytecode 6).
_ARITY = {
    "prim::TupleUnpack": 1, "prim::TupleIndex": 2, "prim::RaiseException": 2, "aten::__getitem__.t": 2,
    "aten::len.t": 1, "aten::len.str": 1, "quantized::conv2d_prepack": 6, "quantized::linear_prepack": 2,
    **{f"aten::{op}{overload}": 2 for op in ("eq", "ne") for overload in ("", ".str", ".int", ".float", ".bool")},
}
