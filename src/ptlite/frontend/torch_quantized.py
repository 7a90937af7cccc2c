"""Models quantized in PyTorch (torch.ao.quantization's eager mode: fuse_modules, prepare, calibrate, convert; or
quantize_dynamic), captured by torch.jit.script or trace: their quantized operators become ptlite's int8 ones
through ptlite.format.pytorch_quantized; this module adds what needs torch, reading the packed weight objects
(Conv2dPackedParamsBase, LinearPackedParamsBase) the graph holds as constants.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ptlite.errors import CaptureError
from ptlite.format.pytorch_quantized import Packed, QuantizedOps, conv_packed, linear_packed, summary, weight_scales
from ptlite.ir.graph import Node, Value

__all__ = ["PACKED_CLASSES", "QuantizedGraph", "summary", "unpack"]

PACKED_CLASSES = {"__torch__.torch.classes.quantized.Conv2dPackedParamsBase": "conv",
                  "__torch__.torch.classes.quantized.LinearPackedParamsBase": "linear"}


def unpack(obj: Any, where: str) -> Packed:
    """A packed weight object's int8 weights, scales and bias, read with torch."""
    kind = PACKED_CLASSES[obj._type().qualified_name()]
    if kind == "conv":
        weight, bias = obj.unpack()
        if obj.transpose():
            raise CaptureError(f"{where}: a quantized transposed convolution; ptlite's int8 convolutions are not "
                               "transposed (keep it float: set its qconfig to None)")
    else:
        weight, bias = torch.ops.quantized.linear_unpack(obj)
    q, scales = _weight(weight, where)
    bias_array = None if bias is None else bias.detach().float().numpy().copy()
    if kind == "linear":
        return linear_packed(q, scales, bias_array, where)
    return conv_packed(q, scales, bias_array, [int(s) for s in obj.stride()], [int(p) for p in obj.padding()],
                       [int(d) for d in obj.dilation()], int(obj.groups()), where)


def _weight(weight: torch.Tensor, where: str) -> tuple[np.ndarray, np.ndarray]:
    """A quantized weight's int8 values and a float32 scale per output channel; refused unless symmetric."""
    scheme = weight.qscheme()
    if weight.dtype != torch.qint8:
        raise CaptureError(f"{where}: weights of dtype {weight.dtype}; ptlite's int8 kernels take qint8 weights")
    q = weight.int_repr().numpy().copy()
    if scheme in (torch.per_tensor_affine, torch.per_tensor_symmetric):
        return q, weight_scales(q, np.array([weight.q_scale()]), np.array([weight.q_zero_point()]), 0, where)
    if scheme in (torch.per_channel_affine, torch.per_channel_symmetric):
        return q, weight_scales(q, weight.q_per_channel_scales().numpy(), weight.q_per_channel_zero_points().numpy(),
                                weight.q_per_channel_axis(), where)
    raise CaptureError(f"{where}: weights quantized {scheme}; ptlite takes per-tensor or per-output-channel weights")


class QuantizedGraph(QuantizedOps):
    """QuantizedOps for a TorchScript graph: the packed weight objects met, by TorchScript value."""

    def __init__(self, add_weight: Any) -> None:
        super().__init__(add_weight, CaptureError)
        self.packed: dict[int, Packed] = {}

    def constant(self, tv: torch._C.Value, value: Any, where: str) -> bool:
        """Take a packed weight object (keeping it, defining nothing); False for any other constant."""
        if not isinstance(value, torch._C.ScriptObject):
            return False
        name = value._type().qualified_name()
        if name.endswith("CellParamsBase"):
            raise CaptureError(f"{where}: an LSTM or GRU quantized by torch.ao.quantization.quantize_dynamic, whose "
                               "packed cells ptlite does not read; capture the float model and quantize it with "
                               "ptlite.quantize(program, 'int8_dynamic'), which quantizes LSTM and GRU layers")
        if name not in PACKED_CLASSES:
            return False
        self.packed[tv.unique()] = unpack(value, where)
        self.found = True
        return True

    def translate(self, kind: str, key: str, tn: torch._C.Node, inputs: list[Value], outputs: list[Value],
                  source: str) -> list[Node] | None:
        """The ptlite nodes for a TorchScript node that makes or reads quantized tensors; None for any other."""
        def packed_of() -> Packed | None:
            args = list(tn.inputs())
            return self.packed.get(args[1].unique()) if len(args) > 1 else None
        return self.node(kind, key, inputs, outputs, source, packed_of)
