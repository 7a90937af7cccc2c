"""Quantization on the IR, without torch: `quantize(program, scheme)` returns a smaller program that runs wherever
the original does. One module per scheme; the schemes so far:

- "fp16_weights" (fp16.py): float32 weights stored as float16, half the file, widened to float32 when the program
  is loaded or optimized: computed in float32, on weights rounded to float16.
- "int8_static" (int8_static.py): convolutions, linear layers and additions on uint8 activations and int8 weights
  (ops/quantized.py), activation ranges from calibration data (observers.py, calibration.py); what has no int8
  kernel stays float, and the program's metadata says which and why (`report`).
- "int8_dynamic" (int8_dynamic.py): linear layers with int8 weights, their inputs quantized at each call; no
  calibration.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ptlite.ir.graph import Program
from ptlite.ir.weights import PYTORCH_SCHEME, widened

from . import fp16, int8_dynamic, int8_static, qdq
from .calibration import Progress
from .observers import OBSERVERS

SCHEMES = (fp16.SCHEME, int8_static.SCHEME, int8_dynamic.SCHEME)


class _QuantizedInPyTorch:
    """A model quantized in PyTorch and captured (ptlite.frontend.torch_quantized): described like ptlite's."""

    @staticmethod
    def describe(info: dict[str, Any]) -> str:
        return f"quantized in PyTorch: {sum(info.get('int8', {}).values())} operator(s) in int8"


_INT8 = {int8_static.SCHEME: int8_static, int8_dynamic.SCHEME: int8_dynamic, PYTORCH_SCHEME: _QuantizedInPyTorch}


def quantize(program: Program, scheme: str, calibration_data: Any = None, *, observer: str = "histogram",
             progress: Progress | None = None) -> Program:
    """A quantized copy of `program` (which is unchanged), saved and loaded as any program; metadata["quantization"]
    records the scheme and which weights it left alone, and why. Quantize before optimize_for_mobile: it keeps the
    scheme (its passes work on the weights in float32, which are narrowed again at the end) and skips what must not
    come before the rounding (Winograd's transform: a program optimized with it is refused here, saying so).

    scheme: "fp16_weights" (convolution, linear and other weight matrices stored as float16: half the file, the
        same float32 arithmetic on rounded weights); "int8_static" (convolutions, linear layers and additions in
        8-bit integers, activation ranges calibrated: a quarter of the file); "int8_dynamic" (linear layers' weights
        in int8, their inputs quantized per call: transformers).
    calibration_data: int8_static's inputs to observe activations on, a list of calls' arguments (each a tuple,
        or the input itself for a one-input method): a few dozen the model sees in use. fp16_weights takes none.
    observer: how int8_static picks a value's range: "histogram" (the range minimizing the expected rounding and
        clipping error, two runs over the data) or "minmax" (every value seen, one run).
    progress: called with (runs done, runs in all) after each calibration run.
    """
    if scheme not in SCHEMES:
        raise ValueError(f"unknown quantization scheme {scheme!r}: ptlite has {', '.join(SCHEMES)}")
    done = program.metadata.get(int8_static.KEY)
    if isinstance(done, dict) and done.get("scheme") != scheme:
        raise ValueError(f"the program is quantized already ({done.get('scheme')}); quantize the float program")
    if scheme == int8_static.SCHEME:
        return int8_static.quantize(program, calibration_data, observer, progress)
    if scheme == int8_dynamic.SCHEME:
        if calibration_data is not None:
            raise ValueError(f"{scheme} needs no calibration data (it quantizes inputs at each call); pass none")
        return int8_dynamic.quantize(program)
    if calibration_data is not None:
        raise ValueError(f"{scheme} needs no calibration data (it only rounds the weights); pass none")
    return fp16.narrow(program)


def _int8_info(program: Program) -> tuple[dict[str, Any], Any] | None:
    info = program.metadata.get(int8_static.KEY)
    if isinstance(info, dict) and info.get("scheme") in _INT8:
        return info, _INT8[info["scheme"]]
    return None


def describe(program: Program) -> str | None:
    """One line on how `program` is quantized (None if it is not)."""
    found = _int8_info(program)
    return found[1].describe(found[0]) if found else fp16.describe(program)


def report(program: Program) -> str | None:
    """What quantization did to `program`: its describe() line, then for the int8 schemes a line per operator kind,
    which run in int8 and which stayed in float and why (None if it is not quantized)."""
    found = _int8_info(program)
    if found is None:
        return describe(program)
    info, scheme = found
    lines = [scheme.describe(info)]
    lines += [f"  int8   {n:4d} x {op}" for op, n in sorted(info.get("int8", {}).items())]
    lines += [f"  float  {item['count']:4d} x {item['op']}: {item['why']}"
              for item in sorted(info.get("float", []), key=lambda i: (i["why"], i["op"]))]
    return "\n".join(lines)


def optimized(program: Program, blocked: frozenset[str],
              optimize: Callable[[Program, frozenset[str]], Program]) -> Program:
    """optimize(program, blocked) for a program that may be quantized: run on its weights widened to float32, without
    the optimizations whose weights must not be rounded after them (Winograd's transform), the result quantized
    again by the same scheme."""
    if qdq.applies(program):  # a PT2E model's quantize/dequantize pairs: int8 operators before any float pass
        program = qdq.fold(program)
    if not fp16.applies(program):
        return optimize(program, blocked)
    return fp16.narrow(optimize(widened(program), blocked | frozenset(fp16.NOT_BEFORE)))


__all__ = ["quantize", "SCHEMES", "OBSERVERS", "describe", "report", "optimized"]
