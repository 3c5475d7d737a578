"""The k-nearest-neighbour Gaussian P of points (hidden states, what a head writes) for long texts: openTSNE's
construction, each point's Gaussian on its k = 3 x perplexity nearest neighbours, symmetrised into the package's
sparse P (:mod:`.sparse`); it equals ``gaussian_affinities`` with each point's non-neighbours at infinite
distance.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, DTypeLike

from .._checks import is_number, real_array
from .sparse import _symmetric_P

__all__ = ["knn_gaussian_affinities"]


def knn_gaussian_affinities(
    X: ArrayLike,
    perplexity: float = 20.0,
    *,
    k: int | None = None,
    dtype: DTypeLike = np.float32,
    max_entries: int | None = None,
    neighbours: str | None = None,
) -> sp.csr_matrix:
    """Sparse P of standard t-SNE for points X (n, d) from each point's k nearest neighbours (openTSNE's
    construction): ``p_{j|i}`` a Gaussian on the squared distances to the ``k = min(n - 1, 3 x perplexity)``
    nearest neighbours, its precision searched so that the row's perplexity is ``perplexity`` (the same search
    as :func:`~headsne_widget.affinity.affinities.binary_search_perplexity`), then ``p_ij = (p_{j|i} + p_{i|j}) / 2n``;
    an entry that underflows to 0 (in ``dtype``) is not stored.

    ``max_entries`` (e.g. ``budget.entries_within()``) bounds the n x k neighbour entries: k is lowered to
    ``max_entries // n`` where it is more, and the perplexity to k / 3 with it (``MemoryBudgetError`` when not
    even one neighbour a point fits). The returned matrix says what was used: ``P.perplexity`` and ``P.k``, and
    keeps the search's result, ``P.neighbours``: (indices (n, k) int64, squared distances (n, k) float64 in X's
    units), nearest first (the widget's hover partners take theirs from it rather than search again).

    ``neighbours``: the search, ``"auto"``, ``"exact"`` or ``"approx"`` (pynndescent; :mod:`.neighbours`), None
    for ``neighbours.settings.neighbours`` ("auto": approximate from ``APPROX_MIN_POINTS`` points on).
    """
    from . import neighbours as knn
    from .perplexity import conditional_gaussians

    method = None if neighbours is None else knn.check_neighbours(neighbours)

    X = real_array(np.asarray(X), "X")
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (n points, d features), got shape {X.shape}")
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"X must have at least 2 points, got {n}")
    if not is_number(perplexity):
        raise TypeError(f"perplexity must be a number, got {type(perplexity).__name__}")
    if not (math.isfinite(perplexity) and 0 < perplexity < n):
        raise ValueError(f"perplexity must be in (0, {n}) for {n} points, got {perplexity!r}")
    k = min(n - 1, int(3 * perplexity)) if k is None else int(k)
    if not 1 <= k <= n - 1:
        raise ValueError(f"k must be in [1, {n - 1}], got {k}")
    if max_entries is not None:
        k, perplexity = _knn_within(n, k, float(perplexity), max_entries)
    X, scale = _scaled_copy(X)
    indices, D = knn.neighbours(X, k, method)
    C = conditional_gaussians(D, np.full(n, -1), perplexity)  # the same search as the exact Gaussians
    order = np.argsort(indices, axis=1, kind="stable")  # canonical CSR straight away: sorted columns a row
    columns, C = np.take_along_axis(indices, order, axis=1), np.take_along_axis(C, order, axis=1)
    conditional = sp.csr_matrix((C.ravel(), columns.ravel(), np.arange(0, n * k + 1, k)), shape=(n, n))
    P = _symmetric_P(conditional, dtype)
    P.perplexity, P.k = float(perplexity), k  # type: ignore[attr-defined]
    if scale > 0:
        D *= scale**2  # back in X's units (the Gaussians above are done with D)
    P.neighbours = (indices, D)  # type: ignore[attr-defined]
    return P


def _scaled_copy(X: np.ndarray) -> tuple[np.ndarray, float]:
    """A float64 copy of X divided by its largest coordinate about the mean (P is scale-free: the search adapts the
    widths), and that scale (0: all points equal, the copy left as it is). One copy: the scale is found a chunk of
    rows at a time (:func:`.neighbours.spread_about`) and the copy divided in place (three n x d float64 arrays
    were held at once before)."""
    from .neighbours import spread_about

    Y = np.array(X, dtype=np.float64)
    scale = spread_about(Y, Y.mean(axis=0))
    if scale > 0:
        Y /= scale
    return Y, scale


def _knn_within(n: int, k: int, perplexity: float, max_entries: int) -> tuple[int, float]:
    """``(k, perplexity)`` lowered so that n x k neighbour entries fit ``max_entries`` (k = 3 x perplexity)."""
    from ..capture.sparse import check_limits
    from ..errors import MemoryBudgetError

    _, limit = check_limits(None, max_entries)
    assert limit is not None
    fits = limit // n
    if fits < 1:
        raise MemoryBudgetError(
            f"the kNN P of {n:,} points needs at least {n:,} entries (one neighbour each), above the budget of "
            f"{limit:,}; raise it with headsne_widget.budget.set_memory_budget(nbytes)",
            needed_entries=n,
        )
    if k <= fits:
        return k, perplexity
    return fits, min(perplexity, fits / 3.0)
