"""The perplexity search, compiled: each row's Gaussian precision searched until its entropy is log(perplexity).

One kernel for the exact Gaussians (every other point of a row, :func:`~.affinities.binary_search_perplexity`) and
the k-nearest-neighbour ones (:func:`~.sparse.knn_gaussian_affinities`): the same stopping rule and step budget as
scikit-learn's ``_binary_search_perplexity`` (:mod:`.perplexity`), its bisection safeguarding a Newton step on
the entropy (which converges in a few steps where the bisection takes tens), a row at a time, so that a row stops
as soon as it is done and no n x n temporary is made per step (the numpy form it replaced made six).

A row starts from the precision its predecessor converged to (rows of one point cloud need precisions within a
few times of each other; scikit-learn starts every row at 1, which on MiniLM's hidden states, squared distances
of order 250, took 8.9 steps a row against 4.1), except the first row of each ``chain`` rows and a row after one
that did not converge (whose precision may be far off: a row of more duplicates than the perplexity doubles it
at every step). The chains restart at fixed rows, so that the result does not depend on how rows are shared
between threads.

A row whose nearest distance is shared by more entries than the perplexity (copies of its point: a word's
occurrences at the embedding layer, a repeated token in a model without position embeddings) cannot reach it:
its entropy stays above log(ties), so the search doubled beta for all its 100 steps (89.8 ms for 516 occurrences
of "bank" at MiniLM's layer 0, against 16 ms at the other layers) and ended at the uniform over the tied entries
(exp(-d 2^100) is 0 for any other entry). That uniform is now written at once.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["search_rows"]


@njit(inline="always")
def _next_beta(beta, beta_min, beta_max, diff, slope):  # pragma: no cover - compiled
    """(beta, bracket) after a step whose entropy is ``diff`` above the target and falls by ``slope`` per unit of
    beta: Newton's step where it stays strictly inside the bracket, else the bisection's."""
    if diff > 0.0:  # entropy too high: narrow the Gaussian
        beta_min = beta
    else:
        beta_max = beta
    step = beta + diff / slope if slope > 0.0 else np.nan
    if max(beta_min, 0.0) < step < beta_max:  # a precision stays positive
        return step, beta_min, beta_max
    if diff > 0.0:
        return (beta * 2.0 if beta_max == np.inf else (beta + beta_max) / 2.0), beta_min, beta_max
    return (beta / 2.0 if beta_min == -np.inf else (beta + beta_min) / 2.0), beta_min, beta_max


@njit(inline="always")
def _unreachable(D, i, own, nearest, least, out):  # pragma: no cover - compiled
    """Whether row i's entropy stays above ``least`` at any precision (more entries tie at its nearest distance
    than exp(least)); if so its row of ``out`` is the uniform over them, where the search would end (module doc)."""
    k = D.shape[1]
    ties = 0
    for j in range(k):
        if j != own and D[i, j] == nearest:
            ties += 1
    if not np.log(ties) > least:
        return False
    for j in range(k):
        out[i, j] = 1.0 / ties if j != own and D[i, j] == nearest else 0.0
    return True


@njit(cache=True, nogil=True)
def search_rows(D, skip, lo, hi, target, tolerance, n_steps, epsilon, chain, out):  # pragma: no cover - compiled
    """Rows [lo, hi) of ``out`` (m, k): ``exp(-beta_i (d_ij - min_j d_ij))`` normalised, entry ``skip[i]`` of a row
    left 0 (-1: none), ``beta_i`` searched until the row's entropy is within ``tolerance`` of ``target``, at most
    ``n_steps`` times: a Newton step on the entropy where it stays inside the bracket found so far, else the
    bisection (doubled or halved until bracketed); a row whose sum underflows divides by ``epsilon``. The search
    starts from the previous row's converged beta, or 1 at a multiple of ``chain`` (module doc)."""
    k = D.shape[1]
    start = 1.0
    for i in range(lo, hi):
        own = skip[i]
        nearest = np.inf
        for j in range(k):
            if j != own and D[i, j] < nearest:
                nearest = D[i, j]
        if _unreachable(D, i, own, nearest, target + tolerance, out):
            start = 1.0
            continue
        beta, beta_min, beta_max = (1.0 if i % chain == 0 else start), -np.inf, np.inf
        start = 1.0  # unless this row converges
        total = 0.0
        for _ in range(n_steps):
            total, weighted, squared = 0.0, 0.0, 0.0
            for j in range(k):
                if j == own:
                    out[i, j] = 0.0
                    continue
                d = D[i, j] - nearest
                p = np.exp(-d * beta)
                out[i, j] = p
                total += p
                weighted += d * p
                squared += d * d * p
            if total == 0.0:
                total = epsilon
            mean = weighted / total
            diff = np.log(total) + beta * mean - target
            if abs(diff) <= tolerance:
                start = beta
                break
            slope = beta * (squared / total - mean * mean)  # -dH/dbeta: beta times the variance of d
            beta, beta_min, beta_max = _next_beta(beta, beta_min, beta_max, diff, slope)
        for j in range(k):
            out[i, j] /= total
