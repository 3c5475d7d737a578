"""The compiled pass of :func:`.decompose.norm_attention_into`: each attention row weighted by the value norms and
renormalised, in place.

numpy took three passes a block of rows (the product, the float64 sum, the scaling) and a temporary each; here a
row is read once for its weighted sum (float64) and once more, from cache, to be written.
"""

from __future__ import annotations

from numba import njit

__all__ = ["weigh_rows"]


@njit(cache=True, nogil=True)
def weigh_rows(A, norms, lo, hi):  # pragma: no cover - compiled
    """Rows [lo, hi) of ``A`` (float32 (n, n)) as ``A_ij norms_j / sum_j A_ij norms_j``, the sum in float64; a
    row whose weighted sum is 0 becomes 0."""
    n = A.shape[1]
    for i in range(lo, hi):
        total = 0.0
        for j in range(n):
            total += A[i, j] * norms[j]
        scale = 1.0 / total if total > 0.0 else 0.0
        for j in range(n):
            A[i, j] = A[i, j] * norms[j] * scale
