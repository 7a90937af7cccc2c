"""The vectorized exp and the activations built on it, measured against float64 over dense grids: the stated
maximum errors (csrc/kernels.inc) hold on every instruction set."""

from __future__ import annotations

import numpy as np


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in units of the last place of float32 at want."""
    want32 = want.astype(np.float32)
    spacing = np.spacing(np.abs(want32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - want) / spacing


def test_exp_within_two_ulp_where_the_result_is_normal(lib, isa):
    x = np.linspace(-87.3, 88.72, 2_000_003, dtype=np.float32)
    y = np.empty_like(x)
    lib.unary(1, x, y, 0, 0.0, 0.0)
    worst = _ulps(y, np.exp(x.astype(np.float64))).max()
    assert worst <= 2.0, f"native {isa} exp: {worst:.2f} ulp"


def test_exp_limits(lib, isa):
    x = np.array([-1000, -87.5, 88.73, 1000, np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)
    y = np.empty_like(x)
    lib.unary(1, x, y, 0, 0.0, 0.0)
    assert list(y[:6]) == [0, 0, np.inf, np.inf, np.inf, 0], f"native {isa}: {y}"
    assert np.isnan(y[6]) and y[7] == 1 and y[8] == 1


def test_sigmoid_and_silu_error(lib, isa):
    x = np.linspace(-100, 100, 1_000_001, dtype=np.float32)
    x64 = x.astype(np.float64)
    sig = 1 / (1 + np.exp(-x64))
    for code, want, name in ((lib.ACT_SIGMOID, sig, "sigmoid"), (lib.ACT_SILU, x64 * sig, "silu")):
        y = np.empty_like(x)
        lib.unary(0, x, y, code, 0.0, 0.0)
        err = np.abs(y - want)
        # relative 4e-7 (~4 ulp: the degree-5 exp's error, a division and rounding; 3.1e-7 measured), or absolute
        # 1e-35 where the result is that small (silu below x = -88.7, where exp(-x) overflows, gives -0 where float32
        # holds down to -2.6e-37)
        assert np.all(err <= np.maximum(4e-7 * np.abs(want), 1e-35)), \
            f"native {isa} {name}: worst {err.max():.3g} at x={x[err.argmax()]}"


def test_tanh_within_two_ulp(lib, isa):
    """tanh: Cephes' polynomial below |x| = 0.625, 1 - 2 / (exp(2|x|) + 1) above; 2 ulp at most (where the result
    is normal), exactly +-1 far out, odd, NaN for NaN."""
    x = np.concatenate([np.linspace(-12, 12, 2_000_001, dtype=np.float32),
                        np.geomspace(1e-30, 1.0, 200_001).astype(np.float32)])
    y = np.empty_like(x)
    lib.unary(0, x, y, lib.ACT_TANH, 0.0, 0.0)
    worst = _ulps(y, np.tanh(x.astype(np.float64)))
    assert worst.max() <= 2.0, f"native {isa} tanh: {worst.max():.2f} ulp at x={x[worst.argmax()]}"
    edge = np.array([-np.inf, -50, 50, np.inf, np.nan, 0.0], np.float32)
    out = np.empty_like(edge)
    lib.unary(0, edge, out, lib.ACT_TANH, 0.0, 0.0)
    assert list(out[:4]) == [-1, -1, 1, 1] and np.isnan(out[4]) and out[5] == 0, f"native {isa}: {out}"


def _erf64(x: np.ndarray) -> np.ndarray:
    """erf in float64, elementwise (math.erf: the C library's, correctly rounded to well under a float32 ulp)."""
    import math
    return np.array([math.erf(v) for v in x.astype(np.float64).tolist()])


def test_erf_within_three_ulp(lib, isa):
    """erf: x P(x^2) below |x| = 1, 1 - exp(-x^2) Q(|x|) up to 3.92, exactly +-1 beyond; 3 ulp at most (where the
    result is normal), odd, NaN for NaN."""
    x = np.concatenate([np.linspace(-6, 6, 300_001, dtype=np.float32),
                        np.geomspace(1e-30, 1.0, 30_001).astype(np.float32),
                        np.array([0.99999994, 1.0, 1.0000001, 3.9199998, 3.92], np.float32)])
    y = np.empty_like(x)
    lib.unary(0, x, y, lib.ACT_ERF, 0.0, 0.0)
    worst = _ulps(y, _erf64(x))
    assert worst.max() <= 3.0, f"native {isa} erf: {worst.max():.2f} ulp at x={x[worst.argmax()]}"
    assert np.array_equal(y[:150_000], -y[300_000:150_000:-1]), "erf is not odd"
    edge = np.array([-np.inf, -4.0, 4.0, np.inf, np.nan, 0.0, -0.0], np.float32)
    out = np.empty_like(edge)
    lib.unary(0, edge, out, lib.ACT_ERF, 0.0, 0.0)
    assert list(out[:4]) == [-1, -1, 1, 1] and np.isnan(out[4]), f"native {isa}: {out}"
    assert out[5] == 0 and not np.signbit(out[5]) and np.signbit(out[6]), f"native {isa}: erf(+-0) = {out[5:]}"


def test_gelu_both_forms(lib, isa):
    """GELU, x Phi(x), and PyTorch's tanh form: within a few ulp of the float64 values where they are O(1), and the
    exact form within 1e-5 relative in its left tail down to x = -9, 2e-5 down to -13 (from erfc there, where
    x/2 (1 + erf) as PyTorch computes it in float32 cancels)."""
    x = np.linspace(-10, 10, 200_001, dtype=np.float32)
    x64 = x.astype(np.float64)
    forms = ((lib.ACT_GELU, 0.5 * x64 * (1 + _erf64(x64 / np.sqrt(2))), "gelu"),
             (lib.ACT_GELU_TANH, 0.5 * x64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (x64 + 0.044715 * x64 ** 3))),
              "gelu tanh"))
    for code, want, name in forms:
        y = np.empty_like(x)
        lib.unary(0, x, y, code, 0.0, 0.0)
        err = np.abs(y - want)
        assert np.all(err <= np.maximum(4e-7 * np.abs(want), 1e-7 * np.abs(x64))), \
            f"native {isa} {name}: worst {err.max():.3g} at x={x[err.argmax()]}"
    edge = np.array([np.inf, np.nan, 0.0], np.float32)
    out = np.empty_like(edge)
    lib.unary(0, edge, out, lib.ACT_GELU, 0.0, 0.0)
    assert out[0] == np.inf and np.isnan(out[1]) and out[2] == 0, f"native {isa}: {out}"
    tail = np.linspace(-13, -1.5, 100_001, dtype=np.float32)
    y = np.empty_like(tail)
    lib.unary(0, tail, y, lib.ACT_GELU, 0.0, 0.0)
    want = tail.astype(np.float64) / 2 * _erfc64(-tail.astype(np.float64) / np.sqrt(2))
    rel = np.abs(y - want) / np.abs(want)
    bound = np.where(tail >= -9, 1e-5, 2e-5)
    assert np.all(rel <= bound), f"native {isa} gelu tail: {rel.max():.3g} relative at x={tail[rel.argmax()]}"


def _erfc64(x: np.ndarray) -> np.ndarray:
    import math
    return np.array([math.erfc(v) for v in x.astype(np.float64).tolist()])
