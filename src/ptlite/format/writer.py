"""Write a Program to a .ptlite file: header, program JSON, weights as aligned raw little-endian arrays."""

from __future__ import annotations

import json
import os
import zlib
from typing import Any

import numpy as np

from ptlite.ir.graph import Program
from ptlite.ir.verifier import verify

from .encoding import encode_constant, encode_graph
from .layout import FORMAT_VERSION, HEADER, HEADER_SIZE, MAGIC, WEIGHT_DTYPES, align

PRODUCER = "ptlite"


def _producer_version() -> str:
    from ptlite.version import __version__

    return f"{PRODUCER} {__version__}"


def _weight_table(program: Program) -> tuple[list[dict[str, Any]], list[np.ndarray], int]:
    table, arrays, offset = [], [], 0
    for name, array in program.weights.items():
        arr = np.asarray(array)
        if arr.dtype.name not in WEIGHT_DTYPES:
            raise TypeError(f"weight {name!r} has dtype {arr.dtype}, which the file format cannot store")
        arr = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        table.append({"name": name, "dtype": arr.dtype.name, "shape": list(arr.shape), "offset": offset,
                      "nbytes": arr.nbytes})
        arrays.append(arr)
        offset = align(offset + arr.nbytes)
    return table, arrays, offset


def program_json(program: Program, weight_table: list[dict[str, Any]]) -> bytes:
    """The program section: methods, weights table, metadata, operator list."""
    doc = {
        "producer": _producer_version(),
        "methods": [encode_graph(g) for g in program.methods.values()],
        "weights": weight_table,
        "operators": program.operator_names(),
        "metadata": {k: encode_constant(v) for k, v in program.metadata.items()},
    }
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).encode("utf-8")


def save(program: Program, path: str | os.PathLike) -> None:
    """Verify the program and write it to `path` (conventionally with the .ptlite extension)."""
    verify(program)
    table, arrays, data_size = _weight_table(program)
    body = program_json(program, table)
    data_offset = align(HEADER_SIZE + len(body))
    header = HEADER.pack(MAGIC, FORMAT_VERSION, 0, HEADER_SIZE, len(body), data_offset, data_size,
                         zlib.crc32(body), b"\0" * 12)
    tmp = f"{os.fspath(path)}.tmp{os.getpid()}"
    folder = os.path.dirname(os.path.abspath(os.fspath(path)))
    if not os.path.isdir(folder):  # else open() would name the temporary file
        raise FileNotFoundError(f"cannot write {os.fspath(path)}: no directory {folder}")
    try:
        with open(tmp, "wb") as f:
            f.write(header)
            f.write(body)
            f.write(b"\0" * (data_offset - HEADER_SIZE - len(body)))
            for entry, arr in zip(table, arrays):
                assert f.tell() == data_offset + entry["offset"]
                f.write(arr.reshape(-1).view(np.uint8).data)  # no copy of the weight
                f.write(b"\0" * (align(arr.nbytes) - arr.nbytes))
            if f.tell() != data_offset + data_size:  # the last weight's padding is part of the data section
                f.write(b"\0" * (data_offset + data_size - f.tell()))
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    os.replace(tmp, path)
