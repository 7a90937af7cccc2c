"""Quantization on the IR, without torch: `quantize(program, scheme)` returns a smaller program that runs wherever
the original does. One module per scheme; the schemes so far:

- "fp16_weights" (fp16.py): float32 weights stored as float16, half the file, widened to float32 when the program
  is loaded or optimized: computed in float32, on weights rounded to float16.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptlite.ir.graph import Program
from ptlite.ir.weights import widened

from . import fp16

SCHEMES = (fp16.SCHEME,)


def quantize(program: Program, scheme: str, calibration_data: Any = None) -> Program:
    """A quantized copy of `program` (which is unchanged), saved and loaded as any program; metadata["quantization"]
    records the scheme and which weights it left alone, and why. Quantize before optimize_for_mobile: it keeps the
    scheme (its passes work on the weights in float32, which are narrowed again at the end) and skips what must not
    come before the rounding (Winograd's transform: a program optimized with it is refused here, saying so).

    scheme: "fp16_weights" (convolution, linear and other weight matrices stored as float16: half the file, the
        same float32 arithmetic on rounded weights).
    calibration_data: inputs to run the program on to observe its activations; fp16_weights takes none.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown quantization scheme {scheme!r}: ptlite has {', '.join(SCHEMES)}")
    if calibration_data is not None:
        raise ValueError(f"{scheme} needs no calibration data (it only rounds the weights); pass none")
    return fp16.narrow(program)


def describe(program: Program) -> str | None:
    """One line on how `program` is quantized (None if it is not)."""
    return fp16.describe(program)


def optimized(program: Program, blocked: frozenset[str],
              optimize: Callable[[Program, frozenset[str]], Program]) -> Program:
    """optimize(program, blocked) for a program that may be quantized: run on its weights widened to float32, without
    the optimizations whose weights must not be rounded after them (Winograd's transform), the result quantized
    again by the same scheme."""
    if not fp16.applies(program):
        return optimize(program, blocked)
    return fp16.narrow(optimize(widened(program), blocked | frozenset(fp16.NOT_BEFORE)))


__all__ = ["quantize", "SCHEMES", "describe", "optimized"]
