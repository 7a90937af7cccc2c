"""Questions about a tensor (size, dim, dtype, device, ...); conversions between tensors and Python scalars.

ptlite tensors live on the CPU as NumPy arrays: a device is the string "cpu", a layout is 0 (strided), nothing
requires grad. A NestedArray (attention.py's padded stand-in for a nested tensor) answers is_nested with True.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.ir.dtypes import scalar_type_of

from .attention import NestedArray

_STRIDED = 0  # PyTorch's Layout enumeration: torch.strided


def _wrap_dim(dim: int, ndim: int) -> int:
    rank = max(ndim, 1)
    if dim < -rank or dim >= rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], "
                         f"but got {dim})")
    return dim + rank if dim < 0 else dim


# ---------------------------------------------------------------------------------------------------------
# Shape
# ---------------------------------------------------------------------------------------------------------

@kernel("aten::size", "aten::sym_size")
def size(self: np.ndarray) -> list[int]:
    return list(self.shape)


@kernel("aten::size.int", "aten::sym_size.int")
def size_int(self: np.ndarray, dim: int) -> int:
    if self.ndim == 0:
        raise IndexError("dimension specified as 0 but tensor has no dimensions")
    return int(self.shape[_wrap_dim(dim, self.ndim)])


@kernel("aten::dim")
def dim(self: np.ndarray) -> int:
    return self.ndim


@kernel("aten::numel", "aten::sym_numel")
def numel(self: np.ndarray) -> int:
    return int(self.size)


@kernel("aten::_shape_as_tensor")
def shape_as_tensor(self: np.ndarray) -> np.ndarray:
    return np.asarray(self.shape, dtype=np.int64)


@kernel("aten::len.Tensor")
def len_tensor(t: np.ndarray) -> int:
    if t.ndim == 0:
        raise TypeError("len() of a 0-d tensor")
    return int(t.shape[0])


def _strides(self: np.ndarray) -> list[int]:
    """Element strides: NumPy's when they are what PyTorch could have, else those of a contiguous tensor."""
    item = self.itemsize
    if all(s >= 0 and s % item == 0 for s in self.strides):
        return [s // item for s in self.strides]
    out, step = [], 1
    for extent in reversed(self.shape):
        out.append(step)
        step *= max(extent, 1)
    return out[::-1]


@kernel("aten::stride", "aten::sym_stride")
def stride(self: np.ndarray) -> list[int]:
    return _strides(self)


@kernel("aten::stride.int",
        "aten::sym_stride.int")
def stride_int(self: np.ndarray, dim: int) -> int:
    return _strides(self)[_wrap_dim(dim, self.ndim)]


@kernel("aten::sym_storage_offset")
def storage_offset(self: np.ndarray) -> int:
    return 0


@kernel("aten::is_contiguous",
        "aten::is_contiguous.memory_format",
        "aten::sym_is_contiguous")
def is_contiguous(self: np.ndarray, memory_format: int = 0) -> bool:
    if memory_format == 2:  # channels_last: NHWC order in memory
        return self.ndim == 4 and self.transpose(0, 2, 3, 1).flags.c_contiguous
    return bool(self.flags.c_contiguous)


@kernel("aten::element_size")
def element_size(self: np.ndarray) -> int:
    return int(self.itemsize)


# ---------------------------------------------------------------------------------------------------------
# Element type, device, flags
# ---------------------------------------------------------------------------------------------------------

@kernel("prim::dtype")
def dtype(a: np.ndarray) -> int:
    return scalar_type_of(a)


@kernel("aten::is_floating_point")
def is_floating_point(self: np.ndarray) -> bool:
    return self.dtype.kind == "f"


@kernel("aten::is_complex")
def is_complex(self: np.ndarray) -> bool:
    return self.dtype.kind == "c"


@kernel("prim::device")
def device(a: np.ndarray) -> str:
    return "cpu"


@kernel("aten::get_device")
def get_device(self: np.ndarray) -> int:
    return -1


@kernel("prim::type")
def device_type(self: str) -> str:
    return str(self).split(":")[0]


@kernel("prim::index")
def device_index(self: str) -> int | None:
    _, _, index = str(self).partition(":")
    return int(index) if index else None


@kernel("aten::device")
def device_from_str(a: str) -> str:
    return a


@kernel("aten::device.with_index")
def device_with_index(type: str, index: int) -> str:  # noqa: A002  (schema name)
    return f"{type}:{index}"


@kernel("aten::eq.device")
def device_eq(a: str, b: str) -> bool:
    return str(a) == str(b)


@kernel("aten::ne.device")
def device_ne(a: str, b: str) -> bool:
    return str(a) != str(b)


@kernel("prim::layout")
def layout(a: np.ndarray) -> int:
    return _STRIDED


@kernel("prim::is_nested")
def is_nested(a: np.ndarray) -> bool:
    return isinstance(a, NestedArray)


@kernel("prim::is_cuda", "prim::is_sparse",
        "prim::is_quantized", "prim::is_mkldnn",
        "prim::is_meta", "prim::is_xpu", "prim::is_mps",
        "prim::is_vulkan", "prim::is_ipu",
        "prim::requires_grad")
def always_false(a: np.ndarray) -> bool:
    return False


@kernel("prim::name")
def name(a: np.ndarray) -> None:
    return None


@kernel("prim::data", "aten::data")
def data(a: np.ndarray) -> np.ndarray:
    return a


# ---------------------------------------------------------------------------------------------------------
# Tensors <-> Python scalars and lists
# ---------------------------------------------------------------------------------------------------------

def _single(a: np.ndarray, what: str) -> Any:
    if a.size != 1:
        raise ValueError(f"a Tensor with {a.size} elements cannot be converted to {what}")
    return a.reshape(()).item()


@kernel("aten::item", "aten::ScalarImplicit",
        "aten::_local_scalar_dense")
def item(self: np.ndarray) -> int | float | bool:
    return _single(self, "Scalar")


@kernel("aten::Int.Tensor")
def int_tensor(a: np.ndarray) -> int:
    return int(_single(a, "int"))


@kernel("aten::IntImplicit")
def int_implicit(a: np.ndarray) -> int:
    """A 0-d integer tensor where TorchScript wants an int (an argument typed int given a tensor)."""
    if a.ndim != 0:
        raise ValueError("Cannot input a tensor of dimension other than 0 as a scalar argument")
    if a.dtype.kind not in "iu":
        raise TypeError(f"Cannot input a tensor of type {a.dtype} as an integral argument")
    return int(a)


@kernel("aten::Float.Tensor")
def float_tensor(a: np.ndarray) -> float:
    return float(_single(a, "float"))


@kernel("aten::Bool.Tensor")
def bool_tensor(a: np.ndarray) -> bool:
    return bool(_single(a, "bool"))


@kernel("prim::NumToTensor.Scalar", "prim::NumToTensor.bool")
def num_to_tensor(a: int | float | bool) -> np.ndarray:
    """A 0-d tensor: bool, int64 or float64 (PyTorch's choice for a Python bool, int or float)."""
    if isinstance(a, (bool, np.bool_)):
        return np.asarray(bool(a))
    if isinstance(a, (int, np.integer)):
        return np.asarray(int(a), dtype=np.int64)
    return np.asarray(float(a), dtype=np.float64)


# prim::tolist's element-type codes and the tensor dtypes each accepts
_TOLIST_TYPES = {0: (("int64",), "Long"), 1: (("float32", "float64"), "Float or Double"),
                 2: (("bool",), "Bool")}


@kernel("prim::tolist")
def tolist(self: np.ndarray, dim: int, elem_type: int) -> Any:
    """tensor.tolist() with TorchScript's checks: the annotated rank and element type must match."""
    dtypes, torch_name = _TOLIST_TYPES[elem_type]
    if self.ndim != dim:
        raise ValueError("Output annotation list dimension and runtime tensor dimension must match for "
                         "tolist()")
    if self.dtype.name not in dtypes:
        raise ValueError("Output annotation element type and runtime tensor element type must match for "
                         f"tolist(): {torch_name} vs {self.dtype.name}")
    return np.asarray(self).tolist()
