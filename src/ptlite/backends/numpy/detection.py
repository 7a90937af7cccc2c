"""Object detection kernels: torchvision's non-maximum suppression and RoI Align, with its CPU kernels' arithmetic
(the same float operations in the same order, so that results match bit for bit where torch's do not tie)."""

from __future__ import annotations

import numpy as np

from ptlite.backends.numpy import kernel
from ptlite.errors import KernelArgumentError

from .reduce import descending_order

_FLOATS = (np.float32, np.float64)
_ROI_ALIGN_FLOATS = (np.float16, np.float32, np.float64)  # torchvision's CPU roi_align takes half; its nms does not


# ------------------------------------------------------------------------------------------------------------
# Non-maximum suppression
# ------------------------------------------------------------------------------------------------------------

@kernel("torchvision::nms")
def nms(dets: np.ndarray, scores: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Indices of the boxes kept, by decreasing score: a box (x1, y1, x2, y2) is dropped when its IoU with a box
    kept before it is > iou_threshold. Areas are (x2 - x1) * (y2 - y1); IoU is computed in the boxes' dtype and
    compared with the threshold in float64, as torchvision's CPU kernel does. Equal scores keep their index order
    (torch's sort leaves their order unspecified)."""
    if dets.ndim != 2 or dets.shape[1] != 4:
        raise KernelArgumentError(f"nms: boxes should be a 2-D tensor of shape [N, 4], got shape {dets.shape}")
    if scores.ndim != 1 or scores.shape[0] != dets.shape[0]:
        raise KernelArgumentError(f"nms: scores should be a 1-D tensor of the boxes' length {dets.shape[0]}, got "
                                  f"shape {scores.shape}")
    if dets.dtype != scores.dtype or dets.dtype.type not in _FLOATS:
        raise KernelArgumentError(f"nms: boxes and scores should both be float32 or float64, got {dets.dtype} and "
                                  f"{scores.dtype}")
    if dets.size == 0:
        return np.empty(0, np.int64)
    x1, y1, x2, y2 = (np.ascontiguousarray(dets[:, k]) for k in range(4))
    areas = (x2 - x1) * (y2 - y1)
    zero = dets.dtype.type(0)
    rest = descending_order(scores)  # the candidates not suppressed yet, best first
    keep = []
    while rest.size:
        i, rest = rest[0], rest[1:]
        keep.append(i)
        if not rest.size:
            break
        # std::max(a, b) is (a < b ? b : a) and std::min(a, b) is (b < a ? b : a): NaNs go where torchvision's go
        xx1 = np.where(x1[i] < x1[rest], x1[rest], x1[i])
        yy1 = np.where(y1[i] < y1[rest], y1[rest], y1[i])
        xx2 = np.where(x2[rest] < x2[i], x2[rest], x2[i])
        yy2 = np.where(y2[rest] < y2[i], y2[rest], y2[i])
        w, h = xx2 - xx1, yy2 - yy1
        inter = np.where(zero < w, w, zero) * np.where(zero < h, h, zero)
        overlap = inter / (areas[i] + areas[rest] - inter)
        rest = rest[~(overlap.astype(np.float64) > iou_threshold)]
    return np.asarray(keep, np.int64)


# ------------------------------------------------------------------------------------------------------------
# RoI Align
# ------------------------------------------------------------------------------------------------------------

@kernel("torchvision::roi_align")
def roi_align(input: np.ndarray, rois: np.ndarray, spatial_scale: float, pooled_height: int, pooled_width: int,
              sampling_ratio: int, aligned: bool) -> np.ndarray:
    """Average of bilinear samples over each bin of each box: input [N, C, H, W], rois [K, 5] (batch index, x1, y1,
    x2, y2 in input coordinates, scaled by spatial_scale), result [K, C, pooled_height, pooled_width].

    Each bin takes sampling_ratio x sampling_ratio samples (sampling_ratio <= 0: ceil(box size / pooled size) per
    axis, per box), evenly spaced; aligned=True shifts boxes by half a pixel, aligned=False makes boxes at least
    1x1. A sample more than one pixel outside the map counts as 0; one less than a pixel outside reads the edge.

    float16 is computed in float16 as torchvision's CPU kernel computes it (c10::Half: each operation in float32,
    rounded to half), not in float32 throughout: the box sizes, sample positions and grid counts rounded to half
    are part of its result (a box's grid count computed in float32 can differ by one, changing every bin)."""
    if input.ndim != 4:
        raise KernelArgumentError(f"roi_align: input should be a 4-D tensor [N, C, H, W], got shape {input.shape}")
    if rois.ndim != 2 or rois.shape[1] != 5:
        raise KernelArgumentError(f"roi_align: rois should have shape [K, 5], got {rois.shape}")
    if input.dtype != rois.dtype or input.dtype.type not in _ROI_ALIGN_FLOATS:
        raise KernelArgumentError(f"roi_align: input and rois should both be float16, float32 or float64, got "
                                  f"{input.dtype} and {rois.dtype}")
    ph, pw = int(pooled_height), int(pooled_width)
    n, c, height, width = input.shape
    out = np.zeros((rois.shape[0], c, ph, pw), input.dtype)
    if out.size == 0:
        return out
    t = input.dtype.type
    # the double spatial_scale becomes the kernel's T: for half through float (c10::Half has no double constructor)
    scale = t(np.float32(spatial_scale)) if t is np.float16 else t(spatial_scale)
    boxes = _boxes(rois, scale, t(0.5 if aligned else 0.0), aligned)
    batch = rois[:, 0].astype(np.int64)  # C's (int): towards zero
    if np.any((batch < 0) | (batch >= n)):
        raise KernelArgumentError(f"roi_align: a box's batch index is outside the input's batch of {n}")
    start_w, start_h, box_w, box_h = boxes
    bin_h, bin_w = box_h / t(ph), box_w / t(pw)
    if sampling_ratio > 0:
        grid_h = grid_w = np.full(len(rois), int(sampling_ratio), np.int64)
    else:
        with np.errstate(invalid="ignore"):
            grid_h = np.ceil(box_h / t(ph)).astype(np.int64)
            grid_w = np.ceil(box_w / t(pw)).astype(np.int64)
    channels_last = np.ascontiguousarray(input.transpose(0, 2, 3, 1)).reshape(n, height * width, c)
    groups = {}
    for k, (gh, gw) in enumerate(zip(grid_h.tolist(), grid_w.tolist())):
        if gh > 0 and gw > 0:  # an empty grid averages nothing: zeros
            groups.setdefault((gh, gw), []).append(k)
    for (gh, gw), members in groups.items():
        for chunk in range(0, len(members), 256):
            idx = np.asarray(members[chunk:chunk + 256])
            ys = _samples(start_h[idx], bin_h[idx], ph, gh, height)
            xs = _samples(start_w[idx], bin_w[idx], pw, gw, width)
            pooled = _pool(channels_last, batch[idx], ys, xs, width, t(max(gh * gw, 1)))
            out[idx] = pooled.transpose(0, 3, 1, 2)
    return out


def _boxes(rois: np.ndarray, scale: np.floating, offset: np.floating, aligned: bool) -> tuple[np.ndarray, ...]:
    """Each box's start (x, y) and size (w, h) on the feature map, in the input's dtype."""
    start_w = rois[:, 1] * scale - offset
    start_h = rois[:, 2] * scale - offset
    box_w = (rois[:, 3] * scale - offset) - start_w
    box_h = (rois[:, 4] * scale - offset) - start_h
    if not aligned:  # std::max(size, 1): malformed boxes become 1x1
        one = rois.dtype.type(1)
        box_w = np.where(box_w < one, one, box_w)
        box_h = np.where(box_h < one, one, box_h)
    return start_w, start_h, box_w, box_h


def _samples(start: np.ndarray, bin_size: np.ndarray, pooled: int, grid: int, size: int) -> tuple[np.ndarray, ...]:
    """Along one axis, for boxes [K] and each (bin, sample) [K, pooled, grid]: whether the sample is on the map
    (within a pixel), its low and high pixel and their weights."""
    t = start.dtype.type
    bins = np.arange(pooled, dtype=start.dtype)[None, :, None] * bin_size[:, None, None]
    offsets = (np.arange(grid, dtype=start.dtype) + t(0.5))[None, None, :] * bin_size[:, None, None] / t(grid)
    pos = start[:, None, None] + bins + offsets
    valid = (pos >= -1.0) & (pos <= size)
    pos = np.where(pos <= 0, t(0), pos)
    low = np.where(valid, pos, 0).astype(np.int64)
    edge = low >= size - 1
    low = np.where(edge, size - 1, low)
    high = np.where(edge, low, low + 1)
    pos = np.where(edge, low.astype(start.dtype), pos)
    frac = pos - low.astype(start.dtype)
    return valid, low, high, t(1) - frac, frac


def _pool(channels_last: np.ndarray, batch: np.ndarray, ys: tuple, xs: tuple, width: int,
          count: np.floating) -> np.ndarray:
    """The boxes' bins [K, PH, PW, C]: the sum over samples (row-major over the grid) of the four weighted corner
    pixels, divided by the count, in torchvision's order of operations."""
    y_valid, y_low, y_high, hy, ly = ys
    x_valid, x_low, x_high, hx, lx = xs
    gh, gw = y_low.shape[2], x_low.shape[2]
    b = batch[:, None, None]
    acc = None
    for iy in range(gh):
        for ix in range(gw):
            valid = y_valid[:, :, iy, None] & x_valid[:, None, :, ix]  # [K, PH, PW]
            ylo, yhi = y_low[:, :, iy, None], y_high[:, :, iy, None]
            xlo, xhi = x_low[:, None, :, ix], x_high[:, None, :, ix]
            w1 = hy[:, :, iy, None] * hx[:, None, :, ix]
            w2 = hy[:, :, iy, None] * lx[:, None, :, ix]
            w3 = ly[:, :, iy, None] * hx[:, None, :, ix]
            w4 = ly[:, :, iy, None] * lx[:, None, :, ix]
            corners = []
            for weight, rows, cols in ((w1, ylo, xlo), (w2, ylo, xhi), (w3, yhi, xlo), (w4, yhi, xhi)):
                place = np.where(valid, rows * width + cols, 0)  # outside: torchvision reads pixel 0 with weight 0
                weight = np.where(valid, weight, 0).astype(channels_last.dtype)
                corners.append(weight[..., None] * channels_last[b, place])
            value = corners[0] + corners[1] + corners[2] + corners[3]
            acc = value if acc is None else acc + value
    return acc / count
