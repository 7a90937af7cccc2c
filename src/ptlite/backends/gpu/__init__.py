"""The GPU backend: WebGPU compute shaders through the `wgpu` package (Vulkan, Metal or D3D12), opt-in.

It is never asked unless selected by name, `ptlite.Module(program, backends=("gpu",))` (see OPT_IN in
ptlite.backends), and runs captured programs' float32 nodes: convolution (any groups, stride, padding,
dilation), linear / addmm / matmul, elementwise arithmetic with broadcasting, activations, max and adaptive average
pooling, concatenation, flatten / view / reshape. Runs of consecutive nodes it takes become one delegate each
(region.py: one command encoder, one submit, one read back per call); a lone node runs as its own small region; any
other node, dtype or unknown shape goes to the next backend (the NumPy reference).

Storage is float32 by default; `precision="fp16"` (or PTLITE_GPU_PRECISION=fp16) keeps weights and activations in
f16 on the device, accumulating in f32, where the adapter has shader-f16. Needs `pip install wgpu` (ptlite[gpu]).
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from ptlite.backends import BackendUnavailable
from ptlite.backends.base import Backend, Delegate, Kernel
from ptlite.ir.graph import Graph, Node, Program, Value
from ptlite.ir.liveness import last_reads, region_values
from ptlite.ops import MODULE_STATE, OpDef

from .device import DeviceUnavailable, GpuDevice, get_device

__all__ = ["GpuBackend", "create", "PRECISIONS"]

PRECISIONS = ("fp32", "fp16")
# The operators with a GPU kernel (kernels/: conv.py, elementwise.py, matmul.py, pool.py, shape.py).
OPERATORS = frozenset((
    "aten::add.Tensor", "aten::sub.Tensor", "aten::mul.Tensor", "aten::div.Tensor", "aten::relu", "aten::relu6",
    "aten::hardtanh", "aten::sigmoid", "aten::hardswish", "aten::silu", "aten::linear", "aten::addmm",
    "aten::matmul", "aten::conv2d", "aten::max_pool2d", "aten::adaptive_avg_pool2d", "aten::flatten.using_ints",
    "aten::view", "aten::reshape", "aten::cat"))


class GpuBackend(Backend):
    """The WebGPU backend on the process's device (device.get_device), in the given storage precision."""

    name = "gpu"

    def __init__(self, device: GpuDevice, precision: str = "fp32") -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
        if precision == "fp16" and not device.f16:
            raise ValueError(f"fp16 storage needs shader-f16, which {device.adapter_name} does not have")
        from .region import WeightCache

        self.device = device
        self.precision = precision
        self.f16 = precision == "fp16"
        self.weights = WeightCache(device, self.f16)

    def kernel(self, op: OpDef, node: Node | None = None) -> Kernel | None:
        if op.key not in OPERATORS:
            return None
        if node is not None:
            from .region import RegionContext, build

            if build(node, RegionContext(self.f16)) is None:
                return None
        return _NodeKernel(self, op.key, node)

    def delegates(self, graph: Graph, program: Program, kernels: dict[int, Kernel]) -> list[Delegate]:
        """Maximal runs of consecutive top-level nodes that this backend's kernels took (and the lists of tensors
        between them), each one Region: one submit per call."""
        from .region import RegionContext, build, take_list

        ctx = RegionContext(self.f16)
        found: list[Delegate] = []
        current: list[tuple[Node, Any]] = []
        last = last_reads(graph.nodes)

        def close() -> None:
            while current and current[-1][1] is None:  # (a list nobody in the region reads is not worth taking)
                current.pop()
            if any(op is not None and op.dispatches for _, op in current):
                found.append(self._delegate(graph, [n for n, _ in current], [op for _, op in current], last))
            current.clear()

        for node in graph.nodes:
            if node.op in ("prim::Constant", MODULE_STATE):
                continue
            if not node.blocks and take_list(node, ctx):
                current.append((node, None))
                continue
            chosen = kernels.get(id(node))
            op = build(node, ctx) if chosen is not None and chosen.backend == self.name else None
            if op is None:
                close()
                continue
            current.append((node, op))
        close()
        return found

    def _delegate(self, graph: Graph, nodes: list[Node], ops: list[Any], last: dict[int, int]) -> Delegate:
        from .region import Region

        inputs, outputs = region_values(graph, nodes, last)
        region = Region(self.device, self.weights, self.f16, nodes, ops, inputs, outputs)
        return Delegate(self.name, nodes, inputs, outputs, region.run, name=f"gpu::region[{len(nodes)}]")

    def describe(self) -> str:
        return f"{self.device.describe()}; {self.precision} storage (opt-in: select it by name)"


