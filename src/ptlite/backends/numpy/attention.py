"""Attention kernels: scaled dot-product attention and PyTorch's fused Transformer fast path (nested tensors).

PyTorch's fast path turns a padded batch into a nested tensor (`_nested_tensor_from_mask`), runs the fused
encoder layers on it and pads it back (`to_padded_tensor`). ptlite stands a NestedArray in for the nested
tensor: the padded (batch, seq, feature) array with each sequence's length; positions past a length are kept
at zero, never attended to, and come back as the padding value.
"""

from __future__ import annotations

import numpy as np

from ptlite.backends.numpy import kernel

from .norm import layer_norm


class NestedArray(np.ndarray):
    """Padded stand-in for a nested tensor: (B, S, ...) data whose row b holds lengths[b] valid positions."""

    lengths: np.ndarray

    @staticmethod
    def wrap(data: np.ndarray, lengths: np.ndarray) -> NestedArray:
        out = np.asarray(data).view(NestedArray)
        out.lengths = np.asarray(lengths, dtype=np.int64)
        return out

    def __array_finalize__(self, obj) -> None:
        self.lengths = getattr(obj, "lengths", None)

    def valid(self) -> np.ndarray:
        """(B, S) bool: True where a position holds data."""
        return np.arange(self.shape[1]) < self.lengths[:, None]


def _plain(a: np.ndarray) -> np.ndarray:
    return a.view(np.ndarray) if isinstance(a, NestedArray) else np.asarray(a)


# ---------------------------------------------------------------------------------------------------------
# Numerical building blocks
# ---------------------------------------------------------------------------------------------------------

def _softmax_(scores: np.ndarray, safe: bool) -> np.ndarray:
    """Softmax over the last axis, in place. Rows with no finite score give NaN, or 0 when `safe`."""
    top = np.maximum.reduce(scores, axis=-1, keepdims=True)
    if np.logical_and.reduce(np.isfinite(top), axis=None):  # every row has a finite top score: the common
        np.subtract(scores, top, out=scores)  # case, in four ufunc calls (a small attention is mostly overhead)
        np.exp(scores, out=scores)
        np.divide(scores, np.add.reduce(scores, axis=-1, keepdims=True), out=scores)
        return scores
    with np.errstate(invalid="ignore"):  # a row of -inf (all keys masked), +inf or NaN scores
        if safe:
            dead = np.isneginf(top)
            top[dead] = 0.0
        scores -= top
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
    if safe and dead.any():
        np.putmask(scores, np.broadcast_to(dead, scores.shape), 0.0)
    return scores


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """Layer norm over the last dimension (the encoder layer's norm1 and norm2): aten::layer_norm's kernel."""
    return layer_norm(x, (x.shape[-1],), weight, bias, eps)


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to about 1e-7 (Abramowitz and Stegun 7.1.26), in x's dtype."""
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    y = 1.0 - poly * np.exp(-a * a)
    return np.copysign(y, x).astype(x.dtype, copy=False)


def _gelu_(x: np.ndarray) -> np.ndarray:
    """Exact (erf) GELU, in place."""
    x *= 0.5 * (1.0 + _erf(x * np.asarray(1.0 / np.sqrt(2.0), x.dtype)))
    return x


