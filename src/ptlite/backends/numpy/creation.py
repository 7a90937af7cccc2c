"""Tensor creation and conversion kernels: zeros/full/arange/linspace/logspace/eye, *_like, new_*, to/_to_copy, fill.

Layout, device, pin_memory, memory_format, non_blocking and requires_grad arguments are accepted and ignored.
`empty` tensors are zero-filled so that results never depend on leftover memory.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.ir.dtypes import to_numpy

from .elementwise import cast, scalar_dtype, write_into

_F32 = np.dtype(np.float32)


def _dtype(dtype: int | None, default: np.dtype) -> np.dtype:
    return default if dtype is None else to_numpy(dtype)


def _shape(size: Any) -> tuple[int, ...]:
    return (int(size),) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)


def _number(x: Any) -> Any:
    """A Scalar argument as a Python number (0-d arrays, as the Tensor overloads pass, included)."""
    return x.item() if isinstance(x, (np.ndarray, np.generic)) else x


# ----------------------------------------------------------------------------------------------------
# Factories
# ----------------------------------------------------------------------------------------------------

@kernel("aten::zeros",
        "aten::empty.memory_format")
def zeros(size: Any, dtype: int | None = None, layout: Any = None, device: Any = None,
          pin_memory: Any = None, memory_format: Any = None) -> np.ndarray:
    return np.zeros(_shape(size), _dtype(dtype, _F32))


@kernel("aten::empty_strided")
def empty_strided(size: Any, stride: Any, dtype: int | None = None, layout: Any = None, device: Any = None,
                  pin_memory: Any = None) -> np.ndarray:
    return zeros(size, dtype)


@kernel("aten::empty_permuted")
def empty_permuted(size: Any, physical_layout: Any, dtype: int | None = None, layout: Any = None,
                   device: Any = None, pin_memory: Any = None) -> np.ndarray:
    return zeros(size, dtype)


@kernel("aten::ones")
def ones(size: Any, dtype: int | None = None, layout: Any = None, device: Any = None,
         pin_memory: Any = None) -> np.ndarray:
    return np.ones(_shape(size), _dtype(dtype, _F32))


@kernel("aten::full")
def full(size: Any, fill_value: Any, dtype: int | None = None, layout: Any = None, device: Any = None,
         pin_memory: Any = None) -> np.ndarray:
    fill_value = _number(fill_value)
    dt = _dtype(dtype, scalar_dtype(fill_value))
    return np.full(_shape(size), cast(fill_value, dt), dt)


@kernel("aten::scalar_tensor")
def scalar_tensor(s: Any, dtype: int | None = None, layout: Any = None, device: Any = None,
                  pin_memory: Any = None) -> np.ndarray:
    dt = _dtype(dtype, _F32)
    return np.asarray(cast(_number(s), dt))


def _arange(start: Any, end: Any, step: Any, dtype: int | None) -> np.ndarray:
    start, end, step = _number(start), _number(end), _number(step)
    if step == 0:
        raise ValueError("arange: step must be nonzero")
    is_float = any(isinstance(v, (float, np.floating)) for v in (start, end, step))
    dt = _dtype(dtype, _F32 if is_float else np.dtype(np.int64))
    if is_float:
        count = math.ceil((end - start) / step)
    else:
        count = -((start - end) // step)  # exact ceil((end - start) / step) for integers
    if count < 0:
        raise ValueError(f"arange: upper bound {end} and step {step} are inconsistent with start {start}")
    if dt.kind in "iub":
        # torch converts start and step to the integer type first (truncating), then counts up
        return (int(start) + int(step) * np.arange(count, dtype=np.int64)).astype(dt, copy=False)
    values = start + step * np.arange(count, dtype=np.float64)  # torch accumulates in double on CPU
    return values.astype(dt)


@kernel("aten::arange")
def arange(end: Any, dtype: int | None = None, layout: Any = None, device: Any = None,
           pin_memory: Any = None) -> np.ndarray:
    return _arange(0, end, 1, dtype)


@kernel("aten::arange.start")
def arange_start(start: Any, end: Any, dtype: int | None = None, layout: Any = None, device: Any = None,
                 pin_memory: Any = None) -> np.ndarray:
    return _arange(start, end, 1, dtype)


@kernel("aten::arange.start_step")
def arange_start_step(start: Any, end: Any, step: Any = 1, dtype: int | None = None, layout: Any = None,
                      device: Any = None, pin_memory: Any = None) -> np.ndarray:
    return _arange(start, end, step, dtype)


@kernel("aten::linspace",
        "aten::linspace.Tensor_Tensor",
        "aten::linspace.Tensor_Scalar",
        "aten::linspace.Scalar_Tensor")
def linspace(start: Any, end: Any, steps: int, dtype: int | None = None, layout: Any = None,
             device: Any = None, pin_memory: Any = None) -> np.ndarray:
    """Like torch: the first half counts up from start, the second half down from end (symmetric rounding)."""
    dt = _dtype(dtype, _F32)
    if steps < 0:
        raise ValueError("linspace: number of steps must be non-negative")
    start, end = _number(start), _number(end)
    work = dt
    if dt.kind != "f":  # integer output: integer end points, float64 steps, truncated results
        start, end, work = int(start), int(end), np.dtype(np.float64)
    start, end = work.type(start), work.type(end)
    if steps <= 1:
        return np.full(steps, start, dt)
    step = (end - start) / work.type(steps - 1)
    i = np.arange(steps, dtype=work)
    half = steps // 2
    out = np.empty(steps, work)
    out[:half] = start + step * i[:half]
    out[half:] = end - step * (work.type(steps - 1) - i[half:])
    return out.astype(dt, copy=False)


@kernel("aten::logspace",
        "aten::logspace.Tensor_Tensor",
        "aten::logspace.Tensor_Scalar",
        "aten::logspace.Scalar_Tensor")
def logspace(start: Any, end: Any, steps: int, base: float = 10.0, dtype: int | None = None, layout: Any = None,
             device: Any = None, pin_memory: Any = None) -> np.ndarray:
    """base ** (the exponents linspace would give), the powers taken in float64 as torch's CPU kernel does."""
    dt = _dtype(dtype, _F32)
    if steps < 0:
        raise ValueError("logspace: number of steps must be non-negative")
    start, end = _number(start), _number(end)
    if dt.kind != "f":
        start, end = int(start), int(end)
    exponents = np.full(steps, float(start)) if steps <= 1 else np.empty(steps)
    if steps > 1:
        step = (float(end) - float(start)) / (steps - 1)
        i = np.arange(steps, dtype=np.float64)
        half = steps // 2
        exponents[:half] = float(start) + step * i[:half]
        exponents[half:] = float(end) - step * (steps - 1 - i[half:])
    return np.power(float(base), exponents).astype(dt)


