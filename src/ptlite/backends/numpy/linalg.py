"""Matrix-product kernels (linear, matmul, mm, bmm, addmm, baddbmm, einsum, ...) on BLAS via np.matmul."""

from __future__ import annotations

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.errors import KernelArgumentError


def _add_into(out: np.ndarray, other) -> np.ndarray:
    """out + other, in place when that keeps out's shape and dtype (out is always a fresh buffer here)."""
    other = np.asarray(other)
    if np.broadcast_shapes(out.shape, other.shape) == out.shape and \
            np.can_cast(other.dtype, out.dtype, "same_kind"):
        np.add(out, other, out=out, casting="same_kind")
        return out
    return np.add(out, other)


def _matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """torch.matmul; a stack of matrices times one matrix (or vector) is folded into a single GEMM."""
    if a.ndim >= 3 and b.ndim <= 2:
        k = a.shape[-1]
        if b.shape[0] != k:
            raise ValueError(f"matmul: shapes {a.shape} and {b.shape} cannot be multiplied")
        out = np.matmul(a.reshape(-1, k), b)
        return out.reshape(a.shape[:-1] + b.shape[1:])
    return np.asarray(np.matmul(a, b))


def _scaled(value: np.ndarray, factor) -> np.ndarray:
    """value * factor, in place (value is a fresh product)."""
    if factor == 1:
        return value
    return np.multiply(value, factor, out=value, casting="same_kind")


@kernel("aten::linear")
def linear(input, weight, bias=None):
    """input @ weight.T + bias, over any number of leading dimensions (one GEMM for all of them)."""
    if input.ndim == 0 or weight.ndim == 0:
        raise KernelArgumentError(f"linear: both arguments need at least 1 dimension, got {input.ndim}-d and "
                                  f"{weight.ndim}-d")
    out = _matmul(input, weight.T)
    return out if bias is None else _add_into(out, bias)


@kernel("aten::matmul")
def matmul(self, other):
    return _matmul(self, other)


@kernel("aten::mm",
        "aten::bmm")
def mm(self, mat2):
    if self.ndim != mat2.ndim or self.ndim not in (2, 3):
        raise ValueError(f"mm/bmm expect two 2-D or two 3-D tensors, got {self.shape} and {mat2.shape}")
    return np.matmul(self, mat2)


@kernel("aten::mv")
def mv(self, vec):
    return np.matmul(self, vec)


@kernel("aten::dot")
def dot(self, tensor):
    return np.asarray(np.dot(self, tensor))


@kernel("aten::addmm",
        "aten::baddbmm",
        "aten::addmv")
def addmm(self, mat1, mat2, beta=1, alpha=1):
    """beta * self + alpha * (mat1 @ mat2); with beta == 0 self is ignored (NaNs in it do not propagate)."""
    out = _scaled(np.matmul(mat1, mat2), alpha)
    if beta == 0:
        return out
    return _add_into(out, self if beta == 1 else self * np.asarray(beta, dtype=out.dtype))


@kernel("aten::t")
def t(self):
    if self.ndim > 2:
        raise ValueError(f"t() expects a tensor with <= 2 dimensions, got shape {self.shape}")
    return self.T


@kernel("aten::einsum")
def einsum(equation, tensors, path=None):
    return np.asarray(np.einsum(equation.replace(" ", ""), *tensors, optimize=len(tensors) > 1))
