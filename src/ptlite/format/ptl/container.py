"""The zip container of a PyTorch Mobile .ptl file: records by name, checked sizes, storages viewed without copying.

`PyTorchStreamWriter` names every record `<archive>/<record>` and stores tensor data uncompressed and 64-byte
aligned, so a stored record is exposed as a read-only NumPy view of the file's bytes (ptlite.format.source); other
records are read (and CRC-checked) by `zipfile`. Every size and offset is checked against the file before use.
"""

from __future__ import annotations

import io
import struct
import zipfile
from typing import Any

import numpy as np

from ptlite.errors import FormatError
from ptlite.format.source import Source, open_source

ZIP_MAGIC = b"PK\x03\x04"
FLATBUFFER_MAGIC = b"PTMF"  # the flatbuffers file identifier, at bytes 4-7

MAX_PICKLE_BYTES = 1 << 30  # a pickle record larger than this is refused before it is read
# What the deflated records of one file may inflate to, together: INFLATE_RATIO times the file's size plus
# INFLATE_SLACK (PyTorch stores records uncompressed; a file zipped again with deflate inflates ~1.1x for weights and
# 5-10x for pickles). A zip bomb is refused before it is inflated.
INFLATE_RATIO = 32
INFLATE_SLACK = 64 << 20
_LOCAL_HEADER = struct.Struct("<4sHHHHHIIIHH")  # signature ... name length, extra length (30 bytes)


