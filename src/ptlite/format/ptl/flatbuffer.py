"""The flatbuffer variant of PyTorch Mobile files (bytecode 9: `_save_for_lite_interpreter(..., _use_flatbuffer=True)`),
decoded by a small bounds-checked flatbuffers reader into the same records as the zip variant (functions, module
objects, tensors as views of the mapped file).

Layout: `torch/csrc/jit/serialization/mobile_bytecode.fbs`. Every offset and length is checked against the file
before it is read; values reference each other by index, resolved once each, with cycles refused.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np

from ptlite.errors import FormatError, UnsupportedOperatorError
from ptlite.format.source import Source, open_source

from .bytecode import OPCODE_ORDER, Argument, Function, Operator, check_instructions
from .quantized import refuse_quantized
from .unpickler import SCALAR_TYPE_DTYPES, ClassTable, Device, ScriptObject, rebuild_tensor

FLATBUFFER_BYTECODE_VERSION = 9
_MAX_DEPTH = 64
_IN_PROGRESS = object()
_INSTRUCTION = struct.Struct("<bxHi")  # op int8, (pad), n uint16, x int32


class _Buffer:
    """Bounds-checked little-endian reads from the file."""

    def __init__(self, data: Any, where: str) -> None:
        self.data = data
        self.size = len(data)
        self.where = where

    def check(self, pos: int, n: int) -> None:
        if pos < 0 or pos + n > self.size:
            raise FormatError(f"{self.where}: offset {pos} (+{n} bytes) lies outside the {self.size}-byte file; "
                              "the file is truncated or corrupt")

    def read(self, fmt: str, pos: int) -> Any:
        self.check(pos, struct.calcsize(fmt))
        return struct.unpack_from(fmt, self.data, pos)[0]

    def target(self, pos: int) -> int:
        """Where the unsigned offset stored at pos points."""
        return pos + self.read("<I", pos)

    def vector(self, pos: int, item_size: int) -> tuple[int, int]:
        """(first element position, length) of the vector at pos."""
        n = self.read("<I", pos)
        self.check(pos + 4, n * item_size)
        return pos + 4, n

    def string(self, pos: int) -> str:
        start, n = self.vector(pos, 1)
        try:
            return bytes(self.data[start:start + n]).decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(f"{self.where}: a string is not valid UTF-8") from None


class _Table:
    """A flatbuffers table: fields by index, through its vtable; absent fields read as their default."""

    def __init__(self, buf: _Buffer, pos: int) -> None:
        self.buf, self.pos = buf, pos
        self.vtable = pos - buf.read("<i", pos)
        self.vtable_size = buf.read("<H", self.vtable)
        if self.vtable_size < 4 or self.vtable_size % 2:
            raise FormatError(f"{buf.where}: invalid table at offset {pos}")
        buf.check(self.vtable, self.vtable_size)

    def field(self, index: int) -> int | None:
        slot = 4 + 2 * index
        if slot >= self.vtable_size:
            return None
        offset = self.buf.read("<H", self.vtable + slot)
        return self.pos + offset if offset else None

    def scalar(self, index: int, fmt: str, default: Any = 0) -> Any:
        pos = self.field(index)
        return default if pos is None else self.buf.read(fmt, pos)

    def ref(self, index: int) -> int | None:
        pos = self.field(index)
        return None if pos is None else self.buf.target(pos)

    def table(self, index: int) -> _Table | None:
        pos = self.ref(index)
        return None if pos is None else _Table(self.buf, pos)

    def string(self, index: int, default: str = "") -> str:
        pos = self.ref(index)
        return default if pos is None else self.buf.string(pos)

    def numbers(self, index: int, fmt: str) -> list[Any]:
        pos = self.ref(index)
        if pos is None:
            return []
        size = struct.calcsize(fmt)
        start, n = self.buf.vector(pos, size)
        return list(struct.unpack_from(f"<{n}{fmt}", self.buf.data, start)) if n else []

    def tables(self, index: int) -> list[_Table]:
        pos = self.ref(index)
        if pos is None:
            return []
        start, n = self.buf.vector(pos, 4)
        return [_Table(self.buf, self.buf.target(start + 4 * i)) for i in range(n)]

    def strings(self, index: int) -> list[str]:
        pos = self.ref(index)
        if pos is None:
            return []
        start, n = self.buf.vector(pos, 4)
        return [self.buf.string(self.buf.target(start + 4 * i)) for i in range(n)]


class _FunctionRef:
    """An IValue holding a function (methods are read from these separately)."""

    def __init__(self, table: _Table) -> None:
        self.table = table


class _Values:
    """The module's IValue table, each entry converted once (identity kept: one tensor, one list object)."""

    def __init__(self, buf: _Buffer, module: _Table, count: int) -> None:
        self.buf = buf
        self.tables = module.tables(4)
        if count:
            self.tables = self.tables[:count]
        self.storages = module.tables(6)
        self.object_types = module.tables(7)
        self.memo: dict[int, Any] = {}
        self.arrays: dict[tuple[int, int], np.ndarray] = {}
        self.classes = ClassTable()

    def fail(self, message: str) -> None:
        raise FormatError(f"{self.buf.where}: {message}")

    def get(self, index: int, depth: int = 0) -> Any:
        if not 0 <= index < len(self.tables):
            self.fail(f"value index {index} outside the table of {len(self.tables)}")
        value = self.memo.get(index, None)
        if value is _IN_PROGRESS:
            self.fail(f"value {index} contains itself")
        if index in self.memo:
            return value
        if depth > _MAX_DEPTH:
            self.fail("values nest too deeply")
        self.memo[index] = _IN_PROGRESS
        value = self.convert(self.tables[index], depth)
        self.memo[index] = value
        return value

    def convert(self, table: _Table, depth: int) -> Any:
        kind = table.scalar(0, "<B")
        pos = table.ref(1)
        if kind == 0 or pos is None:
            return None
        read = self.buf.read
        if kind == 1:
            return read("<q", pos)
        if kind == 2:
            return read("<B", pos) != 0
        if kind == 3:
            return read("<d", pos)
        if kind == 4:
            return complex(read("<d", pos), read("<d", pos + 8))
        inner = _Table(self.buf, pos)
        if kind == 5:
            return self.tensor(inner)
        if kind == 6:
            return inner.string(0)
        if kind in (7, 8):
            items = [self.get(i, depth + 1) for i in inner.numbers(0, "I")]
            return items if kind == 7 else tuple(items)
        if kind == 9:
            return self.dict(inner, depth)
        if kind == 10:
            return self.object(inner, depth)
        if kind == 11:
            return inner.numbers(0, "q")
        if kind == 12:
            return inner.numbers(0, "d")
        if kind == 13:
            return [b != 0 for b in inner.numbers(0, "B")]
        if kind == 14:
            return Device(inner.string(0))
        if kind == 15:
            raise UnsupportedOperatorError(f"{self.buf.where}: the model holds an enum value "
                                           f"({inner.string(0)}), which ptlite does not support yet")
        if kind == 16:
            return _FunctionRef(inner)
        self.fail(f"unknown value kind {kind}")

    def dict(self, table: _Table, depth: int) -> dict:
        keys, values = table.numbers(0, "I"), table.numbers(1, "I")
        if len(keys) != len(values):
            self.fail("a dict has different numbers of keys and values")
        out = {}
        for k, v in zip(keys, values):
            key = self.get(k, depth + 1)
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                self.fail(f"a dict key of type {type(key).__name__}")
            out[key] = self.get(v, depth + 1)
        return out

    def object(self, table: _Table, depth: int) -> ScriptObject:
        type_index = table.scalar(0, "<I")
        if type_index >= len(self.object_types):
            self.fail(f"object type {type_index} outside the table of {len(self.object_types)}")
        object_type = self.object_types[type_index]
        name, kind = object_type.string(0), object_type.scalar(1, "<B")
        if kind == 3:
            raise UnsupportedOperatorError(f"{self.buf.where}: class {name} restores its state with a TorchScript "
                                           "__setstate__, which ptlite does not run yet")
        if kind != 1:
            raise FormatError(f"{self.buf.where}: the file holds an object of the native class {name} (e.g. "
                              "prepacked XNNPACK or quantized weights from optimize_for_mobile), which ptlite does not "
                              "support yet; save the model without torch.utils.mobile_optimizer")
        names = object_type.strings(2)
        attrs = table.numbers(2, "I")
        if len(names) != len(attrs):
            self.fail(f"object of class {name} has {len(attrs)} attributes for {len(names)} names")
        obj = self.classes.get(name)()
        obj.__setstate__({n: self.get(a, depth + 1) for n, a in zip(names, attrs)})
        return obj

    def tensor(self, table: _Table) -> np.ndarray:
        if table.field(6) is not None:
            raise FormatError(f"{self.buf.where}: the file holds quantized tensors, which ptlite does not support "
                              "yet; save the float model instead")
        index, code, offset = table.scalar(0, "<I"), table.scalar(1, "<b"), table.scalar(2, "<i")
        dtype = SCALAR_TYPE_DTYPES.get(code)
        if dtype is None:
            self.fail(f"a tensor has element type code {code}, which ptlite does not support")
        return rebuild_tensor(self.storage(index, dtype), offset, tuple(table.numbers(3, "i")),
                              tuple(table.numbers(4, "i")))

    def storage(self, index: int, dtype: np.dtype) -> np.ndarray:
        key = (index, dtype.num)
        array = self.arrays.get(key)
        if array is None:
            if index >= len(self.storages):
                self.fail(f"storage {index} outside the table of {len(self.storages)}")
            pos = self.storages[index].ref(0)
            start, n = self.buf.vector(pos, 1) if pos is not None else (0, 0)
            if n % dtype.itemsize:
                self.fail(f"storage {index} holds {n} bytes, not a whole number of {dtype.name} elements")
            array = np.frombuffer(self.buf.data, dtype=dtype.newbyteorder("<"), count=n // dtype.itemsize,
                                  offset=start) if n else np.empty(0, dtype)
            self.arrays[key] = array
        return array

    def function(self, ref: _FunctionRef) -> Function:
        table = ref.table
        qualname = table.string(0)
        where = f"{self.buf.where}: {qualname}"
        pos = table.ref(1)
        rows: list[tuple[str, int, int]] = []
        if pos is not None:
            start, n = self.buf.vector(pos, _INSTRUCTION.size)
            for op, count, x in _INSTRUCTION.iter_unpack(self.buf.data[start:start + n * _INSTRUCTION.size]):
                if not 0 <= op < len(OPCODE_ORDER):
                    raise FormatError(f"{where}: unknown instruction code {op}")
                rows.append((OPCODE_ORDER[op], x, count))
        operators = [Operator(t.string(0), t.string(1), t.scalar(2, "<i", -1)) for t in table.tables(2)]
        constants = [self.get(i) for i in table.numbers(3, "I")]
        register_size = table.scalar(5, "<i")
        if not 0 <= register_size <= 1 << 20:
            raise FormatError(f"{where}: invalid register count {register_size}")
        function = Function(qualname, check_instructions(rows, where), operators, constants, table.strings(4),
                            register_size)
        schema = table.table(6)
        if schema is not None:
            function.arguments = [self.argument(a) for a in schema.tables(0)]
            function.returns = [self.argument(a) for a in schema.tables(1)]
        return function

    def argument(self, table: _Table) -> Argument:
        return Argument(table.string(0), table.string(1), self.get(table.scalar(2, "<I")))


