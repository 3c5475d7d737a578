"""Which grid :class:`.interpolation.Repulsion` puts an embedding on, as it is at each call: the trimmed grid at
each share of points left outside, or the split grid at each size, by estimated cost (FFT size x log, near pairs,
outside points x nodes); the cheapest is taken. Pure planning: no sums are computed here."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import near_kernels as nk

__all__ = ["MIN_BOXES", "GridPlanner", "Plan", "fft_cost", "ladder", "quantiles"]

#: the shares of points left outside the trimmed grid, tried each call (the cheapest is taken)
_TRIMS = (0.0, 0.0005, 0.002, 0.01)
#: boxes across the split grid's wider side, tried each call
_SPLIT_BOXES = (32, 64, 128, 256)
#: fewest boxes per dimension (a compact embedding, early in a run, still gets this grid)
MIN_BOXES = 10
#: points up to which the trimmed grid's quantiles are exact (:func:`quantiles`)
_EXACT_QUANTILES = 8192
#: cost of a near pair and of an outside point against a node, relative to one FFT point x log2(size)
_NEAR_COST = 1.5
_OUTSIDE_COST = 1.0


def ladder(value: float) -> float:
    """``value`` rounded up to a power of 2^(1/8), so that a grid's spacing (and its kernel's FFT) stays the same
    while the embedding's extent changes little."""
    return float(2.0 ** (math.ceil(8.0 * math.log2(max(value, 1e-30))) / 8.0))


#: a rectangle's x0, x1, y0, y1
_Bounds = tuple[float, float, float, float]


@dataclass
class Plan:
    """One call's grid: ``split`` (near field within ``cutoff``, all points on a grid of boxes ``box`` wide) or not
    (the points ``inside`` the trimmed box on a grid of boxes ``box`` wide, the ``outside`` ones coupled to its
    nodes directly)."""

    split: bool
    box: float
    x0: float
    y0: float
    nbx: int
    nby: int
    inside: np.ndarray
    outside: np.ndarray
    cutoff: float = 0.0
    cells: tuple[int, int] = (0, 0)
    start: np.ndarray | None = None


