"""The perplexity search, compiled: each row's Gaussian precision searched until its entropy is log(perplexity).

One kernel for the exact Gaussians (every other point of a row, :func:`~.affinities.binary_search_perplexity`) and
the k-nearest-neighbour ones (:func:`~.knn.knn_gaussian_affinities`): the same stopping rule and step budget as
scikit-learn's ``_binary_search_perplexity`` (:mod:`.perplexity`), its bisection safeguarding Halley's step on
the entropy (which converges in a few steps where the bisection takes tens), a row at a time, so that a row stops
as soon as it is done and no n x n temporary is made per step (the numpy form it replaced made six). Each step
costs a pass of exponentials over the row; Halley's step needs one more moment of the offsets in the same pass
and converges cubically where Newton's did quadratically.

A row starts from what its predecessor converged to (rows of one point cloud need similar precisions;
scikit-learn starts every row at 1, which on MiniLM's hidden states, squared distances of order 250, took 8.9
steps a row against 4.1), as a number without units: beta times the row's mean offset from its nearest
distance, carried over and divided by this row's mean offset (1 at the start of a chain). The search then takes
the same steps on c X as on X. Evaluations a row at a perplexity of 30 (512 tokens of MiniLM's hidden states at
layers 1 / 3 / 6, then 512 points of a random walk in 384 dimensions and 1024 in 2): 4.16 / 4.16 / 5.12, 3.48,
5.11 with Newton's step from the last beta; 3.03 / 3.10 / 4.15, 2.78, 3.13 now. Except the first row of each
``chain`` rows and a row after one that did not converge (whose precision may be far off: a row of more
duplicates than the perplexity doubles it at every step). The chains restart at fixed rows, so that the result
does not depend on how rows are shared between threads.

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
    beta: the step ``diff / slope`` (Halley's with :func:`_halley_slope`'s slope) where it stays strictly inside
    the bracket, else the bisection's."""
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
def _halley_slope(beta, diff, mean, second, third):  # pragma: no cover - compiled
    """The slope whose Newton step is Halley's on the entropy H(beta), whose derivatives come from the moments of
    d under the row's Gaussian (``second``, ``third``: E[d^2], E[d^3]): H' = -beta var, H'' = -var + beta skew
    (the third central moment). Halley's step converges cubically where Newton's does quadratically (module doc:
    the evaluations a row). Newton's own slope ``beta var`` where the correction would more than halve or double
    it (far from the root, or the moments cancelling)."""
    var = second - mean * mean
    slope = beta * var  # -dH/dbeta
    if not slope > 0.0:
        return slope
    skew = third - 3.0 * mean * second + 2.0 * mean * mean * mean
    factor = 1.0 - diff * (beta * skew - var) / slope / slope / 2.0  # 1 - f f'' / (2 f'^2); slope^2 may underflow
    return slope * factor if 0.5 < factor < 2.0 else slope


@njit(inline="always")
def _nearest_and_spread(D, i, own):  # pragma: no cover - compiled
    """Row i's nearest distance (entry ``own`` left out) and its mean offset from it; 1 for that mean where it is
    not a positive finite number (every entry at the nearest distance, or rounding below it; distances that
    overflowed)."""
    k = D.shape[1]
    nearest, summed = np.inf, 0.0
    for j in range(k):
        if j != own:
            summed += D[i, j]
            if D[i, j] < nearest:
                nearest = D[i, j]
    spread = summed / max(1, k - 1 if 0 <= own < k else k) - nearest
    return nearest, (spread if 0.0 < spread < np.inf else 1.0)


@njit(inline="always")
def _first_beta(scaled, spread):  # pragma: no cover - compiled
    """The precision a row's search starts from: ``scaled`` (beta times a mean offset) over the row's mean offset;
    1 where that overflows (subnormal offsets: exp(-0 * inf) would be NaN)."""
    beta = scaled / spread
    return beta if beta < np.inf else 1.0


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
    ``n_steps`` times: Halley's step on the entropy where it stays inside the bracket found so far, else the
    bisection (doubled or halved until bracketed); a row whose sum underflows divides by ``epsilon``. The search
    starts from the previous row's converged beta times the mean of its offsets ``d_ij - min_j d_ij`` (a number
    without units), over this row's mean offset; from 1 over it at a multiple of ``chain`` (module doc)."""
    k = D.shape[1]
    start = 1.0  # beta times the row's mean offset, where the last row converged
    for i in range(lo, hi):
        own = skip[i]
        nearest, spread = _nearest_and_spread(D, i, own)
        if _unreachable(D, i, own, nearest, target + tolerance, out):
            start = 1.0
            continue
        beta, beta_min, beta_max = _first_beta(1.0 if i % chain == 0 else start, spread), -np.inf, np.inf
        start = 1.0  # unless this row converges
        total = 0.0
        for _ in range(n_steps):
            total, weighted, squared, cubed = 0.0, 0.0, 0.0, 0.0
            for j in range(k):
                if j == own:
                    out[i, j] = 0.0
                    continue
                d = D[i, j] - nearest
                p = np.exp(-d * beta)
                out[i, j] = p
                total += p
                dp = d * p
                weighted += dp
                squared += d * dp
                cubed += d * d * dp
            if total == 0.0:
                total = epsilon
            mean = weighted / total
            diff = np.log(total) + beta * mean - target
            if abs(diff) <= tolerance:
                start = beta * spread
                break
            beta, beta_min, beta_max = _next_beta(
                beta, beta_min, beta_max, diff, _halley_slope(beta, diff, mean, squared / total, cubed / total)
            )
        for j in range(k):
            out[i, j] /= total
