"""The GPU region executor: a run of nodes recorded into one command encoder, submitted once per call.

A Region is built from nodes whose GpuOps are known (kernels.builders), the values it reads from before it and the
values it hands back. Per call it writes its tensor inputs into their device buffers (weights, the constants of the
program, are uploaded once and shared by every region: `WeightCache`), records every node's dispatches into one
compute pass, copies its outputs into one reused staging buffer in the same encoder, submits once, and reads them
back. Values made and read only inside stay on the device; views (reshape, flatten) share their input's buffer.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ptlite.ir.graph import Node, Value

from .device import GpuDevice
from .kernels import NOT_CONSTANT, OUT, Context, GpuOp, Shape, builders, groups


def constant_of(value: Value) -> Any:
    """A value's Python constant (a prim::Constant's `value`), or NOT_CONSTANT (weights included)."""
    node = value.node
    if node is not None and node.op == "prim::Constant" and "value" in node.attrs:
        return node.attrs["value"]
    return NOT_CONSTANT


def is_weight(value: Value) -> bool:
    """Whether a tensor is one of the program's weights (a prim::Constant naming it)."""
    node = value.node
    return node is not None and node.op == "prim::Constant" and "weight" in node.attrs


def static_shape(value: Value) -> Shape | None:
    """A float32 tensor's shape where every dimension is known, else None."""
    if value.type != "Tensor" or value.dtype != "float32" or value.shape is None:
        return None
    if any(not isinstance(d, int) or d < 0 for d in value.shape):
        return None
    return tuple(value.shape)


class RegionContext(Context):
    """What builders see inside a region: shapes known statically or made by earlier nodes, constants, and the
    tensor lists built inside the region."""

    def __init__(self, f16: bool) -> None:
        self.f16 = f16
        self.shapes: dict[int, Shape] = {}
        self.lists: dict[int, list[Value]] = {}

    def shape(self, value: Value) -> Shape | None:
        found = self.shapes.get(value.id)
        return found if found is not None else static_shape(value)

    def constant(self, value: Value) -> Any:
        return constant_of(value)

    def tensor_list(self, value: Value) -> list[Value] | None:
        found = self.lists.get(value.id)
        if found is None and value.node is not None and value.node.op == "prim::ListConstruct" and \
                value.node.inputs and all(self.shape(v) is not None for v in value.node.inputs):
            found = list(value.node.inputs)
        return found


def build(node: Node, ctx: RegionContext) -> GpuOp | None:
    """The node's GpuOp, or None where no kernel takes it (and the shapes it gives are recorded in `ctx`); a list
    of tensors is recorded as such (GpuOp None, and True returned through `ctx.lists`)."""
    builder = builders().get(node.op)
    if builder is None or len(node.outputs) != 1:
        return None
    try:
        op = builder(node, ctx)
    except (TypeError, ValueError, IndexError):  # arguments of a form the builder does not know
        return None
    if op is None:
        return None
    known = node.outputs[0].shape
    if known is not None and tuple(known) != op.shape and all(isinstance(d, int) for d in known):
        return None  # the capture says otherwise: leave it to the reference
    ctx.shapes[node.outputs[0].id] = op.shape
    return op


def take_list(node: Node, ctx: RegionContext) -> bool:
    """Record a prim::ListConstruct of tensors whose shapes are known (a concatenation's inputs); False if not."""
    if node.op != "prim::ListConstruct" or len(node.outputs) != 1 or not node.inputs \
            or any(ctx.shape(v) is None for v in node.inputs):
        return False
    ctx.lists[node.outputs[0].id] = list(node.inputs)
    return True


