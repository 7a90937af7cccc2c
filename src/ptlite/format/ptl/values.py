"""What a stack slot or register holds while bytecode is translated: an IR value, a constant known while loading
(`Const`) or a module object (`Static`); how such entries compare and what TorchScript type they have; and the
frame of a function being translated, which holds them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ptlite.errors import FormatError
from ptlite.ir.graph import Value

from .bytecode import Function
from .types import type_of
from .unpickler import ScriptObject


class Static:
    """A module object (or other TorchScript object) known while translating; never a run-time value."""

    __slots__ = ("obj",)

    def __init__(self, obj: ScriptObject) -> None:
        self.obj = obj


class Const:
    """A Python value known while translating (a bytecode constant, a module attribute, a folded result)."""

    __slots__ = ("value", "type", "uninitialized", "state")

    def __init__(self, value: Any, type_: str | None = None, uninitialized: bool = False, state: bool = False
                 ) -> None:
        self.value = value
        self.type = type_ or type_of(value)
        self.uninitialized = uninitialized
        self.state = state  # a list or dict object of the file (attribute, bytecode constant): one node per object


Entry = Value | Const | Static
CLEARED = object()  # a register after MOVE / DROPR
LOOP_SLOT = object()  # the trip counter and limit LOOP keeps under a loop body's stack


def entry_type(entry: Any) -> str:
    if isinstance(entry, Value):
        return entry.type
    if isinstance(entry, Const):
        return entry.type
    if isinstance(entry, Static):
        return entry.obj.qualname
    return "Any"


def const_key(value: Any, depth: int = 0) -> Any:
    """A hashable key telling constants apart exactly (1, 1.0 and True differ; lists and tuples differ)."""
    if depth > 64:
        raise FormatError("a constant nests too deeply")
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(const_key(v, depth + 1) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((const_key(k, depth + 1), const_key(v, depth + 1)) for k, v in value.items()))
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)


def is_plain(value: Any, budget: list[int], seen: set[int], depth: int = 0) -> bool:
    """Whether value is a plain constant (no tensors or objects), counting items against a budget and refusing
    cycles and deep nesting (a crafted pickle can make lists that contain themselves)."""
    budget[0] -= 1
    if budget[0] < 0 or depth > 64:
        raise FormatError("a module attribute or constant is too large or nests too deeply")
    if value is None or isinstance(value, (bool, int, float, str, complex)):
        return True
    if isinstance(value, (list, tuple, dict)):
        if id(value) in seen:
            raise FormatError("a module attribute or constant contains itself")
        seen.add(id(value))
        items = list(value.items()) if isinstance(value, dict) else [(v,) for v in value]
        ok = all(is_plain(x, budget, seen, depth + 1) for item in items for x in item)
        seen.discard(id(value))
        return ok
    return False


IMMUTABLE_TYPES = (type(None), bool, int, float, str, complex)


def is_immutable(value: Any, depth: int = 0) -> bool:
    if isinstance(value, IMMUTABLE_TYPES):
        return True
    if isinstance(value, tuple) and depth < 16:
        return all(is_immutable(v, depth + 1) for v in value)
    return False


def known_identity(a: Any, b: Any) -> bool | None:
    """`a is b` when both sides are known now: None, bool, int, float and devices by value, objects by identity."""
    if isinstance(a, Static) and isinstance(b, Static):
        return a.obj is b.obj
    if isinstance(a, Static) or isinstance(b, Static):
        other = b if isinstance(a, Static) else a
        return False if isinstance(other, Const) else None
    if isinstance(a, Const) and isinstance(b, Const) and not (a.uninitialized or b.uninitialized):
        x, y = a.value, b.value
        if x is None or y is None:
            return x is y
        if isinstance(x, (bool, int, float, str)) and isinstance(y, (bool, int, float, str)):
            return type(x) is type(y) and x == y
        return x is y
    for one, other in ((a, b), (b, a)):  # a value of a non-optional type is never None
        if isinstance(one, Const) and one.value is None and not one.uninitialized and isinstance(other, Value) \
                and other.type in ("Tensor", "int", "float", "bool", "str"):
            return False
    return None


_SIMPLE_TYPES = frozenset({"Tensor", "int", "float", "bool", "str", "NoneType", "Device", "complex"})


def is_subtype(actual: str, wanted: str) -> bool | None:
    """Whether a value of type `actual` is an instance of `wanted`; None when the types say too little."""
    if wanted in ("Any", actual):
        return True
    if actual in ("Any", "Scalar") or actual.startswith(("Optional[", "Union[")):
        return None
    if wanted.startswith("Optional["):
        return True if actual == "NoneType" else is_subtype(actual, wanted[9:-1])
    head_a, head_w = actual.split("[", 1)[0], wanted.split("[", 1)[0]
    if head_a != head_w and (head_a in _SIMPLE_TYPES or head_a in ("List", "Tuple", "Dict")) \
            and (head_w in _SIMPLE_TYPES or head_w in ("List", "Tuple", "Dict")):
        return False
    return None


@dataclass
class LoopTrack:
    """Registers a loop body reads from before the loop, and registers it writes: they must not overlap."""

    entry: dict[int, Any]
    outer_reads: set[int] = field(default_factory=set)
    writes: set[int] = field(default_factory=set)


class Frame:
    """One function being translated: its stack, registers and enclosing loops."""

    def __init__(self, fn: Function, stack: list[Any]) -> None:
        self.fn = fn
        self.stack = stack
        self.regs: dict[int, Any] = {}
        self.loops: list[LoopTrack] = []
        self.returned = False
