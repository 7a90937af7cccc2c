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
from .layout import FORMAT_VERSION, HEADER, HEADER_SIZE, MAGIC, MIN_VERSION_KEY, WEIGHT_DTYPES, align

PRODUCER = "ptlite"


def _producer_version() -> str:
    from ptlite.version import __version__

    return f"{PRODUCER} {__version__}"


def _array_entry(array: Any, offset: int, what: str) -> tuple[dict[str, Any], np.ndarray]:
    """An array's table entry (dtype, shape, offset, nbytes) at `offset` of the data section, and its little-endian
    contiguous bytes to write there."""
    arr = np.asarray(array)
    if arr.dtype.name not in WEIGHT_DTYPES:
        raise TypeError(f"{what} has dtype {arr.dtype}, which the file format cannot store")
    arr = np.asarray(arr, dtype=arr.dtype.newbyteorder("<"), order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
    return {"dtype": arr.dtype.name, "shape": list(arr.shape), "offset": offset, "nbytes": arr.nbytes}, arr


def _data_tables(program: Program) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[np.ndarray], int]:
    """The weights table, the bundled inputs' table, the arrays of both in the order they are written, and the data
    section's size."""
    table, arrays, offset = [], [], 0

    def place(array: Any, what: str) -> dict[str, Any]:
        nonlocal offset
        entry, arr = _array_entry(array, offset, what)
        arrays.append(arr)
        offset = align(offset + arr.nbytes)
        return entry

    for name, array in program.weights.items():
        table.append({"name": name, **place(array, f"weight {name!r}")})

    def item(value: Any, what: str) -> dict[str, Any]:
        if isinstance(value, np.ndarray):
            return {"array": place(value, what)}
        return {"value": encode_constant(value)}

    for i, call in enumerate(program.bundled_inputs):  # what the reader would refuse is refused here
        if problem := call.problem(program):
            raise ValueError(f"bundled input {i}: {problem}")
    bundled = [{"method": b.method, "atol": [float(t) for t in b.atol], "rtol": [float(t) for t in b.rtol],
                "inputs": [item(v, f"bundled input {i} argument {j}") for j, v in enumerate(b.inputs)],
                "outputs": [item(v, f"bundled input {i} output {j}") for j, v in enumerate(b.outputs)]}
               for i, b in enumerate(program.bundled_inputs)]
    return table, bundled, arrays, offset


def program_json(program: Program, weight_table: list[dict[str, Any]],
                 bundled_table: list[dict[str, Any]] | None = None) -> bytes:
    """The program section: methods, weights table, metadata (with the least ptlite version the operators need),
    operator list, bundled inputs."""
    from ptlite.ops import required_version

    operators = program.operator_names()
    metadata = {k: encode_constant(v) for k, v in program.metadata.items()}
    metadata[MIN_VERSION_KEY] = required_version(operators)[0]
    doc = {
        "producer": _producer_version(),
        "methods": [encode_graph(g) for g in program.methods.values()],
        "weights": weight_table,
        "operators": operators,
        "metadata": metadata,
    }
    if bundled_table:
        doc["bundled_inputs"] = bundled_table
    return json.dumps(doc, separators=(",", ":"), allow_nan=False).encode("utf-8")


def save(program: Program, path: str | os.PathLike) -> None:
    """Verify the program and write it to `path` (conventionally with the .ptlite extension)."""
    verify(program)
    table, bundled, arrays, data_size = _data_tables(program)
    body = program_json(program, table, bundled)
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
            for arr in arrays:  # each at its entry's offset: aligned as _data_tables placed them
                f.write(arr.reshape(-1).view(np.uint8).data)  # no copy of the weight
                f.write(b"\0" * (align(arr.nbytes) - arr.nbytes))
            if f.tell() != data_offset + data_size:  # the last weight's padding is part of the data section
                f.write(b"\0" * (data_offset + data_size - f.tell()))
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    os.replace(tmp, path)
