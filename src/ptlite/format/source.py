"""A model's bytes for the readers, from a path (mapped and guarded, or read into memory), from bytes, or from a binary
file object (copied into memory once).

Mapped (a path, the default where ptlite.format._mapped was built, on POSIX systems): loading costs no copy, and the
pages are shared with other processes mapping the file. The file may then change on disk without the process dying:
replacing it (`os.replace`, or deleting it) leaves the mapped file as it was, and a file truncated or overwritten in
place is noticed after the call that saw it (its pages past the new end read as zeros instead of raising SIGBUS),
which raises FileChangedError instead of returning results computed from the changed bytes
(`check_sources`). Read (`in_memory=True`, or where the extension is missing): the file is copied into memory at
load, and nothing done to it afterwards matters.

Bytes (`bytes`, `bytearray`, `memoryview`) are the content, never a path: they are copied once into a buffer that
starts on a 64-byte boundary (weights are zero-copy views of it and need that alignment), which a later change to a
bytearray does not reach. A binary file object (anything with `.read()`: an open file, `io.BytesIO`,
`zipfile.ZipFile.open(...)`) is read from its position to its end into such a buffer, and never mapped, even an open
regular file: `fileno()` does not say what `.read()` returns (gzip, bz2 and lzma files report the descriptor of the
compressed file under them, and a file may have been read past its start), and the map's guard needs the path that
named the file, which may name another file by now. Pass the path to map a file. Neither is guarded: the copy is the
load's own, so nothing done to the original afterwards reaches it.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Iterable
from typing import IO, Any, Union

import numpy as np

from ptlite.errors import FileChangedError, FormatError
from ptlite.ir.memory_plan import aligned_empty
from ptlite.ir.weights import seal

try:
    from ._mapped import MappedFile, map_file
except ImportError:  # not built (no compiler at install): files are read
    MappedFile = map_file = None  # type: ignore[assignment,misc]

# What ptlite.load takes: a path, the file's content, or a binary file object to read it from.
Source = Union[str, os.PathLike, bytes, bytearray, memoryview, IO[bytes], "Opened"]
BYTES_NAME = "<bytes>"  # what messages call content given as bytes
_CHUNK = 1 << 20  # what one read of a file object of unknown length asks for


class Opened:
    """A model's bytes, opened once: `data` (read-only; its start 64-byte aligned where ptlite copied it, page
    aligned where it is mapped), `name` (what messages call it: the path, the file object's name, or "<bytes>") and
    whether it is `mapped` (a guarded map of a path: the only kind that can change under a loaded module). The
    readers take one in place of a path, so that a source is opened (a file object read) once."""

    __slots__ = ("data", "name", "mapped")

    def __init__(self, data: memoryview, name: str, mapped: bool) -> None:
        self.data = data
        self.name = name
        self.mapped = mapped

    def __repr__(self) -> str:
        return f"<Opened {self.name}: {len(self.data)} bytes, {'mapped' if self.mapped else 'in memory'}>"


def open_source(source: Source, in_memory: bool = False) -> Opened:
    """A model's bytes, read-only, from a path (a guarded map; or, in_memory or where there is no guarded map here, a
    copy in memory that starts on a 64-byte boundary), from bytes or a binary file object (copied into such memory
    once; in_memory changes nothing), or an Opened source (returned as it is). FormatError for an empty source;
    TypeError for anything else, and for a text-mode file object."""
    if isinstance(source, Opened):
        return source
    if isinstance(source, (str, os.PathLike)):
        return _open_path(source, in_memory)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return Opened(_copied(_flat(source), BYTES_NAME), BYTES_NAME, False)
    if isinstance(source, io.TextIOBase):
        raise TypeError(f"{source_name(source)} is a file object opened in text mode; ptlite reads a model's bytes: "
                        "open it in binary mode (open(path, 'rb'))")
    if callable(getattr(source, "read", None)):
        name = source_name(source)
        return Opened(_read_file_object(source, name), name, False)
    raise TypeError(f"expected a file path (str or os.PathLike), the file's content (bytes, bytearray or memoryview) "
                    f"or a binary file object (with .read()), got {type(source).__name__}: {str(source)[:60]}")


def source_name(source: Any) -> str:
    """What messages call a source: its path, a file object's name (as `open` and zipfile's members have), or
    "<bytes>" for content; `<TypeName>` for a file object without a name."""
    if isinstance(source, Opened):
        return source.name
    if isinstance(source, (str, os.PathLike)):
        return os.fsdecode(os.fspath(source))
    if isinstance(source, (bytes, bytearray, memoryview)):
        return BYTES_NAME
    name = getattr(source, "name", None)
    if isinstance(name, (str, os.PathLike)):  # not an int (a file opened from a descriptor)
        return os.fsdecode(os.fspath(name))
    return f"<{type(source).__name__}>"


def _open_path(path: str | os.PathLike, in_memory: bool) -> Opened:
    name = os.fsdecode(os.fspath(path))
    if not in_memory and map_file is not None:
        try:
            return Opened(memoryview(map_file(name)), name, True)
        except OSError:
            if os.path.isdir(name):  # map_file's "not a regular file" would not say what it is
                raise IsADirectoryError(errno.EISDIR, "a folder, not a model file", name) from None
            if not os.path.isfile(name):
                raise
            # not mappable (a special file, no guard slot left): read it
    with open(name, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        data = aligned_empty(size, np.uint8)
        got = _fill(f, memoryview(data))
    if size == 0:
        raise FormatError(f"{name}: file is empty")
    if got != size:
        raise FormatError(f"{name}: {got} of its {size} bytes could be read; the file changed while it was read")
    return Opened(memoryview(seal(data)), name, False)  # frozen (ptlite.ir.weights): kernels need not compare


def _fill(f: Any, view: memoryview) -> int:
    """Read from f into view until it is full or f ends; the number of bytes read."""
    got = 0
    while got < len(view):  # one read returns at most 2 GiB on Linux
        n = f.readinto(view[got:])
        if not n:
            break
        got += n
    return got


def _flat(content: bytes | bytearray | memoryview) -> memoryview:
    """Content as a flat view of its bytes; TypeError for a view that is not contiguous."""
    view = memoryview(content)
    if not view.c_contiguous:
        raise TypeError("the memoryview given as a model's content is not contiguous; pass bytes(view)")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def _copied(view: memoryview, name: str) -> memoryview:
    """The bytes of view copied into read-only memory that starts on a 64-byte boundary."""
    if not len(view):
        raise FormatError(f"{name}: the content is empty (0 bytes)")
    data = aligned_empty(len(view), np.uint8)
    data[:] = np.frombuffer(view, np.uint8)
    return memoryview(seal(data))


def _read_file_object(f: Any, name: str) -> memoryview:
    """What f.read() gives, from its position to its end, in 64-byte aligned read-only memory. An open regular file
    is read straight into that memory; another file object in chunks, each copied there at the end."""
    size = _regular_file_remaining(f)
    if size is not None:
        data = aligned_empty(size, np.uint8)
        got = _fill(f, memoryview(data))
        if got == size and not f.read(1):
            if not size:
                raise FormatError(f"{name}: nothing is left to read in the file object (0 bytes)")
            return memoryview(seal(data))
        raise FormatError(f"{name}: the file changed while it was read ({got} bytes where {size} were left)")
    chunks = []
    while True:
        chunk = f.read(_CHUNK)
        if isinstance(chunk, str):
            raise TypeError(f"{name}: .read() returned text (str); ptlite reads a model's bytes: open the file in "
                            "binary mode (open(path, 'rb'))")
        if chunk is None:
            raise TypeError(f"{name}: .read() returned None (a non-blocking stream with nothing to read yet); pass "
                            "the file's content as bytes, or a blocking file object")
        if not isinstance(chunk, (bytes, bytearray, memoryview)):
            raise TypeError(f"{name}: .read() returned {type(chunk).__name__}, not bytes")
        if not chunk:
            break
        chunks.append(chunk)
    views = [_flat(chunk) for chunk in chunks]
    if not views:
        raise FormatError(f"{name}: nothing is left to read in the file object (0 bytes)")
    data = aligned_empty(sum(len(v) for v in views), np.uint8)
    at = 0
    for view in views:  # each chunk copied once, into place
        data[at:at + len(view)] = np.frombuffer(view, np.uint8)
        at += len(view)
    return memoryview(seal(data))


def _regular_file_remaining(f: Any) -> int | None:
    """The bytes left to read in f when it is an open regular file read as it is stored (open(path, 'rb'), whose
    fileno() is what it reads; not gzip and the like, whose fileno() is the compressed file's), else None."""
    raw = f.raw if isinstance(f, io.BufferedReader) else f
    if not isinstance(raw, io.FileIO):
        return None
    try:
        status = os.fstat(raw.fileno())
        position = f.tell()
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(status.st_mode):
        return None
    return max(status.st_size - position, 0)


def sources_of(arrays: Iterable[Any]) -> list[Any]:
    """The guarded maps that these arrays (weights) are views of, each once."""
    if MappedFile is None:
        return []
    found: dict[int, Any] = {}
    for a in arrays:
        base = a
        while isinstance(base, (np.ndarray, memoryview)):  # views of views, through memoryviews (seal's)
            base = base.base if isinstance(base, np.ndarray) else base.obj
        if isinstance(base, MappedFile):
            found[id(base)] = base
    return list(found.values())


def check_sources(sources: list[Any]) -> None:
    """FileChangedError if a mapped file that weights are read from changed since it was mapped."""
    for source in sources:
        what = source.changed()
        if what is not None:
            raise FileChangedError(
                f"{source.path}: {what}, so this call's results were computed from changed bytes and are discarded. "
                "Load the file again (ptlite.load). To replace a model file that is in use, write the new file "
                "beside it and os.replace() it onto the old name (a loaded module keeps reading the old file), "
                "or load with ptlite.load(path, in_memory=True) to copy the file into memory at load")