def read_flatbuffer(source: Source, in_memory: bool = False) -> tuple[int, int, dict[str, Function], Any]:
    """(bytecode version, operator version, functions by qualified name, root object) of a flatbuffer file (a path,
    its content, a binary file object, or a source already opened: ptlite.format.source)."""
    opened = open_source(source, in_memory)  # mapped and guarded, or in memory (ptlite.format.source)
    data, name = opened.data, opened.name
    if len(data) < 8:
        raise FormatError(f"{name}: file is {len(data)} bytes, too short for a PyTorch Mobile file")
    buf = _Buffer(data, name)
    module = _Table(buf, buf.target(0))
    version = module.scalar(0, "<I")
    if version != FLATBUFFER_BYTECODE_VERSION:
        raise FormatError(f"{name}: flatbuffer bytecode version {version}; ptlite reads version "
                          f"{FLATBUFFER_BYTECODE_VERSION}")
    operator_version = module.scalar(10, "<I")
    values = _Values(buf, module, module.scalar(11, "<I"))
    functions: dict[str, Function] = {}
    for index in module.numbers(2, "I"):
        ref = values.get(index)
        if not isinstance(ref, _FunctionRef):
            raise FormatError(f"{name}: method entry {index} is not a function")
        function = values.function(ref)
        functions.setdefault(function.qualname, function)
    refuse_quantized(functions, name)  # before the objects, whose packed quantized weights are native objects
    root = values.get(module.scalar(3, "<I"))
    return version, operator_version, functions, root
