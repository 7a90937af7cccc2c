"""Comparison, logic and selection kernels: eq/ne/lt/le/gt/ge, equal, logical and bitwise ops, where and
masked_fill."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ptlite.ir.registry import kernel

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
    kernel(f"aten::{_name}.Tensor(Tensor self, Tensor other) -> Tensor",
           f"aten::{_name}.Scalar(Tensor self, Scalar other) -> Tensor")(_comparison(_ufunc))


@kernel("aten::equal(Tensor self, Tensor other) -> bool")
def equal(self: np.ndarray, other: np.ndarray) -> bool:
    return self.shape == other.shape and bool(np.array_equal(self, other))


@kernel("aten::logical_and(Tensor self, Tensor other) -> Tensor")
def logical_and(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return wrap(np.logical_and(self, other))


@kernel("aten::logical_or(Tensor self, Tensor other) -> Tensor")
def logical_or(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return wrap(np.logical_or(self, other))


@kernel("aten::logical_xor(Tensor self, Tensor other) -> Tensor")
def logical_xor(self: np.ndarray, other: np.ndarray) -> np.ndarray:
    return wrap(np.logical_xor(self, other))


@kernel("aten::logical_not(Tensor self) -> Tensor")
def logical_not(self: np.ndarray) -> np.ndarray:
    return wrap(np.logical_not(self))


@kernel("aten::bitwise_not(Tensor self) -> Tensor")
def bitwise_not(self: np.ndarray) -> np.ndarray:
    return wrap(np.invert(self))


@kernel("aten::bitwise_and.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::bitwise_and.Scalar(Tensor self, Scalar other) -> Tensor",
        "aten::bitwise_and.Scalar_Tensor(Scalar self, Tensor other) -> Tensor",
        "aten::__and__.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::__and__.Scalar(Tensor self, Scalar other) -> Tensor")
def bitwise_and(self: Operand, other: Operand) -> np.ndarray:
    return binary(np.bitwise_and, self, other)


@kernel("aten::bitwise_or.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::bitwise_or.Scalar(Tensor self, Scalar other) -> Tensor",
        "aten::bitwise_or.Scalar_Tensor(Scalar self, Tensor other) -> Tensor",
        "aten::__or__.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::__or__.Scalar(Tensor self, Scalar other) -> Tensor")
def bitwise_or(self: Operand, other: Operand) -> np.ndarray:
    return binary(np.bitwise_or, self, other)


@kernel("aten::bitwise_xor.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::bitwise_xor.Scalar(Tensor self, Scalar other) -> Tensor",
        "aten::bitwise_xor.Scalar_Tensor(Scalar self, Tensor other) -> Tensor",
        "aten::__xor__.Tensor(Tensor self, Tensor other) -> Tensor",
        "aten::__xor__.Scalar(Tensor self, Scalar other) -> Tensor")
def bitwise_xor(self: Operand, other: Operand) -> np.ndarray:
    return binary(np.bitwise_xor, self, other)


# ----------------------------------------------------------------------------------------------------
# Selection
# ----------------------------------------------------------------------------------------------------

@kernel("aten::where.self(Tensor condition, Tensor self, Tensor other) -> Tensor",
        "aten::where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor",
        "aten::where.ScalarSelf(Tensor condition, Scalar self, Tensor other) -> Tensor",
        "aten::where.Scalar(Tensor condition, Scalar self, Scalar other) -> Tensor")
def where(condition: np.ndarray, self: Operand, other: Operand) -> np.ndarray:
    dt = result_type(self, other)
    return select(condition, np.asarray(cast(self, dt)), np.asarray(cast(other, dt)))


@kernel("aten::where(Tensor condition) -> Tensor[]")
def where_nonzero(condition: np.ndarray) -> list[np.ndarray]:
    return [i.astype(_I64, copy=False) for i in np.nonzero(np.atleast_1d(condition))]


@kernel("aten::masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor",
        "aten::masked_fill.Tensor(Tensor self, Tensor mask, Tensor value) -> Tensor")
def masked_fill(self: np.ndarray, mask: np.ndarray, value: Operand) -> np.ndarray:
    return select(mask, np.asarray(cast(value, self.dtype)), self)


@kernel("aten::masked_fill_.Scalar(Tensor(a!) self, Tensor mask, Scalar value) -> Tensor(a!)",
        "aten::masked_fill_.Tensor(Tensor(a!) self, Tensor mask, Tensor value) -> Tensor(a!)")
def masked_fill_(self: np.ndarray, mask: np.ndarray, value: Operand) -> np.ndarray:
    if not self.flags.writeable:
        return np.broadcast_to(masked_fill(self, mask, value), self.shape).copy()
    np.copyto(self, cast(value, self.dtype), where=mask)
    return self
