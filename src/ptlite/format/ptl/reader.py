"""Read a PyTorch Mobile .ptl file (zip, bytecode versions 4 to 8) into a ptlite Program, without torch and without
running anything from the file: restricted unpickling, then translation of each method's bytecode into the IR."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from typing import Any

from ptlite import ops
from ptlite.errors import FormatError, UnsupportedOperatorError
from ptlite.format.pytorch_quantized import summary
from ptlite.format.reader import gc_paused
from ptlite.format.source import Opened, Source, open_source, source_name
from ptlite.ir.graph import Program
from ptlite.ir.verifier import verify_graph

from .bytecode import Function, parse_bytecode
from .container import Archive, ViewFile, sniff
from .flatbuffer import read_flatbuffer
from .quantized import is_translated
from .restore import is_packed, restore_objects
from .state import StateChanged, StateSlot, max_reruns
from .translate import Translator
from .unpickler import ClassTable, ScriptObject, StorageSource, unpickle

_HIDDEN_METHODS = ("__setstate__", "__getstate__")


def sniff_file(source: Source) -> str | None:
    """'zip' or 'flatbuffer' when a file's content looks like a PyTorch Mobile file, else None. source: a path, the
    content (bytes, bytearray, memoryview), a source already opened (ptlite.format.source), or a seekable binary file
    object (its first bytes are read, and its position put back)."""
    return sniff(_head(source))


def _head(source: Source) -> bytes:
    """The first 8 bytes of a source, without consuming a file object."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as f:
            return f.read(8)
    if isinstance(source, Opened):
        return bytes(source.data[:8])
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(memoryview(source).cast("B")[:8]) if memoryview(source).c_contiguous else b""
    seekable = getattr(source, "seekable", None)
    if not (callable(seekable) and seekable()):
        raise TypeError(f"{source_name(source)}: a file object that cannot seek would be consumed by sniffing it; "
                        "open it first (ptlite.format.source.open_source) and pass that")
    position = source.tell()
    head = source.read(8)
    source.seek(position)
    if not isinstance(head, bytes):
        raise TypeError(f"{source_name(source)}: .read() returned {type(head).__name__}, not bytes: open the file in "
                        "binary mode (open(path, 'rb'))")
    return head


def is_pytorch_mobile(source: Source) -> bool:
    """Whether a file is a PyTorch Mobile file: a flatbuffer, or a zip archive holding bytecode.pkl (a file
    saved with torch.jit.save is a zip archive too, without it). source: as for sniff_file."""
    kind = sniff_file(source)
    if kind != "zip":
        return kind == "flatbuffer"
    try:
        with zipfile.ZipFile(source if isinstance(source, (str, os.PathLike)) else ViewFile(_bytes_of(source))) as zf:
            return any(n.split("/", 1)[-1] == "bytecode.pkl" for n in zf.namelist())
    except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, RuntimeError):
        return False


def _bytes_of(source: Source) -> memoryview:
    """The bytes of a source that is not a path: an opened one's, content as it is, a seekable file object's from
    its position (read, and its position put back)."""
    if isinstance(source, Opened):
        return source.data
    if isinstance(source, (bytes, bytearray, memoryview)):
        return memoryview(source)
    position = source.tell()
    try:
        return open_source(source).data
    finally:
        source.seek(position)


def read_ptl(source: Source, methods: Sequence[str] | None = None, *, evaluate: ops.Evaluate,
             in_memory: bool = False) -> Program:
    """Translate a .ptl file into a Program whose methods are the root module's methods, forward first.

    methods: the names of the methods to translate; by default forward and the other public methods (those
    exported with @torch.jit.export). Methods whose name starts with '_' are helpers that the file keeps because
    a method calls them (torchvision's `_forward_impl`, which forward already inlines); name them to get them.
    evaluate: computes a pure operator whose arguments the bytecode fixes, so that the translation keeps its result
    instead (the reference backend's `evaluate`: ptlite.load_program hands it in).
    source: a path, the file's content (bytes, bytearray, memoryview), a binary file object, or a source already
    opened (ptlite.format.source).
    in_memory: copy the file into memory instead of mapping it (ptlite.format.source; content and file objects are
    always copied into memory).
    """
    opened = open_source(source, in_memory)  # once: a file object is read here, and the readers take this
    name = opened.name
    kind = sniff_file(opened)
    if kind == "flatbuffer":
        version, operator_version, functions, root = read_flatbuffer(opened)
    elif kind == "zip":
        version, operator_version, functions, root = _read_zip(opened)
    else:
        raise FormatError(f"{name}: not a PyTorch Mobile file (neither a zip archive nor a flatbuffer)")
    if not isinstance(root, ScriptObject):
        raise FormatError(f"{name}: the file's state is not a TorchScript module object")
    _check_objects(root, functions, name)
    program = Program(metadata={"capture": "pytorch-mobile", "bytecode_version": version,
                                "operator_version": operator_version})
    # Translation makes thousands of IR objects and no garbage: paused, the collector does not rescan them. Not while
    # unpickling, where a hostile file could make cyclic garbage (self-holding lists, dropped) that only it frees.
    with gc_paused():
        _translate(program, _root_methods(functions, root, methods, name), functions, root, operator_version, name,
                   evaluate)
    return program


