"""The perplexity search, compiled: each row's Gaussian precision bisected until its entropy is log(perplexity).

One kernel for the exact Gaussians (every other point of a row, :func:`~.affinities.binary_search_perplexity`) and
the k-nearest-neighbour ones (:func:`~.sparse.knn_gaussian_affinities`): the same bisection, stopping rule and
step budget as scikit-learn's ``_binary_search_perplexity`` (:mod:`.perplexity`), a row at a time, so that a row
stops as soon as it is done and no n x n temporary is made per step (the numpy form it replaces made six).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["search_rows"]


@njit(cache=True, nogil=True)
def search_rows(D, skip, lo, hi, target, tolerance, n_steps, epsilon, out):  # pragma: no cover - compiled
    """Rows [lo, hi) of ``out`` (m, k): ``exp(-beta_i (d_ij - min_j d_ij))`` normalised, entry ``skip[i]`` of a row
    left 0 (-1: none), ``beta_i`` bisected (doubled or halved until bracketed) until the row's entropy is within
    ``tolerance`` of ``target``, at most ``n_steps`` times; a row whose sum underflows divides by ``epsilon``."""
    k = D.shape[1]
    for i in range(lo, hi):
        own = skip[i]
        nearest = np.inf
        for j in range(k):
            if j != own and D[i, j] < nearest:
                nearest = D[i, j]
        beta, beta_min, beta_max = 1.0, -np.inf, np.inf
        total = 0.0
        for _ in range(n_steps):
            total, weighted = 0.0, 0.0
            for j in range(k):
                if j == own:
                    out[i, j] = 0.0
                    continue
                d = D[i, j] - nearest
                p = np.exp(-d * beta)
                out[i, j] = p
                total += p
                weighted += d * p
            if total == 0.0:
                total = epsilon
            diff = np.log(total) + beta * weighted / total - target
            if abs(diff) <= tolerance:
                break
            if diff > 0.0:  # entropy too high: narrow the Gaussian
                beta_min = beta
                beta = beta * 2.0 if beta_max == np.inf else (beta + beta_max) / 2.0
            else:
                beta_max = beta
                beta = beta / 2.0 if beta_min == -np.inf else (beta + beta_min) / 2.0
        for j in range(k):
            out[i, j] /= total
