"""The native backend's elementwise kernels: arithmetic of one shape (either layout) or with broadcasting, in place
for residual blocks, the SE multiply, activations, sums and means over neighbouring dimensions, and the view
operators (run by the reference's code: they compute nothing). kernels.py imports this module: its kernels are in
KERNELS from the start.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _native as lib
from .arguments import F32, INF, SCALAR_ARITHMETIC, UNARY, pad_dims, unary_epilogue
from .kernels import KERNELS, _channels_last, _into, _kernel, _reference
from .views import OPS as VIEWS
from .views import broadcast_shape, merge_dims, reduced


def _flat(x: np.ndarray) -> np.ndarray | None:
    """A flat view of x's memory when it is dense (C order or channels-last), else None."""
    if x.flags.c_contiguous:
        return x.reshape(-1)
    if x.ndim == 4:
        view = x.transpose(0, 2, 3, 1)
        if view.flags.c_contiguous:
            return view.reshape(-1)
    return None


def _like(x: np.ndarray, out: Any) -> np.ndarray:
    """Where a result of x's shape and layout goes: `out` if it has exactly x's shape, dtype and strides (a
    result for an `out` in another layout is copied there: _into)."""
    if isinstance(out, np.ndarray) and out.shape == x.shape and out.dtype == F32 and out.strides == x.strides \
            and out.flags.writeable:
        return out
    return np.empty_like(x)


def _same_shape(op: int, self: Any, other: Any, out: Any, relu: bool = False) -> np.ndarray | None:
    """self op other (then relu) for float32 operands of one shape and layout; None where the library does not
    take them."""
    if isinstance(self, np.ndarray) and isinstance(other, np.ndarray) and self.dtype == F32 \
            and other.dtype == F32 and self.shape == other.shape and self.strides == other.strides and self.size > 0:
        a, b = _flat(self), _flat(other)
        if a is not None and b is not None:
            y = _like(self, out)
            flat = _flat(y)
            if flat is not None and not np.shares_memory(flat, a) and not np.shares_memory(flat, b):
                lib.binary(op, a, b, flat, lib.ACT_RELU if relu else lib.ACT_NONE, 0.0, INF)
                return _into(out, y)
    return None


def _out(out: Any) -> dict[str, Any]:
    """The `out=` keyword for the reference where the runtime gave one (operators with an out variant only)."""
    return {} if out is None else {"out": out}