def _read_zip(opened: Opened) -> tuple[int, int, dict[str, Function], Any]:
    """(bytecode version, operator version, functions, root object) of the zip variant."""
    name = opened.name
    with Archive(opened) as archive:
        if not archive.has("bytecode.pkl"):
            raise FormatError(f"{name}: a zip archive without bytecode.pkl, so not a PyTorch Mobile file (a file "
                              "saved with torch.jit.save needs torch: convert it with 'ptlite convert')")
        big_endian = archive.has("byteorder") and archive.read("byteorder", limit=16).strip() == b"big"
        operator_version = _operator_version(archive, name)
        classes = ClassTable()
        folder = "bytecode" if any(n.startswith("bytecode/") for n in archive.names()) else "constants"
        code = unpickle(archive.read("bytecode.pkl"), f"{name}: bytecode.pkl",
                        StorageSource(archive, folder, big_endian), classes)
        version, functions = parse_bytecode(code, name)
        root = unpickle(archive.read("data.pkl"), f"{name}: data.pkl", StorageSource(archive, "data", big_endian),
                        classes)
        restore_objects(root, functions, name)
    return version, operator_version, functions, root


def _operator_version(archive: Archive, name: str) -> int:
    record = ".data/version" if archive.has(".data/version") else "version"
    text = archive.read(record, limit=32).strip()
    if not text.isdigit():
        raise FormatError(f"{name}: record {record} holds {text[:20]!r}, not a version number")
    return int(text)


def _check_objects(root: ScriptObject, functions: dict[str, Function], name: str) -> None:
    """Every object must be an attribute holder (its __setstate__ has run) or packed weights."""
    for obj in _all_objects(root):
        if f"{obj.qualname}.__setstate__" in functions and not isinstance(obj.state, dict):
            raise UnsupportedOperatorError(f"{name}: class {obj.qualname} restores its state with a TorchScript "
                                           "__setstate__, which ptlite runs in zip .ptl files only")
        if not isinstance(obj.state, dict) and not is_packed(obj):
            raise FormatError(f"{name}: object of class {obj.qualname} has no attribute dictionary")


def _all_objects(root: ScriptObject) -> list[ScriptObject]:
    found, queue, seen = [], [root], set()
    while queue:
        obj = queue.pop()
        if id(obj) not in seen:
            seen.add(id(obj))
            found.append(obj)
            queue.extend(v for v in obj.slots if isinstance(v, ScriptObject))
    return found


def _root_methods(functions: dict[str, Function], root: ScriptObject, wanted: Sequence[str] | None, name: str
                  ) -> list[Function]:
    available = {f.name: f for f in functions.values()
                 if f.class_name == root.qualname and f.name not in _HIDDEN_METHODS}
    if wanted is None:
        wanted = [m for m in available if not m.startswith("_")]
    unknown = [m for m in wanted if m not in available]
    if unknown:
        raise ValueError(f"{name}: no method {', '.join(unknown)}; the file has {', '.join(available) or 'none'}")
    return sorted((available[m] for m in dict.fromkeys(wanted)), key=lambda f: f.name != "forward")


def _translate(program: Program, methods: list[Function], functions: dict[str, Function], root: ScriptObject,
               operator_version: int, name: str, evaluate: ops.Evaluate) -> None:
    missing_anywhere = _missing_operators(functions)
    state_slots: dict[tuple[int, int], StateSlot] = {}
    reruns = max_reruns(sum(len(obj.slots) for obj in _all_objects(root)))
    for _ in range(reruns):
        program.methods.clear()
        program.weights.clear()
        translator = Translator(functions, root, program, operator_version, evaluate, lenient=bool(missing_anywhere),
                                state_slots=state_slots)
        try:
            for fn in methods:
                program.methods[fn.name] = translator.method(fn)
            break
        except StateChanged:
            continue  # a SET_ATTR made an attribute state (see state.py): translate again, reading it from there
        except (FormatError, UnsupportedOperatorError) as exc:
            if missing_anywhere:  # a placeholder for a missing operator may have derailed the translation
                tail = f"\n(translation stopped: {exc})"
                raise UnsupportedOperatorError(_missing_message(name, missing_anywhere, tail)) from None
            raise
    else:
        raise FormatError(f"{name}: the types of the attributes set while running do not settle")
    if translator.missing:
        raise UnsupportedOperatorError(_missing_message(name, translator.missing, ""))
    if not program.methods:
        raise FormatError(f"{name}: the file has no public methods of its root class {root.qualname}")
    if translator.quantized.found:
        program.metadata["quantization"] = summary([n for g in program.methods.values() for n in g.walk()])
    if state_slots:
        program.metadata["state"] = {slot.path: slot.type for slot in state_slots.values()}
    problems = [f"{g.name}: {p}" for g in program.methods.values()
                for p in verify_graph(g, program, check_operators=False)]
    if problems:
        raise FormatError(f"{name}: the translated program is invalid:\n  " + "\n  ".join(problems[:20]))


def _missing_operators(functions: dict[str, Function]) -> dict[str, list[str]]:
    missing: dict[str, list[str]] = {}
    for fn in functions.values():
        if fn.name in _HIDDEN_METHODS:  # run while loading (restore.py), never translated
            continue
        for op in fn.operators:
            if ops.lookup(op.key) is None and not is_translated(op.key):
                missing.setdefault(op.key, []).append(fn.qualname)
    return missing


def _missing_message(name: str, missing: dict[str, Any], tail: str) -> str:
    lines = []
    for op, where in sorted(missing.items()):
        places = list(dict.fromkeys(where))
        more = f" and {len(places) - 3} more" if len(places) > 3 else ""
        lines.append(f"  {op}  (used in {', '.join(places[:3])}{more})")
    return (f"{name}: the model uses {len(missing)} operator(s) that this ptlite cannot run:\n" + "\n".join(lines)
            + "\nUpgrade ptlite, or change the model to avoid these operators." + tail)