def _linear(x: np.ndarray, weight: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """x @ weight.T + bias as one 2-D GEMM (NumPy loops over the leading dimensions of a 3-D matmul)."""
    out = np.matmul(x.reshape(-1, x.shape[-1]), weight.T)
    if bias is not None:
        out += bias
    return out.reshape(*x.shape[:-1], weight.shape[0])


# ---------------------------------------------------------------------------------------------------------
# Multi-head attention (PyTorch's native fused kernel)
# ---------------------------------------------------------------------------------------------------------

def _attention_mask(mask: np.ndarray | None, mask_type: int | None, batch: int) -> np.ndarray | None:
    """The native kernel's mask as a bool 'masked out' array broadcastable to (B, H, L, S).

    Any non-zero value masks a position (a float mask's -inf and 0.5 alike), as in PyTorch's fast path.
    """
    if mask is None:
        return None
    if mask_type is None:
        raise ValueError("Mask Type should be defined")
    masked = np.asarray(mask) if mask.dtype == np.bool_ else np.asarray(mask) != 0
    if mask_type == 0:  # attention mask (L, S)
        return masked.reshape((1, 1) + masked.shape[-2:])
    if mask_type == 1:  # key padding mask (B, S)
        return masked.reshape(batch, 1, 1, masked.shape[-1])
    return masked.reshape(batch, -1, *masked.shape[-2:]) if masked.ndim == 3 else masked


def _multi_head(query, key, value, embed_dim: int, num_heads: int, qkv_weight, qkv_bias, proj_weight,
                proj_bias, masked: np.ndarray | None, need_weights: bool, average: bool):
    """Project, attend (masked positions excluded) and project back; returns (output, weights or None)."""
    batch, q_len = query.shape[0], query.shape[1]
    head_dim = embed_dim // num_heads
    if query is key and key is value:
        q, k, v = np.split(_linear(query, qkv_weight, qkv_bias), 3, axis=-1)
    else:
        w = np.split(qkv_weight, 3, axis=0)
        b = np.split(qkv_bias, 3, axis=0)
        q, k, v = (_linear(t, wi, bi) for t, wi, bi in zip((query, key, value), w, b, strict=True))
    k_len = k.shape[1]
    q *= np.asarray(1.0 / np.sqrt(head_dim), q.dtype)
    q = q.reshape(batch, q_len, num_heads, head_dim).transpose(0, 2, 1, 3)
    k = k.reshape(batch, k_len, num_heads, head_dim).transpose(0, 2, 3, 1)
    v = v.reshape(batch, k_len, num_heads, head_dim).transpose(0, 2, 1, 3)
    scores = np.matmul(q, k)
    if masked is not None:
        np.putmask(scores, np.broadcast_to(masked, scores.shape), -np.inf)
    probs = _softmax_(scores, safe=False)
    context = np.matmul(probs, v).transpose(0, 2, 1, 3).reshape(batch, q_len, embed_dim)
    out = _linear(context, proj_weight, proj_bias)
    if not need_weights:
        return out, None
    return out, (probs.mean(axis=1) if average else probs)


@kernel("aten::_native_multi_head_attention")
def native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
                                proj_bias, mask=None, need_weights=True, average_attn_weights=True,
                                mask_type=None):
    """Batch-first self/cross attention. A fully masked query row gives NaN, as PyTorch's kernel does."""
    q = _plain(query)
    k = q if key is query else _plain(key)
    v = q if value is query else (k if value is key else _plain(value))
    if isinstance(query, NestedArray):
        masked = ~query.valid()[:, None, None, :]
    else:
        masked = _attention_mask(mask, mask_type, q.shape[0])
    if q.shape != k.shape or k.shape != v.shape:
        raise ValueError("expected `query`/`key`/`value` shapes to match")
    out, weights = _multi_head(q, k, v, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight,
                               proj_bias, masked, need_weights, average_attn_weights)
    if isinstance(query, NestedArray):
        out = _zero_padding(out, query.lengths)
    return out, weights


# ---------------------------------------------------------------------------------------------------------
# The fused encoder layer
# ---------------------------------------------------------------------------------------------------------

def _zero_padding(x: np.ndarray, lengths: np.ndarray) -> NestedArray:
    valid = np.arange(x.shape[1]) < lengths[:, None]
    x[~valid] = 0.0
    return NestedArray.wrap(x, lengths)


@kernel("aten::_transformer_encoder_layer_fwd")
def transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                                  use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2,
                                  norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None,
                                  mask_type=None):
    """Self-attention + FFN block (post-norm or pre-norm) of nn.TransformerEncoderLayer's fast path."""
    lengths = src.lengths if isinstance(src, NestedArray) else None
    x = _plain(src)
    if x.size == 0:
        return src.copy()
    if lengths is not None:
        masked = (np.arange(x.shape[1]) >= lengths[:, None])[:, None, None, :]
    else:
        masked = _attention_mask(mask, mask_type, x.shape[0])
    attn_in = _layer_norm(x, norm_weight_1, norm_bias_1, eps) if norm_first else x
    h, _ = _multi_head(attn_in, attn_in, attn_in, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight,
                       proj_bias, masked, False, True)
    h += x
    if not norm_first:
        h = _layer_norm(h, norm_weight_1, norm_bias_1, eps)
    ffn_in = _layer_norm(h, norm_weight_2, norm_bias_2, eps) if norm_first else h
    hidden = _linear(ffn_in, ffn_weight_1, ffn_bias_1)
    hidden = _gelu_(hidden) if use_gelu else np.maximum(hidden, 0.0, out=hidden)
    out = _linear(hidden, ffn_weight_2, ffn_bias_2)
    out += h
    if not norm_first:
        out = _layer_norm(out, norm_weight_2, norm_bias_2, eps)
    if lengths is not None:
        return _zero_padding(out, lengths)
    return out


