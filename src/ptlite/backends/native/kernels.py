"""The native backend's kernels, one per operator it runs: each puts its arguments in the form the C library takes
(float32, channels-last images, C-contiguous buffers), calls it, and returns the result in the layout the NumPy
reference would (channels-last images stay channels-last). Arguments the library does not take (another dtype,
grouped convolution, broadcasting it does not do) go to the reference's kernel for that operator, so a kernel here
is never less general than the reference's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ptlite import ops
from ptlite.backends.numpy import implementation
from ptlite.backends.numpy.packed import check_gate

from . import _native as lib
from .arguments import (
    BILINEAR,
    F32,
    WINOGRAD_LAYOUTS,
    WINOGRAD_POSITIONS,
    activation_epilogue,
    bilinear_size,
    conv_out_size,
    pair,
    pool_args,
    pool_out_size,
    resize_table,
)

KERNELS: dict[str, Callable[..., Any]] = {}


def _kernel(*keys: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        for key in keys:
            KERNELS[key] = fn
        return fn
    return wrap


def _reference(key: str) -> Callable[..., Any]:
    fn = implementation(key)
    assert fn is not None, key
    return fn


def _nhwc(x: np.ndarray) -> np.ndarray:
    """(N, C, H, W) float32 as a C-contiguous (N, H, W, C) array: a view when it is channels-last already."""
    view = x.transpose(0, 2, 3, 1)
    return view if view.flags.c_contiguous else np.ascontiguousarray(view)


def _nhwc_target(out: Any, shape: tuple[int, int, int, int]) -> np.ndarray | None:
    """out's NHWC view, when out is a writeable channels-last float32 array of the (N, C, H, W) `shape`."""
    if not isinstance(out, np.ndarray) or out.shape != shape or out.dtype != F32 or not out.flags.writeable:
        return None
    view = out.transpose(0, 2, 3, 1)
    return view if view.flags.c_contiguous else None


def _into(out: Any, y: np.ndarray) -> np.ndarray:
    """y, copied into `out` (and out returned) when out is a writeable array of y's shape and dtype in another
    layout, as the reference's elementwise kernels do (its convolutions and pooling, which write NHWC only,
    allocate instead)."""
    if out is not y and isinstance(out, np.ndarray) and out.shape == y.shape and out.dtype == y.dtype \
            and out.flags.writeable:
        np.copyto(out, y)
        return out
    return y


# ------------------------------------------------------------------------------------------------ convolution