class Archive:
    """An open .ptl zip: `read(name)` for small records, `array(name, dtype, count)` for storages."""

    def __init__(self, source: Source, in_memory: bool = False) -> None:
        opened = open_source(source, in_memory)  # mapped and guarded, or in memory (ptlite.format.source)
        self.path = opened.name  # what messages call the file: its path, or "<bytes>", or a file object's name
        self._map = opened.data
        self.size = len(self._map)
        if self.size < len(ZIP_MAGIC):
            raise FormatError(f"{self.path}: file is {self.size} bytes, too short for a PyTorch Mobile file")
        self._inflated = 0  # bytes the deflated records read so far inflated to
        try:  # zipfile reads the same bytes the storages are views of, not the file again
            self._zip = zipfile.ZipFile(ViewFile(self._map))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, struct.error,
                NotImplementedError, RuntimeError) as exc:  # anything zipfile says about a damaged directory
            raise FormatError(f"{self.path}: not a readable zip archive ({exc}); the file is truncated or "
                              "corrupt") from None
        self.prefix, self.records = self._index()

    def _index(self) -> tuple[str, dict[str, zipfile.ZipInfo]]:
        infos = self._zip.infolist()
        if not infos:
            raise FormatError(f"{self.path}: the zip archive is empty")
        prefix = infos[0].filename.split("/", 1)[0]
        records: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            archive, slash, name = info.filename.partition("/")
            if archive != prefix or not slash or not name:
                raise FormatError(f"{self.path}: record {info.filename!r} is not under the archive folder "
                                  f"{prefix!r}/; not a file PyTorch wrote")
            if name in records:
                raise FormatError(f"{self.path}: record {info.filename!r} appears twice")
            if info.flag_bits & 0x1:
                raise FormatError(f"{self.path}: record {info.filename!r} is encrypted")
            if info.header_offset + info.compress_size > self.size:
                raise FormatError(f"{self.path}: record {info.filename!r} lies outside the {self.size}-byte file; "
                                  "the file is truncated")
            records[name] = info
        return prefix, records

    def close(self) -> None:
        """Close the zip reader; arrays already returned keep the file mapped."""
        self._zip.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def has(self, name: str) -> bool:
        return name in self.records

    def names(self) -> list[str]:
        return list(self.records)

    def read(self, name: str, limit: int = MAX_PICKLE_BYTES) -> bytes:
        """The bytes of record `name` (decompressed and CRC-checked)."""
        info = self._info(name)
        if info.file_size > limit:
            raise FormatError(f"{self.path}: record {name!r} is {info.file_size} bytes, more than the "
                              f"{limit} this reader accepts")
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise FormatError(f"{self.path}: record {name!r} is compressed with method {info.compress_type}; PyTorch "
                              "stores records uncompressed, and ptlite reads stored and deflated ones only")
        if info.compress_type != zipfile.ZIP_STORED:
            budget = INFLATE_RATIO * self.size + INFLATE_SLACK
            if self._inflated + info.file_size > budget:
                raise FormatError(f"{self.path}: record {name!r} inflates from {info.compress_size} to "
                                  f"{info.file_size} bytes, past the {budget} bytes that this {self.size}-byte "
                                  f"file's deflated records may inflate to ({INFLATE_RATIO}x its size + "
                                  f"{INFLATE_SLACK >> 20} MiB); PyTorch stores records uncompressed: the file is "
                                  "crafted or was zipped again")
            self._inflated += info.file_size
        try:
            with self._zip.open(info) as f:  # read() of the whole record would inflate past a size that lies
                data = f.read(info.file_size)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, RuntimeError,
                struct.error) as exc:
            raise FormatError(f"{self.path}: cannot read record {name!r} ({type(exc).__name__}: {exc}); the file "
                              "is corrupt") from None
        except Exception as exc:  # zlib.error and friends: any failure to decode is a corrupt file
            raise FormatError(f"{self.path}: cannot read record {name!r} ({type(exc).__name__}: {exc}); the file "
                              "is corrupt") from None
        if len(data) != info.file_size:
            raise FormatError(f"{self.path}: record {name!r} holds {len(data)} bytes, its header says "
                              f"{info.file_size}")
        return data

    def record_size(self, name: str) -> int:
        return self._info(name).file_size

    def array(self, name: str, dtype: np.dtype, count: int) -> np.ndarray:
        """Record `name` as a read-only 1-D array of `count` elements of `dtype`; the record must hold exactly
        that many bytes. Stored records are views of the mapped file (no copy)."""
        info = self._info(name)
        nbytes = count * dtype.itemsize
        if info.file_size != nbytes:
            raise FormatError(f"{self.path}: storage record {name!r} holds {info.file_size} bytes, but the pickle "
                              f"declares {count} elements of {dtype.name} ({nbytes} bytes); the file is corrupt")
        if info.compress_type == zipfile.ZIP_STORED and info.compress_size == info.file_size:
            offset = self._data_offset(info)
            return np.frombuffer(self._map, dtype=dtype, count=count, offset=offset)
        return np.frombuffer(self.read(name, limit=max(nbytes, 1)), dtype=dtype, count=count)

    def _info(self, name: str) -> zipfile.ZipInfo:
        try:
            return self.records[name]
        except KeyError:
            raise FormatError(f"{self.path}: record {name!r} is missing from the archive") from None

    def _data_offset(self, info: zipfile.ZipInfo) -> int:
        """Where a record's bytes start: after its local header, whose name must match the central directory."""
        start = info.header_offset
        if start + _LOCAL_HEADER.size > self.size:
            raise FormatError(f"{self.path}: local header of {info.filename!r} lies outside the file")
        fields = _LOCAL_HEADER.unpack_from(self._map, start)
        if fields[0] != ZIP_MAGIC:
            raise FormatError(f"{self.path}: bad local header for record {info.filename!r}; the file is corrupt")
        name_len, extra_len = fields[9], fields[10]
        name = bytes(self._map[start + 30:start + 30 + name_len])
        if name != info.orig_filename.encode("utf-8", "surrogateescape") and name.decode("cp437") != info.filename:
            raise FormatError(f"{self.path}: local header names {name[:60]!r}, the directory "
                              f"{info.filename!r}; the file is corrupt")
        offset = start + 30 + name_len + extra_len
        if offset + info.file_size > self.size:
            raise FormatError(f"{self.path}: record {info.filename!r} ({info.file_size} bytes at offset {offset}) "
                              f"lies outside the {self.size}-byte file; the file is truncated")
        return offset


class ViewFile(io.RawIOBase):
    """A read-only, seekable file over bytes in memory or mapped (an archive's), which zipfile reads records from
    without copying the whole."""

    def __init__(self, data: memoryview) -> None:
        super().__init__()
        self._data = data
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: len(self._data)}.get(whence)
        if base is None:
            raise ValueError(f"invalid whence {whence}")
        if base + offset < 0:
            raise OSError(f"negative seek position {base + offset}")
        self._pos = base + offset
        return self._pos

    def read(self, size: int | None = -1) -> bytes:
        end = len(self._data) if size is None or size < 0 else min(self._pos + size, len(self._data))
        data = bytes(self._data[self._pos:end]) if end > self._pos else b""
        self._pos += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(memoryview(buffer).nbytes)
        memoryview(buffer).cast("B")[:len(data)] = data
        return len(data)


def sniff(head: bytes) -> str | None:
    """'zip' or 'flatbuffer' when the first 8 bytes of a file look like a PyTorch Mobile file, else None."""
    if head[4:8] == FLATBUFFER_MAGIC:
        return "flatbuffer"
    if head[:4] == ZIP_MAGIC:
        return "zip"
    return None
