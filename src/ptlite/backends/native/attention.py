"""The native backend's kernels for attention blocks: softmax and layer norm over rows, scaled dot-product
attention and batched matrix products (imported by kernels.kernel_for when a program first asks for one of them).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from . import _native as lib
from .kernels import F32, _kernel, _reference


def _rows(x: Any, dim: Any) -> tuple[np.ndarray, int] | None:
    """x as a C-contiguous float32 array and the length of its last axis, when `dim` names that axis."""
    if not isinstance(x, np.ndarray) or x.dtype != F32 or x.ndim < 1 or x.size == 0 or type(dim) is not int \
            or dim not in (-1, x.ndim - 1):
        return None
    return np.ascontiguousarray(x), x.shape[-1]


def _softmax_rows(rows: tuple[np.ndarray, int]) -> np.ndarray:
    x, n = rows
    y = np.empty_like(x)
    lib.softmax(x, y, x.size // n, n)
    return y


@_kernel("aten::softmax.int")
def softmax(self, dim, dtype=None):
    rows = _rows(self, dim) if dtype is None else None
    return _reference("aten::softmax.int")(self, dim, dtype) if rows is None else _softmax_rows(rows)


@_kernel("aten::_softmax")
def _softmax(self, dim, half_to_float):
    rows = _rows(self, dim) if not half_to_float else None
    return _reference("aten::_softmax")(self, dim, half_to_float) if rows is None else _softmax_rows(rows)


@_kernel("aten::layer_norm")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):  # noqa: A002
    shape = tuple(normalized_shape) if isinstance(normalized_shape, (list, tuple)) else None
    if isinstance(input, np.ndarray) and input.dtype == F32 and shape and input.size > 0 \
            and input.shape[input.ndim - len(shape):] == shape and isinstance(eps, float) and eps >= 0 \
            and all(p is None or isinstance(p, np.ndarray) and p.dtype == F32 and p.shape == shape
                    for p in (weight, bias)):
        x = np.ascontiguousarray(input)
        n = math.prod(shape)
        y = np.empty_like(x)
        lib.layer_norm(x, None if weight is None else np.ascontiguousarray(weight),
                       None if bias is None else np.ascontiguousarray(bias), y, x.size // n, n, eps)
        return y
    return _reference("aten::layer_norm")(input, normalized_shape, weight, bias, eps, cudnn_enable)


def matmul_shapes(sa: tuple[int, ...], sb: tuple[int, ...]) -> tuple[tuple[int, ...], int, bool] | None:
    """For a product of (..., m, k) and (..., k, n) operands: the output shape, the number of batch entries and
    whether b is one matrix for all of them; None for what the library does not take (a 1-D operand, an empty one,
    a's batch broadcast against b's)."""
    if len(sa) < 2 or len(sb) < 2 or sa[-1] != sb[-2] or 0 in sa or 0 in sb:
        return None
    batch_a, batch_b = sa[:-2], sb[:-2]
    shared = math.prod(batch_b) == 1
    if len(batch_b) > len(batch_a) or not (shared or batch_b == batch_a[len(batch_a) - len(batch_b):]) \
            or (not shared and math.prod(batch_a) != math.prod(batch_b)):
        return None
    return (*batch_a, sa[-2], sb[-1]), math.prod(batch_a), shared


def _matmul(a: Any, b: Any) -> np.ndarray | None:
    if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == F32 and b.dtype == F32):
        return None
    planned = matmul_shapes(a.shape, b.shape)
    if planned is None:
        return None
    out, count, shared = planned
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    a = np.ascontiguousarray(a)
    flipped = np.swapaxes(b, -1, -2)
    if flipped.flags.c_contiguous and not b.flags.c_contiguous:  # a transposed view (attention's keys): as it is
        buf, sb_k, sb_n = flipped, 1, k
    else:
        buf, sb_k, sb_n = np.ascontiguousarray(b), n, 1
    y = np.empty(out, F32)
    lib.matmul(a, buf, y, (count, m, k, n, m * k, k, 0 if shared else k * n, sb_k, sb_n))
    return y


@_kernel("aten::matmul")
def matmul(self, other):
    y = _matmul(self, other)
    return _reference("aten::matmul")(self, other) if y is None else y


@_kernel("aten::mm")
def mm(self, mat2):
    y = _matmul(self, mat2) if getattr(self, "ndim", 0) == 2 and getattr(mat2, "ndim", 0) == 2 else None
    return _reference("aten::mm")(self, mat2) if y is None else y


@_kernel("aten::scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(q k^T * scale + mask) v for float32 (..., L, E) inputs with up to two batch dimensions shared by
    query, key and value; a float or bool mask broadcast to (..., L, S). Dropout is not applied (inference)."""
    y = _attention(query, key, value, attn_mask, is_causal, scale) if not enable_gqa else None
    if y is not None:
        return y
    return _reference("aten::scaled_dot_product_attention")(query, key, value, attn_mask, dropout_p, is_causal,
                                                            scale, enable_gqa)


def _attention(q: Any, k: Any, v: Any, mask: Any, causal: Any, scale: Any) -> np.ndarray | None:
    if not all(isinstance(t, np.ndarray) and t.dtype == F32 and 2 <= t.ndim <= 4 and t.size > 0 for t in (q, k, v)) \
            or not q.shape[:-2] == k.shape[:-2] == v.shape[:-2] or k.shape[-1] != q.shape[-1] \
            or v.shape[-2] != k.shape[-2] or type(causal) is not bool or (causal and mask is not None) \
            or not (scale is None or isinstance(scale, (int, float))):
        return None
    batch = (1,) * (4 - q.ndim) + q.shape[:-2]
    length, keys = q.shape[-2], k.shape[-2]
    strides = (0, 0, 0, 0)
    if mask is not None:
        if not isinstance(mask, np.ndarray) or mask.ndim > q.ndim or mask.size == 0:
            return None
        if mask.dtype == np.bool_:
            mask = np.where(mask, np.float32(0.0), np.float32(-np.inf))
        elif mask.dtype != F32:
            return None
        try:
            full = np.broadcast_to(mask, batch + (length, keys))
        except ValueError:
            return None
        if not mask.flags.c_contiguous:
            mask = np.ascontiguousarray(mask)
            full = np.broadcast_to(mask, batch + (length, keys))
        strides = tuple(s // 4 for s in full.strides)
    y = np.empty(q.shape[:-1] + (v.shape[-1],), F32)
    factor = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    lib.attention(np.ascontiguousarray(q), np.ascontiguousarray(k), np.ascontiguousarray(v), mask, y,
                  (*batch, length, keys, q.shape[-1], v.shape[-1], int(causal), *strides), factor)
    return y
