"""The functions of `bytecode.pkl` (bytecode versions 4 to 8), checked row by row into plain records."""

from __future__ import annotations

import reprlib
from dataclasses import dataclass
from typing import Any

from ptlite.errors import FormatError

MIN_BYTECODE_VERSION, MAX_BYTECODE_VERSION = 4, 8
MAX_REGISTERS = 1 << 20

# Every opcode of torch/csrc/jit/runtime/instruction.h, in FORALL_OPCODES order (the flatbuffer variant stores the
# index); those a mobile file may not contain are refused.
OPCODE_ORDER = (
    "OP", "OPN", "LOAD", "MOVE", "STOREN", "STORE", "DROP", "DROPR", "LOADC", "JF", "JMP", "LOOP", "RET", "WAIT",
    "CALL", "GUARD", "TYPECHECK", "FAIL_GUARD", "PROFILE_OP", "TAIL_CALL", "INTERFACE_CALL", "GET_ATTR", "SET_ATTR",
    "LIST_UNPACK", "TUPLE_CONSTRUCT", "NAMED_TUPLE_CONSTRUCT", "LIST_CONSTRUCT", "DICT_CONSTRUCT", "CREATE_OBJECT",
    "ISINSTANCE", "TUPLE_SLICE", "TUPLE_INDEX", "RAISE_EXCEPTION", "DICT_INDEX", "UNCHECKED_CAST", "__IS__",
    "UN_INITIALIZED", "__ISNOT__", "FORMAT", "DEVICE", "DTYPE", "DIM", "__NOT__", "TO_LIST", "NUM_TO_TENSOR",
    "IS_CUDA", "FORK", "WARN", "ENTER", "EXIT", "AWAITABLE",
)
OPCODES = frozenset(OPCODE_ORDER)
NOT_IN_MOBILE = frozenset({"WAIT", "GUARD", "TYPECHECK", "FAIL_GUARD", "PROFILE_OP", "TAIL_CALL", "FORK",
                           "AWAITABLE", "ENTER", "EXIT"})


@dataclass(frozen=True)
class Operator:
    """One row of a function's operator table; `nsa` (arguments pushed) is None before bytecode 6."""

    name: str
    overload: str
    nsa: int | None

    @property
    def key(self) -> str:
        return f"{self.name}.{self.overload}" if self.overload else self.name


@dataclass(frozen=True)
class Argument:
    """An argument or return of a function's schema; a default of None means none (as in PyTorch's loader)."""

    name: str
    type: str
    default: Any = None


@dataclass
class Function:
    """One compiled TorchScript function: instructions over per-function operator, constant and type tables."""

    qualname: str
    instructions: list[tuple[str, int, int]]
    operators: list[Operator]
    constants: list[Any]
    types: list[str]
    register_size: int
    arguments: list[Argument] | None = None
    returns: list[Argument] | None = None

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def class_name(self) -> str:
        return self.qualname.rsplit(".", 1)[0]


def _expect(cond: bool, message: str) -> None:
    if not cond:
        raise FormatError(message)


def _rows(value: Any, names: tuple[str, ...], where: str) -> list[Any]:
    """(('name', value), ...) rows at fixed positions -> the values."""
    _expect(isinstance(value, tuple) and len(value) >= len(names), f"{where}: expected rows {', '.join(names)}")
    out = []
    for i, name in enumerate(names):
        row = value[i]
        if not (isinstance(row, tuple) and len(row) == 2 and row[0] == name):  # the message only when needed:
            raise FormatError(f"{where}: row {i} must be ({name!r}, ...), got {_head(row)}")  # rows can be huge
        out.append(row[1])
    return out


def _head(value: Any, limit: int = 80) -> str:
    """The start of a value's text, without writing out all of a large (or nested) tuple: an instruction table."""
    return reprlib.repr(value)[:limit]


def _instruction(row: Any, where: str) -> tuple[str, int, int]:
    _expect(isinstance(row, tuple) and len(row) == 3, f"{where}: instruction {str(row)[:60]} is not (op, X, N)")
    op, x, n = row
    _expect(isinstance(op, str) and op in OPCODES, f"{where}: unknown instruction {str(op)[:40]!r}")
    _expect(op not in NOT_IN_MOBILE, f"{where}: instruction {op} is not allowed in a PyTorch Mobile file")
    _expect(type(x) is int and -(1 << 31) <= x < (1 << 31), f"{where}: {op} has an invalid operand X={x!r}")
    _expect(type(n) is int and 0 <= n < (1 << 16), f"{where}: {op} has an invalid operand N={n!r}")
    return op, x, n


