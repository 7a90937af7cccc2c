"""Object detection kernels against torchvision and PyTorch: nms and roi_align (torchvision's operators), and the
aten operators the detectors reach: topk, sort/argsort, unique, meshgrid, _shape_as_tensor, IntImplicit, dict
update and nearest upsampling of 1-D and 3-D signals."""

from __future__ import annotations

import functools

import numpy as np
import oracle
import pytest
from kernel_backend import kernel as op

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")  # registers torchvision's operators with torch

RNG = np.random.default_rng(20)
rand = functools.partial(oracle.rand, RNG)
check = oracle.check


def test_schemas_are_torchs() -> None:
    oracle.check_schemas(["torchvision::nms", "torchvision::roi_align", "aten::topk", "aten::sort", "aten::sort.stable",
                          "aten::argsort", "aten::argsort.stable", "aten::_unique2", "aten::meshgrid",
                          "aten::meshgrid.indexing", "aten::_shape_as_tensor", "aten::IntImplicit", "aten::update.str",
                          "aten::upsample_nearest1d", "aten::upsample_nearest1d.vec", "aten::upsample_nearest3d",
                          "aten::upsample_nearest3d.vec"])


# ------------------------------------------------------------------------------------------------------------
# nms
# ------------------------------------------------------------------------------------------------------------

def boxes(n: int, size: float = 100.0, dtype=np.float32) -> np.ndarray:
    """n random boxes (x1, y1, x2, y2) inside a size x size image, overlapping often."""
    corner = RNG.uniform(0, size * 0.8, (n, 2))
    extent = RNG.uniform(1, size * 0.4, (n, 2))
    return np.concatenate([corner, corner + extent], axis=1).astype(dtype)


@pytest.mark.parametrize("threshold", [0.0, 0.3, 0.5, 0.7, 1.0])
@pytest.mark.parametrize("n", [1, 7, 200])
def test_nms(threshold: float, n: int) -> None:
    check("torchvision::nms", boxes(n), RNG.random(n).astype(np.float32), threshold)


def test_nms_float64_and_many_boxes() -> None:
    check("torchvision::nms", boxes(50, dtype=np.float64), RNG.random(50), 0.5)
    check("torchvision::nms", boxes(3000, size=600), RNG.random(3000).astype(np.float32), 0.45)


def test_nms_empty_input_gives_empty_int64() -> None:
    check("torchvision::nms", np.zeros((0, 4), np.float32), np.zeros(0, np.float32), 0.5)


def test_nms_all_suppressed_but_the_best() -> None:
    b = np.tile(np.array([[10, 10, 50, 50]], np.float32), (6, 1)) + RNG.uniform(0, 1, (6, 4)).astype(np.float32)
    ours, _ = check("torchvision::nms", b, RNG.random(6).astype(np.float32), 0.5)
    assert len(ours) == 1


def test_nms_threshold_edges_and_degenerate_boxes() -> None:
    """IoU exactly at the threshold is kept (suppression needs IoU > threshold, compared in float64), boxes
    touching at an edge do not overlap, and empty or inverted boxes (area 0 or negative) behave as in
    torchvision."""
    b = np.array([[0, 0, 10, 10], [0, 0, 10, 5], [10, 0, 20, 10], [5, 5, 5, 5], [8, 8, 2, 2], [0, 0, 10, 10.0001]],
                 np.float32)
    s = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.4], np.float32)
    for threshold in (0.5, 0.49999, 0.50001, 0.0, 1.0, 0.9999):
        check("torchvision::nms", b, s, threshold)


def test_nms_equal_scores_keep_index_order() -> None:
    """torchvision sorts the scores (torch's sort leaves ties in an unspecified order; small inputs come out in
    index order, as ptlite always gives them)."""
    b = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [30, 30, 40, 40], [31, 31, 41, 41]], np.float32)
    s = np.array([0.5, 0.5, 0.5, 0.5], np.float32)
    ours, _ = check("torchvision::nms", b, s, 0.5)
    assert ours.tolist() == [0, 2]


