"""Quantile-equidistant rescaling of a scatter plot (thesis Appendix A.3).

Each axis is mapped by a piecewise-linear phi through k of its quantiles: the quantile at level
q goes to q, so the rescaled axis is roughly uniform on [0, 1] and crowded regions are spread out.
k = n gives the empirical CDF; small k keeps more of the original scale. Ticks for the original
scale come from phi^-1 at equidistant positions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .._checks import is_int, real_array

__all__ = ["QuantileMap", "quantile_rescale"]


@dataclass(frozen=True)
class QuantileMap:
    """phi of one axis: strictly increasing knots ``values`` (data units) -> ``levels`` (in [0, 1])."""

    values: np.ndarray
    levels: np.ndarray

    def __call__(self, x: ArrayLike) -> np.ndarray:
        """phi(x): data units -> [0, 1] (clamped outside the data range)."""
        return np.interp(np.asarray(x, dtype=np.float64), self.values, self.levels)

    def inverse(self, u: ArrayLike) -> np.ndarray:
        """phi^-1(u): [0, 1] -> data units, e.g. the value to write at a tick (clamped outside [0, 1]).

        Each value is a weighted mean of its two knots, ``v0 (1 - t) + v1 t``, bounded by them: np.interp's
        slope ``(v1 - v0) / (l1 - l0)`` overflowed to inf for knots near the float64 limit (-1.8e308 and
        -1.5e308 a level step of 0.01 apart).
        """
        u = np.asarray(u, dtype=np.float64)
        if self.values.size == 1:
            return np.where(np.isnan(u), np.nan, self.values[0])
        j = np.clip(np.searchsorted(self.levels, u, side="right") - 1, 0, self.levels.size - 2)
        l0, l1, v0, v1 = self.levels[j], self.levels[j + 1], self.values[j], self.values[j + 1]
        t = np.clip((u - l0) / (l1 - l0), 0.0, 1.0)
        return np.clip(v0 * (1.0 - t) + v1 * t, v0, v1)

    def ticks(self, m: int = 5) -> tuple[np.ndarray, np.ndarray]:
        """``m`` equidistant tick positions in [0, 1] and the original values they stand for."""
        if m < 2:
            raise ValueError(f"need at least 2 ticks, got {m}")
        positions = np.linspace(0.0, 1.0, m)
        return positions, self.inverse(positions)


def _axis_map(column: np.ndarray, k: int) -> QuantileMap:
    """phi through the k quantiles of one axis; tied quantiles are merged (mean level) to keep phi invertible."""
    levels = np.linspace(0.0, 1.0, k)
    values = np.quantile(column, levels)
    values[0], values[-1] = column.min(), column.max()
    unique, inverse = np.unique(values, return_inverse=True)
    if unique.size == 1:  # a constant axis sits in the middle
        return QuantileMap(unique, np.array([0.5]))
    merged = np.bincount(inverse, weights=levels) / np.bincount(inverse)
    merged = (merged - merged[0]) / (merged[-1] - merged[0])
    return QuantileMap(unique, merged)


#: most quantiles of an axis (the thesis uses 100; the widget's ``quantile_k`` has the same bound)
MAX_QUANTILE_K = 1000


def quantile_rescale(Y: ArrayLike, k: int = 100) -> tuple[np.ndarray, tuple[QuantileMap, ...]]:
    """Rescale every axis of Y (n, d) by its quantile map; return (Y in [0, 1]^d, one QuantileMap per axis).

    The thesis uses k = 100; k is at most ``MAX_QUANTILE_K`` (each axis computes k knots: 5e7 knots took 13.5 s
    and 4.7 GB). Float32 input stays float32.
    """
    Y = np.asarray(Y)
    if Y.ndim != 2 or Y.shape[0] < 1 or Y.shape[1] < 1:
        raise ValueError(f"Y must be a 2-D array of points (n, d), got shape {Y.shape}")
    Y = real_array(Y, "Y")
    if not is_int(k):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    if not 2 <= k <= MAX_QUANTILE_K:
        raise ValueError(f"k must be between 2 and {MAX_QUANTILE_K} quantiles, got {k}")
    Y64 = Y.astype(np.float64)
    maps = tuple(_axis_map(Y64[:, a], int(k)) for a in range(Y.shape[1]))
    out = np.column_stack([np.clip(m(Y64[:, a]), 0.0, 1.0) for a, m in enumerate(maps)])
    dtype = Y.dtype if np.issubdtype(Y.dtype, np.floating) else np.float64
    return out.astype(dtype), maps
