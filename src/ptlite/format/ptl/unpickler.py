"""A restricted unpickler for the pickles of PyTorch Mobile files: it accepts only the globals such files contain
and never imports or calls anything else.

`pickle.Unpickler.find_class` is replaced by a lookup in a fixed table of ptlite's own functions (tensor rebuild,
storage types, TorchScript's list builders, OrderedDict, ...); `__torch__.*` classes become plain attribute
holders (`ScriptObject`); any other global is refused with a FormatError naming it, before anything runs. Before
unpickling, the opcodes are checked against the set PyTorch's own C++ unpickler accepts (protocol 2), and memo
indices must grow one by one, so a crafted file cannot make the unpickler reserve huge memory.
"""

from __future__ import annotations

import io
import math
import pickle
import re
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from ptlite.errors import FormatError

from .container import Archive


class ScriptObject:
    """An instance of a TorchScript class (`__torch__.*`) from the file: named attribute slots, in pickled order
    (GET_ATTR/SET_ATTR index them), or the raw state when the class restores itself with `__setstate__`."""

    qualname = ""
    names: list[str] = []  # replaced per object by __setstate__ (never mutated in place)
    slots: list[Any] = []
    state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state
        if isinstance(state, dict):
            self.names = [str(k) for k in state]
            self.slots = list(state.values())
        else:
            self.names, self.slots = [], []

    def __repr__(self) -> str:
        return f"<{self.qualname} object>"


class Device(str):
    """A torch.device value (ptlite represents devices as their string, e.g. 'cpu')."""


class StorageType:
    """A `torch.<Name>Storage` global: names the element type of a storage."""

    def __init__(self, name: str, scalar_type: int, dtype: str | None) -> None:
        self.name = name
        self.scalar_type = scalar_type
        self.quantized = name in _QUANTIZED_STORAGES
        raw = _QUANTIZED_STORAGES.get(name, dtype)
        self.dtype = np.dtype(raw) if raw else None