def test_nms_refuses_mismatched_arguments() -> None:
    with pytest.raises(ValueError, match="shape"):
        op("torchvision::nms")(np.zeros((3, 5), np.float32), np.zeros(3, np.float32), 0.5)
    with pytest.raises(ValueError, match="length"):
        op("torchvision::nms")(np.zeros((3, 4), np.float32), np.zeros(2, np.float32), 0.5)
    with pytest.raises(ValueError, match="float32 or float64"):
        op("torchvision::nms")(np.zeros((3, 4), np.float32), np.zeros(3, np.float64), 0.5)


# ------------------------------------------------------------------------------------------------------------
# roi_align
# ------------------------------------------------------------------------------------------------------------

def rois(k: int, batch: int, size: float, spill: float = 0.2, rng: np.random.Generator = RNG) -> np.ndarray:
    """k boxes (batch index, x1, y1, x2, y2) over a size x size input, partly outside by up to spill * size."""
    corner = rng.uniform(-spill * size, size * 0.9, (k, 2))
    extent = rng.uniform(0.1, size * 0.6, (k, 2))
    index = rng.integers(0, batch, (k, 1))
    return np.concatenate([index, corner, corner + extent], axis=1).astype(np.float32)


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [-1, 0, 1, 2, 3])
@pytest.mark.parametrize("scale", [1.0, 0.5, 0.25, 1 / 32])
def test_roi_align(aligned: bool, sampling_ratio: int, scale: float) -> None:
    x = rand(2, 5, 16, 20)
    check("torchvision::roi_align", x, rois(12, 2, 20 / scale), scale, 7, 5, sampling_ratio, aligned, tol=1e-6)


def test_roi_align_float64_large_and_outside() -> None:
    x = rand(1, 3, 13, 11).astype(np.float64)
    r = rois(9, 1, 13, spill=1.0).astype(np.float64)
    check("torchvision::roi_align", x, r, 1.0, 2, 3, -1, True, tol=1e-12)
    far = np.array([[0, -50, -50, -20, -20], [0, 30, 30, 60, 70], [0, -2, -2, 14, 14], [0, 3, 4, 3, 4]], np.float32)
    check("torchvision::roi_align", rand(1, 4, 12, 12), far, 1.0, 3, 3, 2, False, tol=1e-6)
    check("torchvision::roi_align", rand(1, 4, 12, 12), far, 1.0, 3, 3, -1, True, tol=1e-6)


def test_roi_align_as_faster_rcnn_pools() -> None:
    """MultiScaleRoIAlign's call: 7x7, two samples per bin, aligned=False, many boxes over a stride-16 map."""
    x = rand(1, 32, 20, 20)
    check("torchvision::roi_align", x, rois(150, 1, 320), 1 / 16, 7, 7, 2, False, tol=1e-6)


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [-1, 0, 2])
@pytest.mark.parametrize("scale", [1.0, 0.25, 1 / 32])
def test_roi_align_float16(aligned: bool, sampling_ratio: int, scale: float) -> None:
    """torchvision's CPU kernel computes half (each operation rounded to half, the box sizes and grid counts too),
    and so does ptlite's; a float16 tolerance (1e-3 of the largest value) leaves room for the rounding."""
    rng = np.random.default_rng(16)  # its own numbers: the tests after these draw what they drew before
    x = oracle.rand(rng, 2, 5, 16, 20, dtype=np.float16)
    ours, _ = check("torchvision::roi_align", x, rois(12, 2, 20 / scale, rng=rng).astype(np.float16), scale, 7, 5,
                    sampling_ratio, aligned, tol=1e-3)
    assert ours.dtype == np.float16