# ---------------------------------------------------------------------------------------------------------
# Nested tensors from padded batches and back
# ---------------------------------------------------------------------------------------------------------

def _left_aligned(valid: np.ndarray) -> bool:
    lengths = valid.sum(axis=-1)
    return bool(np.array_equal(valid, np.arange(valid.shape[-1]) < lengths[..., None]))


@kernel("aten::_nested_tensor_from_mask_left_aligned")
def nested_tensor_from_mask_left_aligned(t: np.ndarray, mask: np.ndarray) -> bool:
    """Whether every row of `mask` (True = keep) is a run of Trues followed only by Falses."""
    return _left_aligned(np.asarray(mask).astype(bool, copy=False))


@kernel("aten::_nested_tensor_from_mask")
def nested_tensor_from_mask(t: np.ndarray, mask: np.ndarray, mask_check: bool = True) -> NestedArray:
    """Row b keeps its first sum(mask[b]) positions (True = keep), as PyTorch does."""
    valid = np.asarray(mask).astype(bool, copy=False)
    if mask_check and not _left_aligned(valid):
        raise ValueError("Mask tensor must be left-aligned: each row holds its Trues before its Falses")
    lengths = valid.sum(axis=-1).astype(np.int64)
    data = np.array(_plain(t), copy=True)
    return _zero_padding(data, lengths)


@kernel("aten::to_padded_tensor")
def to_padded_tensor(self: np.ndarray, padding: float, output_size: list[int] | None = None) -> np.ndarray:
    """Dense (B, S, ...) with `padding` past each length; S is the longest length unless output_size says."""
    data = _plain(self)
    lengths = self.lengths if isinstance(self, NestedArray) else np.full(data.shape[0], data.shape[1])
    longest = int(lengths.max()) if lengths.size else 0
    data = data[:, :longest]
    out = np.where((np.arange(longest) < lengths[:, None]).reshape(data.shape[:2] + (1,) * (data.ndim - 2)),
                   data, np.asarray(padding, data.dtype))
    if output_size is not None:
        shape = tuple(int(s) for s in output_size)
        if len(shape) != out.ndim or any(s < o for s, o in zip(shape, out.shape, strict=True)):
            raise ValueError(f"to_padded_tensor: output_size {list(shape)} is smaller than the data "
                             f"{list(out.shape)}")
        full = np.full(shape, padding, dtype=out.dtype)
        full[tuple(slice(0, n) for n in out.shape)] = out
        out = full
    return out


# ---------------------------------------------------------------------------------------------------------
# Scaled dot-product attention
# ---------------------------------------------------------------------------------------------------------

@kernel("aten::scaled_dot_product_attention")
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """softmax(q k^T * scale + mask) v over (..., L, E) inputs; rows with every key masked give 0.

    Dropout is not applied: ptlite runs inference, where PyTorch's modules pass dropout_p=0.
    """
    query, key, value = np.asarray(query), np.asarray(key), np.asarray(value)
    if is_causal and attn_mask is not None:
        raise ValueError("scaled_dot_product_attention: Explicit attn_mask should not be set when "
                         "is_causal=True")
    if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
        repeat = query.shape[-3] // key.shape[-3]
        key = np.repeat(key, repeat, axis=-3)
        value = np.repeat(value, repeat, axis=-3)
    dtype = np.result_type(query.dtype, key.dtype)
    factor = (1.0 / np.sqrt(query.shape[-1])) if scale is None else scale
    scores = np.matmul(query * np.asarray(factor, dtype), np.swapaxes(key, -1, -2))
    q_len, k_len = query.shape[-2], key.shape[-2]
    if is_causal:
        scores = np.where(np.tri(q_len, k_len, dtype=bool), scores, np.asarray(-np.inf, scores.dtype))
    elif attn_mask is not None:
        mask = np.asarray(attn_mask)
        if mask.dtype == np.bool_:
            scores = np.where(mask, scores, np.asarray(-np.inf, scores.dtype))
        else:
            scores = scores + mask.astype(scores.dtype, copy=False)
    probs = _softmax_(scores, safe=True)
    return np.matmul(probs, value).astype(dtype, copy=False)