@kernel("aten::eye")
def eye(n: int, dtype: int | None = None, layout: Any = None, device: Any = None,
        pin_memory: Any = None) -> np.ndarray:
    return np.eye(n, dtype=_dtype(dtype, _F32))


@kernel("aten::eye.m")
def eye_m(n: int, m: int, dtype: int | None = None, layout: Any = None, device: Any = None,
          pin_memory: Any = None) -> np.ndarray:
    return np.eye(n, m, dtype=_dtype(dtype, _F32))


def _infer_list_dtype(data: Any) -> np.dtype:
    """torch.tensor(list): bool if every leaf is bool, int64 if all are integers, else the default float."""
    leaves = np.asarray(data, dtype=object).reshape(-1)
    if leaves.size == 0:
        return _F32
    kinds = {scalar_dtype(_number(v)) for v in leaves}
    if _F32 in kinds:
        return _F32
    return np.dtype(np.int64) if np.dtype(np.int64) in kinds else np.dtype(np.bool_)


@kernel("aten::tensor",
        "aten::as_tensor.list")
def tensor(data: list, dtype: int | None = None, device: Any = None,
           requires_grad: bool = False) -> np.ndarray:
    return np.array(data, dtype=_dtype(dtype, _infer_list_dtype(data)))


@kernel("aten::tensor.float",
        "aten::tensor.int",
        "aten::tensor.bool",
        "aten::as_tensor.float",
        "aten::as_tensor.int",
        "aten::as_tensor.bool")
def tensor_scalar(t: Any, dtype: int | None = None, device: Any = None,
                  requires_grad: bool = False) -> np.ndarray:
    dt = _dtype(dtype, scalar_dtype(t))
    return np.asarray(cast(t, dt))


@kernel("aten::as_tensor")
def as_tensor(data: np.ndarray, dtype: int | None = None, device: Any = None) -> np.ndarray:
    return data if dtype is None else data.astype(to_numpy(dtype), copy=False)


# ----------------------------------------------------------------------------------------------------
# *_like and new_*
# ----------------------------------------------------------------------------------------------------

@kernel("aten::zeros_like",
        "aten::empty_like")
def zeros_like(self: np.ndarray, dtype: int | None = None, layout: Any = None, device: Any = None,
               pin_memory: Any = None, memory_format: Any = None) -> np.ndarray:
    return np.zeros(self.shape, _dtype(dtype, self.dtype))


@kernel("aten::ones_like")
def ones_like(self: np.ndarray, dtype: int | None = None, layout: Any = None, device: Any = None,
              pin_memory: Any = None, memory_format: Any = None) -> np.ndarray:
    return np.ones(self.shape, _dtype(dtype, self.dtype))


@kernel("aten::full_like")
def full_like(self: np.ndarray, fill_value: Any, dtype: int | None = None, layout: Any = None,
              device: Any = None, pin_memory: Any = None, memory_format: Any = None) -> np.ndarray:
    dt = _dtype(dtype, self.dtype)
    return np.full(self.shape, cast(_number(fill_value), dt), dt)