def test_roi_align_float16_as_faster_rcnn_pools_and_outside() -> None:
    rng = np.random.default_rng(17)
    half = functools.partial(oracle.rand, rng, dtype=np.float16)
    check("torchvision::roi_align", half(1, 32, 20, 20), rois(150, 1, 320, rng=rng).astype(np.float16), 1 / 16, 7,
          7, 2, False, tol=1e-3)
    far = np.array([[0, -50, -50, -20, -20], [0, 30, 30, 60, 70], [0, -2, -2, 14, 14], [0, 3, 4, 3, 4]], np.float16)
    check("torchvision::roi_align", half(1, 4, 12, 12), far, 1.0, 3, 3, -1, True, tol=1e-3)
    check("torchvision::roi_align", half(1, 3, 8, 8), np.zeros((0, 5), np.float16), 1.0, 2, 2, 2, False)


def test_roi_align_float16_is_declared_and_other_dtypes_refused() -> None:
    from ptlite import ops

    assert ops.get("torchvision::roi_align").dtypes == {"float16", "float32", "float64"}
    assert ops.get("torchvision::nms").dtypes == {"float32", "float64"}, "torchvision's CPU nms refuses half"
    roi, x = op("torchvision::roi_align"), np.zeros((1, 2, 8, 8), np.float16)
    with pytest.raises(ValueError, match="float16, float32 or float64"):
        roi(x, np.array([[0, 0, 0, 4, 4]], np.float32), 1.0, 2, 2, 2, False)
    with pytest.raises(ValueError, match="float16, float32 or float64"):
        roi(x.astype(np.int32), np.array([[0, 0, 0, 4, 4]], np.int32), 1.0, 2, 2, 2, False)


def test_roi_align_empty() -> None:
    check("torchvision::roi_align", rand(1, 3, 8, 8), np.zeros((0, 5), np.float32), 1.0, 2, 2, 2, False)


def test_roi_align_refuses_bad_batch_index_and_shapes() -> None:
    roi = op("torchvision::roi_align")
    with pytest.raises(ValueError, match="batch index"):
        roi(rand(1, 2, 8, 8), np.array([[1, 0, 0, 4, 4]], np.float32), 1.0, 2, 2, 2, False)
    with pytest.raises(ValueError, match=r"\[K, 5\]"):
        roi(rand(1, 2, 8, 8), np.zeros((1, 4), np.float32), 1.0, 2, 2, 2, False)
    with pytest.raises(ValueError, match="4-D"):
        roi(rand(2, 8, 8), np.zeros((1, 5), np.float32), 1.0, 2, 2, 2, False)


# ------------------------------------------------------------------------------------------------------------
# topk, sort, unique
# ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_topk(largest: bool, dim: int) -> None:
    x = rand(6, 9, 4)
    for k in (0, 1, 3, x.shape[dim]):
        check("aten::topk", x, k, dim, largest, True)


def test_topk_int_nan_and_scalars() -> None:
    check("aten::topk", rand(20, dtype=np.int64, low=-100, high=100), 5, -1, True, True)
    x = rand(10)
    x[[2, 7]] = np.nan
    check("aten::topk", x, 4, -1, True, True)
    check("aten::topk", x, 4, -1, False, True)
    check("aten::topk", np.asarray(2.5, np.float32), 1, 0, True, True)
    with pytest.raises(IndexError):
        op("aten::topk")(rand(4), 5, -1, True, True)


def test_topk_unsorted_gives_the_same_set() -> None:
    """sorted=False: torch's order is unspecified; ptlite gives the sorted one."""
    x = rand(50)
    values, indices = op("aten::topk")(x, 10, -1, True, False)
    ref = torch.topk(torch.from_numpy(x), 10, sorted=False)
    assert sorted(indices.tolist()) == sorted(ref.indices.tolist())
    assert np.array_equal(np.sort(values), np.sort(ref.values.numpy()))


def test_topk_and_sort_break_ties_by_index() -> None:
    """Equal values come in index order (torch's order of ties is unspecified; on small inputs it is this one)."""
    x = np.array([1, 3, 3, 2, 3, 1, 0], np.float32)
    assert op("aten::topk")(x, 4, -1, True, True)[1].tolist() == [1, 2, 4, 3]
    assert op("aten::sort")(x, -1, True)[1].tolist() == [1, 2, 4, 3, 0, 5, 6]
    assert op("aten::sort")(x, -1, False)[1].tolist() == [6, 0, 5, 3, 1, 2, 4]


