"""Read a .ptlite file, checking every size and offset before use; weights are views of the file's bytes, not copies."""

from __future__ import annotations

import gc
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from ptlite.errors import FormatError
from ptlite.ir.graph import BLOCKLIST_KEY, BundledInput, Program
from ptlite.ir.verifier import verify_graph
from ptlite.ops import lookup
from ptlite.version import __version__, version_key

from .encoding import decode_constant, decode_graph, parse_json
from .layout import ALIGN, FORMAT_VERSION, HEADER, HEADER_SIZE, MAGIC, MAX_PROGRAM_BYTES, MIN_VERSION_KEY, WEIGHT_DTYPES
from .source import Source, open_source


def is_ptlite_file(head: bytes) -> bool:
    """Whether the first bytes of a file are a .ptlite magic."""
    return head.startswith(MAGIC)


def _read_header(buf: Any, size: int, name: str) -> tuple[int, int, int, int, int]:
    if size < HEADER_SIZE:
        raise FormatError(f"{name}: file is {size} bytes, too short for a ptlite header ({HEADER_SIZE} bytes); "
                          "it is truncated or not a ptlite file")
    magic, version, _flags, prog_off, prog_size, data_off, data_size, crc, _ = HEADER.unpack_from(buf, 0)
    if magic != MAGIC:
        raise FormatError(f"{name}: not a ptlite file (bad magic {magic!r})")
    if version > FORMAT_VERSION:
        raise FormatError(f"{name}: file format version {version} is newer than this ptlite reads "
                          f"(version {FORMAT_VERSION}); upgrade ptlite")
    if version < 1:
        raise FormatError(f"{name}: invalid format version {version}")
    if prog_off != HEADER_SIZE or prog_size > MAX_PROGRAM_BYTES or prog_off + prog_size > size:
        raise FormatError(f"{name}: program section (offset {prog_off}, {prog_size} bytes) lies outside the "
                          f"{size}-byte file; the file is truncated or corrupt")
    if data_off % ALIGN or data_off < prog_off + prog_size or data_off + data_size > size:
        raise FormatError(f"{name}: data section (offset {data_off}, {data_size} bytes) lies outside the "
                          f"{size}-byte file or is misaligned; the file is truncated or corrupt")
    return prog_off, prog_size, data_off, data_size, crc


# The stored dtypes as little-endian NumPy dtypes (what the file holds), made once.
_LITTLE_ENDIAN = {name: np.dtype(name).newbyteorder("<") for name in WEIGHT_DTYPES}


def _weights(table: Any, buf: Any, data_off: int, data_size: int, name: str) -> dict[str, np.ndarray]:
    if not isinstance(table, list):
        raise FormatError(f"{name}: weights table must be a list")
    weights: dict[str, np.ndarray] = {}
    for i, entry in enumerate(table):
        if type(entry) is not dict:
            raise FormatError(f"{name}: weight entry {i} must be an object")
        wname, dtype, shape = entry.get("name"), entry.get("dtype"), entry.get("shape")
        offset, nbytes = entry.get("offset"), entry.get("nbytes")
        if type(wname) is not str or wname in weights:
            raise FormatError(f"{name}: weight entry {i} has a missing or duplicate name")
        dt = _LITTLE_ENDIAN.get(dtype) if type(dtype) is str else None
        if dt is None:
            raise FormatError(f"{name}: weight {wname!r} has unsupported dtype {dtype!r}")
        count = _element_count(shape)  # exact (no int64 wrap-around a crafted shape could use to match nbytes)
        if count is None:
            raise FormatError(f"{name}: weight {wname!r} has an invalid shape {str(shape)[:60]}")
        if type(offset) is not int or type(nbytes) is not int or offset < 0 or offset % ALIGN:
            raise FormatError(f"{name}: weight {wname!r} has an invalid or misaligned offset {offset!r}")
        if count * dt.itemsize != nbytes:
            raise FormatError(f"{name}: weight {wname!r}: size {nbytes} bytes does not match shape {shape} of {dtype}")
        if offset + nbytes > data_size:
            raise FormatError(f"{name}: weight {wname!r} (offset {offset}, {nbytes} bytes) lies outside the "
                              f"{data_size}-byte data section; the file is truncated or corrupt")
        arr = np.ndarray(shape, dtype=dt, buffer=buf, offset=data_off + offset)  # a read-only view of the map
        weights[wname] = arr if dt.isnative else arr.astype(dt.newbyteorder("="))
    return weights


def _element_count(shape: Any) -> int | None:
    """The number of elements of a shape from the file (a list of at most 64 non-negative ints, as NumPy allows),
    or None if it is not one."""
    if type(shape) is not list or len(shape) > 64:
        return None
    count = 1
    for d in shape:
        if type(d) is not int or d < 0:
            return None
        count *= d
    return count


def read_program(source: Source, in_memory: bool = False) -> Program:
    """Read and validate a .ptlite file into a Program whose weights are read-only views of the file's bytes
    (mapped and guarded, or copied into memory: see ptlite.format.source). source: a path, the file's content
    (bytes, bytearray, memoryview), a binary file object, or a source already opened (ptlite.format.source)."""
    opened = open_source(source, in_memory)
    buf, name = opened.data, opened.name
    size = len(buf)
    prog_off, prog_size, data_off, data_size, crc = _read_header(buf, size, name)
    body = bytes(buf[prog_off:prog_off + prog_size])
    if zlib.crc32(body) != crc:
        raise FormatError(f"{name}: program section checksum mismatch; the file is corrupt")
    with gc_paused():
        return _read_sections(body, buf, data_off, data_size, name)


