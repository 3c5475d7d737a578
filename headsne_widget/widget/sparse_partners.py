"""Each token's partners from a head's sparse rows (long texts, issue 21): never an n x n array.

A head above :data:`~headsne_widget.affinity.sparse.SPARSE_MIN_TOKENS` tokens is read as its kept entries
(``Extraction.sparse_attention``: each query row's fewest largest keys reaching the mass), and the partners
are ranked among those entries, as :func:`~headsne_widget.widget.partners.head_partners` ranks a dense head:
"attends to" from row i's kept entries, "attended by" from column i's (the queries that kept key i), the
edges by ``max(A_ij, A_ji)`` over both; partners restricted to ``kept``, self excluded, strongest first, equal
weights the lower index first. A token with fewer kept entries than k has its list padded with index -1 and
weight 0, which the page skips (``js/lib/tokens.js``). One compiled pass over the rows and their transpose:
O(nnz x k) time, O(nnz + n k) memory.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from numba import njit

__all__ = ["sparse_head_partners", "warm"]


@njit(cache=True, nogil=True, inline="always")
def _offer(ind: np.ndarray, wts: np.ndarray, count: int, k: int, j: int, w: float) -> int:
    """Insert (j, w) into the sorted top list (ind, wts) of ``count`` entries (at most k); the new count."""
    pos = count
    while pos > 0 and (w > wts[pos - 1] or (w == wts[pos - 1] and j < ind[pos - 1])):
        pos -= 1
    if pos >= k:
        return count
    last = min(count, k - 1)
    for c in range(last, pos, -1):
        ind[c], wts[c] = ind[c - 1], wts[c - 1]
    ind[pos], wts[pos] = j, w
    return min(count + 1, k)


@njit(cache=True, nogil=True)
def _partners(rp, ri, rd, cp, ci, cd, partner, k, indices, weights):  # noqa: PLR0917 - a compiled kernel's arrays
    """indices/weights (3, n, k), filled -1 / 0: per row i the top-k of row i (to), of column i (by) and of the
    merge of both by max (edges). Row and column indices sorted ascending within each row."""
    n = rp.shape[0] - 1
    for i in range(n):
        c0 = c1 = c2 = 0
        a, b = rp[i], cp[i]
        a_end, b_end = rp[i + 1], cp[i + 1]
        while a < a_end or b < b_end:
            ja = ri[a] if a < a_end else n
            jb = ci[b] if b < b_end else n
            j = min(ja, jb)
            wa = rd[a] if ja == j else 0.0
            wb = cd[b] if jb == j else 0.0
            if ja == j:
                a += 1
            if jb == j:
                b += 1
            if j == i or not partner[j]:
                continue
            if wa > 0.0:
                c0 = _offer(indices[0, i], weights[0, i], c0, k, j, wa)
            if wb > 0.0:
                c1 = _offer(indices[1, i], weights[1, i], c1, k, j, wb)
            w = max(wa, wb)
            if w > 0.0:
                c2 = _offer(indices[2, i], weights[2, i], c2, k, j, w)


def sparse_head_partners(
    S: Any, k: int, kept: np.ndarray | None = None
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """``head_partners`` of a head given as its kept entries ``S`` (a ``scipy.sparse`` (n, n), rows the queries):
    "attends to", "attended by" and the edges, each (indices int32 (n, k'), weights float32 (n, k')) with
    ``k' = min(k, len(kept) - 1)`` (see the module doc)."""
    rows = sp.csr_array(S, dtype=np.float32)
    rows.sort_indices()
    cols = sp.csr_array(rows.T)  # row i of the transpose: the queries that kept key i
    cols.sort_indices()
    n = rows.shape[0]
    partner = np.zeros(n, dtype=np.bool_)
    partner[np.arange(n) if kept is None else np.asarray(kept)] = True
    k = max(0, min(int(k), int(partner.sum()) - 1))
    indices = np.full((3, n, k), -1, dtype=np.int32)
    weights = np.zeros((3, n, k), dtype=np.float32)
    if k > 0:
        _partners(rows.indptr, rows.indices, rows.data, cols.indptr, cols.indices, cols.data, partner, k,
                  indices, weights)  # fmt: skip
    to, by, edges = ((indices[r], weights[r]) for r in range(3))
    return to, by, edges


def warm() -> None:
    """Compile (or load from numba's cache) the kernel, on a 2-token head: a long text's first hover lines waited
    1.2-3 s for it at a fresh install (:func:`~.loading.start_widget_warmup`)."""
    sparse_head_partners(sp.csr_array(np.array([[0.0, 1.0], [1.0, 0.0]], np.float32)), 1)
