"""The kernels' stand-ins for np.clip, np.tile and as_strided give NumPy's results (and the view is read-only)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

from ptlite.backends.numpy._fastnp import clip, strided_view, tile_cols, tile_row


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int64])
@pytest.mark.parametrize("reps", [0, 1, 7])
def test_tiles_match_numpy(dtype, reps, rng):
    row = rng.normal(size=5).astype(dtype)
    matrix = rng.normal(size=(3, 4)).astype(dtype)
    for ours, ref in ((tile_row(row, reps), np.tile(row, reps)), (tile_cols(matrix, reps), np.tile(matrix, (1, reps)))):
        assert ours.dtype == ref.dtype and ours.shape == ref.shape and ours.flags.c_contiguous
        np.testing.assert_array_equal(ours, ref)


def test_strided_view_is_as_strided_read_only_and_bounded(rng):
    base = rng.normal(size=(2, 5, 6, 3)).astype(np.float32)
    s_n, s_h, s_w, s_c = base.strides
    shape, strides = (3, 3, 2, 3, 4, 3), (s_h, s_w, s_n, s_h, s_w, s_c)  # 3x3 patches, as depthwise_sum reads
    ours = strided_view(base, shape, strides)
    np.testing.assert_array_equal(ours, as_strided(base, shape=shape, strides=strides))
    assert not ours.flags.writeable
    with pytest.raises(ValueError):  # reaching past the array's memory is refused (as_strided would allow it)
        strided_view(base, (3, 3, 2, 5, 6, 3), strides)
    transposed = base.transpose(0, 3, 1, 2)  # not C-contiguous: falls back to as_strided
    view = strided_view(transposed, (2, 3), transposed.strides[:2])
    np.testing.assert_array_equal(view, transposed[:, :, 0, 0])
    assert not view.flags.writeable


def test_clip_is_np_clip(rng):
    x = rng.normal(size=(4, 9)).astype(np.float32) * 5
    x[0, 0] = np.nan
    out = np.empty_like(x)
    np.testing.assert_array_equal(clip(x, np.float32(0), np.float32(6), out=out), np.clip(x, 0, 6))