@pytest.mark.parametrize("descending", [False, True])
def test_sort_and_argsort(descending: bool) -> None:
    x = rand(5, 7)
    x[1, 3] = np.nan
    for dim in (0, 1, -1):
        check("aten::sort", x, dim, descending)
        check("aten::sort.stable", x, True, dim, descending)
        check("aten::argsort", x, dim, descending)
        check("aten::argsort.stable", x, True, dim, descending)
    ties = rand(30, dtype=np.int32, low=-5, high=5)
    check("aten::sort.stable", ties, True, 0, descending)  # stable: equal values in index order, as in torch
    values, indices = op("aten::sort")(ties, 0, descending)  # torch's order of equal values is unspecified
    ref = torch.sort(torch.from_numpy(ties), descending=descending)
    assert np.array_equal(values, ref.values.numpy()) and np.array_equal(ties[indices], values)
    check("aten::sort", np.asarray(1.5, np.float32), 0, descending)


def test_unique() -> None:
    x = rand(4, 6, dtype=np.int64, low=0, high=5)
    for inverse in (False, True):
        for counts in (False, True):
            check("aten::_unique2", x, True, inverse, counts)
    check("aten::_unique2", rand(10, dtype=np.float32), True, True, True)
    check("aten::_unique2", np.zeros(0, np.float32), True, True, True)


# ------------------------------------------------------------------------------------------------------------
# meshgrid, shapes, dicts, nearest upsampling
# ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("indexing", ["ij", "xy"])
def test_meshgrid(indexing: str) -> None:
    check("aten::meshgrid.indexing", [rand(3), rand(4)], indexing)
    check("aten::meshgrid.indexing", [rand(2, dtype=np.int64), rand(3, dtype=np.int64),
                                      rand(4, dtype=np.int64)], indexing)
    check("aten::meshgrid.indexing", [np.asarray(1.0, np.float32), rand(3)], indexing)
    check("aten::meshgrid", [rand(3), rand(5)])


def test_meshgrid_refuses_matrices_and_other_indexing() -> None:
    with pytest.raises(ValueError, match="0-d or 1-d"):
        op("aten::meshgrid.indexing")([rand(2, 2)], "ij")
    with pytest.raises(ValueError, match="indexing"):
        op("aten::meshgrid.indexing")([rand(2)], "ji")


def test_shape_as_tensor_and_int_implicit() -> None:
    check("aten::_shape_as_tensor", rand(2, 3, 5))
    check("aten::_shape_as_tensor", np.asarray(1.0, np.float32))
    check("aten::IntImplicit", np.asarray(7, np.int64))
    with pytest.raises(TypeError):
        op("aten::IntImplicit")(np.asarray(7.5, np.float32))
    with pytest.raises(ValueError):
        op("aten::IntImplicit")(np.array([7], np.int64))


def test_dict_update() -> None:
    d = {"a": 1, "b": 2}
    op("aten::update.str")(d, {"b": 3, "c": 4})
    assert d == {"a": 1, "b": 3, "c": 4}


@pytest.mark.parametrize("size", [5, 8, 12, 3])
def test_upsample_nearest_1d_and_3d(size: int) -> None:
    check("aten::upsample_nearest1d", rand(2, 3, 6), [size], None)
    check("aten::upsample_nearest1d.vec", rand(2, 3, 6), [size], None)
    check("aten::upsample_nearest3d", rand(1, 2, 3, 4, 5), [size, size + 1, 4], None, None, None)
    check("aten::upsample_nearest3d.vec", rand(1, 2, 3, 4, 5), [size, 2, size], None)


def test_upsample_nearest_by_scale_factors() -> None:
    check("aten::upsample_nearest1d.vec", rand(1, 2, 7), None, [1.5])
    check("aten::upsample_nearest3d.vec", rand(1, 2, 3, 4, 5), None, [2.0, 1.5, 0.5])
    check("aten::upsample_nearest1d", rand(1, 2, 7), [10], 1.5)
