"""Each GPU kernel against the NumPy reference, in fp32 storage and in fp16 storage (where the reference is given
the same f16-rounded inputs and the tolerance is 1e-3 of the largest output)."""

from __future__ import annotations

import numpy as np
import pytest

from ptlite import backends, ops

rng = np.random.default_rng(0)


def t(*shape: int, low: float = -2.0, high: float = 2.0) -> np.ndarray:
    return rng.uniform(low, high, shape).astype(np.float32)


def check(backend, precision: str, key: str, *args) -> None:
    """The GPU backend's kernel and the reference's agree on args (rounded to f16 first in the fp16 mode)."""
    if precision == "fp16":
        args = tuple(_round16(a) for a in args)
    op = ops.get(key)
    kernel = backend.kernel(op, None)
    assert kernel is not None and kernel.backend == "gpu", key
    got = kernel.fn(*args)
    want = backends.reference().kernel(op, None).fn(*args)
    assert got.shape == want.shape and got.dtype == np.float32, (got.shape, want.shape, got.dtype)
    scale = max(float(np.abs(want).max()), 1e-6)
    tol = 1e-3 if precision == "fp16" else 2e-6
    err = float(np.abs(got - want).max())
    assert err <= tol * scale, f"{key}: max error {err:.3g} > {tol} x {scale:.3g}"


def _round16(a):
    if isinstance(a, np.ndarray):
        return a.astype(np.float16).astype(np.float32)
    if isinstance(a, list) and a and isinstance(a[0], np.ndarray):
        return [_round16(e) for e in a]
    return a


@pytest.mark.parametrize("key,alpha", [("aten::add.Tensor", 1), ("aten::add.Tensor", 2.5), ("aten::sub.Tensor", 0.5)])
def test_add_sub_broadcast(any_gpu, key, alpha):
    check(*any_gpu, key, t(2, 3, 4, 5), t(3, 1, 5), alpha)


@pytest.mark.parametrize("key", ["aten::mul.Tensor", "aten::div.Tensor"])
def test_mul_div_broadcast(any_gpu, key):
    check(*any_gpu, key, t(4, 1, 6), t(3, 1, low=0.5, high=2.0))
    check(*any_gpu, key, t(2, 3, 5, 7), t(low=0.5, high=1.5))  # a 0-d tensor


@pytest.mark.parametrize("key,extra", [("aten::relu", ()), ("aten::relu6", ()), ("aten::hardtanh", (-0.5, 0.7)),
                                       ("aten::sigmoid", ()), ("aten::hardswish", ()), ("aten::silu", ())])
def test_activations(any_gpu, key, extra):
    check(*any_gpu, key, t(2, 3, 7, 5, low=-8, high=8), *extra)


def test_linear(any_gpu):
    check(*any_gpu, "aten::linear", t(7, 13), t(10, 13), t(10))
    check(*any_gpu, "aten::linear", t(2, 3, 9), t(5, 9), None)


def test_addmm_and_matmul(any_gpu):
    check(*any_gpu, "aten::addmm", t(6), t(5, 11), t(11, 6), 0.5, 2.0)
    check(*any_gpu, "aten::addmm", t(5, 6), t(5, 11), t(11, 6), 1, 1)
    check(*any_gpu, "aten::matmul", t(9, 17), t(17, 3))


@pytest.mark.parametrize("x,w,bias,stride,padding,dilation,groups", [
    ((1, 3, 9, 11), (8, 3, 3, 3), True, [1, 1], [1, 1], [1, 1], 1),   # general, padded
    ((2, 4, 10, 9), (6, 4, 3, 3), True, [2, 2], [2, 2], [2, 2], 1),   # strided, dilated
    ((1, 4, 7, 8), (6, 2, 3, 2), False, [1, 2], [0, 1], [1, 1], 2),   # grouped, 3 channels a group, asymmetric
    ((1, 6, 8, 8), (6, 1, 3, 3), True, [1, 1], [1, 1], [1, 1], 6),    # depthwise
    ((2, 5, 6, 7), (9, 5, 1, 1), False, [1, 1], [0, 0], [1, 1], 1),   # pointwise
    ((1, 8, 9, 9), (8, 1, 5, 5), True, [2, 2], [2, 2], [1, 1], 8),    # depthwise 5x5, strided
])
def test_conv2d(any_gpu, x, w, bias, stride, padding, dilation, groups):
    check(*any_gpu, "aten::conv2d", t(*x), t(*w), t(w[0]) if bias else None, stride, padding, dilation, groups)


@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil", [
    ([2, 2], [], [0, 0], [1, 1], False), ([3, 3], [2, 2], [1, 1], [1, 1], False),
    ([3, 3], [2, 2], [0, 0], [1, 1], True), ([2, 3], [1, 2], [1, 1], [2, 1], False)])
def test_max_pool2d(any_gpu, kernel, stride, padding, dilation, ceil):
    check(*any_gpu, "aten::max_pool2d", t(2, 3, 9, 10), kernel, stride, padding, dilation, ceil)


@pytest.mark.parametrize("size", [[1, 1], [3, 2]])
def test_adaptive_avg_pool2d(any_gpu, size):
    check(*any_gpu, "aten::adaptive_avg_pool2d", t(2, 3, 7, 5), size)


def test_cat(any_gpu):
    check(*any_gpu, "aten::cat", [t(2, 3, 4, 5), t(2, 1, 4, 5), t(2, 4, 4, 5)], 1)
    check(*any_gpu, "aten::cat", [t(1, 3), t(2, 3)], 0)


def test_views(any_gpu):
    check(*any_gpu, "aten::flatten.using_ints", t(2, 3, 4, 5), 1, -1)
    check(*any_gpu, "aten::view", t(2, 3, 4), [6, -1])
    check(*any_gpu, "aten::reshape", t(2, 3, 4), [-1])


def test_declined_arguments_run_on_the_reference(gpu):
    """A call the GPU kernels cannot take (float64 here) runs on the reference rather than failing."""
    a, b = np.ones((2, 3)), np.full((2, 3), 2.0)
    out = gpu.kernel(ops.get("aten::mul.Tensor"), None).fn(a, b)
    assert out.dtype == np.float64 and np.all(out == 2.0)


def test_declines_what_it_does_not_run(gpu):
    assert gpu.kernel(ops.get("aten::tanh"), None) is None
    assert gpu.kernel(ops.get("aten::relu_"), None) is None
