"""Find where a captured program first departs from PyTorch: the node, its operator and the size of the gap."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ptlite.ir.graph import Program
from ptlite.ir.weights import widened
from ptlite.runtime.interpreter import CompiledGraph


class _Recorder(torch.fx.Interpreter):
    def __init__(self, gm: torch.fx.GraphModule) -> None:
        super().__init__(gm)
        self.values: dict[str, Any] = {}

    def run_node(self, n: torch.fx.Node) -> Any:
        result = super().run_node(n)
        self.values[n.name] = result
        return result


def first_divergence(model: torch.nn.Module, example_inputs: tuple, program: Program, rtol: float = 1e-4,
                     inputs: tuple | None = None) -> str | None:
    """For a program captured by export from `model` with `example_inputs`: run both on `inputs` (default: the
    examples) and describe the first node whose output differs by more than rtol x its max |reference|."""
    inputs = inputs if inputs is not None else example_inputs
    try:
        model = model.eval()
    except NotImplementedError:  # a PT2E-quantized graph module refuses eval(): it is in eval mode already
        pass
    ep = torch.export.export(model, example_inputs)
    recorder = _Recorder(ep.module())
    with torch.inference_mode():
        recorder.run(*inputs)
    program = widened(program)  # a quantized program's weights, as a Module runs them
    compiled = CompiledGraph(program.forward, program)
    ours = compiled.intermediates(*[t.numpy() for t in inputs])
    ops = {v.name: (n.op, n.source) for n in program.forward.walk() for v in n.outputs}
    for name, ref in recorder.values.items():
        if not isinstance(ref, torch.Tensor) or name not in ours or not ref.is_floating_point():
            continue
        mine = np.asarray(ours[name])
        expected = ref.detach().numpy()
        if mine.shape != expected.shape:
            op, src = ops.get(name, ("?", ""))
            return f"{name} = {op} ({src}): shape {mine.shape} != torch {expected.shape}"
        scale = float(np.abs(expected).max()) if expected.size else 0.0
        diff = float(np.abs(mine.astype(np.float64) - expected).max()) if expected.size else 0.0
        if diff > rtol * max(scale, 1e-12):
            op, src = ops.get(name, ("?", ""))
            return f"{name} = {op} ({src}): max |diff| {diff:.3g}, max |reference| {scale:.3g}"
    return None
