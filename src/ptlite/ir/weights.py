"""Weights nothing can change: how to tell (a loaded file's, mapped read-only) and how to make arrays so (those a
load folds or packs itself); kernels that keep values derived from weights compare them with copies only when the
weights are not frozen. And weights a program stores narrower than it computes with (quantization's fp16_weights):
which they are, and widening them back."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ptlite.errors import FormatError

from .graph import Program

FLOAT16_KEY = "float16_weights"  # program.metadata[FLOAT16_KEY]: names of weights stored as float16, run as float32
QUANTIZATION_KEY = "quantization"  # which scheme stored them so (ptlite.quantization): dropped with them on widening
PYTORCH_SCHEME = "pytorch"  # metadata[QUANTIZATION_KEY]["scheme"] of a model quantized in PyTorch, captured


def frozen(a: np.ndarray) -> bool:
    """Whether nothing can change a's values: a read-only view, over read-only views, of a read-only buffer (a
    loaded file's memory map). An array that owns its memory can be made writeable again, so it is not."""
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        a = a.base
    if a is None:
        return False
    try:
        return memoryview(a).readonly
    except TypeError:
        return False


def seal(a: np.ndarray) -> np.ndarray:
    """A read-only view of a C-contiguous array, read through a read-only memoryview so that NumPy will not make it
    writeable again: frozen() holds for it, with no copy. For arrays that only their maker holds, such as the
    weights ptlite.load folds and packs from a .ptl file, whose derived values would otherwise be compared at every
    call. `a` itself is made read-only too; what could still change the values is code that digs the original out
    of the view (`.base.obj`) and makes it writeable again, which then also leaves kept values stale. Other arrays
    (frozen already, or not C-contiguous) are returned as they are."""
    if frozen(a) or not a.flags.c_contiguous:
        return a
    a.flags.writeable = False
    sealed = np.asarray(memoryview(a).toreadonly())
    return sealed if sealed.dtype == a.dtype and sealed.shape == a.shape else a


def stored_float16(program: Program) -> list[str]:
    """The weights `program` stores as float16 but computes with as float32 (metadata[FLOAT16_KEY]); FormatError if
    that list does not name float16 weights of the program."""
    names = program.metadata.get(FLOAT16_KEY)
    if names is None:
        return []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise FormatError(f"the program's {FLOAT16_KEY} metadata is {type(names).__name__}, not a list of weight "
                          "names: the file is damaged")
    if len(set(names)) != len(names):
        raise FormatError(f"the program's {FLOAT16_KEY} metadata names a weight more than once: the file is damaged")
    wrong = [n for n in names if not (isinstance(program.weights.get(n), np.ndarray)
                                      and program.weights[n].dtype == np.float16)]
    if wrong:
        raise FormatError(f"the program's {FLOAT16_KEY} metadata names {len(wrong)} weight(s) that are not float16 "
                          f"weights of the program ({', '.join(wrong[:3])}{', ...' if len(wrong) > 3 else ''}): the "
                          "file is damaged")
    return names


def widened(program: Program, wrap: Callable[[np.ndarray], np.ndarray] | None = None) -> Program:
    """`program` with the weights it stores as float16 for float32 (stored_float16) widened to float32, each passed
    through `wrap` (e.g. seal): a float32 program again (the quantization metadata goes with them), a copy sharing
    the graphs; or `program` itself where there are none."""
    names = stored_float16(program)
    if not names:
        return program
    weights = dict(program.weights)
    for name in names:
        wide = weights[name].astype(np.float32)
        weights[name] = wrap(wide) if wrap is not None else wide
    metadata = {k: v for k, v in program.metadata.items() if k not in (FLOAT16_KEY, QUANTIZATION_KEY)}
    return Program(methods=program.methods, weights=weights, metadata=metadata, bundled_inputs=program.bundled_inputs)