class QuantizedStorage:
    """A storage of quantized elements (their integer representation): only `_rebuild_qtensor` takes it."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


class QTensor:
    """A quantized tensor of the file (`torch._utils._rebuild_qtensor`): its integer values and its quantization
    parameters, per tensor (one scale and zero point) or per channel (along `axis`)."""

    def __init__(self, values: np.ndarray, scales: np.ndarray, zero_points: np.ndarray, axis: int) -> None:
        self.values = values  # int8, uint8 or int32
        self.scales = scales  # float64, one or one per channel
        self.zero_points = zero_points  # int64, as many as scales
        self.axis = axis

    def __repr__(self) -> str:
        return f"<quantized tensor {self.values.dtype}{list(self.values.shape)}>"


# torch.<Name>Storage -> (ScalarType code, NumPy dtype or None where ptlite has no equivalent)
_STORAGES = {
    "ByteStorage": (0, "uint8"), "CharStorage": (1, "int8"), "ShortStorage": (2, "int16"),
    "IntStorage": (3, "int32"), "LongStorage": (4, "int64"), "HalfStorage": (5, "float16"),
    "FloatStorage": (6, "float32"), "DoubleStorage": (7, "float64"), "ComplexHalfStorage": (8, None),
    "ComplexFloatStorage": (9, None), "ComplexDoubleStorage": (10, None),
    "BoolStorage": (11, "bool"), "QInt8Storage": (12, None), "QUInt8Storage": (13, None),
    "QInt32Storage": (14, None), "BFloat16Storage": (15, None), "QUInt4x2Storage": (16, None),
    "QUInt2x4Storage": (17, None), "Float8_e5m2Storage": (23, None), "Float8_e4m3fnStorage": (24, None),
    "Float8_e5m2fnuzStorage": (25, None), "Float8_e4m3fnuzStorage": (26, None), "UInt16Storage": (27, None),
    "UInt32Storage": (28, None), "UInt64Storage": (29, None),
}  # None: no element type ptlite's runtime supports (quantized, bfloat16, float8, complex, wide unsigned)
# Quantized storages hold the integer representation of qint8, quint8 and qint32 elements.
_QUANTIZED_STORAGES = {"QInt8Storage": "int8", "QUInt8Storage": "uint8", "QInt32Storage": "int32"}
SCALAR_TYPE_DTYPES = {code: np.dtype(dtype) for code, dtype in _STORAGES.values() if dtype is not None}
_QSCHEMES = {"per_tensor_affine": 0, "per_channel_affine": 1, "per_tensor_symmetric": 2,
             "per_channel_symmetric": 3, "per_channel_affine_float_qparams": 4}
MAX_DIMS = 64


def _fail(message: str) -> None:
    raise FormatError(message)


def _int(value: Any, what: str) -> int:
    if type(value) is not int:
        _fail(f"{what} must be an int, got {type(value).__name__}")
    return value


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)) or len(value) > MAX_DIMS:
        _fail(f"{what} must be a tuple of at most {MAX_DIMS} ints")
    for v in value:
        if type(v) is not int or v < 0:
            _fail(f"{what} must hold non-negative ints, got {str(value)[:80]}")
    return tuple(value)


def rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, requires_grad: Any = False,
                   hooks: Any = None, metadata: Any = None) -> np.ndarray:
    """`torch._utils._rebuild_tensor_v2`: a strided view of a storage, checked to lie inside it."""
    if isinstance(storage, QuantizedStorage):
        _fail("a plain tensor over a quantized storage; the file is corrupt")
    if not isinstance(storage, np.ndarray):
        _fail("a tensor's storage is not a storage reference")
    offset = _int(offset, "tensor storage offset")
    size, stride = _ints(size, "tensor size"), _ints(stride, "tensor stride")
    if len(size) != len(stride):
        _fail(f"tensor size {size} and stride {stride} differ in length")
    numel = math.prod(size)
    if offset < 0:
        _fail(f"negative tensor storage offset {offset}")
    if numel:
        last = offset + sum((s - 1) * st for s, st in zip(size, stride))
        if last >= storage.size:
            _fail(f"tensor of size {list(size)}, stride {list(stride)} at offset {offset} reaches element {last} "
                  f"of a {storage.size}-element storage; the file is corrupt")
    elif offset > storage.size:
        _fail(f"tensor storage offset {offset} beyond its {storage.size}-element storage")
    if numel > 4 * storage.size + (1 << 20):
        _fail(f"tensor of size {list(size)} repeats its {storage.size}-element storage too often to be a "
              "PyTorch Mobile weight; refusing to expand it")
    return _view(storage, offset, size, stride, numel)


def _view(storage: np.ndarray, offset: int, size: tuple[int, ...], stride: tuple[int, ...], numel: int
          ) -> np.ndarray:
    contiguous, expected = True, 1
    for s, st in zip(reversed(size), reversed(stride)):
        if s != 1 and st != expected:
            contiguous = False
        expected *= s
    if contiguous:
        return storage[offset:offset + numel].reshape(size)
    item = storage.itemsize
    view = np.lib.stride_tricks.as_strided(storage[offset:], shape=size, strides=[st * item for st in stride],
                                           writeable=False)
    out = np.ascontiguousarray(view)
    out.flags.writeable = False
    return out


def rebuild_qtensor(storage: Any, offset: Any, size: Any, stride: Any, quantizer: Any, requires_grad: Any = False,
                    hooks: Any = None) -> QTensor:
    """`torch._utils._rebuild_qtensor`: a quantized tensor with per-tensor or per-channel affine parameters."""
    if not isinstance(storage, QuantizedStorage):
        _fail("a quantized tensor's storage is not a quantized storage reference")
    values = rebuild_tensor(storage.array, offset, size, stride)
    if not isinstance(quantizer, tuple) or not quantizer or type(quantizer[0]) is not int:
        _fail("a quantized tensor's parameters are not a (scheme, ...) tuple")
    scheme = quantizer[0]
    if scheme in (_QSCHEMES["per_tensor_affine"], _QSCHEMES["per_tensor_symmetric"]) and len(quantizer) == 3:
        scale, zero_point = quantizer[1:]
        if not isinstance(scale, float) or type(zero_point) is not int or not -(1 << 31) <= zero_point < 1 << 31:
            _fail("a per-tensor quantized tensor's scale and zero point are not a float and an int32")
        return QTensor(values, np.array([scale]), np.array([zero_point], np.int64), 0)
    if scheme in (_QSCHEMES["per_channel_affine"], _QSCHEMES["per_channel_symmetric"]) and len(quantizer) == 4:
        scales, zero_points, axis = quantizer[1:]
        if not (isinstance(scales, np.ndarray) and isinstance(zero_points, np.ndarray) and type(axis) is int
                and scales.dtype.kind == "f" and zero_points.dtype.kind in "iu"):
            _fail("a per-channel quantized tensor's parameters are not (float scales, int zero points, axis)")
        if not 0 <= axis < max(values.ndim, 1) or scales.shape != zero_points.shape \
                or scales.shape != (values.shape[axis] if values.ndim else 1,):
            _fail(f"a per-channel quantized tensor of shape {list(values.shape)} with {scales.size} scales and "
                  f"{zero_points.size} zero points along axis {axis}")
        return QTensor(values, scales.astype(np.float64), zero_points.astype(np.int64), axis)
    names = {code: name for name, code in _QSCHEMES.items()}
    _fail(f"a quantized tensor with scheme {names.get(scheme, scheme)} and {len(quantizer) - 1} parameters, which "
          "ptlite does not read (it reads per-tensor and per-channel affine ones)")
    raise AssertionError  # unreachable: _fail raises


def _rebuild_parameter(data: Any, requires_grad: Any = False, hooks: Any = None) -> Any:
    return data


def _rebuild_parameter_with_state(data: Any, requires_grad: Any = False, hooks: Any = None, state: Any = None
                                  ) -> Any:
    return data


def _rebuild_from_type(func: Any, type_: Any, args: Any, state: Any = None) -> Any:
    if func not in (rebuild_tensor, _rebuild_parameter) or not isinstance(args, tuple):
        _fail("torch._tensor._rebuild_from_type_v2 must wrap a tensor rebuild function")
    return func(*args)


def _unsupported_tensor(kind: str) -> Callable[..., Any]:
    def refuse(*args: Any) -> Any:
        _fail(f"the file holds {kind} tensors, which ptlite does not support yet; save the model with dense "
              "tensors instead")
    return refuse


def _same_list(items: Any) -> list:
    if not isinstance(items, list):
        _fail(f"a TorchScript list builder got {type(items).__name__}, not a list")
    return items


def _restore_type_tag(value: Any, type_str: Any = None) -> Any:
    return value


def _device(text: Any) -> Device:
    if not isinstance(text, str):
        _fail("torch.device needs a string")
    return Device(text)


def _complex(re: Any = 0.0, im: Any = 0.0) -> complex:
    if not all(isinstance(v, (int, float)) for v in (re, im)):
        _fail("builtins.complex needs two numbers")
    return complex(re, im)


def _empty_hooks(*args: Any) -> dict:
    return {}


class _TensorType:
    """The `torch.Tensor` global that `_rebuild_from_type_v2` names; never called."""


# The only globals a PyTorch Mobile pickle may name ('module.name' -> what it becomes).
_GLOBALS: dict[str, Any] = {
    "torch._utils._rebuild_tensor_v2": rebuild_tensor,
    "torch._utils._rebuild_parameter": _rebuild_parameter,
    "torch._utils._rebuild_parameter_with_state": _rebuild_parameter_with_state,
    "torch._utils._rebuild_qtensor": rebuild_qtensor,
    "torch._utils._rebuild_sparse_tensor": _unsupported_tensor("sparse"),
    "torch._tensor._rebuild_from_type_v2": _rebuild_from_type,
    "torch.Tensor": _TensorType,
    "torch.device": _device,
    "builtins.complex": _complex,
    "collections.OrderedDict": _empty_hooks,
    "torch.jit._pickle.build_intlist": _same_list,
    "torch.jit._pickle.build_doublelist": _same_list,
    "torch.jit._pickle.build_boollist": _same_list,
    "torch.jit._pickle.build_tensorlist": _same_list,
    "torch.jit._pickle.build_genericlist": _same_list,
    "torch.jit._pickle.restore_type_tag": _restore_type_tag,
    **{f"torch.{name}": StorageType(name, code, dtype) for name, (code, dtype) in _STORAGES.items()},
    **{f"torch.{name}": code for name, code in _QSCHEMES.items()},
}


# Native (torchbind) classes whose pickled state ptlite reads itself (format/ptl/restore.py): the packed weights of
# quantized linear layers, pickled as (weight, bias).
NATIVE_CLASSES = frozenset({"__torch__.torch.classes.quantized.LinearPackedParamsBase"})


class ClassTable:
    """One ScriptObject subclass per TorchScript class name, made on first use."""

    def __init__(self) -> None:
        self._by_name: dict[str, type] = {}

    def get(self, qualname: str) -> type:
        cls = self._by_name.get(qualname)
        if cls is None:
            cls = type("ScriptObject", (ScriptObject,), {"qualname": qualname})
            self._by_name[qualname] = cls
        return cls


# ---------------------------------------------------------------------------------------------------------
# Opcode check: the protocol-2 subset that PyTorch's C++ unpickler reads (torch/csrc/jit/serialization/unpickler.cpp)
# ---------------------------------------------------------------------------------------------------------

_FIXED_ARG = {  # opcode -> bytes of argument
    b"\x80"[0]: 1, ord("."): 0, ord("("): 0, ord("R"): 0, ord("b"): 0, b"\x81"[0]: 0, ord("Q"): 0,
    ord("N"): 0, b"\x88"[0]: 0, b"\x89"[0]: 0, ord("K"): 1, ord("M"): 2, ord("J"): 4, ord("G"): 8,
    ord(")"): 0, ord("t"): 0, b"\x85"[0]: 0, b"\x86"[0]: 0, b"\x87"[0]: 0, ord("]"): 0, ord("a"): 0,
    ord("e"): 0, ord("l"): 0, ord("}"): 0, ord("d"): 0, ord("s"): 0, ord("u"): 0, ord("h"): 1, ord("j"): 4,
}
_BINPUT, _LONG_BINPUT, _GLOBAL, _LONG1, _BINUNICODE, _BINUNICODE8, _STOP = (
    ord("q"), ord("r"), ord("c"), b"\x8a"[0], ord("X"), b"\x8d"[0], ord("."))
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


def _fixed_run() -> re.Pattern[bytes]:
    """A pattern matching a run of whole opcodes with fixed-size arguments, STOP excepted: the bulk of a bytecode
    pickle (BININT1, BINGET, TUPLE3, ... ~90 % of MobileNetV2's 90,000 opcodes), skipped in one C call instead of
    one Python iteration each (check_opcodes 18 -> 5 ms there). Each alternative starts with a distinct opcode
    byte and nothing follows the repetition, so the match never backtracks; a match stops after 4096 opcodes
    (the engine keeps a record per repetition: an unbounded run in a crafted file could take gigabytes), and
    the loop goes on from there."""
    by_size: dict[int, list[int]] = {}
    for op, size in _FIXED_ARG.items():
        if op != _STOP:
            by_size.setdefault(size, []).append(op)
    alternatives = [b"[" + b"".join(re.escape(bytes([op])) for op in sorted(ops)) + b"]" + b"." * size
                    for size, ops in sorted(by_size.items())]
    return re.compile(b"(?:" + b"|".join(alternatives) + b"){0,4096}", re.DOTALL)


_FIXED_RUN = _fixed_run()


def check_opcodes(data: bytes, where: str) -> None:
    """Refuse a pickle using opcodes PyTorch's unpickler does not read, or memo indices that skip ahead."""
    i, n, puts = 0, len(data), 0
    fixed = _FIXED_ARG
    skip = _FIXED_RUN.match
    while i < n:
        i = skip(data, i).end()  # the opcodes the loop below would only step over
        if i >= n:
            continue  # no STOP: the loop's else says so
        op = data[i]
        i += 1
        size = fixed.get(op)
        if size is not None:
            i += size
            if op == _STOP:
                break
            continue
        if op == _BINPUT or op == _LONG_BINPUT:
            if op == _BINPUT:
                index = data[i] if i < n else 0
                i += 1
            else:
                index = _U32.unpack_from(data, i)[0] if i + 4 <= n else 0
                i += 4
            if index > puts:
                _fail(f"{where}: memo index {index} skips ahead (only {puts} values stored so far); "
                      "the pickle is corrupt or crafted")
            puts += index == puts
        elif op == _GLOBAL:
            middle = data.find(b"\n", i)
            end = data.find(b"\n", middle + 1) if middle >= 0 else -1
            if end < 0:
                _fail(f"{where}: truncated GLOBAL")
            check_global(data[i:middle].decode("utf-8", "replace"), data[middle + 1:end].decode("utf-8", "replace"),
                         where)
            i = end + 1
        elif op == _LONG1:
            i += 1 + (data[i] if i < n else 0)
        elif op == _BINUNICODE:
            i += 4 + (_U32.unpack_from(data, i)[0] if i + 4 <= n else 0)
        elif op == _BINUNICODE8:
            i += 8 + (_U64.unpack_from(data, i)[0] if i + 8 <= n else 0)
        else:
            _fail(f"{where}: pickle opcode {bytes([op])!r} at byte {i - 1} is not one PyTorch Mobile files use; "
                  "refusing the file")
    else:
        _fail(f"{where}: the pickle ends without STOP; the file is truncated or corrupt")
    if i > n:
        _fail(f"{where}: the pickle is truncated")
    if i < n:
        _fail(f"{where}: {n - i} bytes follow the pickle's STOP; PyTorch writes none: the file is corrupt or crafted")


# ---------------------------------------------------------------------------------------------------------
# The unpickler
# ---------------------------------------------------------------------------------------------------------

class StorageSource:
    """Where a pickle's storages live: records `<folder>/<key>` of the archive, each read once."""

    def __init__(self, archive: Archive, folder: str, big_endian: bool = False) -> None:
        self.archive = archive
        self.folder = folder
        self.big_endian = big_endian
        self.cache: dict[str, np.ndarray] = {}
        self.quantized: set[str] = set()  # keys of the storages declared quantized

    def load(self, pid: Any, where: str) -> np.ndarray:
        if not isinstance(pid, tuple) or len(pid) != 5 or pid[0] != "storage":
            _fail(f"{where}: unknown persistent id {str(pid)[:80]}; expected ('storage', type, key, location, "
                  "numel)")
        _, stype, key, _location, numel = pid
        if not isinstance(stype, StorageType):
            _fail(f"{where}: persistent id names {str(stype)[:60]} as a storage type")
        if not isinstance(key, str) or "/" in key or key in ("", ".", ".."):
            _fail(f"{where}: invalid storage key {str(key)[:60]!r}")
        numel = _int(numel, "storage size")
        if numel < 0:
            _fail(f"{where}: negative storage size {numel}")
        if stype.dtype is None:
            _fail(f"{where}: storage {key} holds {stype.name[:-len('Storage')]} elements, which ptlite does not "
                  "support yet (bfloat16, float8, complex and wide unsigned tensors)")
        cached = self.cache.get(key)
        if cached is not None:
            if cached.dtype != stype.dtype or cached.size != numel or (key in self.quantized) != stype.quantized:
                _fail(f"{where}: storage {key} is declared twice with different types or sizes")
            return QuantizedStorage(cached) if stype.quantized else cached
        name = f"{self.folder}/{key}"
        if numel == 0:
            array = np.empty(0, dtype=stype.dtype)
        elif self.big_endian:
            array = self.archive.array(name, stype.dtype.newbyteorder(">"), numel).astype(stype.dtype)
        else:
            array = self.archive.array(name, stype.dtype.newbyteorder("<"), numel)
            if not array.dtype.isnative:  # pragma: no cover  (big-endian hosts)
                array = array.astype(stype.dtype)
        self.cache[key] = array
        if stype.quantized:
            self.quantized.add(key)
            return QuantizedStorage(array)
        return array


def check_global(module: str, name: str, where: str) -> None:
    """Refuse any global but the whitelisted ones and TorchScript classes (`__torch__.*`), naming it."""
    qualified = f"{module}.{name}"
    if qualified in _GLOBALS:
        return
    if qualified in NATIVE_CLASSES:
        return
    if module == "__torch__.torch.classes" or module.startswith("__torch__.torch.classes."):
        _fail(f"{where}: the file holds an object of the native class {qualified} (e.g. prepacked XNNPACK or "
              "quantized weights from optimize_for_mobile), which ptlite does not support yet; save the model "
              "without torch.utils.mobile_optimizer")
    if module == "__torch__" or module.startswith("__torch__."):
        if not all(part.isidentifier() for part in f"{module}.{name}".split(".")):
            _fail(f"{where}: invalid TorchScript class name {qualified[:80]!r}")
        return
    _fail(f"{where}: the pickle names the global '{qualified}', which PyTorch Mobile files never contain; "
          "refusing to load the file (nothing from it was run)")


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, where: str, storages: StorageSource | None, classes: ClassTable) -> None:
        # A reader with peek(): the C unpickler then takes the data in large chunks instead of calling read() once
        # per opcode (~3x faster on a bytecode pickle's ~90,000 small opcodes).
        super().__init__(io.BufferedReader(io.BytesIO(data)))
        self.where = where
        self.storages = storages
        self.classes = classes

    def find_class(self, module: str, name: str) -> Any:
        check_global(module, name, self.where)  # never the default: nothing is imported
        qualified = f"{module}.{name}"
        return _GLOBALS[qualified] if qualified in _GLOBALS else self.classes.get(qualified)

    def persistent_load(self, pid: Any) -> Any:
        if self.storages is None:
            _fail(f"{self.where}: this pickle may not reference tensor storages")
        return self.storages.load(pid, self.where)


def unpickle(data: bytes, where: str, storages: StorageSource | None = None,
             classes: ClassTable | None = None) -> Any:
    """Load one pickle of a PyTorch Mobile file with the restricted unpickler; any failure is a FormatError."""
    check_opcodes(data, where)
    unpickler = _Unpickler(data, where, storages, classes or ClassTable())
    try:
        return unpickler.load()
    except FormatError:
        raise
    except RecursionError:
        raise FormatError(f"{where}: the pickle nests too deeply") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError,
            OverflowError, MemoryError, struct.error, UnicodeDecodeError) as exc:
        raise FormatError(f"{where}: invalid pickle ({type(exc).__name__}: {exc})") from None
