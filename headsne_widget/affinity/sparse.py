"""Sparse P for long texts (issue 21): an attention head's P from the largest entries of each row, the
k-nearest-neighbour Gaussian P of hidden states, and the checks of a sparse P.

Why: a dense P is n^2 float32 (1 GiB at 16384 tokens, 16 GiB at 65536) and the exact t-SNE reads all of it
every iteration. Attention rows are peaked: most of a row's mass sits on a few keys, so P built from the
smallest set of largest entries that reaches ``mass`` of each row (0.99 by default) keeps almost all of it in
O(n x keys) memory, and :mod:`..embedding.sparse_engine` embeds it in O(nnz + n) per iteration.

Every P here is a ``scipy.sparse.csr_matrix``: symmetric (exactly: p_ij and p_ji are the same float), zero
diagonal (not stored), sum 1, sorted int32 indices. Its values are the dense construction's restricted to the
kept entries: ``sparse_attention_affinities(kept)`` equals ``attention_affinities`` of the dense matrix with
every entry not kept set to 0, and ``knn_gaussian_affinities`` equals ``gaussian_affinities`` computed with
each point's non-neighbours at infinite distance (as openTSNE does: k = 3 x perplexity neighbours).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, DTypeLike

from .._checks import real_array
from ..errors import DegenerateAffinitiesError

__all__ = [
    "SPARSE_MIN_TOKENS",
    "check_mass",
    "check_sparse_affinities",
    "knn_gaussian_affinities",
    "largest_entries",
    "sparse_attention_affinities",
    "sparse_attention_dispatch",
]

#: Tokens from which :func:`~headsne_widget.affinity.selection.selection_affinities` gives a sparse P (and so
#: :func:`~headsne_widget.tsne` the interpolation engine) unless told otherwise; below, the exact dense engine
#: is faster (``benchmarks/tsne_sparse.py --switch`` measures both on the same P).
SPARSE_MIN_TOKENS = 4096
_SYMMETRY_TOL = 1e-6  # relative to the largest entry, as the dense check
_SUM_TOL = 1e-4
_ROWS = 256  # rows per block where a dense matrix is read


def check_mass(mass: Any) -> float:
    """``mass`` as a float in (0, 1], else a TypeError or ValueError naming it."""
    if isinstance(mass, bool) or not isinstance(mass, (int, float, np.integer, np.floating)):
        raise TypeError(f"mass must be a number in (0, 1], got {type(mass).__name__}")
    value = float(mass)
    if not (0.0 < value <= 1.0):
        raise ValueError(f"mass must be in (0, 1] (the share of each row's attention to keep), got {mass!r}")
    return value


def block_largest(B: np.ndarray, mass: float, first: int = 64) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each row of the block B (rows, n) of non-negative entries, the smallest set of its largest entries
    whose sum reaches ``mass`` of the row's sum (ties broken by the lower index): (counts (rows,), column
    indices, values), the indices of each row in increasing order, rows one after the other.

    The ``first`` largest entries of each row are found by a partial sort (argpartition) and widened 4 times
    over for the rows they do not cover: peaked rows (attention) cost O(n) each rather than a full sort."""
    rows, n = B.shape
    target = mass * B.sum(axis=1, dtype=np.float64) * (1.0 - 1e-12)
    counts = np.zeros(rows, np.int64)
    chosen: list[np.ndarray | None] = [None] * rows
    todo = np.arange(rows)
    k = min(first, n)
    while todo.size:
        sub = B[todo]
        top = np.argpartition(-sub, k - 1, axis=1)[:, :k] if k < n else np.tile(np.arange(n), (todo.size, 1))
        values = np.take_along_axis(sub, top, axis=1).astype(np.float64)
        order = np.lexsort((top, -values), axis=1)  # largest first, the lower index first among equals
        top, values = np.take_along_axis(top, order, axis=1), np.take_along_axis(values, order, axis=1)
        reached = np.cumsum(values, axis=1) >= target[todo, None]
        done = reached.any(axis=1) | (k >= n)
        for r in np.flatnonzero(done):
            count = int(np.argmax(reached[r])) + 1 if reached[r].any() else int((values[r] > 0).sum())
            count = min(count, int((values[r] > 0).sum())) if count > 0 else 0
            chosen[todo[r]] = np.sort(top[r, :count])
            counts[todo[r]] = count
        todo = todo[~done]
        k = min(4 * k, n)
    cols = np.concatenate([c for c in chosen if c is not None]) if rows else np.empty(0, np.int64)
    flat_rows = np.repeat(np.arange(rows), counts)
    return counts, cols.astype(np.int64), B[flat_rows, cols].astype(np.float64)


