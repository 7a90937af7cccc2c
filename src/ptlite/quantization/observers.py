"""Observers: what calibration learns of a tensor's values, and the uint8 (scale, zero point) it chooses from it.

- "minmax": the range of every value seen. Nothing is clipped, so a few outliers stretch the step for all.
- "histogram": the range seen, then a histogram of the values over it (a second pass over the calibration data),
  and the clipping range, among the histogram's quantiles, that minimizes the expected squared error: rounding
  (step^2 / 12 for each value inside) plus clipping (the distance to the range, squared, for each value outside).
  PyTorch's HistogramObserver searches for the same minimum by another route.
"""

from __future__ import annotations

import numpy as np

from .int8 import QMAX, QMIN, affine_qparams

BINS = 2048
# Candidate fractions of the values to clip at each end (from the histogram's cumulative counts).
TAILS = (0.0, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2)


class MinMax:
    """The range of every value observed."""

    passes = 1

    def __init__(self) -> None:
        self.lo = np.inf
        self.hi = -np.inf

    def observe(self, x: np.ndarray, step: int = 0) -> None:
        if x.size:
            self.lo = min(self.lo, float(x.min()))
            self.hi = max(self.hi, float(x.max()))

    @property
    def seen(self) -> bool:
        return self.lo <= self.hi

    def range(self) -> tuple[float, float]:
        return self.lo, self.hi

    def qparams(self) -> tuple[float, int]:
        return affine_qparams(*self.range())


class Histogram(MinMax):
    """The range (first pass), then a histogram over it (second pass); the range chosen minimizes the error."""

    passes = 2

    def __init__(self) -> None:
        super().__init__()
        self.counts: np.ndarray | None = None

    def observe(self, x: np.ndarray, step: int = 0) -> None:
        if step == 0:
            super().observe(x)
            return
        if not x.size or not self.seen:
            return
        counts, _ = np.histogram(x, bins=BINS, range=self._edges())
        self.counts = counts if self.counts is None else self.counts + counts

    def _edges(self) -> tuple[float, float]:
        lo, hi = min(self.lo, 0.0), max(self.hi, 0.0)
        return (lo, hi) if hi > lo else (lo, lo + 1.0)

    def range(self) -> tuple[float, float]:
        if self.counts is None or not self.counts.sum():
            return super().range()
        lo, hi = self._edges()
        width = (hi - lo) / BINS
        centers = lo + width * (np.arange(BINS) + 0.5)
        counts = self.counts.astype(np.float64)
        cumulative = np.cumsum(counts) / counts.sum()
        lows = {lo} | {lo + width * int(np.searchsorted(cumulative, t, side="right")) for t in TAILS if t}
        highs = {hi} | {lo + width * (int(np.searchsorted(cumulative, 1 - t, side="left")) + 1) for t in TAILS if t}
        best, chosen = np.inf, (lo, hi)
        for a in sorted(lows):
            for b in sorted(highs):
                a0, b0 = min(a, 0.0), max(b, 0.0)
                if b0 <= a0:
                    continue
                step = (b0 - a0) / (QMAX - QMIN)
                outside = np.maximum(a0 - centers, 0) + np.maximum(centers - b0, 0)
                error = float(np.sum(counts * np.where(outside > 0, outside ** 2, step * step / 12)))
                if error < best:
                    best, chosen = error, (a0, b0)
        return chosen


OBSERVERS: dict[str, type[MinMax]] = {"minmax": MinMax, "histogram": Histogram}