def conv_nhwc(xh: np.ndarray, weight: np.ndarray, bias: np.ndarray | None, kernel_size: Sequence[int],
              stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], groups: int,
              epilogue: tuple[int, float, float], target: np.ndarray | None = None,
              out_channels: int | None = None, winograd: bool = False) -> np.ndarray | None:
    """The convolution of C-contiguous NHWC float32 `xh` by a prepacked weight (dense (K, O) or depthwise), by
    panels of 16 output channels when `out_channels` is given (ops/packed.py), or by Winograd's transformed weight
    when `winograd` (F(4x4, 3x3): (36, C, O); F(2x2, 3x3): (16, C, O)), into `target` (an NHWC array) or a new one;
    None if the library does not take these arguments."""
    n, h, w, c = xh.shape
    kh, kw = kernel_size
    layout = lib.ROWS
    if winograd:
        if weight.ndim != 3 or weight.shape[0] not in WINOGRAD_LAYOUTS or weight.shape[1] != c or groups != 1 \
                or (kh, kw) != (3, 3) or tuple(stride) != (1, 1) or tuple(dilation) != (1, 1):
            return None
        o, layout = weight.shape[2], WINOGRAD_LAYOUTS[weight.shape[0]]
    elif out_channels is not None:
        o, layout = out_channels, lib.PANELS
        if groups != 1 or weight.ndim != 3 or weight.shape != (-(-o // lib.PANEL), kh * kw * c, lib.PANEL):
            return None
    elif groups == 1 and weight.ndim == 2 and weight.shape[0] == kh * kw * c:
        o = weight.shape[1]
    elif groups == c and weight.ndim == 2 and weight.shape == (kh * kw, c):
        o = c
    else:
        return None
    if weight.dtype != F32 or (bias is not None and (bias.dtype != F32 or bias.shape != (o,))):
        return None
    top, bottom, left, right = padding
    ho = conv_out_size(h, kh, stride[0], top, bottom, dilation[0])
    wo = conv_out_size(w, kw, stride[1], left, right, dilation[1])
    if ho <= 0 or wo <= 0:
        return None  # the reference says what is wrong
    y = target if target is not None and target.shape == (n, ho, wo, o) else np.empty((n, ho, wo, o), F32)
    lib.conv2d(xh, weight, bias, y, (n, h, w, c, o, kh, kw, stride[0], stride[1], top, bottom, left, right,
                                     dilation[0], dilation[1], ho, wo, groups, layout), *epilogue)
    return y


def _conv(input, weight, bias, kernel_size, stride, padding, dilation, groups, activation,
          activation_args, out, out_channels=None, winograd=False):
    """A convolution of an (N, C, H, W) or (C, H, W) float32 image, its result channels-last (written into `out`
    when that is a channels-last array of its shape); None when the library does not take the arguments."""
    epilogue = activation_epilogue(activation, activation_args)
    if input.dtype != F32 or input.ndim not in (3, 4) or epilogue is None:
        return None
    x = input[None] if input.ndim == 3 else input
    target = None
    if isinstance(out, np.ndarray) and out.ndim == input.ndim:
        o = out_channels if out_channels is not None else weight.shape[-1] if groups == 1 else x.shape[1]
        ho = conv_out_size(x.shape[2], kernel_size[0], stride[0], padding[0], padding[1], dilation[0])
        wo = conv_out_size(x.shape[3], kernel_size[1], stride[1], padding[2], padding[3], dilation[1])
        target = _nhwc_target(out[None] if input.ndim == 3 else out, (x.shape[0], o, ho, wo))
    y = conv_nhwc(_nhwc(x), weight, bias, kernel_size, stride, padding, dilation, int(groups), epilogue, target,
                  out_channels, winograd)
    if y is None:
        return None
    if target is not None and y is target:
        return out
    y = y.transpose(0, 3, 1, 2)
    return y[0] if input.ndim == 3 else y


@_kernel(ops.CONV2D_PREPACKED)
def conv2d_prepacked(input, weight, bias, kernel_size, stride, padding, dilation, groups, activation="none",
                     activation_args=(), *, out=None):
    y = _conv(input, weight, bias, kernel_size, stride, padding, dilation, groups, activation,
              activation_args, out)
    if y is not None:
        return y
    return _reference(ops.CONV2D_PREPACKED)(input, weight, bias, kernel_size, stride, padding, dilation, groups,
                                            activation, activation_args, out=out)


@_kernel(ops.CONV2D_PACKED)
def conv2d_packed(input, weight, bias, kernel_size, stride, padding, dilation, out_channels, activation="none",
                  activation_args=(), *, out=None):
    y = _conv(input, weight, bias, kernel_size, stride, padding, dilation, 1, activation,
              activation_args, out, int(out_channels))
    if y is not None:
        return y
    return _reference(ops.CONV2D_PACKED)(input, weight, bias, kernel_size, stride, padding, dilation, out_channels,
                                         activation, activation_args, out=out)


@_kernel(ops.CONV2D_PACKED_GATED)
def conv2d_packed_gated(input, gate, weight, bias, kernel_size, stride, padding, dilation, out_channels,
                        activation="none", activation_args=(), *, out=None):
    """Node by node: the product (in the input's layout), then the convolution. The executor's step scales the
    weight per image instead (pl_conv_run_scaled)."""
    check_gate(input, gate)
    return conv2d_packed(np.multiply(input, gate), weight, bias, kernel_size, stride, padding, dilation,
                         out_channels, activation, activation_args, out=out)


def _winograd(key: str) -> Callable[..., Any]:
    """The kernel of a Winograd operator: its weight must have the operator's positions (WINOGRAD_POSITIONS), or the
    reference runs it (and says what is wrong)."""
    positions = WINOGRAD_POSITIONS[key]

    def fn(input, weight, bias, padding, activation="none", activation_args=(), *, out=None):
        y = None
        if isinstance(weight, np.ndarray) and weight.ndim == 3 and weight.shape[0] == positions:
            y = _conv(input, weight, bias, (3, 3), (1, 1), padding, (1, 1), 1, activation, activation_args, out,
                      winograd=True)
        return y if y is not None else _reference(key)(input, weight, bias, padding, activation, activation_args,
                                                       out=out)
    fn.__name__ = key.split("::")[1]
    return _kernel(key)(fn)


conv2d_winograd_v2 = _winograd(ops.CONV2D_WINOGRAD_V2)
conv2d_winograd_2x2 = _winograd(ops.CONV2D_WINOGRAD_2X2)


@_kernel(ops.CONV2D_POINTWISE_DEPTHWISE)
def conv2d_pointwise_depthwise(input, pw_weight, pw_bias, pw_activation, pw_activation_args, dw_weight, dw_bias,
                               kernel_size, stride, padding, dilation, activation="none", activation_args=(), *,
                               out=None):
    pw = activation_epilogue(pw_activation, pw_activation_args)
    dw = activation_epilogue(activation, activation_args)
    if input.dtype == F32 and input.ndim == 4 and pw is not None and dw is not None:
        mid = conv_nhwc(_nhwc(input), pw_weight, pw_bias, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, pw)
        if mid is not None:
            n, h, w, c = mid.shape
            ho = conv_out_size(h, kernel_size[0], stride[0], padding[0], padding[1], dilation[0])
            wo = conv_out_size(w, kernel_size[1], stride[1], padding[2], padding[3], dilation[1])
            target = None if out is None else _nhwc_target(out, (n, c, ho, wo))
            y = conv_nhwc(mid, dw_weight, dw_bias, kernel_size, stride, padding, dilation, c, dw, target)
            if y is not None:
                return out if target is not None and y is target else y.transpose(0, 3, 1, 2)
    return _reference(ops.CONV2D_POINTWISE_DEPTHWISE)(
        input, pw_weight, pw_bias, pw_activation, pw_activation_args, dw_weight, dw_bias, kernel_size, stride,
        padding, dilation, activation, activation_args, out=out)


def _linear(input, weight, bias, activation, activation_args, out, out_features=None):
    """y = act(input @ W + bias) over the last dimension, by a (K, O) or panel-packed weight; None when the
    library does not take the arguments."""
    epilogue = activation_epilogue(activation, activation_args)
    k = weight.shape[0] if out_features is None else weight.shape[1] if weight.ndim == 3 else -1
    if input.dtype != F32 or input.ndim < 1 or epilogue is None or input.shape[-1] != k or input.size == 0:
        return None
    o = weight.shape[1] if out_features is None else int(out_features)
    rows = input.size // k
    x = np.ascontiguousarray(input).reshape(rows, 1, 1, k)
    shape = input.shape[:-1] + (o,)
    into = isinstance(out, np.ndarray) and out.shape == shape and out.dtype == F32 and out.flags.c_contiguous \
        and out.flags.writeable
    target = out.reshape(rows, 1, 1, o) if into else None
    y = conv_nhwc(x, weight, bias, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, epilogue, target, out_features)
    if y is None:
        return None
    return out if into else y.reshape(shape)


@_kernel(ops.LINEAR_PREPACKED)
def linear_prepacked(input, weight, bias, activation="none", activation_args=(), *, out=None):
    y = _linear(input, weight, bias, activation, activation_args, out) if weight.ndim == 2 else None
    if y is not None:
        return y
    return _reference(ops.LINEAR_PREPACKED)(input, weight, bias, activation, activation_args, out=out)


@_kernel(ops.LINEAR_PACKED)
def linear_packed(input, weight, bias, out_features, activation="none", activation_args=(), *, out=None):
    y = _linear(input, weight, bias, activation, activation_args, out, int(out_features))
    if y is not None:
        return y
    return _reference(ops.LINEAR_PACKED)(input, weight, bias, out_features, activation, activation_args, out=out)


# ------------------------------------------------------------------------------------------------ pooling

def _channels_last(x: np.ndarray) -> bool:
    """Whether a 4-D array's memory is NHWC (images the convolutions made): pooling keeps an NCHW image NCHW, so
    the reference takes those."""
    return x.transpose(0, 2, 3, 1).flags.c_contiguous


def _pool(op: str, self: Any, args: Sequence[Any], out: Any) -> Any:
    parsed = pool_args(op, args)
    if parsed is not None and isinstance(self, np.ndarray) and self.dtype == F32 and self.ndim == 4 \
            and _channels_last(self):
        k, s, p, d, ceil, kind, divisor = parsed
        n, c, h, w = self.shape
        ho, wo = pool_out_size(h, k[0], s[0], p[0], d[0], ceil), pool_out_size(w, k[1], s[1], p[1], d[1], ceil)
        if ho >= 1 and wo >= 1 and n * c * h * w > 0:
            target = None if out is None else _nhwc_target(out, (n, c, ho, wo))
            y = target if target is not None else np.empty((n, ho, wo, c), F32)
            lib.pool2d(_nhwc(self), y, (n, h, w, c, k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], ho, wo), kind,
                       divisor)
            return out if target is not None else y.transpose(0, 3, 1, 2)
    if parsed is not None and parsed[5] == lib.POOL_MAX and isinstance(self, np.ndarray) and self.dtype == np.uint8 \
            and self.ndim == 4 and _channels_last(self) and self.size:  # a quantized image: int8 pooling
        k, s, p, d, ceil, _, _ = parsed
        n, c, h, w = self.shape
        ho, wo = pool_out_size(h, k[0], s[0], p[0], d[0], ceil), pool_out_size(w, k[1], s[1], p[1], d[1], ceil)
        if ho >= 1 and wo >= 1:
            into = isinstance(out, np.ndarray) and out.shape == (n, c, ho, wo) and out.dtype == np.uint8 \
                and out.flags.writeable and out.transpose(0, 2, 3, 1).flags.c_contiguous
            y = out.transpose(0, 2, 3, 1) if into else np.empty((n, ho, wo, c), np.uint8)
            lib.qmaxpool(self.transpose(0, 2, 3, 1), y, (n, h, w, c, k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1],
                                                          ho, wo))
            return out if into else y.transpose(0, 3, 1, 2)
    return _reference(op)(self, *args, **({} if out is None else {"out": out}))