def largest_entries(A: ArrayLike, mass: float = 0.99) -> sp.csr_matrix:
    """Each row's smallest set of largest entries reaching ``mass`` of the row's sum, as a CSR matrix (float64
    values of A, the rest not stored): what ``Extraction.sparse_attention(layer, head, mass)`` gives from the
    capture, here from a dense (n, n) attention matrix (tests, benchmarks, and heads captured dense), in blocks
    of rows (:func:`block_largest`)."""
    mass = check_mass(mass)
    A = np.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square (n, n) attention matrix, got shape {A.shape}")
    A = real_array(A, "A")
    if A.size and A.min() < 0:
        raise ValueError("A has negative entries; attention weights are non-negative")
    n = A.shape[0]
    counts, cols, vals = [], [], []
    for lo in range(0, n, _ROWS):
        c, j, v = block_largest(A[lo : lo + _ROWS], mass)
        counts.append(c)
        cols.append(j)
        vals.append(v)
    indptr = np.concatenate([[0], np.cumsum(np.concatenate(counts))]) if n else np.zeros(1, np.int64)
    return sp.csr_matrix((np.concatenate(vals), np.concatenate(cols), indptr), shape=(n, n))


def _symmetric_P(M: sp.spmatrix, dtype: DTypeLike) -> sp.csr_matrix:
    """The package's sparse P of M + M^T (M non-negative): diagonal and zeros dropped, divided by its sum, in
    ``dtype``, sorted int32 indices; one compiled pass (:func:`.sparse_kernels.symmetric_sum`)."""
    from .sparse_kernels import symmetric_sum  # numba: imported on first use

    M = sp.csr_matrix(M, dtype=np.float64)
    M.sum_duplicates()  # canonical (sorted, no duplicates): already so for the capture's rows
    n = M.shape[0]
    indptr, indices, data = symmetric_sum(M.indptr.astype(np.int64), M.indices.astype(np.int32), M.data, n)
    total = float(data.sum())
    if not total > 0.0:
        raise DegenerateAffinitiesError(
            "no affinity mass is left off the diagonal (every kept token attends only to itself), "
            "so P is undefined; pick another head or keep more mass"
        )
    data /= total
    return sp.csr_matrix((data.astype(dtype), indices, indptr), shape=(n, n))


def sparse_attention_affinities(
    A: Any, *, exclude: ArrayLike | None = None, dtype: DTypeLike = np.float32, mass: float = 0.99
) -> tuple[sp.csr_matrix, float] | tuple[sp.csr_matrix, float, np.ndarray]:
    """Sparse P of one attention head: ``p_ij = (a_ij + a_ji) / sum_{m != n} (a_mn + a_nm)`` over the kept entries.

    ``A`` is either the kept entries of the head as a ``scipy.sparse`` matrix (rows are queries:
    ``Extraction.sparse_attention(layer, head, mass)``, or :func:`largest_entries`), or a dense (n, n)
    attention matrix, of which each row's smallest set of largest entries reaching ``mass`` is kept first.
    Returns ``(P, kept_mass)``: P a CSR matrix in ``dtype`` (see the module doc), and the share of the
    attention mass its entries carry, sum of the kept a_ij (diagonal included) over sum of all a_ij, with a
    sparse ``A`` taken as rows that each sum to 1 (softmax rows). With ``exclude`` (a boolean mask of the
    tokens to drop) ``(P, kept_mass, kept)`` as ``attention_affinities`` does, ``kept`` the int64 indices of the
    tokens P covers, and the mass counted over the kept tokens' rows and columns.
    """
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise TypeError(f"dtype must be float32 or float64, got {dt}")
    if sp.issparse(A):
        M = sp.csr_matrix(A, dtype=np.float64)
        if M.ndim != 2 or M.shape[0] != M.shape[1]:
            raise ValueError(f"A must be a square (n, n) matrix, got shape {M.shape}")
        if M.nnz and not np.isfinite(M.data).all():
            raise ValueError("A contains NaN or infinite values")
        if M.nnz and M.data.min() < 0:
            raise ValueError("A has negative entries; attention weights are non-negative")
        full = np.ones(M.shape[0])  # softmax rows
    else:
        dense = real_array(np.asarray(A), "A")
        if dense.ndim != 2 or dense.shape[0] != dense.shape[1]:
            raise ValueError(f"A must be a square (n, n) attention matrix, got shape {dense.shape}")
        M = largest_entries(dense, mass)
        full = dense.sum(axis=1, dtype=np.float64)
    n = M.shape[0]
    kept = np.arange(n, dtype=np.int64)
    if exclude is not None:
        mask = np.asarray(exclude)
        if mask.dtype != np.bool_ or mask.shape != (n,):
            raise TypeError(f"exclude must be a boolean mask of shape ({n},)")
        if mask.any():  # (slicing copies the rows twice: 1.9 s of 5.4 at 65536 tokens with nothing to drop)
            kept = np.flatnonzero(~mask).astype(np.int64)
            M = M[kept][:, kept]
            full = full[kept] if sp.issparse(A) else np.asarray(dense[np.ix_(kept, kept)].sum(axis=1), np.float64)
    if M.shape[0] < 2:
        raise DegenerateAffinitiesError(f"P needs at least 2 tokens, but only {M.shape[0]} remain")
    kept_mass = float(M.sum()) / max(float(full.sum()), np.finfo(float).tiny)
    P = _symmetric_P(M, dt)
    return (P, kept_mass, kept) if exclude is not None else (P, kept_mass)