_MISSING = object()


class _NodeKernel(Kernel):
    """One node as a region of its own, built per shape signature of its arguments at the call (a call the GPU
    kernels cannot take runs on the reference)."""

    __slots__ = ("gpu", "key", "node", "_regions", "_lock")

    def __init__(self, gpu: GpuBackend, key: str, node: Node | None) -> None:
        self.backend = gpu.name
        self.accepts_out = False
        self.gpu, self.key, self.node = gpu, key, node
        self._regions: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    @property
    def fn(self) -> Any:
        return self.__call__

    def __call__(self, *args: Any) -> Any:
        signature = tuple(_signature(a) for a in args)
        with self._lock:
            built = self._regions.get(signature, _MISSING)
            if built is _MISSING:
                built = self._regions[signature] = self._build(args)
        if built is None:  # (these arguments are not for the GPU kernels)
            from ptlite import ops
            from ptlite.backends import reference

            return reference().kernel(ops.get(self.key), self.node).fn(*args)
        region, slots = built
        (out,) = region.run(*[args[i] if e is None else args[i][e] for i, e in slots])
        return out

    def _build(self, args: tuple) -> tuple[Any, list[tuple[int, int | None]]] | None:
        """A region of this node alone for arguments like `args`, and where each of its inputs is in them (argument,
        element of a list argument or None); None if the GPU kernels do not take them."""
        from .region import Region, RegionContext, build, take_list

        weights = {i for i, v in enumerate(self.node.inputs) if _produced_by_weight(v)} if self.node else set()
        ctx = RegionContext(self.gpu.f16)
        nodes: list[Node] = []
        inputs: list[Value] = []
        slots: list[tuple[int, int | None]] = []
        node_inputs: list[Value] = []
        for i, a in enumerate(args):
            listed = isinstance(a, (list, tuple)) and a and all(isinstance(e, np.ndarray) for e in a)
            if isinstance(a, np.ndarray) or listed:
                elements = []
                for e, array in enumerate(a if listed else [a]):
                    v = Value(f"arg{i}", "Tensor", str(array.dtype), array.shape)
                    if i in weights:
                        Node("prim::Constant", [], [v], attrs={"weight": f"arg{i}"})
                    elements.append(v)
                    slots.append((i, e if listed else None))
                inputs.extend(elements)
                if listed:
                    nodes.append(Node("prim::ListConstruct", elements, [Value(f"arg{i}", "List[Tensor]")]))
                    if not take_list(nodes[-1], ctx):
                        return None
                    node_inputs.append(nodes[-1].outputs[0])
                else:
                    node_inputs.append(elements[0])
            else:
                node_inputs.append(Node("prim::Constant", [], [Value(f"arg{i}", "Any")], attrs={"value": a}).outputs[0])
        node = Node(self.key, node_inputs, [Value("out")])
        op = build(node, ctx)
        if op is None:
            return None
        region = Region(self.gpu.device, self.gpu.weights, self.gpu.f16, [*nodes, node], [None] * len(nodes) + [op],
                        inputs, [node.outputs[0]])
        return region, slots


def _signature(arg: Any) -> Any:
    if isinstance(arg, np.ndarray):
        return ("array", arg.dtype.str, arg.shape)
    if isinstance(arg, (list, tuple)) and arg and all(isinstance(e, np.ndarray) for e in arg):
        return ("arrays", tuple((e.dtype.str, e.shape) for e in arg))
    try:
        hash(arg)
        return ("value", type(arg).__name__, arg)
    except TypeError:
        return ("value", type(arg).__name__, repr(arg))


def _produced_by_weight(value: Value) -> bool:
    node = value.node
    return node is not None and node.op == "prim::Constant" and "weight" in node.attrs


def create(precision: str | None = None) -> GpuBackend:
    """The GPU backend on this process's device; BackendUnavailable saying why not (wgpu not installed, no
    adapter, only an OpenGL one). `precision`: "fp32" (default, or PTLITE_GPU_PRECISION) or "fp16"."""
    try:
        device = get_device()
    except DeviceUnavailable as exc:
        raise BackendUnavailable(str(exc)) from None
    precision = precision or os.environ.get("PTLITE_GPU_PRECISION") or "fp32"
    try:
        return GpuBackend(device, precision)
    except ValueError as exc:
        raise BackendUnavailable(str(exc)) from None