class WeightCache:
    """Device buffers of weight arrays, by the array's identity (kept while the array lives): uploaded once."""

    def __init__(self, device: GpuDevice, f16: bool) -> None:
        self.device = device
        self.f16 = f16
        self._buffers: dict[int, tuple[Any, Any]] = {}  # id(array) -> (weakref to it, buffer)

    def buffer(self, array: np.ndarray) -> Any:
        """The buffer holding `array` (float32, or f16 in the fp16 mode), uploading it the first time."""
        found = self._buffers.get(id(array))
        if found is not None and found[0]() is array:
            return found[1]
        data = np.ascontiguousarray(array, np.float16 if self.f16 else np.float32)
        buf = self.device.storage_buffer(data.nbytes)
        self.device.write(buf, data)
        key = id(array)
        try:
            ref = weakref.ref(array, lambda _, key=key, cache=self._buffers: cache.pop(key, None))
        except TypeError:
            return buf  # (not weak-referenceable: not cached)
        self._buffers[key] = (ref, buf)
        return buf

    def __len__(self) -> int:
        return len(self._buffers)


class Region:
    """Nodes run on the device as one submit (see the module's docstring). `ops`: each node's GpuOp, None for a
    list of tensors; `inputs` and `outputs` as ptlite.ir.liveness.region_values gives them."""

    def __init__(self, device: GpuDevice, weights: WeightCache, f16: bool, nodes: Sequence[Node],
                 ops: Sequence[GpuOp | None], inputs: Sequence[Value], outputs: Sequence[Value]) -> None:
        self.device, self.weights, self.f16 = device, weights, f16
        self.nodes, self.inputs, self.outputs = list(nodes), list(inputs), list(outputs)
        self.itemsize = 2 if f16 else 4
        self.lists: dict[int, list[Value]] = {}
        # each tensor value -> where its data is: ("input", index into inputs) or ("buffer", buffer)
        self.where: dict[int, tuple[str, Any]] = {}
        self.shapes: dict[int, Shape] = {}
        self.uploads: list[tuple[int, Any, Shape]] = []  # (input index, buffer, shape) written per call
        self.weight_inputs: list[int] = []  # input indexes of weights (their buffers come from the cache)
        root: dict[int, int] = {}  # a view's value id -> the value whose buffer it shares
        for node, op in zip(nodes, ops):
            if op is not None and op.alias is not None:
                source = op.reads[op.alias].id
                root[node.outputs[0].id] = root.get(source, source)
        read = {root.get(v.id, v.id) for op in ops if op is not None and op.dispatches for v in op.reads}
        for j, v in enumerate(self.inputs):
            shape = static_shape(v)
            if v.type != "Tensor" or shape is None:
                continue
            self.shapes[v.id] = shape
            self.where[v.id] = ("input", j)
            if v.id in read:
                if is_weight(v) or constant_of(v) is not NOT_CONSTANT:
                    self.weight_inputs.append(j)
                else:
                    self.uploads.append((j, device.storage_buffer(math.prod(shape) * self.itemsize), shape))
        self.steps: list[tuple[GpuOp, Node]] = []
        for node, op in zip(nodes, ops):
            out = node.outputs[0]
            if op is None:
                self.lists[out.id] = list(node.inputs)
                continue
            self.shapes[out.id] = op.shape
            if op.alias is not None:
                self.where[out.id] = self.where[op.reads[op.alias].id]
            else:
                self.where[out.id] = ("buffer", device.storage_buffer(math.prod(op.shape) * self.itemsize))
            self.steps.append((op, node))
        self.dispatches = sum(len(op.dispatches) for op, _ in self.steps)
        # what is read back: (output index, element index or -1, value); results aliasing an input are host views
        self.reads_back: list[tuple[Value, int, int]] = []  # (value, staging offset, bytes)
        offset = 0
        for v in self.outputs:
            for element in self.lists.get(v.id, [v]):
                kind, _ = self.where[element.id]
                if kind == "buffer":
                    nbytes = (math.prod(self.shapes[element.id]) * self.itemsize + 3) & ~3
                    self.reads_back.append((element, offset, nbytes))
                    offset += nbytes
        self.staging = device.staging_buffer(offset) if offset else None
        self._recorded: list[tuple[Any, Any, tuple[int, int, int]]] | None = None
        self._weights_bound: tuple[int, ...] = ()

    # ------------------------------------------------------------------------------------------------ building

    def _buffer(self, value: Value, args: Sequence[Any]) -> Any:
        kind, where = self.where[value.id]
        if kind == "buffer":
            return where
        if where in self.weight_inputs:
            return self.weights.buffer(args[where])
        return next(buf for j, buf, _ in self.uploads if j == where)

    def _record(self, args: Sequence[Any]) -> list[tuple[Any, Any, tuple[int, int, int]]]:
        """The pipelines, bind groups and workgroup counts of every dispatch (made once, or again when the weight
        arrays handed in change)."""
        bound = tuple(id(args[j]) for j in self.weight_inputs)
        if self._recorded is not None and bound == self._weights_bound:
            return self._recorded
        dev = self.device
        limit = dev.limits.get("max-compute-workgroups-per-dimension", 65535)
        recorded = []
        for op, node in self.steps:
            if not op.dispatches:
                continue  # (a view)
            out = self._buffer(node.outputs[0], args)
            for d in op.dispatches:
                pipeline = dev.pipeline(d.source)
                buffers = [out if b == OUT else self._buffer(op.reads[b], args) for b in d.bindings]
                buffers.append(dev.uniform_buffer(d.params))
                group = dev.device.create_bind_group(layout=pipeline.get_bind_group_layout(0), entries=[
                    {"binding": i, "resource": {"buffer": b}} for i, b in enumerate(buffers)])
                recorded.append((pipeline, group, groups(d.invocations, limit)))
        self._recorded, self._weights_bound = recorded, bound
        return recorded

    # ------------------------------------------------------------------------------------------------ running

    def run(self, *args: Any) -> list[Any]:
        """The outputs' values for the inputs' (float32 arrays of the shapes the region was built for)."""
        dev = self.device
        with dev.lock:
            for j, buf, shape in self.uploads:
                dev.write(buf, self._checked(j, args[j], shape).astype(np.float16 if self.f16 else np.float32,
                                                                        copy=False))
            for j in self.weight_inputs:
                self._checked(j, args[j], self.shapes[self.inputs[j].id])
            recorded = self._record(args)
            results: dict[int, np.ndarray] = {}
            if self.reads_back or recorded:
                encoder = dev.device.create_command_encoder()
                if recorded:
                    compute = encoder.begin_compute_pass()
                    for pipeline, group, (gx, gy, gz) in recorded:
                        compute.set_pipeline(pipeline)
                        compute.set_bind_group(0, group)
                        compute.dispatch_workgroups(gx, gy, gz)
                    compute.end()
                for value, offset, nbytes in self.reads_back:
                    encoder.copy_buffer_to_buffer(self.where[value.id][1], 0, self.staging, offset, nbytes)
                dev.submit(encoder.finish())
                if self.reads_back:
                    results = self._read_back()
            return [self._result(v, args, results) for v in self.outputs]

    def _read_back(self) -> dict[int, np.ndarray]:
        dtype = np.float16 if self.f16 else np.float32
        self.staging.map_sync(self.device.wgpu.MapMode.READ)
        try:
            raw = self.staging.read_mapped(copy=False)
            results = {}
            for value, offset, _ in self.reads_back:
                shape = self.shapes[value.id]
                data = np.frombuffer(raw, dtype, math.prod(shape), offset)
                results[value.id] = data.astype(np.float32).reshape(shape)  # (a copy: the mapping ends below)
        finally:
            self.staging.unmap()
        return results

    def _result(self, value: Value, args: Sequence[Any], results: dict[int, np.ndarray]) -> Any:
        if value.id in self.lists:
            return [self._result(v, args, results) for v in self.lists[value.id]]
        if value.id in results:
            return results[value.id]
        kind, where = self.where[value.id]
        return np.reshape(args[where], self.shapes[value.id])  # a view of an input

    def _checked(self, j: int, array: Any, shape: Shape) -> np.ndarray:
        if not isinstance(array, np.ndarray) or array.dtype != np.float32 or array.shape != shape:
            got = f"{array.dtype}{list(array.shape)}" if isinstance(array, np.ndarray) else type(array).__name__
            raise ValueError(f"the GPU region was compiled for a float32{list(shape)} tensor at "
                             f"{self.inputs[j]!r}, not {got}")
        return array