_PASS_LISTS = ("passes", BLOCKLIST_KEY)


def _read_sections(body: bytes, buf: Any, data_off: int, data_size: int, name: str) -> Program:
    """The Program from the program section (its JSON) and the data section (its weights)."""
    try:
        doc = parse_json(body.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # ValueError: UnicodeDecodeError and json.JSONDecodeError
        raise FormatError(f"{name}: program section is not valid JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("methods"), list):
        raise FormatError(f"{name}: program section lacks a 'methods' list")
    metadata = doc.get("metadata", {})
    if not isinstance(metadata, dict):
        raise FormatError(f"{name}: metadata must be an object")
    _check_version(metadata.get(MIN_VERSION_KEY), doc.get("operators"), name)
    weights = _weights(doc.get("weights", []), buf, data_off, data_size, name)
    program = Program(weights=weights, metadata={k: decode_constant(v) for k, v in metadata.items()})
    program.bundled_inputs = _bundled_inputs(doc.get("bundled_inputs", []), buf, data_off, data_size, name)
    for key in _PASS_LISTS:  # the metadata ptlite acts on at load (the memory plan is checked with the graphs)
        value = program.metadata.get(key, [])
        if type(value) is not list or not all(type(v) is str for v in value):
            raise FormatError(f"{name}: metadata {key!r} must be a list of pass names, not {str(value)[:60]}")
    program.metadata.setdefault("producer", doc.get("producer"))
    _decode_methods(doc["methods"], program, name)
    return program


def _check_version(needed: Any, operators: Any, name: str) -> None:
    """FormatError, naming the version to upgrade to, for a file that needs a newer ptlite than this one."""
    if needed is None:
        return
    try:
        too_new = version_key(needed) > version_key(__version__)
    except ValueError as exc:
        raise FormatError(f"{name}: metadata {MIN_VERSION_KEY!r}: {exc}") from None
    if too_new:
        newer = [op for op in operators if type(op) is str and lookup(op) is None] if type(operators) is list else []
        raise FormatError(f"{name}: the file needs ptlite {needed} or newer (this is {__version__})"
                          + (f"; operators this version lacks: {', '.join(newer[:10])}" if newer else "")
                          + f"; upgrade: pip install -U 'ptlite>={needed}'")


def _bundled_inputs(table: Any, buf: Any, data_off: int, data_size: int, name: str) -> list[BundledInput]:
    """The example calls stored with the program (checked as the weights are: every array inside the data section)."""
    if not isinstance(table, list):
        raise FormatError(f"{name}: bundled_inputs must be a list")
    bundled = []
    for i, entry in enumerate(table):
        if type(entry) is not dict or type(entry.get("method")) is not str:
            raise FormatError(f"{name}: bundled input {i} must be an object naming its method")
        parts: dict[str, list[Any]] = {}
        for part in ("inputs", "outputs"):
            items = entry.get(part)
            if type(items) is not list:
                raise FormatError(f"{name}: bundled input {i} lacks its {part} list")
            for j, item in enumerate(items):
                if type(item) is not dict or set(item) not in ({"array"}, {"value"}) or (
                        "array" in item and type(item["array"]) is not dict):
                    raise FormatError(f"{name}: bundled input {i} {part[:-1]} {j} must hold an array or a value")
            arrays = [dict(item["array"], name=f"bundled input {i} {part[:-1]} {j}")
                      for j, item in enumerate(items) if "array" in item]
            found = iter(_weights(arrays, buf, data_off, data_size, name).values())
            try:
                parts[part] = [next(found) if "array" in item else decode_constant(item["value"]) for item in items]
            except FormatError as exc:
                raise FormatError(f"{name}: bundled input {i} {part}: {exc}") from None
        tolerances = {}
        for key in ("atol", "rtol"):
            value = entry.get(key)
            if type(value) is not list or len(value) != len(parts["outputs"]):
                raise FormatError(f"{name}: bundled input {i}: {key} must list a tolerance per output")
            if not all(type(t) in (int, float) and 0 <= t < float("inf") for t in value):
                raise FormatError(f"{name}: bundled input {i}: {key} values must be finite and non-negative")
            tolerances[key] = [float(t) for t in value]
        bundled.append(BundledInput(entry["method"], parts["inputs"], parts["outputs"], **tolerances))
    return bundled


def _decode_methods(methods: list, program: Program, name: str) -> None:
    try:
        for i, data in enumerate(methods):
            graph = decode_graph(data, f"{name}: method {i}")
            program.methods[graph.name] = graph
    except RecursionError:
        raise FormatError(f"{name}: program nests too deeply") from None
    if "forward" not in program.methods:
        raise FormatError(f"{name}: the program has no 'forward' method"
                          + (f" (its methods: {', '.join(program.methods)[:200]})" if program.methods else ""))
    problems = [f"{g.name}: {p}" for g in program.methods.values()
                for p in verify_graph(g, program, check_operators=False)]
    if problems:
        raise FormatError(f"{name}: invalid program:\n  " + "\n  ".join(problems[:20]))


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while ptlite builds a program (reading this file's JSON, translating a .ptl
    file's checked bytecode, optimizing a program at load): the thousands of objects made would trigger collections
    that free nothing (what is dropped is freed by reference counting). Not for unpickling untrusted data, which can
    make cyclic garbage. Leaves the collector as it found it."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