@_kernel("aten::max_pool2d")
def max_pool2d(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False, *, out=None):
    return _pool("aten::max_pool2d", self, (kernel_size, stride, padding, dilation, ceil_mode), out)


@_kernel("aten::avg_pool2d")
def avg_pool2d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    return _pool("aten::avg_pool2d", self, (kernel_size, stride, padding, ceil_mode, count_include_pad,
                                            divisor_override), None)


@_kernel("aten::adaptive_avg_pool2d")
def adaptive_avg_pool2d(self, output_size, *, out=None):
    size = pair(output_size)
    if self.dtype == F32 and self.ndim == 4 and size == (1, 1) and self.size > 0:
        n, c, h, w = self.shape
        y = out if isinstance(out, np.ndarray) and out.shape == (n, c, 1, 1) and out.dtype == F32 \
            and out.flags.c_contiguous and out.flags.writeable else np.empty((n, c, 1, 1), F32)
        lib.mean_rows(_nhwc(self), y, n, h * w, c)
        return y
    return _reference("aten::adaptive_avg_pool2d")(self, output_size, out=out)


# ------------------------------------------------------------------------------------------------ resizing

def _bilinear(x: Any, op: str, args: Sequence[Any]) -> np.ndarray | None:
    """A BILINEAR operator on a channels-last float32 image, or None (an NCHW image stays NCHW: the reference's)."""
    if not isinstance(x, np.ndarray) or x.dtype != F32 or x.ndim != 4 or x.size == 0 or not _channels_last(x) \
            or not isinstance(args[1], bool):
        return None
    size = bilinear_size(op, x.shape, args)
    if size is None:
        return None
    n, c, h, w = x.shape
    (ho, wo), scales = size
    y = np.empty((n, ho, wo, c), F32)
    lib.resize(_nhwc(x), resize_table(h, w, ho, wo, args[1], scales), y, (n, h, w, c, ho, wo))
    return y.transpose(0, 3, 1, 2)


@_kernel(BILINEAR[0])
def upsample_bilinear2d_vec(input, output_size, align_corners, scale_factors):  # noqa: A002
    y = _bilinear(input, BILINEAR[0], (output_size, align_corners, scale_factors))
    return y if y is not None else _reference(BILINEAR[0])(input, output_size, align_corners, scale_factors)


@_kernel(BILINEAR[1])
def upsample_bilinear2d(self, output_size, align_corners, scales_h=None, scales_w=None):
    y = _bilinear(self, BILINEAR[1], (output_size, align_corners, scales_h, scales_w))
    return y if y is not None else _reference(BILINEAR[1])(self, output_size, align_corners, scales_h, scales_w)


def kernel_for(key: str) -> Callable[..., Any] | None:
    """The kernel for an operator key, importing the module that registers it where that is another
    (ptlite.backends.native.OPERATORS)."""
    from . import OPERATORS

    if key not in KERNELS and key in OPERATORS:
        import importlib

        importlib.import_module(f"{__package__}.{OPERATORS[key]}")
    return KERNELS.get(key)


from . import elementwise as _elementwise  # noqa: E402,F401  (its kernels join KERNELS; it imports this module)
