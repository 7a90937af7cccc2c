"""The reference kernels of the operators on panel-packed weights (ops/packed.py: the native backend's layout):
the weight unpacked to the prepacked (K, O) layout, then the prepacked kernels. They define what the native
kernels compute, and run a file lowered for the native backend where its library is missing."""

from __future__ import annotations

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.ops import CONV2D_PACKED, CONV2D_PACKED_GATED, LINEAR_PACKED

from ._derived import derived
from .prepacked import conv2d_prepacked, linear_prepacked

PANEL = 16  # output channels per panel


def pack_panels(matrix: np.ndarray) -> np.ndarray:
    """A (K, O) weight matrix as (ceil(O / 16), K, 16) panels, the columns past O zero."""
    k, o = matrix.shape
    panels = -(-o // PANEL)
    padded = np.zeros((k, panels * PANEL), dtype=matrix.dtype)
    padded[:, :o] = matrix
    return np.ascontiguousarray(padded.reshape(k, panels, PANEL).transpose(1, 0, 2))


def unpack_panels(weight: np.ndarray, out_channels: int) -> np.ndarray:
    """The inverse of pack_panels: (P, K, 16) -> (K, O), C-contiguous; ValueError if the shapes disagree."""
    if weight.ndim != 3 or weight.shape[2] != PANEL or not 0 < out_channels <= weight.shape[0] * PANEL \
            or out_channels <= (weight.shape[0] - 1) * PANEL:
        raise ValueError(f"a panel-packed weight of shape {tuple(weight.shape)} cannot hold {out_channels} output "
                         f"channels: expected ({-(-out_channels // PANEL)}, K, {PANEL})")
    p, k, _ = weight.shape

    def make() -> np.ndarray:
        return np.ascontiguousarray(weight.transpose(1, 0, 2).reshape(k, p * PANEL)[:, :out_channels])

    return derived((weight,), ("unpack_panels", out_channels), make)


@kernel(CONV2D_PACKED)
def conv2d_packed(input, weight, bias, kernel_size, stride, padding, dilation, out_channels, activation="none",
                  activation_args=(), *, out=None):
    """2-D convolution (groups 1) by a panel-packed weight; otherwise as ptlite::conv2d_prepacked."""
    return conv2d_prepacked(input, unpack_panels(weight, out_channels), bias, kernel_size, stride, padding, dilation,
                            1, activation, activation_args, out=out)


def check_gate(input: np.ndarray, gate: np.ndarray) -> None:
    """ValueError unless `gate` holds a factor per image and input channel of `input` (a batch of 1 on either side
    broadcasts, as the multiply does)."""
    if not (isinstance(gate, np.ndarray) and isinstance(input, np.ndarray) and input.ndim == 4 and gate.ndim == 4
            and gate.shape[1:] == (input.shape[1], 1, 1)
            and (gate.shape[0] == input.shape[0] or 1 in (gate.shape[0], input.shape[0]))):
        got = tuple(gate.shape) if isinstance(gate, np.ndarray) else type(gate).__name__
        want = tuple(input.shape) if isinstance(input, np.ndarray) else type(input).__name__
        raise ValueError(f"{CONV2D_PACKED_GATED}: the gate must be (N, C, 1, 1) factors for the (N, C, H, W) input "
                         f"{want}, got {got}")


@kernel(CONV2D_PACKED_GATED)
def conv2d_packed_gated(input, gate, weight, bias, kernel_size, stride, padding, dilation, out_channels,
                        activation="none", activation_args=(), *, out=None):
    """conv2d_packed of `input * gate` (the product keeps the input's memory layout)."""
    check_gate(input, gate)
    return conv2d_packed(np.multiply(input, gate), weight, bias, kernel_size, stride, padding, dilation,
                         out_channels, activation, activation_args, out=out)


@kernel(LINEAR_PACKED)
def linear_packed(input, weight, bias, out_features, activation="none", activation_args=(), *, out=None):
    """y = input @ W + bias by a panel-packed weight; otherwise as ptlite::linear_prepacked."""
    return linear_prepacked(input, unpack_panels(weight, out_features), bias, activation, activation_args, out=out)
