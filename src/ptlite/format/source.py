"""A model file's bytes for the readers: mapped and guarded, or read into memory.

Mapped (the default where ptlite.format._mapped was built, on POSIX systems): loading costs no copy, and the pages
are shared with other processes mapping the file. The file may then change on disk without the process dying:
replacing it (`os.replace`, or deleting it) leaves the mapped file as it was, and a file truncated or overwritten in
place is noticed after the call that saw it (its pages past the new end read as zeros instead of raising SIGBUS),
which raises FileChangedError instead of returning results computed from the changed bytes
(`check_sources`). Read (`in_memory=True`, or where the extension is missing): the file is copied into memory at
load, and nothing done to it afterwards matters.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from ptlite.errors import FileChangedError, FormatError
from ptlite.ir.memory_plan import aligned_empty
from ptlite.ir.weights import seal

try:
    from ._mapped import MappedFile, map_file
except ImportError:  # not built (no compiler at install): files are read
    MappedFile = map_file = None  # type: ignore[assignment,misc]


def open_source(path: str | os.PathLike, in_memory: bool = False) -> memoryview:
    """The file's bytes, read-only: a guarded map, or (in_memory, or no guarded map here) a copy in memory that
    starts on a 64-byte boundary. FormatError for an empty file."""
    name = os.fspath(path)
    if not in_memory and map_file is not None:
        try:
            return memoryview(map_file(name))
        except OSError:
            if not os.path.isfile(name):
                raise
            # not mappable (a special file, no guard slot left): read it
    with open(name, "rb", buffering=0) as f:
        size = os.fstat(f.fileno()).st_size
        data = aligned_empty(size, np.uint8)
        view, got = memoryview(data), 0
        while got < size:  # one read returns at most 2 GiB on Linux
            n = f.readinto(view[got:])
            if not n:
                break
            got += n
    if size == 0:
        raise FormatError(f"{name}: file is empty")
    if got != size:
        raise FormatError(f"{name}: {got} of its {size} bytes could be read; the file changed while it was read")
    return memoryview(seal(data))  # frozen (ptlite.ir.weights): kernels need not compare derived values


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