@kernel("aten::new_zeros",
        "aten::new_empty")
def new_zeros(self: np.ndarray, size: Any, dtype: int | None = None, layout: Any = None, device: Any = None,
              pin_memory: Any = None) -> np.ndarray:
    return np.zeros(_shape(size), _dtype(dtype, self.dtype))


@kernel("aten::new_ones")
def new_ones(self: np.ndarray, size: Any, dtype: int | None = None, layout: Any = None, device: Any = None,
             pin_memory: Any = None) -> np.ndarray:
    return np.ones(_shape(size), _dtype(dtype, self.dtype))


@kernel("aten::new_full")
def new_full(self: np.ndarray, size: Any, fill_value: Any, dtype: int | None = None, layout: Any = None,
             device: Any = None, pin_memory: Any = None) -> np.ndarray:
    dt = _dtype(dtype, self.dtype)
    return np.full(_shape(size), cast(_number(fill_value), dt), dt)


# ----------------------------------------------------------------------------------------------------
# Conversion: to, _to_copy, type_as
# ----------------------------------------------------------------------------------------------------

def convert(self: np.ndarray, dt: np.dtype | None, copy: bool) -> np.ndarray:
    """`self` as dtype dt: the same array when nothing changes and no copy is asked for, else a new one.

    Float to integer conversion truncates toward zero, as a C cast (and torch) does.
    """
    if dt is None or dt == self.dtype:
        return np.array(self, copy=True) if copy else self
    return self.astype(dt)


@kernel("aten::to.dtype")
def to_dtype(self: np.ndarray, dtype: int, non_blocking: bool = False, copy: bool = False,
             memory_format: Any = None) -> np.ndarray:
    return convert(self, to_numpy(dtype), copy)


@kernel("aten::to.device")
def to_device(self: np.ndarray, device: Any, dtype: int, non_blocking: bool = False, copy: bool = False,
              memory_format: Any = None) -> np.ndarray:
    return convert(self, to_numpy(dtype), copy)


@kernel("aten::to.other")
def to_other(self: np.ndarray, other: np.ndarray, non_blocking: bool = False, copy: bool = False,
             memory_format: Any = None) -> np.ndarray:
    return convert(self, other.dtype, copy)


@kernel("aten::to.dtype_layout")
def to_dtype_layout(self: np.ndarray, dtype: int | None = None, layout: Any = None, device: Any = None,
                    pin_memory: Any = None, non_blocking: bool = False, copy: bool = False,
                    memory_format: Any = None) -> np.ndarray:
    return convert(self, None if dtype is None else to_numpy(dtype), copy)


@kernel("aten::to.prim_Device")
def to_prim_device(self: np.ndarray, device: Any, dtype: int | None = None, non_blocking: bool = False,
                   copy: bool = False) -> np.ndarray:
    return convert(self, None if dtype is None else to_numpy(dtype), copy)


@kernel("aten::to.prim_dtype")
def to_prim_dtype(self: np.ndarray, dtype: int | None = None, non_blocking: bool = False,
                  copy: bool = False) -> np.ndarray:
    return convert(self, None if dtype is None else to_numpy(dtype), copy)


@kernel("aten::to.prim_other")
def to_prim_other(self: np.ndarray, non_blocking: bool = False, copy: bool = False) -> np.ndarray:
    return convert(self, None, copy)


@kernel("aten::_to_copy")
def to_copy(self: np.ndarray, dtype: int | None = None, layout: Any = None, device: Any = None,
            pin_memory: Any = None, non_blocking: bool = False, memory_format: Any = None) -> np.ndarray:
    return convert(self, None if dtype is None else to_numpy(dtype), True)


@kernel("aten::type_as")
def type_as(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return convert(self, other.dtype, False)


# ----------------------------------------------------------------------------------------------------
# Triangles and fills
# ----------------------------------------------------------------------------------------------------

@kernel("aten::tril")
def tril(self: np.ndarray, diagonal: int = 0) -> np.ndarray:
    return np.tril(self, diagonal)


@kernel("aten::triu")
def triu(self: np.ndarray, diagonal: int = 0) -> np.ndarray:
    return np.triu(self, diagonal)


@kernel("aten::fill.Scalar",
        "aten::fill.Tensor")
def fill(self: np.ndarray, value: Any) -> np.ndarray:
    return np.full(self.shape, cast(value, self.dtype), self.dtype)


@kernel("aten::fill_.Scalar",
        "aten::fill_.Tensor")
def fill_(self: np.ndarray, value: Any) -> np.ndarray:
    if not self.flags.writeable:
        return fill(self, value)
    self[...] = cast(value, self.dtype)
    return self


@kernel("aten::zero_")
def zero_(self: np.ndarray) -> np.ndarray:
    return write_into(self, np.zeros((), self.dtype))