def quantiles(x: np.ndarray, y: np.ndarray, trims: tuple[float, ...]) -> dict[float, tuple[float, float, float, float]]:
    """(x_t, x_1-t, y_t, y_1-t), the coordinates' quantiles, for t = 0 (the smallest and largest, exact) and each of
    ``trims``: exact up to :data:`_EXACT_QUANTILES` points, above from every (n // _EXACT_QUANTILES)-th point (where
    they only decide which few points the trimmed grid leaves outside; a partition of all 65536 took 1.8 ms of
    every plan's 4.4, one thread)."""
    n = x.shape[0]
    stride = max(1, n // _EXACT_QUANTILES)
    xs, ys = (x, y) if stride == 1 else (x[::stride], y[::stride])
    m = xs.shape[0]
    kth = sorted({0, m - 1} | {int(t * m) for t in trims} | {m - 1 - int(t * m) for t in trims})
    xs, ys = np.partition(xs, kth), np.partition(ys, kth)
    out = {}
    for t in trims:
        k = int(t * m)
        out[t] = (float(xs[k]), float(xs[m - 1 - k]), float(ys[k]), float(ys[m - 1 - k]))
    out[0.0] = (float(x.min()), float(x.max()), float(y.min()), float(y.max()))
    return out


def fft_cost(nbx: int, nby: int, points: int, transforms: int) -> float:
    """Relative cost of a grid's FFTs: ``transforms`` of them (the trimmed grid's three forward and four inverse,
    the split grid's one and three)."""
    size = (2 * nbx * points) * (2 * nby * points)
    return transforms * size * math.log2(max(size, 2))


@dataclass(frozen=True)
class GridPlanner:
    """The sizes a :class:`.interpolation.Repulsion` was made with (checked there), and its choice of grid."""

    points: int
    box: float
    min_boxes: int
    trim: float | None
    mode: str
    ratio: float
    far_box: float
    split_boxes: int | None
    reach: int

    def trimmed(
        self, x: np.ndarray, y: np.ndarray, trim: float, quantiles: dict[float, _Bounds], every: np.ndarray
    ) -> Plan:
        """The trimmed plan, ``quantiles[t]`` the coordinates' (x_t, x_1-t, y_t, y_1-t) for every trim t and 0 (see
        :func:`quantiles`)."""
        inside, outside = every, every[:0]
        x0, x1, y0, y1 = quantiles[0.0]
        if trim > 0:
            a0, a1, b0, b1 = quantiles[trim]
            pad = 0.05 * max(a1 - a0, b1 - b0)
            a0, a1, b0, b1 = a0 - pad, a1 + pad, b0 - pad, b1 + pad
            if a0 > x0 or a1 < x1 or b0 > y0 or b1 < y1:
                inside_mask = (x >= a0) & (x <= a1) & (y >= b0) & (y <= b1)
                inside, outside = np.flatnonzero(inside_mask), np.flatnonzero(~inside_mask)
                x0, x1, y0, y1 = a0, a1, b0, b1
        extent = max(x1 - x0, y1 - y0)
        box = self.box if extent >= self.min_boxes * self.box else min(self.box, ladder(extent / self.min_boxes))
        nbx = max(1, math.ceil((x1 - x0) / box * (1 + 1e-12)))
        nby = max(1, math.ceil((y1 - y0) / box * (1 + 1e-12)))
        return Plan(False, box, x0, y0, nbx, nby, inside, outside)

    def trimmed_cost(self, plan: Plan) -> float:
        m = plan.outside.shape[0]
        return fft_cost(plan.nbx, plan.nby, self.points, 7) + _OUTSIDE_COST * m * (
            plan.nbx * plan.nby * self.points**2 + m
        )

    def split(self, x: np.ndarray, y: np.ndarray, bounds: _Bounds, boxes: int, every: np.ndarray) -> Plan:
        """The split plan with about ``boxes`` boxes across the wider side (its cells counted, not yet sorted)."""
        x0, x1, y0, y1 = bounds
        extent = max(x1 - x0, y1 - y0)
        box = max(self.far_box, ladder(extent / boxes))
        nbx = max(1, math.ceil((x1 - x0) / box * (1 + 1e-12)))
        nby = max(1, math.ceil((y1 - y0) / box * (1 + 1e-12)))
        cutoff = self.ratio * box
        side = cutoff / self.reach
        ncx = max(1, math.ceil((x1 - x0) / side * (1 + 1e-12)))
        ncy = max(1, math.ceil((y1 - y0) / side * (1 + 1e-12)))
        start = np.empty(ncx * ncy + 1, np.int64)
        nk.cell_counts(x, y, x0, y0, side, ncx, ncy, start)
        return Plan(True, box, x0, y0, nbx, nby, every, every[:0], cutoff, (ncx, ncy), start)

    def split_cost(self, plan: Plan) -> float:
        assert plan.start is not None
        return fft_cost(plan.nbx, plan.nby, self.points, 4) + _NEAR_COST * nk.near_pairs(
            plan.start, *plan.cells, self.reach
        )

    def plan(self, x: np.ndarray, y: np.ndarray, every: np.ndarray) -> Plan:
        """The cheapest plan by estimated cost: trimmed at each of :data:`_TRIMS`, split at each of
        :data:`_SPLIT_BOXES` (``mode`` may rule out one kind)."""
        trims = (self.trim,) if self.trim is not None else _TRIMS
        bounds_at = quantiles(x, y, trims)
        bounds = bounds_at[0.0]
        plans: list[tuple[float, Plan]] = []
        if self.mode != "split":
            for trim in trims:
                plan = self.trimmed(x, y, trim, bounds_at, every)
                plans.append((self.trimmed_cost(plan), plan))
        cheapest = min(cost for cost, _ in plans) if plans else math.inf
        if self.mode != "trimmed" and cheapest > _NEAR_COST * 8 * x.shape[0]:  # else no split can be cheaper
            for boxes in (self.split_boxes,) if self.split_boxes is not None else _SPLIT_BOXES:
                plan = self.split(x, y, bounds, boxes, every)
                plans.append((self.split_cost(plan), plan))
        return min(plans, key=lambda item: item[0])[1]
