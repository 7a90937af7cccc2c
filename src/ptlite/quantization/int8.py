"""What the int8 schemes share: 8-bit parameters from a range, and weights quantized per output channel.

Activations are affine uint8 per tensor: real = scale * (q - zero_point), the range widened to hold 0 (which must
be exact: padding, relu), over all 256 levels. Weights are symmetric int8 per output channel: scale = max |w| / 127
and q in [-127, 127] (no -128: the symmetric range keeps -w representable; a channel of zeros gets scale 1).
"""

from __future__ import annotations

import math

import numpy as np

from ptlite.ir.graph import Node, Program
from ptlite.ir.weights import QUANTIZATION_KEY
from ptlite.passes.base import constant_value

QMIN, QMAX = 0, 255  # activations: uint8
WMAX = 127  # weights: int8 in [-WMAX, WMAX]

# Activations an int8 operator absorbs as its output's clamp: op -> its (lower, upper) real bounds.
RELUS = {"aten::relu": (0.0, math.inf), "aten::relu_": (0.0, math.inf), "aten::relu6": (0.0, 6.0),
         "aten::relu6_": (0.0, 6.0)}
HARDTANHS = frozenset({"aten::hardtanh", "aten::hardtanh_"})


def affine_qparams(lo: float, hi: float) -> tuple[float, int]:
    """(scale, zero point) of uint8 over [lo, hi] widened to hold 0 (PyTorch's affine MinMaxObserver formula: the
    zero point rounded half to even and clamped); a range of one point gets the smallest float32 step."""
    lo, hi = min(float(lo), 0.0), max(float(hi), 0.0)
    scale = max((hi - lo) / (QMAX - QMIN), float(np.finfo(np.float32).eps))
    scale = float(np.float32(scale))
    zero_point = int(min(max(QMIN - round(lo / scale), QMIN), QMAX))
    return scale, zero_point


def quantize_weight(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A float weight whose axis 0 is the output channel -> (int8 weight of the same shape, float32 scales (O,)),
    symmetric per channel."""
    w = np.asarray(weight, dtype=np.float32)
    if not np.isfinite(w).all():
        raise ValueError("a weight holding inf or NaN cannot be quantized")
    amax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1, initial=0.0)
    # a channel of zeros (or of values so small that amax / 127 is no normal float32) gets scale 1: all its q are 0
    scales = np.where(amax > WMAX * np.finfo(np.float32).tiny, amax / WMAX, 1.0).astype(np.float32)
    shape = (-1,) + (1,) * (w.ndim - 1)
    q = np.clip(np.rint(w / scales.reshape(shape)), -WMAX, WMAX).astype(np.int8)
    return q, scales


def activation_bounds(node: Node) -> tuple[float, float] | None:
    """The real output range of an activation an int8 operator can absorb (relu, relu6, hardtanh with constant
    bounds around 0), else None."""
    if node.op in RELUS:
        return RELUS[node.op]
    if node.op in HARDTANHS and len(node.inputs) == 3:
        lo, hi = constant_value(node.inputs[1]), constant_value(node.inputs[2])
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (lo, hi)) and lo <= 0 <= hi:
            return float(lo), float(hi)
    return None


def output_range(bounds: tuple[float, float] | None, scale: float, zero_point: int) -> tuple[int, int]:
    """[output_min, output_max] of an int8 operator whose absorbed activation bounds its real outputs so."""
    lo, hi = bounds if bounds is not None else (-math.inf, math.inf)
    out_min = QMIN if lo == -math.inf else min(max(zero_point + round(lo / scale), QMIN), QMAX)
    out_max = QMAX if hi == math.inf else min(max(zero_point + round(hi / scale), QMIN), QMAX)
    return out_min, out_max


def require_captured(program: Program, scheme: str) -> None:
    """ValueError unless `program` is a float program as captured: not quantized, not optimized (lowered) yet."""
    done = program.metadata.get(QUANTIZATION_KEY)
    if isinstance(done, dict):
        raise ValueError(f"the program is quantized already ({done.get('scheme')}); quantize the float program")
    if program.lowered_for is not None:
        raise ValueError(f"{scheme}: the program was optimized (lowered for {program.lowered_for}) already; "
                         "quantize the program as captured, then optimize_for_mobile the result")