def _broadcast(op: int, self: Any, other: Any, out: Any, relu: bool = False) -> np.ndarray | None:
    """self op other (then relu) for float32 operands of shapes that broadcast to one another, each read where it
    lies (C order or a channels-last image) at its own strides; the result is channels-last where it is an image and
    the first operand of its shape is, as the reference gives it. None where the library does not take them
    (another dtype, more than 6 dimensions after merging, an empty result)."""
    if not (isinstance(self, np.ndarray) and isinstance(other, np.ndarray) and self.dtype == F32
            and other.dtype == F32):
        return None
    shape = broadcast_shape(self.shape, other.shape)
    if shape is None or math.prod(shape) == 0 or not shape:
        return None
    operands = [x if _flat(x) is not None else np.ascontiguousarray(x) for x in (self, other)]
    strides = [tuple(s // 4 for s in np.broadcast_to(x, shape).strides) for x in operands]
    full = next((x for x in (self, other) if x.shape == shape), None)
    nhwc = len(shape) == 4 and full is not None and not full.flags.c_contiguous and _channels_last(full)
    order = (0, 2, 3, 1) if nhwc else tuple(range(len(shape)))
    merged = merge_dims(tuple(shape[d] for d in order), [tuple(s[d] for d in order) for s in strides],
                        lib.COPY_MAX_DIMS)
    if merged is None:
        return None
    dims, (sa, sb) = merged
    pad = [1] * (lib.COPY_MAX_DIMS - len(dims))
    zeros = [0] * len(pad)
    flat = np.empty(math.prod(shape), F32)
    lib.broadcast(op, _flat(operands[0]), _flat(operands[1]), flat,
                  (len(dims), (*dims, *pad), (*sa, *zeros), (*sb, *zeros)), lib.ACT_RELU if relu else lib.ACT_NONE,
                  0.0, INF)
    if nhwc:
        n, c, h, w = shape
        return _into(out, flat.reshape(n, h, w, c).transpose(0, 3, 1, 2))
    return _into(out, flat.reshape(shape))


def _binary(op: int, key: str, relu: bool = False, alpha: bool = True) -> Callable[..., Any]:
    """An elementwise operator: the library's same-shape kernel, or its broadcasting one, else the reference."""
    def fn(self, other, alpha=1, *, out=None):
        if alpha == 1:
            y = _same_shape(op, self, other, out, relu)
            if y is None:
                y = _broadcast(op, self, other, out, relu)
            if y is not None:
                return y
        return _reference(key)(self, other, alpha, **_out(out))

    def fn_no_alpha(self, other, *, out=None):
        y = _same_shape(op, self, other, out, relu)
        if y is None:
            y = _broadcast(op, self, other, out, relu)
        return y if y is not None else _reference(key)(self, other, **_out(out))
    chosen = fn if alpha else fn_no_alpha
    chosen.__name__ = key.split("::")[1].replace(".", "_")
    return chosen


KERNELS["aten::add.Tensor"] = _binary(lib.ADD, "aten::add.Tensor")
KERNELS["aten::_add_relu.Tensor"] = _binary(lib.ADD, "aten::_add_relu.Tensor", relu=True)
KERNELS["aten::sub.Tensor"] = _binary(lib.SUB, "aten::sub.Tensor")
KERNELS["aten::div.Tensor"] = _binary(lib.DIV, "aten::div.Tensor", alpha=False)


def _reduction(key: str, mean: bool) -> Callable[..., Any]:
    """A sum or mean over one run of neighbouring dimensions of a float32 tensor (C order, or the spatial
    dimensions of a channels-last image), without a dtype; else the reference."""
    def fn(self, dim=None, keepdim=False, dtype=None, *, out=None):
        if isinstance(self, np.ndarray) and self.dtype == F32 and self.size > 0 and dtype is None:
            x, shape = self, self.shape
            if x.ndim == 4 and not x.flags.c_contiguous and _channels_last(x) and dim is not None \
                    and sorted(d % 4 for d in dim if type(d) is int) == [2, 3] and len(dim) == 2:
                x, shape = x.transpose(0, 2, 3, 1), (shape[0], shape[2] * shape[3], shape[1])
                form = ((shape[0], shape[1], shape[2]), (self.shape[0], self.shape[1]) + ((1, 1) if keepdim else ()))
            else:
                x = np.ascontiguousarray(x)
                form = reduced(shape, dim, keepdim)
            if form is not None:
                (outer, r, inner), out_shape = form
                y = np.empty(out_shape, F32)
                lib.reduce(x, y, outer, r, inner, 1.0 / r if mean else 1.0)
                return _into(out, y)
        return _reference(key)(self, dim, keepdim, dtype, **_out(out))
    fn.__name__ = key.split("::")[1].replace(".", "_")
    return fn


KERNELS["aten::sum.dim_IntList"] = _reduction("aten::sum.dim_IntList", mean=False)
KERNELS["aten::mean.dim"] = _reduction("aten::mean.dim", mean=True)


@_kernel("aten::mul.Tensor")
def mul(self, other, *, out=None):
    """self * other: of one shape and layout, or an image by per-image channel factors (N, C, 1, 1), in either order
    (squeeze-and-excitation's scale * input), when the image is channels-last; else with broadcasting."""
    if isinstance(self, np.ndarray) and isinstance(other, np.ndarray) and self.dtype == F32 \
            and other.dtype == F32 and self.size > 0:
        if self.shape == other.shape:
            y = _same_shape(lib.MUL, self, other, out)
            if y is not None:
                return y
        image, factors = (other, self) if self.ndim == 4 and self.shape[2:] == (1, 1) else (self, other)
        if image.ndim == 4 and factors.shape == (image.shape[0], image.shape[1], 1, 1) and _channels_last(image) \
                and factors.flags.c_contiguous:
            x = _flat(image)
            y = _like(image, out)
            flat = _flat(y)
            if flat is not None and y.strides == image.strides and not np.shares_memory(flat, x) \
                    and not np.shares_memory(flat, factors):
                lib.binary(lib.MUL, x, factors.reshape(-1), flat, lib.ACT_NONE, 0.0, 0.0, image.shape[0])
                return _into(out, y)
    y = _broadcast(lib.MUL, self, other, out)
    return y if y is not None else _reference("aten::mul.Tensor")(self, other, **_out(out))


def _binary_in_place(op: int, key: str, relu: bool = False) -> Callable[..., Any]:
    """self = self op other (then relu), written into self and returned: the in-place forms torch.export writes
    for residual blocks (aten::add_, aten::_add_relu_)."""
    def fn(self, other, alpha=1):
        if isinstance(self, np.ndarray) and isinstance(other, np.ndarray) and self.dtype == F32 \
                and other.dtype == F32 and self.shape == other.shape and self.strides == other.strides \
                and alpha == 1 and self.size > 0 and self.flags.writeable:
            a, b = _flat(self), _flat(other)
            if a is not None and b is not None and (not np.shares_memory(a, b) or a.ctypes.data == b.ctypes.data):
                lib.binary(op, a, b, a, lib.ACT_RELU if relu else lib.ACT_NONE, 0.0, INF)
                return self
        return _reference(key)(self, other, alpha)
    fn.__name__ = key.split("::")[1].replace(".", "_")
    return fn


KERNELS["aten::add_.Tensor"] = _binary_in_place(lib.ADD, "aten::add_.Tensor")
KERNELS["aten::_add_relu_.Tensor"] = _binary_in_place(lib.ADD, "aten::_add_relu_.Tensor", relu=True)


def _activation(key: str) -> Callable[..., Any]:
    def fn(self, *args, out=None, **kwargs):
        if isinstance(self, np.ndarray) and self.dtype == F32 and self.size > 0:
            x = _flat(self)
            epilogue = unary_epilogue(key, args, kwargs)
            if x is not None and epilogue is not None:
                y = _like(self, out)
                flat = _flat(y)
                if flat is not None and not np.shares_memory(flat, x):
                    lib.unary(0, x, flat, *epilogue)
                    return _into(out, y)
        reference = _reference(key)
        return reference(self, *args, **kwargs) if out is None else reference(self, *args, out=out, **kwargs)
    fn.__name__ = key.split("::")[1]
    return fn


for _key in UNARY:
    KERNELS[_key] = _activation(_key)


@_kernel("aten::constant_pad_nd")
def constant_pad_nd(self, pad, value=0):
    planned = pad_dims(self.shape, pad, value) if isinstance(self, np.ndarray) and self.dtype == F32 else None
    if planned is None:
        return _reference("aten::constant_pad_nd")(self, pad, value)
    out, before = planned
    order = [0, 2, 3, 1] if self.ndim == 4 and not self.flags.c_contiguous and _channels_last(self) else None
    x = np.ascontiguousarray(self if order is None else self.transpose(order))
    if order is not None:  # channels-last memory: padded as (N, H, W, C), handed back as the (N, C, H, W) view
        out, before = [out[d] for d in order], [before[d] for d in order]
    y = np.empty(out, F32)
    lib.pad(x, y, x.shape, out, before, float(value))
    return y if order is None else y.transpose(0, 3, 1, 2)


@_kernel("aten::pad")
def pad(self, pad, mode="constant", value=None):
    if mode != "constant":
        return _reference("aten::pad")(self, pad, mode, value)
    return constant_pad_nd(self, pad, 0.0 if value is None else value)


def _by_reference(key: str) -> Callable[..., Any]:
    """An operator taken by this backend but run node by node by the reference's code: the view operators (they
    compute nothing), concatenation (NumPy's copy, as fast as a copy gets) and arithmetic by a number (one NumPy
    pass); taken so that the executor's regions and the memory plan do not stop at them (in a region they are plan
    steps: an alias, a copy, a step per input of a concatenation, an elementwise step)."""
    def fn(*args, **kwargs):
        return _reference(key)(*args, **kwargs)
    fn.__name__ = key.split("::")[1].replace(".", "_")
    return fn


for _key in (*VIEWS, "aten::cat", *SCALAR_ARITHMETIC):
    KERNELS[_key] = _by_reference(_key)