def sparse_attention_dispatch(dense: Callable[..., Any]) -> Callable[..., Any]:
    """``attention_affinities`` that builds a sparse P from a ``scipy.sparse`` A (its kept entries, as they are)
    and calls ``dense`` for any other A: the same returns, P or (P, kept) with ``exclude``."""

    @functools.wraps(dense)
    def attention_affinities(A: Any, *, exclude: Any = None, dtype: Any = np.float64, out: Any = None) -> Any:
        if not sp.issparse(A):
            return dense(A, exclude=exclude, dtype=dtype, out=out)
        if out is not None:
            raise ValueError("out= receives a dense P; a sparse A gives a sparse P")
        result: tuple = sparse_attention_affinities(A, exclude=exclude, dtype=dtype)
        return (result[0], result[2]) if exclude is not None else result[0]

    return attention_affinities


# ---------------------------------------------------------------------------------- hidden states: kNN Gaussian


def nearest_neighbours(X: np.ndarray, k: int, block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """The exact k nearest neighbours of every row of X (itself excluded): (indices (n, k) int64, squared
    euclidean distances (n, k) float64), nearest first. Blocks of rows against all rows by one matrix product
    each and ``torch.topk`` (O(n^2 d) time, O(block n) memory; in torch rather than numpy's argpartition: 2.1x
    faster at 16384 points of 64 dimensions, 2.3 against 5.0 s, the same neighbours)."""
    import torch

    n = X.shape[0]
    Xc = np.asarray(X, dtype=np.float64)
    T = torch.from_numpy(Xc - Xc.mean(axis=0))  # the expansion |x|^2 + |y|^2 - 2 x.y cancels less about the centre
    norms = (T * T).sum(dim=1)
    indices = np.empty((n, k), np.int64)
    distances = np.empty((n, k))
    for lo in range(0, n, block):
        hi = min(lo + block, n)
        D = torch.addmm(norms[lo:hi, None] + norms[None, :], T[lo:hi], T.T, alpha=-2.0).clamp_(min=0.0)
        D[torch.arange(hi - lo), torch.arange(lo, hi)] = torch.inf  # not its own neighbour
        d, nearest = torch.topk(D, k, dim=1, largest=False, sorted=True)
        indices[lo:hi], distances[lo:hi] = nearest.numpy(), d.numpy()
    return indices, distances


def knn_gaussian_affinities(
    X: ArrayLike, perplexity: float = 20.0, *, k: int | None = None, dtype: DTypeLike = np.float32
) -> sp.csr_matrix:
    """Sparse P of standard t-SNE for points X (n, d) from each point's k nearest neighbours (openTSNE's
    construction): ``p_{j|i}`` a Gaussian on the squared distances to the ``k = min(n - 1, 3 x perplexity)``
    nearest neighbours, its precision bisected so that the row's perplexity is ``perplexity`` (the same search
    as :func:`~headsne_widget.affinity.affinities.binary_search_perplexity`), then ``p_ij = (p_{j|i} + p_{i|j}) / 2n``.
    """
    from .affinities import EPSILON_DBL, N_STEPS, PERPLEXITY_TOLERANCE

    X = real_array(np.asarray(X), "X").astype(np.float64, copy=False)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (n points, d features), got shape {X.shape}")
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"X must have at least 2 points, got {n}")
    if isinstance(perplexity, bool) or not isinstance(perplexity, (int, float, np.integer, np.floating)):
        raise TypeError(f"perplexity must be a number, got {type(perplexity).__name__}")
    if not (math.isfinite(perplexity) and 0 < perplexity < n):
        raise ValueError(f"perplexity must be in (0, {n}) for {n} points, got {perplexity!r}")
    k = min(n - 1, int(3 * perplexity)) if k is None else int(k)
    if not 1 <= k <= n - 1:
        raise ValueError(f"k must be in [1, {n - 1}], got {k}")
    scale = float(np.abs(X - X.mean(axis=0)).max())
    X = X / scale if scale > 0 else X  # P is scale-free: the search adapts the widths
    indices, D = nearest_neighbours(X, k)
    D = D - D[:, :1]  # shifting a row by its nearest distance leaves p_{j|i} unchanged, keeps exp() finite
    beta = np.ones(n)
    lo_b = np.full(n, -np.inf)
    hi_b = np.full(n, np.inf)
    target = np.log(perplexity)
    C = np.empty_like(D)
    active = np.arange(n)
    for _ in range(N_STEPS):
        E = np.exp(-D[active] * beta[active, None])
        total = E.sum(axis=1)
        total[total == 0.0] = EPSILON_DBL
        E /= total[:, None]
        C[active] = E
        entropy = np.log(total) + beta[active] * np.einsum("ij,ij->i", D[active], E)
        diff = entropy - target
        searching = np.abs(diff) > PERPLEXITY_TOLERANCE
        active, diff = active[searching], diff[searching]
        if active.size == 0:
            break
        flat = diff > 0.0
        b = beta[active]
        lo, hi = np.where(flat, b, lo_b[active]), np.where(flat, hi_b[active], b)
        beta[active] = np.where(
            flat, np.where(np.isinf(hi), b * 2.0, (b + hi) / 2.0), np.where(np.isinf(lo), b / 2.0, (b + lo) / 2.0)
        )
        lo_b[active], hi_b[active] = lo, hi
    rows = np.repeat(np.arange(n), k)
    conditional = sp.csr_matrix((C.ravel(), (rows, indices.ravel())), shape=(n, n))
    return _symmetric_P(conditional, dtype)


