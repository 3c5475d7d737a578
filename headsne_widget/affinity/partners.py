"""Each token's partners, for the hover lines and the tooltip: what a P source ranks (``PSource.partners``).

- a head's matrix (attention, value-weighted attention, query-key): each token's strongest partners three ways,
  "attends to" (row i, keys), "attended by" (column i, queries) and by ``max(A_ij, A_ji)`` (the edges, the
  symmetric view P uses), in one compiled pass: over the dense (n, n) matrix (:func:`head_partners`) or over a
  long text's kept rows (:func:`sparse_head_partners`, never an n x n array);
- a source of points (hidden states, what a head writes): each token's nearest neighbours in its space
  (:func:`neighbour_partners`), by the one exact search (:func:`.neighbours.exact_neighbours`), or the kNN P's
  own search.

Partners are restricted to the kept tokens (those drawn in the scatter), so every edge can be drawn; a token is
never its own partner; equal weights of a head rank the lower index first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

__all__ = ["AtHand", "Ranked", "Searched", "TokenPartners", "head_partners", "neighbour_partners",
           "sparse_head_partners", "warm"]  # fmt: skip

#: a kNN P's own search among its points (``P.neighbours``): (indices (m, k), squared distances (m, k)), nearest first
Searched = tuple[np.ndarray, np.ndarray]


class Ranked(NamedTuple):
    """One ranking, a row per token: partner indices int32 (n, k) and weights float32 (n, k), strongest first; a
    token with fewer partners than k (a sparse head's row) is padded with index -1 and weight 0."""

    indices: np.ndarray
    weights: np.ndarray


class TokenPartners(NamedTuple):
    """A selection's partners: a head's three rankings, or a source of points' neighbours as ``edges`` alone."""

    attends_to: Ranked | None
    attended_by: Ranked | None
    edges: Ranked


@dataclass(frozen=True)
class AtHand:
    """What the build of P left at hand for its partners, so that they are not computed twice: a dense head's
    ``matrix``, a sparse head's kept ``rows``, a kNN P's own search (``searched``); ``sparse``: whether that P was
    sparse, which decides how the partners are found again where nothing is left (a new ``edge_k``)."""

    sparse: bool = False
    matrix: np.ndarray | None = None
    rows: Any = None
    searched: Searched | None = None


def _partner_mask(n: int, kept: np.ndarray | None) -> np.ndarray:
    mask = np.zeros(n, dtype=np.bool_)
    mask[np.arange(n) if kept is None else np.asarray(kept)] = True
    return mask


def _three(indices: np.ndarray, weights: np.ndarray) -> TokenPartners:
    to, by, edges = (Ranked(indices[r], weights[r]) for r in range(3))
    return TokenPartners(to, by, edges)


def head_partners(A: np.ndarray, k: int, kept: np.ndarray | None = None) -> TokenPartners:
    """Each token's ``k`` strongest partners in the dense head A (n, n), three ways (module doc), each (indices
    int32 (n, k'), weights float32 (n, k')) with ``k' = min(k, len(kept) - 1)``. One compiled pass over A and
    A^T in tiles (:func:`~.matrix_kernels.partners`): 0.3 s at n = 8192, where numpy's row-wise argpartition,
    three times, took 4 s."""
    A = np.asarray(A)
    if A.dtype not in (np.float32, np.float64) or not A.flags.c_contiguous:
        A = np.ascontiguousarray(A, dtype=np.float32)
    n = A.shape[0]
    partner = _partner_mask(n, kept)
    k = max(0, min(int(k), int(partner.sum()) - 1))
    weights = np.empty((3, n, k), dtype=np.float32)
    indices = np.empty((3, n, k), dtype=np.int32)
    if k > 0:
        from .matrix_kernels import partners  # numba: imported on first use

        partners(A, partner, weights, indices)
    return _three(indices, weights)


def sparse_head_partners(S: Any, k: int, kept: np.ndarray | None = None) -> TokenPartners:
    """:func:`head_partners` of a head given as its kept entries ``S`` (a ``scipy.sparse`` (n, n), rows the
    queries; ``Extraction.sparse_attention``): "attends to" from row i's kept entries, "attended by" from column
    i's (the queries that kept key i), the edges by ``max(A_ij, A_ji)`` over both. One compiled pass over the
    rows and their transpose (:func:`~.matrix_kernels.kept_row_partners`): O(nnz x k) time, O(nnz + n k)
    memory."""
    import scipy.sparse as sp

    rows = sp.csr_array(S, dtype=np.float32)
    rows.sort_indices()
    cols = sp.csr_array(rows.T)  # row i of the transpose: the queries that kept key i
    cols.sort_indices()
    n = rows.shape[0]
    partner = _partner_mask(n, kept)
    k = max(0, min(int(k), int(partner.sum()) - 1))
    indices = np.full((3, n, k), -1, dtype=np.int32)
    weights = np.zeros((3, n, k), dtype=np.float32)
    if k > 0:
        from .matrix_kernels import kept_row_partners  # numba: imported on first use

        kept_row_partners(rows.indptr, rows.indices, rows.data, cols.indptr, cols.indices, cols.data, partner,
                          weights, indices)  # fmt: skip
    return _three(indices, weights)


def neighbour_partners(
    X: np.ndarray, k: int, kept: np.ndarray | None = None, *, searched: Searched | None = None,
    method: str | None = "exact",
) -> Ranked:  # fmt: skip
    """Each token's k nearest kept tokens in the space X (n, d), by euclidean distance, nearest first.

    The kept tokens' neighbours: ``searched`` (the kNN P's own search among them, its first k) where it holds k a
    token, else :func:`.neighbours.neighbours` by ``method`` ("exact": :func:`.neighbours.exact_neighbours`;
    None: the search a kNN P takes). An excluded token's, among the kept ones, by the exact search. Among points
    at equal distances the search's order stands (the same whatever the threads). Weights are
    ``1 / (1 + d^2 / median d^2)`` over the float32 squared distances (the blocked search these came from ranked
    float32 distances: the weights of a text are the same to the bit), in (0, 1], so they read like attention
    weights."""
    from .neighbours import neighbours

    X = np.asarray(X)
    n = X.shape[0]
    among = np.arange(n) if kept is None else np.asarray(kept)
    k = max(0, min(int(k), len(among) - 1))
    if searched is not None and searched[0].shape[0] == len(among) and searched[0].shape[1] >= k:
        found, distances = searched[0][:, :k], searched[1][:, :k]
    else:
        found, distances = neighbours(np.asarray(X[among], dtype=np.float64), k, method)
    indices = np.zeros((n, k), dtype=np.int32)
    dist2 = np.zeros((n, k), dtype=np.float32)
    indices[among], dist2[among] = among[found], distances
    others = np.setdiff1d(np.arange(n), among)
    if others.size:
        indices[others], dist2[others] = _excluded_neighbours(X, among, others, k)
    d2 = dist2.astype(np.float64)
    scale = float(np.median(d2)) if d2.size else 1.0
    weights = 1.0 / (1.0 + d2 / (scale if scale > 0 else 1.0))
    return Ranked(indices, weights.astype(np.float32))


def _excluded_neighbours(X: np.ndarray, among: np.ndarray, others: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest of ``among`` to each of ``others`` (tokens left out of the map), by the exact search among
    both, the other excluded tokens then dropped (at most ``len(others) - 1`` of them a row, so k remain)."""
    from .neighbours import exact_neighbours

    points = np.concatenate([among, others])
    wider = min(k + len(others) - 1, len(points) - 1)
    found, distances = exact_neighbours(
        np.asarray(X[points], dtype=np.float64), wider, np.arange(len(among), len(points))
    )
    found = points[found]
    first = np.argsort(~np.isin(found, among), axis=1, kind="stable")[:, :k]  # the kept ones, nearest first
    return np.take_along_axis(found, first, axis=1), np.take_along_axis(distances, first, axis=1)


def warm() -> None:
    """Compile (or load from numba's cache) the sparse rows' kernel, on a 2-token head: a long text's first hover
    lines waited 1.2-3 s for it at a fresh install (the widget's warm-up calls this)."""
    import scipy.sparse as sp

    sparse_head_partners(sp.csr_array(np.array([[0.0, 1.0], [1.0, 0.0]], np.float32)), 1)
