"""Seed corpora for the fuzz targets (needs torch): small models of each kind ptlite reads, as .ptlite files lowered
for NumPy (target `ptlite`) and for the native backend (`native`) and as PyTorch Mobile .ptl files, zip and
flatbuffer (`ptl`). Small weights, so that mutations land on the structure.

    python fuzz/make_corpus.py OUT_DIR      # writes OUT_DIR/ptlite, OUT_DIR/native, OUT_DIR/ptl
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import torch
from torch import nn

import ptlite


class Convs(nn.Module):
    """Dense, depthwise and 1x1 convolutions, batch norm, relu6, a residual add, pooling and a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.ReLU6())
        self.dw = nn.Conv2d(8, 8, 3, 1, 1, groups=8)
        self.pw = nn.Conv2d(8, 8, 1)
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        y = y + self.pw(torch.relu(self.dw(y)))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(4, 6, batch_first=True)
        self.head = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return torch.softmax(self.head(out[:, -1]), dim=-1)


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


class Control(nn.Module):
    """Loops, branches, lists and an int argument (TorchScript only)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, n: int = 2) -> torch.Tensor:
        outs = []
        for i in range(n):
            x = self.lin(x) if i % 2 == 0 else torch.tanh(x)
            outs.append(x.sum())
        return x * torch.stack(outs).mean()


class Quantized(nn.Module):
    """For PyTorch's eager-mode quantization: conv + relu (fused), depthwise, a quantized add, linear."""

    def __init__(self) -> None:
        super().__init__()
        self.quant, self.dequant = torch.ao.quantization.QuantStub(), torch.ao.quantization.DeQuantStub()
        self.conv, self.relu = nn.Conv2d(3, 8, 3, 2, 1), nn.ReLU()
        self.dw = nn.Conv2d(8, 8, 3, 1, 1, groups=8)
        self.add = torch.ao.nn.quantized.FloatFunctional()
        self.head = nn.Linear(8 * 8 * 8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.conv(self.quant(x)))
        y = self.add.add(y, self.dw(y))
        return self.dequant(self.head(torch.flatten(y, 1)))


def _quantized_ptl(out: Path) -> None:
    """Quantized .ptl seeds (the `ptl` target): an eager-mode int8 model per engine, whose convolutions restore their
    packed weights in __setstate__, and dynamic int8 linear layers."""
    q = torch.ao.quantization
    previous = torch.backends.quantized.engine
    try:
        for engine in ("qnnpack", "x86"):
            torch.backends.quantized.engine = engine
            model = q.fuse_modules(Quantized().eval(), [["conv", "relu"]])
            model.qconfig = q.get_default_qconfig(engine)
            q.prepare(model, inplace=True)
            model(torch.randn(2, 3, 16, 16))
            q.convert(model, inplace=True)
            torch.jit.script(model)._save_for_lite_interpreter(str(out / "ptl" / f"quantized.{engine}.ptl"))
        dynamic = q.quantize_dynamic(nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3)), {nn.Linear})
        torch.jit.script(dynamic)._save_for_lite_interpreter(str(out / "ptl" / "quantized.dynamic.ptl"))
    finally:
        torch.backends.quantized.engine = previous


MODELS = {"convs": (Convs, (1, 3, 16, 16)), "recurrent": (Recurrent, (1, 5, 4)), "attention": (Attention, (1, 6, 8)),
          "control": (Control, (2, 4))}


def _portable(program: ptlite.Program) -> ptlite.Program:
    """The program with the machine's folders cut from its nodes' sources (`... at /site-packages/torch/nn/...`), so
    that the seeds are the same bytes on every machine and a seeded run mutates them alike (tests/test_fuzz.py)."""
    folders = sorted({os.path.dirname(os.path.dirname(torch.__file__)) + os.sep,
                      os.path.dirname(os.path.abspath(__file__)) + os.sep}, key=len, reverse=True)
    for graph in program.methods.values():
        for node in graph.walk():
            for folder in folders:
                if node.source and folder in node.source:
                    node.source = node.source.replace(folder, "")
    return program


def main(out: Path) -> None:
    warnings.simplefilter("ignore")
    for kind in ("ptlite", "native", "ptl"):
        (out / kind).mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    for name, (cls, shape) in MODELS.items():
        model = cls().eval()
        x = torch.randn(*shape)
        for method in ("export", "script"):
            if name == "control" and method == "export":
                continue
            program = _portable(ptlite.capture(model, (x,), method=method))
            ptlite.save(program, out / "ptlite" / f"{name}.{method}.captured.ptlite")
            for kind, backend in (("ptlite", "numpy"), ("native", "native")):
                lowered = _portable(ptlite.optimize_for_mobile(program, backend=backend))
                ptlite.save(lowered, out / kind / f"{name}.{method}.ptlite")
            quantized = ptlite.optimize_for_mobile(ptlite.quantize(program, "fp16_weights"), backend="native")
            ptlite.save(_portable(quantized), out / "native" / f"{name}.{method}.fp16.ptlite")  # widened at load
            calibration = [(torch.randn(*shape).numpy(),) for _ in range(2)]
            for scheme, data in (("int8_static", calibration), ("int8_dynamic", None)):
                int8 = ptlite.optimize_for_mobile(ptlite.quantize(program, scheme, data), backend="native")
                ptlite.save(_portable(int8), out / "native" / f"{name}.{method}.{scheme}.ptlite")
        scripted = torch.jit.script(model)
        scripted._save_for_lite_interpreter(str(out / "ptl" / f"{name}.ptl"))
        scripted._save_for_lite_interpreter(str(out / "ptl" / f"{name}.flatbuffer.ptl"), _use_flatbuffer=True)
    _quantized_ptl(out)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