# ---------------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class SparseAffinities:
    """A checked sparse P as the engine reads it: CSR arrays, rows in order, int32 column indices."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray

    @property
    def n(self) -> int:
        return self.indptr.shape[0] - 1


def check_sparse_affinities(P: Any, dtype: DTypeLike = np.float32, check: bool = True) -> SparseAffinities:
    """A ``scipy.sparse`` P as the sparse engine needs it, or a ValueError naming the problem: square, n >= 4,
    finite, non-negative, symmetric (max |P - P^T| within 1e-6 of the largest entry), zero diagonal, sum 1
    within 1e-4. A P within those tolerances is symmetrised exactly, (P + P^T) / 2, and normalised; explicit
    zeros are dropped. ``check=False`` takes P as built by this module (CSR, sorted, canonical): only the shape
    and the type are looked at."""
    if not sp.issparse(P):
        raise TypeError(f"P must be a scipy.sparse matrix here, got {type(P).__name__}")
    if P.ndim != 2 or P.shape[0] != P.shape[1]:
        raise ValueError(f"P must be a square 2-D matrix, got shape {P.shape}")
    n = P.shape[0]
    if n < 4:
        raise ValueError(f"t-SNE needs at least 4 points, P is {n} x {n}")
    dt = np.dtype(dtype)
    if not check:
        C = sp.csr_matrix(P)
        return SparseAffinities(C.indptr.astype(np.int64), C.indices.astype(np.int32), C.data.astype(dt))
    C = sp.csr_matrix(P, dtype=np.float64, copy=True)
    C.sum_duplicates()
    if C.nnz and not np.isfinite(C.data).all():
        raise ValueError("P contains NaN or infinite values")
    if C.nnz and C.data.min() < 0:
        raise ValueError(f"P must be non-negative, its smallest entry is {C.data.min():.3g}")
    C.eliminate_zeros()
    if C.nnz == 0:
        raise ValueError("P has no non-zero entry")
    largest = float(C.data.max())
    asymmetry = abs(C - C.T)
    worst = float(asymmetry.max()) if asymmetry.nnz else 0.0
    if worst > _SYMMETRY_TOL * largest:
        raise ValueError(f"P must be symmetric: max |P - P^T| = {worst:.3g} (largest entry {largest:.3g})")
    diagonal = float(np.abs(C.diagonal()).max())
    if diagonal > _SYMMETRY_TOL * largest:
        raise ValueError(f"P must have a zero diagonal (q_ii = 0, so KL would be infinite); max p_ii = {diagonal:.3g}")
    total = float(C.data.sum())
    if abs(total - 1.0) > _SUM_TOL:
        raise ValueError(f"P must sum to 1 (a joint distribution), it sums to {total:.6g}")
    S = _symmetric_P(C, dt)  # ((C + C^T) / 2 normalised: the same P)
    return SparseAffinities(S.indptr.astype(np.int64), S.indices, S.data)
