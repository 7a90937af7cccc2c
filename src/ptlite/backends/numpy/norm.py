"""Normalization kernels: batch, layer, group and instance norm (inference semantics, NCHW channel axis 1)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ptlite.backends.numpy import kernel

from ._layout import channel_broadcast, is_channels_last, nhwc_view


def _float(x: np.ndarray) -> np.ndarray:
    return x if np.issubdtype(x.dtype, np.floating) else x.astype(np.float32)


def _per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    """A (C,) vector shaped to broadcast along axis 1 of an ndim-array."""
    return v.reshape((1, -1) + (1,) * (ndim - 2)) if ndim >= 2 else v


def _scale_shift(x, scale, shift):
    """x * scale + shift in one fresh buffer of x's dtype and layout (scale, shift already broadcastable);
    a channels-last x is done on long rows of its NHWC view (see channel_broadcast)."""
    out = channel_broadcast(np.multiply, x, scale)
    if out is None:
        out = np.multiply(x, scale, dtype=x.dtype)
    if channel_broadcast(np.add, out, shift, out=out) is None:
        np.add(out, shift, out=out, casting="same_kind")
    return out


def _centered_moments(x2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row means and biased variances of a 2-D array (two-pass: mean, then mean of squared deviations), and x2
    minus its row means (a new array, which the normalizations scale in place)."""
    d = x2.dtype.type(x2.shape[1])
    mean = np.add.reduce(x2, axis=1, dtype=x2.dtype)
    np.divide(mean, d, out=mean)
    centered = np.subtract(x2, mean[:, None])
    var = np.einsum("ij,ij->i", centered, centered)
    np.divide(var, d, out=var)
    return mean, var, centered


def _rstd(var: np.ndarray, eps: float) -> np.ndarray:
    """1 / sqrt(var + eps), in var's dtype (a new array)."""
    rstd = np.add(var, var.dtype.type(eps))
    np.sqrt(rstd, out=rstd)
    return np.divide(var.dtype.type(1), rstd, out=rstd)


def _batch_norm_stats(x, running_mean, running_var, use_batch_stats):
    """(mean, var) per channel: the batch's own (biased variance) or the running estimates."""
    if use_batch_stats or running_mean is None or running_var is None:
        c = x.shape[1]
        v = nhwc_view(x) if is_channels_last(x) else None
        per_channel = np.moveaxis(x, 1, 0).reshape(c, -1) if v is None else v.reshape(-1, c).T  # a view
        return _centered_moments(per_channel)[:2]
    return running_mean, running_var


def _batch_norm(x, weight, bias, mean, var, eps):
    x = _float(x)
    dt = x.dtype
    scale = (1 / np.sqrt(np.asarray(var, dtype=dt) + dt.type(eps))).astype(dt)
    if weight is not None:
        scale = scale * np.asarray(weight, dtype=dt)
    shift = -np.asarray(mean, dtype=dt) * scale
    if bias is not None:
        shift = shift + np.asarray(bias, dtype=dt)
    return _scale_shift(x, _per_channel(scale, x.ndim), _per_channel(shift, x.ndim))


@kernel("aten::batch_norm")
def batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled=True):
    """Running statistics when training=False; batch statistics otherwise (running buffers untouched)."""
    mean, var = _batch_norm_stats(_float(input), running_mean, running_var, training)
    return _batch_norm(input, weight, bias, mean, var, eps)


@kernel("aten::native_batch_norm",
        "aten::_native_batch_norm_legit")
def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    """(output, saved mean, saved inverse std); the saved statistics are empty unless training."""
    x = _float(input)
    mean, var = _batch_norm_stats(x, running_mean, running_var, training)
    out = _batch_norm(x, weight, bias, mean, var, eps)
    if training:
        return out, mean, _rstd(var, eps)
    empty = np.empty((0,), dtype=out.dtype)
    return out, empty, empty.copy()


@kernel("aten::_native_batch_norm_legit.no_stats")
def native_batch_norm_no_stats(input, weight, bias, training, momentum, eps):
    """Batch norm without running statistics (torch.export's decomposition of instance_norm)."""
    return native_batch_norm(input, weight, bias, None, None, True, momentum, eps)


@kernel("aten::_native_batch_norm_legit_no_training")
def native_batch_norm_no_training(input, weight, bias, running_mean, running_var, momentum, eps):
    return native_batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps)


def _layer_norm(x, normalized_shape: Sequence[int], weight, bias, eps):
    x = _float(x)
    k = len(normalized_shape)
    if tuple(x.shape[x.ndim - k:]) != tuple(int(s) for s in normalized_shape):
        raise ValueError(f"layer_norm: input shape {x.shape} does not end with {list(normalized_shape)}")
    lead = x.shape[:x.ndim - k]
    x2 = x.reshape(math.prod(lead), math.prod(x.shape[x.ndim - k:]))  # explicit: lead may hold a 0
    mean, var, out = _centered_moments(x2)
    rstd = _rstd(var, eps)
    out *= rstd[:, None]
    if weight is not None:
        out *= np.asarray(weight, dtype=x.dtype).reshape(-1)
    if bias is not None:
        out += np.asarray(bias, dtype=x.dtype).reshape(-1)
    stat_shape = lead + (1,) * k
    return out.reshape(x.shape), mean.reshape(stat_shape), rstd.reshape(stat_shape)


@kernel("aten::layer_norm")
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True):
    return _layer_norm(input, normalized_shape, weight, bias, eps)[0]


@kernel("aten::native_layer_norm")
def native_layer_norm(input, normalized_shape, weight, bias, eps):
    return _layer_norm(input, normalized_shape, weight, bias, eps)


def _group_norm(x, groups: int, weight, bias, eps):
    x = _float(x)
    n, c = x.shape[:2]
    if c % groups:
        raise ValueError(f"group_norm: {c} channels are not divisible into {groups} groups")
    x2 = x.reshape(n * groups, c // groups * math.prod(x.shape[2:]))  # explicit: n may be 0
    mean, var, out = _centered_moments(x2)
    rstd = _rstd(var, eps)
    out *= rstd[:, None]
    out = out.reshape(x.shape)
    if weight is not None:
        out *= _per_channel(np.asarray(weight, dtype=x.dtype), x.ndim)
    if bias is not None:
        out += _per_channel(np.asarray(bias, dtype=x.dtype), x.ndim)
    return out, mean.reshape(n, groups), rstd.reshape(n, groups)


@kernel("aten::group_norm")
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn_enabled=True):
    return _group_norm(input, int(num_groups), weight, bias, eps)[0]


@kernel("aten::native_group_norm")
def native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    return _group_norm(input, int(group), weight, bias, eps)


@kernel("aten::instance_norm")
def instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps,
                  cudnn_enabled=True):
    """Per-sample, per-channel statistics (or the running ones when use_input_stats=False)."""
    x = _float(input)
    if not use_input_stats and running_mean is not None and running_var is not None:
        return _batch_norm(x, weight, bias, running_mean, running_var, eps)
    return _group_norm(x, x.shape[1], weight, bias, eps)[0]
