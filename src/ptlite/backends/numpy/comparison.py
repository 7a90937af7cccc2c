"""Comparison, logic and selection kernels: eq/ne/lt/le/gt/ge, equal, logical and bitwise ops, where and
masked_fill."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ptlite.backends.numpy import kernel

from .elementwise import Operand, binary, cast, result_type, select, wrap

_I64 = np.dtype(np.int64)


# ----------------------------------------------------------------------------------------------------
# Comparison and logic (results are bool)
# ----------------------------------------------------------------------------------------------------

def _comparison(ufunc: np.ufunc) -> Callable[[Operand, Operand], np.ndarray]:
    def compare(self: Operand, other: Operand) -> np.ndarray:
        return binary(ufunc, self, other)
    compare.__name__ = ufunc.__name__
    return compare


for _name, _ufunc in [("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                      ("gt", np.greater), ("ge", np.greater_equal)]:
    kernel(f"aten::{_name}.Tensor", f"aten::{_name}.Scalar")(_comparison(_ufunc))


@kernel("aten::equal")
def equal(self: np.ndarray, other: np.ndarray) -> bool:
    return self.shape == other.shape and bool(np.array_equal(self, other))


@kernel("aten::logical_and")
def logical_and(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return wrap(np.logical_and(self, other))


@kernel("aten::logical_or")
def logical_or(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return wrap(np.logical_or(self, other))


@kernel("aten::logical_xor")
def logical_xor(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return wrap(np.logical_xor(self, other))


@kernel("aten::logical_not")
def logical_not(self: np.ndarray) -> np.ndarray:
    return wrap(np.logical_not(self))


@kernel("aten::bitwise_not")
def bitwise_not(self: np.ndarray) -> np.ndarray:
    return wrap(np.invert(self))


@kernel("aten::bitwise_and.Tensor",
        "aten::bitwise_and.Scalar",
        "aten::bitwise_and.Scalar_Tensor",
        "aten::__and__.Tensor",
        "aten::__and__.Scalar")
def bitwise_and(self: Operand, other: Operand) -> np.ndarray:
    return binary(np.bitwise_and, self, other)


@kernel("aten::bitwise_or.Tensor",
        "aten::bitwise_or.Scalar",
        "aten::bitwise_or.Scalar_Tensor",
        "aten::__or__.Tensor",
        "aten::__or__.Scalar")
def bitwise_or(self: Operand, other: Operand) -> np.ndarray:
    return binary(np.bitwise_or, self, other)


@kernel("aten::bitwise_xor.Tensor",
        "aten::bitwise_xor.Scalar",
        "aten::bitwise_xor.Scalar_Tensor",
        "aten::__xor__.Tensor",
        "aten::__xor__.Scalar")
def bitwise_xor(self: Operand, other: Operand) -> np.ndarray:
    return binary(np.bitwise_xor, self, other)


# ----------------------------------------------------------------------------------------------------
# Selection
# ----------------------------------------------------------------------------------------------------

@kernel("aten::where.self",
        "aten::where.ScalarOther",
        "aten::where.ScalarSelf",
        "aten::where.Scalar")
def where(condition: np.ndarray, self: Operand, other: Operand) -> np.ndarray:
    dt = result_type(self, other)
    return select(condition, np.asarray(cast(self, dt)), np.asarray(cast(other, dt)))


@kernel("aten::where")
def where_nonzero(condition: np.ndarray) -> list[np.ndarray]:
    return [i.astype(_I64, copy=False) for i in np.nonzero(np.atleast_1d(condition))]


@kernel("aten::masked_fill.Scalar",
        "aten::masked_fill.Tensor")
def masked_fill(self: np.ndarray, mask: np.ndarray, value: Operand) -> np.ndarray:
    return select(mask, np.asarray(cast(value, self.dtype)), self)


@kernel("aten::masked_fill_.Scalar",
        "aten::masked_fill_.Tensor")
def masked_fill_(self: np.ndarray, mask: np.ndarray, value: Operand) -> np.ndarray:
    if not self.flags.writeable:
        return np.broadcast_to(masked_fill(self, mask, value), self.shape).copy()
    np.copyto(self, cast(value, self.dtype), where=mask)
    return self
