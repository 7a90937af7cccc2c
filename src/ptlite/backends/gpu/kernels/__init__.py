"""The GPU backend's kernels: per operator, a builder that turns one node (its shapes and constant arguments known)
into dispatches of WGSL compute shaders, or declines it.

A builder is `build(node, ctx) -> GpuOp | None`. `ctx` (Context) says what is known of the node's inputs: tensor
shapes, constant arguments, the tensors of a list. A GpuOp names the tensors it reads (in binding order), the shape
of its one output, and its dispatches; a view (reshape, flatten) has none and shares its input's buffer. Every shader
binds the tensors it reads at 0.., its output next, and a uniform block of parameters last (PARAMS u32 words), and
uses every binding (wgpu's automatic layouts drop unused ones). Storage is `T` (f32, or f16 in the fp16 mode);
arithmetic is f32 either way.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ptlite.ir.graph import Node, Value

WORKGROUP = 64  # invocations per workgroup (1-D): every shader here is barrier-free (lavapipe runs barriers slowly)
PARAMS = 32  # u32 words in every shader's parameter block
OUT = -1  # a Dispatch binding: the op's output
NOT_CONSTANT = object()
Shape = tuple[int, ...]


class Dispatch:
    """One compute dispatch: a shader (WGSL source), the buffers it binds in order (indexes into the op's `reads`,
    or OUT), its parameter words, and how many invocations it needs."""

    __slots__ = ("source", "bindings", "params", "invocations")

    def __init__(self, source: str, bindings: Sequence[int], params: Sequence[int | float], invocations: int) -> None:
        self.source = source
        self.bindings = list(bindings)
        self.params = pack_params(params)
        self.invocations = invocations


class GpuOp:
    """What one node becomes: the tensors it reads (binding order), its output's shape, its dispatches; `alias`
    (an index into `reads`) for a view that shares its input's buffer instead."""

    __slots__ = ("reads", "shape", "dispatches", "alias")

    def __init__(self, reads: Sequence[Value], shape: Shape, dispatches: Sequence[Dispatch] = (),
                 alias: int | None = None) -> None:
        self.reads = list(reads)
        self.shape = tuple(shape)
        self.dispatches = list(dispatches)
        self.alias = alias


class Context:
    """What a builder may ask about a node's inputs (the region or the call answers)."""

    f16: bool = False  # storage is f16

    def shape(self, value: Value) -> Shape | None:
        """A float32 tensor's static shape; None if not a float32 tensor or not known."""
        raise NotImplementedError

    def constant(self, value: Value) -> Any:
        """A constant argument's Python value, or NOT_CONSTANT."""
        raise NotImplementedError

    def tensor_list(self, value: Value) -> list[Value] | None:
        """The tensors of a list argument (a prim::ListConstruct of tensors), or None."""
        raise NotImplementedError


Builder = Callable[[Node, Context], "GpuOp | None"]
BUILDERS: dict[str, Builder] = {}


def register(*keys: str) -> Callable[[Builder], Builder]:
    """Register a builder for operators (their keys in the operator table)."""
    def wrap(fn: Builder) -> Builder:
        for key in keys:
            BUILDERS[key] = fn
        return fn
    return wrap


def builders() -> dict[str, Builder]:
    """Every operator key with a GPU kernel -> its builder (the family modules are imported here)."""
    from . import conv, elementwise, matmul, pool, shape  # noqa: F401  (they register)

    return BUILDERS


# ------------------------------------------------------------------------------------------------ helpers

def pack_params(values: Sequence[int | float]) -> np.ndarray:
    """Parameter words: ints as u32 (negative ones as two's complement), floats as f32 bits."""
    if len(values) > PARAMS:
        raise ValueError(f"{len(values)} parameters, more than {PARAMS}")
    words = np.zeros(PARAMS, np.uint32)
    for i, v in enumerate(values):
        if isinstance(v, float):
            words[i] = struct.unpack("<I", struct.pack("<f", v))[0]
        else:
            words[i] = int(v) & 0xFFFFFFFF
    return words


def prelude(f16: bool, reads: int, binding_types: Sequence[str] | None = None) -> str:
    """The start of a shader: f16 enabled where needed, `T` the storage type, bindings X0..X{reads-1} (read),
    O (written), the parameter block P with pu(i) (u32), pi(i) (i32), pf(i) (f32), and `index(gid, nwg)`."""
    lines = ["enable f16;" if f16 else "", f"alias T = {'f16' if f16 else 'f32'};"]
    for i in range(reads):
        lines.append(f"@group(0) @binding({i}) var<storage, read> X{i}: array<T>;")
    lines += [f"@group(0) @binding({reads}) var<storage, read_write> O: array<T>;",
              f"@group(0) @binding({reads + 1}) var<uniform> P: array<vec4<u32>, {PARAMS // 4}>;",
              "fn pu(i: u32) -> u32 { return P[i / 4u][i % 4u]; }",
              "fn pi(i: u32) -> i32 { return bitcast<i32>(P[i / 4u][i % 4u]); }",
              "fn pf(i: u32) -> f32 { return bitcast<f32>(P[i / 4u][i % 4u]); }",
              f"fn index(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {{ return gid.x + gid.y * nwg.x * {WORKGROUP}u; }}"]
    return "\n".join(lines) + "\n"


ENTRY = (f"@compute @workgroup_size({WORKGROUP})\n"
         "fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {\n"
         "    let i = index(gid, nwg);\n")


def groups(invocations: int, max_per_dim: int = 65535) -> tuple[int, int, int]:
    """Workgroups for a count of invocations: (x, y, 1), y > 1 past the per-dimension limit."""
    n = max(1, math.ceil(invocations / WORKGROUP))
    if n <= max_per_dim:
        return n, 1, 1
    y = math.ceil(n / max_per_dim)
    return math.ceil(n / y), y, 1


def ints(value: Any, n: int) -> tuple[int, ...] | None:
    """A constant int or list of ints as n ints (one int repeated), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return (value,) * n
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        if len(value) == 1:
            return (value[0],) * n
        if len(value) == n:
            return tuple(value)
    return None


def number(value: Any) -> float | None:
    """A constant int or float as a float, else None (bools and others)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)