_ALLOWED = OPCODES - NOT_IN_MOBILE


def check_instructions(rows: tuple | list, where: str) -> list[tuple[str, int, int]]:
    """The instruction rows, checked (a fast pass; the first bad row is then explained by `_instruction`)."""
    allowed = _ALLOWED
    for row in rows:
        if type(row) is tuple and len(row) == 3:
            op, x, n = row
            if type(op) is str and op in allowed and type(x) is int and type(n) is int \
                    and -(1 << 31) <= x < (1 << 31) and 0 <= n < (1 << 16):
                continue
        _instruction(row, where)
    return list(rows)


def _operator(row: Any, where: str) -> Operator:
    ok = isinstance(row, tuple) and len(row) in (2, 3) and all(isinstance(s, str) for s in row[:2])
    if not ok:
        raise FormatError(f"{where}: operator row {_head(row)} is not (name, overload[, num_args])")
    nsa = row[2] if len(row) == 3 else None
    _expect(nsa is None or type(nsa) is int, f"{where}: operator {row[0]} has an invalid argument count")
    _expect("::" in row[0], f"{where}: operator name {row[0][:60]!r} lacks a namespace")
    return Operator(row[0], row[1], nsa)


def _arguments(value: Any, where: str) -> list[Argument]:
    _expect(isinstance(value, tuple), f"{where}: schema arguments must be a tuple")
    out = []
    for item in value:
        name, type_, default = _rows(item, ("name", "type", "default_value"), where)
        _expect(isinstance(name, str) and isinstance(type_, str), f"{where}: invalid schema argument")
        out.append(Argument(name, type_, default))
    return out


def _function(item: Any, version: int, where: str) -> Function:
    _expect(isinstance(item, tuple) and len(item) in (2, 3) and isinstance(item[0], str),
            f"{where}: a function must be (qualified name, code[, schema])")
    qualname = item[0]
    where = f"{where}: {qualname}"
    instructions, operators, constants, types, register_size = _rows(
        item[1], ("instructions", "operators", "constants", "types", "register_size"), where)
    for table, name in ((instructions, "instructions"), (operators, "operators"), (constants, "constants"),
                        (types, "types")):
        _expect(isinstance(table, tuple), f"{where}: {name} must be a tuple")
    _expect(type(register_size) is int and 0 <= register_size <= MAX_REGISTERS,
            f"{where}: invalid register_size {register_size!r}")
    _expect(all(isinstance(t, str) for t in types), f"{where}: types must be strings")
    function = Function(qualname, check_instructions(instructions, where),
                        [_operator(r, where) for r in operators], list(constants), list(types), register_size)
    if len(item) == 3:
        arguments, returns = _rows(item[2], ("arguments", "returns"), f"{where} schema")
        function.arguments = _arguments(arguments, f"{where} schema")
        function.returns = _arguments(returns, f"{where} schema")
    else:
        _expect(version < 5, f"{where}: bytecode version {version} requires a schema for every function")
    return function


def check_version(version: Any, where: str) -> int:
    if type(version) is not int:
        raise FormatError(f"{where}: bytecode.pkl has no version number (bytecode version 3 or older, PyTorch "
                          "before 1.6); re-save the model with a newer PyTorch")
    if version < MIN_BYTECODE_VERSION:
        raise FormatError(f"{where}: bytecode version {version} is too old (ptlite reads {MIN_BYTECODE_VERSION} to "
                          f"{MAX_BYTECODE_VERSION}); re-save the model with a newer PyTorch")
    if version > MAX_BYTECODE_VERSION:
        raise FormatError(f"{where}: bytecode version {version} is newer than ptlite reads "
                          f"({MIN_BYTECODE_VERSION} to {MAX_BYTECODE_VERSION}); back-port it with "
                          f"torch.jit.mobile._backport_for_mobile(src, dst, {MAX_BYTECODE_VERSION})")
    return version


def parse_bytecode(root: Any, where: str) -> tuple[int, dict[str, Function]]:
    """The bytecode version and the functions, by qualified name, in file order."""
    _expect(isinstance(root, tuple) and len(root) >= 1, f"{where}: bytecode.pkl must hold a tuple")
    version = check_version(root[0], where)
    functions: dict[str, Function] = {}
    for item in root[1:]:
        function = _function(item, version, where)
        functions.setdefault(function.qualname, function)
    return version, functions
