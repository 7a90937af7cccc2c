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
        # relative 1e-6 (a few ulp: exp's error plus a division), or absolute 1e-35 where the result is that small
        # (silu below x = -88.7, where exp(-x) overflows, gives -0 where float32 holds down to -2.6e-37)
        assert np.all(err <= np.maximum(1e-6 * np.abs(want), 1e-35)), \
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
