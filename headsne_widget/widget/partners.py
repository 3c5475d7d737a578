"""Each token's partners, for the hover lines and the tooltip: pure functions, array in, array out.

- :func:`head_partners`: a head's strongest partners three ways, in one compiled pass: "attends to" (row i
  of A, keys), "attended by" (column i, queries) and by ``max(A_ij, A_ji)`` (the symmetric view that P
  uses; :func:`attention_partners` and :func:`top_edges` are two of them);
- :func:`hidden_neighbours`: nearest neighbours in a layer's hidden space (hidden mode's partners).

No extra n x n array is made at long lengths (hidden space: rows in blocks).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..affinity.sparse import SPARSE_MIN_TOKENS

#: a kNN P's own search among its points (``P.neighbours``): (indices (m, k), squared distances (m, k)), nearest first
Searched = tuple[np.ndarray, np.ndarray]

__all__ = ["attention_partners", "head_partners", "hidden_neighbours", "partner_traits", "top_edges"]

_BLOCK = 1024  # rows per block: bounds the temporary to _BLOCK x n floats


def _top_k(W: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k largest entries of each row of W, largest first: (indices int32, weights float32)."""
    if k == 0:
        return np.zeros((W.shape[0], 0), dtype=np.int32), np.zeros((W.shape[0], 0), dtype=np.float32)
    indices = np.argpartition(-W, k - 1, axis=1)[:, :k]
    weights = np.take_along_axis(W, indices, axis=1)
    order = np.argsort(-weights, axis=1, kind="stable")
    indices = np.take_along_axis(indices, order, axis=1)
    return indices.astype(np.int32), np.take_along_axis(weights, order, axis=1).astype(np.float32)


def _partner_mask(n: int, kept: np.ndarray | None) -> np.ndarray:
    mask = np.zeros(n, dtype=bool)
    mask[np.arange(n) if kept is None else kept] = True
    return mask


def _blocked(
    score: Any, n: int, k: int, partner: np.ndarray, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of ``score(block)`` (a (len(block), n) block) over partners, self excluded, block by block, for the
    tokens ``rows`` (None: all n): (indices int32, weights float32), a row per token of ``rows``."""
    k = max(0, min(int(k), int(partner.sum()) - 1))
    rows = np.arange(n) if rows is None else rows
    indices = np.zeros((len(rows), k), dtype=np.int32)
    weights = np.zeros((len(rows), k), dtype=np.float32)
    for start in range(0, len(rows), _BLOCK):
        at = slice(start, min(len(rows), start + _BLOCK))
        block = rows[at]
        W = np.array(score(block), dtype=np.float32)
        W[:, ~partner] = -np.inf
        W[np.arange(len(block)), block] = -np.inf
        indices[at], weights[at] = _top_k(W, k)
    return indices, weights


def head_partners(
    A: np.ndarray, k: int, kept: np.ndarray | None = None
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """Each token's ``k`` strongest partners in head A, strongest first, three ways: "attends to" (row i,
    keys), "attended by" (column i, queries) and the edges, by ``max(A_ij, A_ji)`` (the symmetric view
    that P uses). Each is (indices int32 (n, k'), weights float32 (n, k')).

    Partners are restricted to ``kept`` (token indices drawn in the scatter), so every edge can be drawn,
    and ``k' = min(k, len(kept) - 1)``; equal weights rank the lower index first. One compiled pass over A
    and A^T in tiles (:func:`~headsne_widget.affinity.matrix_kernels.partners`): 0.3 s at n = 8192, where
    numpy's row-wise argpartition, three times, took 4 s.
    """
    A = np.asarray(A)
    if A.dtype not in (np.float32, np.float64) or not A.flags.c_contiguous:
        A = np.ascontiguousarray(A, dtype=np.float32)
    n = A.shape[0]
    partner = _partner_mask(n, kept)
    k = max(0, min(int(k), int(partner.sum()) - 1))
    weights = np.empty((3, n, k), dtype=np.float32)
    indices = np.empty((3, n, k), dtype=np.int32)
    if k > 0:
        from ..affinity.matrix_kernels import partners  # numba: imported on first use

        partners(A, partner, weights, indices)
    to, by, edges = ((indices[r], weights[r]) for r in range(3))
    return to, by, edges


def top_edges(A: np.ndarray, k: int, kept: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each token's ``k`` strongest partners in head A by ``max(A_ij, A_ji)``, strongest first (see
    :func:`head_partners`): (indices int32 (n, k'), weights float32 (n, k'))."""
    return head_partners(A, k, kept)[2]


