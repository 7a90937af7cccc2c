"""The fp16_weights scheme: float32 weights stored as float16 (half the file), widened back to float32 when a program
is run or optimized (ptlite.ir.weights.widened), so that every kernel computes in float32 on the rounded weights.

Which weights: float32 arrays of two or more dimensions (convolution and linear weights in any packed layout,
embedding tables); vectors (biases, norms' scales) stay float32, as do arrays with a finite value past float16's
range (65504: an attention mask's large negatives, which would become infinities), arrays whose values all lie
below its smallest normal number, and integer tables past 2048. Winograd-transformed weights are not rounded: a
program to be quantized is optimized without that transform (NOT_BEFORE). The metadata names the narrowed
weights (ptlite.ir.weights.FLOAT16_KEY), so that float16 weights the model had before are left as they are.
"""

from __future__ import annotations

import numpy as np

from ptlite.ir.graph import Program
from ptlite.ir.weights import FLOAT16_KEY, QUANTIZATION_KEY, stored_float16
from ptlite.ops import CONV2D_WINOGRAD, CONV2D_WINOGRAD_2X2, CONV2D_WINOGRAD_V2
from ptlite.runtime.limits import format_bytes

SCHEME = "fp16_weights"
KEY = QUANTIZATION_KEY  # program.metadata[KEY]: {"scheme": SCHEME, "float32": {name: why it was left in float32}}
FLOAT16_MAX = float(np.finfo(np.float16).max)
FLOAT16_TINY = float(np.finfo(np.float16).tiny)  # the smallest normal float16, 6.1e-5
FLOAT16_INTEGERS = 2048  # float16 holds every integer up to this, not all past it
# Optimizations whose weights must not be rounded after them: a Winograd-transformed weight rounded to float16 errs
# ~7x more than the direct weight rounded (a 3x3 64 -> 64 pair: 2.4e-3 against 3.4e-4 of the largest output), so a
# program to be stored so is optimized without them (at load, where nothing is stored, they are free to run).
NOT_BEFORE = ("WINOGRAD",)
TRANSFORMED_OPS = (CONV2D_WINOGRAD, CONV2D_WINOGRAD_V2, CONV2D_WINOGRAD_2X2)
VECTOR = "a vector"  # how a kept vector's reason begins (describe counts them apart)


def narrow(program: Program) -> Program:
    """A copy of `program` (sharing its graphs) whose eligible float32 weights are float16, with what was done in
    its metadata. Weights stored as float16 already (a quantized program's) are kept as they are."""
    transformed = sorted(set(program.operator_names()) & set(TRANSFORMED_OPS))
    if transformed:
        raise ValueError(f"{SCHEME}: the program's 3x3 convolutions are Winograd-transformed "
                         f"({', '.join(transformed)}), whose weights would round to ~7x float16's error: quantize "
                         "before optimize_for_mobile (which then skips Winograd), or optimize with "
                         "optimization_blocklist=['WINOGRAD']")
    done = set(stored_float16(program))
    weights: dict[str, np.ndarray] = {}
    float16: list[str] = []
    kept: dict[str, str] = {}
    for name, w in program.weights.items():
        weights[name] = w
        if name in done:
            float16.append(name)
        elif isinstance(w, np.ndarray) and w.dtype == np.float32:
            why = _kept_why(w)
            if why:
                kept[name] = why
            else:
                weights[name] = w.astype(np.float16)
                float16.append(name)
    metadata = {**program.metadata, KEY: {"scheme": SCHEME, "float32": kept}, FLOAT16_KEY: float16}
    return Program(methods=program.methods, weights=weights, metadata=metadata, bundled_inputs=program.bundled_inputs)


def _kept_why(w: np.ndarray) -> str | None:
    """Why a float32 weight stays float32, or None if it is narrowed."""
    if w.ndim < 2:
        return f"{VECTOR} (a bias or a scale): a few bytes"
    magnitude = np.abs(w)
    largest = float(magnitude[np.isfinite(magnitude)].max(initial=0.0))
    if largest > FLOAT16_MAX:
        return f"values up to {largest:.3g}, past float16's {FLOAT16_MAX:.0f}"
    if 0 < largest < FLOAT16_TINY:
        return f"values all below {FLOAT16_TINY:.2g}, where float16 loses their precision"
    if largest > FLOAT16_INTEGERS and np.array_equal(w, np.round(w)):
        return f"integers up to {largest:.0f}, past the {FLOAT16_INTEGERS} float16 holds exactly"
    return None


def applies(program: Program) -> bool:
    """Whether `program` stores its weights by this scheme (a widened one no longer says so)."""
    info = program.metadata.get(KEY)
    return isinstance(info, dict) and info.get("scheme") == SCHEME


def describe(program: Program) -> str | None:
    """One line on what fp16_weights did to `program` (None if it is not so quantized)."""
    if not applies(program):
        return None
    names = stored_float16(program)
    kept = program.metadata[KEY].get("float32")
    kept = kept if isinstance(kept, dict) else {}
    stored = sum(program.weights[n].nbytes for n in names)
    vectors = sum(isinstance(why, str) and why.startswith(VECTOR) for why in kept.values())
    spoiled = len(kept) - vectors
    return (f"{SCHEME}: {len(names)} weights in float16 ({format_bytes(stored)}), {len(kept)} left in float32 ("
            f"{vectors} vectors" + (f", {spoiled} that float16 would spoil)" if spoiled else ")"))
