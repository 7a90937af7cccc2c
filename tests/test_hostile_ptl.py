"""Hostile .ptl files are refused at load, early, naming the problem in a FormatError: those that would cost memory
out of proportion to their size (deeply nested modules with long memoized names; records that inflate far past the
file's size, a zip bomb as a pickle and as a storage), within a stated bound on Python's allocations (traced);
bytes hidden after a pickle's STOP; and bytecode passing an operator a scalar of a type TorchScript never would
(a bool for an int: a loop that would never end)."""

from __future__ import annotations

import pickle
import struct
import tracemalloc
import zipfile
from pathlib import Path

import pytest
import torch
from torch import nn

import ptlite
from ptlite.format.ptl import container
from ptlite.format.ptl.unpickler import unpickle


class Leaf(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


@pytest.fixture(scope="module")
def leaf(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("budgets") / "leaf.ptl"
    torch.jit.script(Leaf().eval())._save_for_lite_interpreter(str(path))
    return path


def _records(src: Path) -> tuple[str, dict[str, bytes]]:
    with zipfile.ZipFile(src) as z:
        prefix = z.namelist()[0].split("/")[0]
        return prefix, {i.filename.split("/", 1)[1]: z.read(i) for i in z.infolist()}


def _write(dst: Path, prefix: str, records: dict[str, bytes], deflated: dict[str, int] | None = None) -> Path:
    """A .ptl zip of `records` (stored), plus records of `deflated[name]` zero bytes compressed with deflate."""
    with zipfile.ZipFile(dst, "w") as z:
        for name, data in records.items():
            if name not in (deflated or {}):
                z.writestr(f"{prefix}/{name}", data, compress_type=zipfile.ZIP_STORED)
        for name, size in (deflated or {}).items():
            info = zipfile.ZipInfo(f"{prefix}/{name}")
            info.compress_type = zipfile.ZIP_DEFLATED
            with z.open(info, "w") as out:
                chunk = bytes(1 << 20)
                for _ in range(size >> 20):
                    out.write(chunk)
    return dst


def _binunicode(text: str) -> bytes:
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data


def _load_traced(path: Path, match: str) -> int:
    """Load a file that must be refused with a FormatError matching `match`; the peak of Python's allocations."""
    tracemalloc.start()
    try:
        with pytest.raises(ptlite.FormatError, match=match):
            ptlite.load(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_deeply_nested_modules_with_long_names_are_refused_in_little_memory(leaf, tmp_path):
    """2,000 nested module objects named by one memoized 1,000-character string: 40 KB of pickle whose dotted
    attribute paths, built in full, would take 2 GB."""
    depth, name = 2000, "n" * 1000
    parts = [b"\x80\x02c__torch__\nLeaf\nq\x00"]
    for level in range(depth):
        if level:
            parts.append(b"h\x00")  # the class again, from the memo
        key = _binunicode(name) + b"q\x01" if level == 0 else b"h\x01"
        parts.append(b")\x81}(" + _binunicode("training") + b"\x89" + key)
    parts.append(b"h\x00)\x81}(" + _binunicode("training") + b"\x89ub" + b"ub" * depth + b".")
    prefix, records = _records(leaf)
    records["data.pkl"] = b"".join(parts)
    crafted = _write(tmp_path / "nested.ptl", prefix, records)
    assert crafted.stat().st_size < 100_000
    peak = _load_traced(crafted, "attribute path .* is longer than 4096 characters")
    assert peak < 64 << 20, f"refusing the nested modules peaked at {peak >> 20} MiB"


def test_a_pickle_that_inflates_past_the_budget_is_refused_before_inflating(leaf, tmp_path):
    prefix, records = _records(leaf)
    size = 2 * container.INFLATE_SLACK  # zeros: deflate makes ~130 KB of them
    crafted = _write(tmp_path / "bomb.ptl", prefix, records, {"data.pkl": size})
    assert crafted.stat().st_size < 1 << 20
    peak = _load_traced(crafted, r"record 'data.pkl' inflates from \d+ to 134217728 bytes, past the \d+ bytes")
    assert peak < 16 << 20, f"refusing the zip bomb peaked at {peak >> 20} MiB"


def test_a_storage_that_inflates_past_the_budget_is_refused_before_inflating(leaf, tmp_path):
    """The pickle declares a storage of 2 * INFLATE_SLACK bytes (the weight uses 16 of them) and its record is that
    many deflated zeros: the size agrees with the pickle, and the budget still refuses it."""
    prefix, records = _records(leaf)
    size = 2 * container.INFLATE_SLACK
    declared = b"X\x03\x00\x00\x00cpuq\nK\x04t"  # the weight's storage: 'cpu', 4 elements
    assert declared in records["data.pkl"]
    records["data.pkl"] = records["data.pkl"].replace(declared, b"X\x03\x00\x00\x00cpuq\nJ"
                                                      + struct.pack("<i", size // 4) + b"t")
    crafted = _write(tmp_path / "storage_bomb.ptl", prefix, records, {"data/0": size})
    peak = _load_traced(crafted, r"record 'data/0' inflates from \d+ to 134217728 bytes")
    assert peak < 16 << 20, f"refusing the storage bomb peaked at {peak >> 20} MiB"


def test_a_record_deflated_within_the_budget_still_loads(leaf, tmp_path):
    """A file zipped again with deflate (every record compressed) loads and runs as the stored one does."""
    prefix, records = _records(leaf)
    again = tmp_path / "deflated.ptl"
    with zipfile.ZipFile(again, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in records.items():
            z.writestr(f"{prefix}/{name}", data)
    x = torch.randn(3, 2)
    assert (ptlite.load(again)(x.numpy()) == ptlite.load(leaf)(x.numpy())).all()


@pytest.mark.parametrize("record", ["data.pkl", "bytecode.pkl"])
def test_bytes_after_a_pickle_s_stop_are_refused(leaf, tmp_path, record):
    prefix, records = _records(leaf)
    records[record] += b"hidden after STOP"
    crafted = _write(tmp_path / "trailing.ptl", prefix, records)
    with pytest.raises(ptlite.FormatError, match="17 bytes follow the pickle's STOP"):
        ptlite.load(crafted)


class Counter(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        i = 0
        while i < 3:
            x = x * 2.0
            i = i + 1
        return x


def _retuple(value):
    return tuple(_retuple(v) for v in value) if isinstance(value, (list, tuple)) else value


def _relist(value):
    return [_relist(v) for v in value] if isinstance(value, (list, tuple)) else value


def test_a_bool_where_an_operator_takes_an_int_is_refused(tmp_path):
    """The counter's `i + 1` is aten::add.int(int, int) with the constant 1; a file whose constant is False instead
    (the lite interpreter would add False forever: the loop never ends) is refused at load."""
    path = tmp_path / "counter.ptl"
    torch.jit.script(Counter().eval())._save_for_lite_interpreter(str(path))
    x = torch.randn(2)
    assert (ptlite.load(path)(x.numpy()) == (x * 8).numpy()).all()
    prefix, records = _records(path)
    code = _relist(unpickle(records["bytecode.pkl"], "test"))
    (forward,) = [f for f in code[1:] if f[0].endswith("Counter.forward")]
    (constants,) = [value for name, value in forward[1] if name == "constants"]
    ones = [i for i, c in enumerate(constants) if type(c) is int and c == 1]
    assert len(ones) == 1, constants  # the increment (0 and 3 are the start and the bound)
    constants[ones[0]] = False
    records["bytecode.pkl"] = pickle.dumps(_retuple(code), protocol=2)
    crafted = _write(tmp_path / "bool_counter.ptl", prefix, records)
    message = r"aten::add.int argument 'b' is int, the file passes a bool \(False\)"
    with pytest.raises(ptlite.FormatError, match=message):
        ptlite.load(crafted)


@pytest.mark.parametrize("shape,problem", [((), "0-d array"), ((3, 5), "last dimension is 5, the weight expects 2")])
def test_an_input_a_kernel_cannot_take_is_an_input_error_naming_it(leaf, shape, problem):
    """A .ptl file's inputs have no ranks or sizes to check before running: the first kernel to read one says what
    does not fit, as an InputError naming the input (not an IndexError from inside the kernel)."""
    import numpy as np

    with pytest.raises(ptlite.InputError, match=f"input 'x' cannot be used by ptlite::linear_prepacked .*{problem}"):
        ptlite.load(leaf)(np.ones(shape, np.float32))


def test_a_record_compressed_otherwise_than_deflate_is_refused(leaf, tmp_path):
    """bzip2 and LZMA inflate with no bound zipfile can set: refused before reading."""
    prefix, records = _records(leaf)
    bz = tmp_path / "bzip2.ptl"
    with zipfile.ZipFile(bz, "w") as z:
        for name, data in records.items():
            z.writestr(f"{prefix}/{name}", data,
                       compress_type=zipfile.ZIP_BZIP2 if name == "data.pkl" else zipfile.ZIP_STORED)
    with pytest.raises(ptlite.FormatError, match="'data.pkl' is compressed with method 12"):
        ptlite.load(bz)


def test_a_deflated_record_that_lies_about_its_size_inflates_no_further(leaf, tmp_path):
    """A record declaring 16 bytes whose deflate stream holds 64 MiB: only what it declares is inflated."""
    prefix, records = _records(leaf)
    crafted = _write(tmp_path / "liar.ptl", prefix, records, {"data.pkl": 64 << 20})
    data = bytearray(crafted.read_bytes())
    at = data.find(b"PK\x01\x02")
    while at >= 0:  # central directory entries: the uncompressed size at +24, the local header's at +22
        name_len = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46:at + 46 + name_len].endswith(b"data.pkl"):
            struct.pack_into("<I", data, at + 24, 16)
            struct.pack_into("<I", data, struct.unpack_from("<I", data, at + 42)[0] + 22, 16)
        at = data.find(b"PK\x01\x02", at + 4)
    crafted.write_bytes(bytes(data))
    peak = _load_traced(crafted, "data.pkl")
    assert peak < 16 << 20, f"the lying record peaked at {peak >> 20} MiB"
