"""What every fuzz target does with one input: the bytes as a model file, loaded and run as a user would.

A hostile file may only end in one of ptlite's own errors (`PtliteError`: FormatError, UnsupportedOperatorError,
InputError, ExecutionError, ...). Anything else escaping (an IndexError from a kernel, a RecursionError, a
MemoryError), a crash (a signal) or a hang (libFuzzer's -timeout) is a finding. The run is bounded like a device
would bound it: inputs of at most MAX_INPUT_ELEMENTS elements, and libFuzzer's -rss_limit_mb for memory.

Checksums are no defence against an attacker, who computes them, and they stop almost every mutation at the
first check: for about half the inputs (the first byte decides) the harness makes them right before loading (a
.ptlite file's program CRC; a .ptl zip's records packed again with their CRCs), so that mutations reach the JSON,
the pickles, the bytecode and the kernels behind them.
"""

from __future__ import annotations

import io
import os
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

import ptlite
from ptlite.format.layout import HEADER

MAX_INPUT_ELEMENTS = 1 << 20  # a method whose declared inputs are larger is loaded, not called
_SCRATCH = tempfile.mkdtemp(prefix="ptlite-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


def inputs_for(module: ptlite.Module) -> list[Any] | None:
    """Zeros (or a scalar) for each input of forward, from its specs; None if they cannot be made within bounds."""
    values: list[Any] = []
    for spec in module.input_specs:
        if spec.type == "Tensor":
            shape = tuple(2 if d is None else d for d in (spec.shape or (1, 3, 8, 8)))
            if len(shape) > 8 or any(type(d) is not int or d < 0 for d in shape) \
                    or int(np.prod(shape, dtype=np.float64)) > MAX_INPUT_ELEMENTS:
                return None
            try:
                values.append(np.zeros(shape, dtype=spec.dtype or np.float32))
            except TypeError:
                return None
        elif spec.has_default:
            values.append(spec.default)
        elif spec.type in ("int", "float", "bool"):
            values.append({"int": 1, "float": 1.0, "bool": False}[spec.type])
        else:
            return None
    return values


def _fix_ptlite(data: bytes) -> bytes:
    """The program section's CRC made right, where the header's offsets lie inside the data."""
    if len(data) < HEADER.size:
        return data
    fields = list(HEADER.unpack_from(data))  # magic, version, flags, program offset and size, data ..., CRC, reserved
    off, size = fields[3], fields[4]
    if off + size > len(data):
        return data
    fields[7] = zlib.crc32(data[off:off + size])
    return HEADER.pack(*fields) + data[HEADER.size:]


def _fix_zip(data: bytes) -> bytes:
    """The zip's records packed again (stored, with their CRCs); the input as it is where zipfile cannot list them."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            records = []
            for info in z.infolist()[:64]:
                with z.open(info) as f:
                    f._expected_crc = None  # read past a wrong CRC: the point is to make it right
                    records.append((info.filename, f.read(1 << 22)))
    except Exception:
        return data
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, body in records:
            z.writestr(name, body, compress_type=zipfile.ZIP_STORED)
    return out.getvalue()


def run_one(data: bytes, suffix: str, backends: tuple[str, ...]) -> None:
    """Load `data` as a file (`suffix`) on `backends` and call forward once; ptlite's errors are the expected end."""
    if data and data[0] & 1:
        data = _fix_ptlite(data) if data.startswith(b"\x89PTLITE\n") else \
            _fix_zip(data) if data.startswith(b"PK") else data
    path = os.path.join(_SCRATCH, f"input{suffix}")
    with open(path, "wb") as f:
        f.write(data)
    try:
        module = ptlite.load(path, backends=backends)
        args = inputs_for(module)
        if args is not None:
            module(*args)
    except ptlite.PtliteError:
        pass


def warm(seeds: str | os.PathLike | None, suffix: str, backends: tuple[str, ...]) -> None:
    """Run the seed files once, so that every module their loading and running imports is imported now (the
    targets call this inside atheris.instrument_imports: ptlite imports kernel families when first used)."""
    for path in sorted(Path(seeds).iterdir()) if seeds and Path(seeds).is_dir() else []:
        run_one(path.read_bytes(), suffix, backends)
