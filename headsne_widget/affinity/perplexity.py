"""The perplexity search, shared by the exact Gaussians (:mod:`.affinities`) and the k-nearest-neighbour ones
(:mod:`.sparse`): the same stopping rule and step budget as scikit-learn's ``_binary_search_perplexity``, each
row searched by the compiled kernel (:mod:`.perplexity_kernels`: Halley's steps inside the bisection's bracket),
the rows in shares on the package's threads."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["EPSILON_DBL", "N_STEPS", "PERPLEXITY_TOLERANCE", "conditional_gaussians"]

#: a row's entropy is within this of log(perplexity) when its search stops
PERPLEXITY_TOLERANCE = 1e-5
#: most search steps a row takes
N_STEPS = 100
#: what a row's sum of Gaussians becomes when it underflows to 0
EPSILON_DBL = 1e-8
#: rows a share of the search holds at least (a share is a cancel point: about 10 ms at 2048 points), and a chain
#: of rows each starting from its predecessor's precision (:mod:`.perplexity_kernels`)
ROWS_A_SHARE = 64


def conditional_gaussians(
    D: np.ndarray, skip: np.ndarray, perplexity: float, check: Callable[[], None] | None = None
) -> np.ndarray:
    """float64 (m, k): each row of distances ``D`` (m, k) as ``p_{j|i}``, a Gaussian of the given perplexity over
    the row's entries but ``skip[i]`` (its own point, 0 there; -1: none). ``check()`` runs before each share of
    rows (a widget's cancel point) and may raise to stop."""
    from .._parallel import in_shares
    from .perplexity_kernels import search_rows

    D = np.ascontiguousarray(D, dtype=np.float64)
    skip = np.ascontiguousarray(skip, dtype=np.int64)
    out = np.empty_like(D)
    m, target = D.shape[0], float(np.log(perplexity))

    def part(lo: int, hi: int) -> None:
        if check is not None:
            check()
        search_rows(D, skip, lo, hi, target, PERPLEXITY_TOLERANCE, N_STEPS, EPSILON_DBL, ROWS_A_SHARE, out)

    in_shares(m, part, count=max(1, min(64, m // ROWS_A_SHARE)), multiple=ROWS_A_SHARE)
    return out