def attention_partners(
    A: np.ndarray, k: int, kept: np.ndarray | None = None
) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]:
    """BertViz's two directions: for each token i, its top-k keys in row i ("attends to") and its top-k
    queries in column i ("attended by"), each as (indices int32 (n, k'), weights float32 (n, k'))."""
    to, by, _ = head_partners(A, k, kept)
    return to, by


def hidden_neighbours(
    X: np.ndarray, k: int, kept: np.ndarray | None = None, searched: Searched | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Each token's k nearest neighbours in hidden space X (n, d), by Euclidean distance, nearest first.

    Weights are ``1 / (1 + d^2 / median d^2)``, in (0, 1], so they read like attention weights. ``searched``: the
    neighbours a long text's kNN P found among the ``kept`` tokens (``P.neighbours``), taken instead of a second
    search where they hold at least k a token.
    """
    X = np.asarray(X, dtype=np.float64)
    n = X.shape[0]
    sq = np.einsum("ij,ij->i", X, X)

    def d2(rows: np.ndarray) -> np.ndarray:
        return np.maximum(sq[rows, None] + sq[None, :] - 2.0 * X[rows] @ X.T, 0.0)

    partner = _partner_mask(n, kept)
    if searched is not None and not np.array_equal(np.arange(n) if kept is None else kept, np.flatnonzero(partner)):
        searched = None  # the P's rows are the kept tokens in their order: only increasing ones are the partners'
    if partner.sum() >= SPARSE_MIN_TOKENS:  # a long text, whose kNN P searched them: its search, else the same
        indices, dist2 = _searched(X, k, partner, d2, searched)
    else:
        indices, neg = _blocked(lambda rows: -d2(rows), n, k, partner)
        dist2 = -neg.astype(np.float64)
    scale = float(np.median(dist2)) if dist2.size else 1.0
    weights = 1.0 / (1.0 + dist2 / (scale if scale > 0 else 1.0))
    return indices, weights.astype(np.float32)


def _searched(
    X: np.ndarray, k: int, partner: np.ndarray, d2: Any, searched: Searched | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The partners of a long text's tokens by :func:`~headsne_widget.affinity.neighbours.neighbours` among the
    ``partner`` tokens (as hidden mode's P finds its neighbours; ``searched``, the P's own result, where it holds
    them), and of the others (few: the excluded ones) by the blocked search short texts take: (indices int32,
    squared distances)."""
    from ..affinity.neighbours import neighbours

    among = np.flatnonzero(partner)
    k = max(0, min(int(k), len(among) - 1))
    if searched is not None and searched[0].shape[0] == len(among) and searched[0].shape[1] >= k:
        found, distances = searched[0][:, :k], searched[1][:, :k]  # the P's search, nearest first
    else:
        found, distances = neighbours(X[among], k)
    indices = np.zeros((X.shape[0], k), dtype=np.int32)
    dist2 = np.zeros((X.shape[0], k))
    indices[among], dist2[among] = among[found], distances
    others = np.flatnonzero(~partner)
    if others.size:
        indices[others], neg = _blocked(lambda rows: -d2(rows), X.shape[0], k, partner, others)
        dist2[others] = -neg.astype(np.float64)
    return indices, dist2


def partner_traits(
    A: np.ndarray | None, X: np.ndarray | None, k: int, kept: np.ndarray, searched: Searched | None = None
) -> dict[str, Any]:
    """The widget's partner traits ``edges``, ``attends_to``, ``attended_by`` (each ``{"indices", "weights"}`` or
    None): from a head's attention A, or (A None) nearest neighbours in hidden space X (``searched``: the kNN
    P's own search, :func:`hidden_neighbours`)."""

    def pack(pair: tuple[np.ndarray, np.ndarray]) -> dict[str, np.ndarray]:
        return {"indices": pair[0], "weights": pair[1]}

    if A is None:
        if X is None:
            raise ValueError("partner_traits needs a head's attention A or hidden states X")
        return {"edges": pack(hidden_neighbours(X, k, kept, searched)), "attends_to": None, "attended_by": None}
    to, by, edges = head_partners(A, k, kept)
    return {"edges": pack(edges), "attends_to": pack(to), "attended_by": pack(by)}
