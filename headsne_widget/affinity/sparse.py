"""Sparse P for long texts (issue 21): an attention head's P from the largest entries of each row, the checks of a
sparse P, and the symmetrisation the k-nearest-neighbour Gaussian P of hidden states shares (:mod:`.knn`).

Why: a dense P is n^2 float32 (1 GiB at 16384 tokens, 16 GiB at 65536) and the exact t-SNE reads all of it
every iteration. Attention rows are peaked: most of a row's mass sits on a few keys, so P built from the
smallest set of largest entries that reaches ``mass`` of each row (0.99 by default) keeps almost all of it in
O(n x keys) memory, and :mod:`..embedding.sparse_engine` embeds it in O(nnz + n) per iteration.

Every P here is a ``scipy.sparse.csr_matrix``: symmetric (exactly: p_ij and p_ji are the same float), zero
diagonal (not stored), sum 1, sorted int32 indices. Its values are the dense construction's restricted to the
kept entries: ``sparse_attention_affinities(kept)`` equals ``attention_affinities`` of the dense matrix with
every entry not kept set to 0, and ``knn.knn_gaussian_affinities`` equals ``gaussian_affinities`` computed with
each point's non-neighbours at infinite distance (as openTSNE does: k = 3 x perplexity neighbours).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, DTypeLike

from .._checks import DEFAULT_MASS, check_mass, float_dtype, real_array
from .._memory import fresh_empty
from .._parallel import shares, threads
from ..errors import DegenerateAffinitiesError

__all__ = [
    "SPARSE_MIN_TOKENS",
    "check_sparse_affinities",
    "in_row_shares",
    "largest_entries",
    "permuted",
    "row_shares",
    "sparse_attention_affinities",
    "sparse_attention_dispatch",
    "symmetric_P_arrays",
    "transposed",
]

#: Tokens from which :func:`~headsne_widget.affinity.selection.selection_affinities` gives a sparse P (and so
#: :func:`~headsne_widget.tsne` the interpolation engine) unless told otherwise; below, the exact dense engine
#: is faster (``benchmarks/tsne_sparse.py --switch`` measures both on the same P).
SPARSE_MIN_TOKENS = 4096
_SYMMETRY_TOL = 1e-6  # relative to the largest entry, as the dense check
_SUM_TOL = 1e-4
_ROWS = 256  # rows per block where a dense matrix is read
_SHARES = 16  # ranges of rows of equal work handed to the worker threads


def block_largest(B: np.ndarray, mass: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each row of the block B (rows, n) of non-negative entries, the smallest set of its largest entries
    whose sum reaches ``mass`` of the row's sum: (counts (rows,), column indices, values), the indices of each
    row increasing, rows one after the other (:func:`_block_rows` without the shares kept)."""
    counts, cols, values, _ = _block_rows(B, mass)
    return counts, cols, values


def _block_rows(
    B: np.ndarray, mass: float, max_keys: int | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`block_largest` with at most ``max_keys`` entries a row, and each row's share kept ``(rows,)``.

    The selection is the capture's (:func:`~headsne_widget.capture.sparse.top_mass`, one rule for the package:
    ties go to the lower column), ranked in float64; the values are B's, as float64."""
    from ..capture.sparse import top_mass

    block = np.ascontiguousarray(B, dtype=np.float64)
    counts, cols, _, kept = top_mass(block, mass, max_keys)
    rows = np.repeat(np.arange(B.shape[0]), counts)
    return counts, cols, block[rows, cols], kept


def largest_entries(
    A: ArrayLike, mass: float = DEFAULT_MASS, *, max_keys: int | None = None, max_entries: int | None = None
) -> sp.csr_matrix:
    """Each row's smallest set of largest entries reaching ``mass`` of the row's sum, as a CSR matrix (float64
    values of A, the rest not stored): what ``Extraction.sparse_attention(layer, head, mass)`` gives from the
    capture, here from a dense (n, n) attention matrix (tests, benchmarks, and heads captured dense), in blocks
    of rows (:func:`_block_rows`). The bounds are the capture's: ``max_keys`` entries a row at most,
    ``max_entries`` refused (``MemoryBudgetError``) as soon as the blocks so far, extrapolated, exceed it. The
    matrix's ``kept`` attribute is each row's share kept (below ``mass`` where ``max_keys`` capped it)."""
    from ..capture.sparse import check_entries, check_limits

    mass = check_mass(mass)
    max_keys, max_entries = check_limits(max_keys, max_entries)
    A = np.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square (n, n) attention matrix, got shape {A.shape}")
    A = real_array(A, "A")
    if A.size and A.min() < 0:
        raise ValueError("A has negative entries; attention weights are non-negative")
    n = A.shape[0]
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    entries = 0
    for lo in range(0, n, _ROWS):
        parts.append(_block_rows(A[lo : lo + _ROWS], mass, max_keys=max_keys))
        entries += int(parts[-1][0].sum())
        if max_entries is not None:
            check_entries(entries, min(lo + _ROWS, n), n, max_entries, label="the head", mass=mass, max_keys=max_keys)
    counts, cols, vals, kept = ([part[i] for part in parts] for i in range(4))
    empty = np.zeros(0, np.int64)
    indptr = np.concatenate([[0], np.cumsum(np.concatenate([empty, *counts]))])
    data, indices = np.concatenate([empty.astype(np.float64), *vals]), np.concatenate([empty, *cols])
    matrix = sp.csr_matrix((data, indices, indptr), shape=(n, n))
    matrix.mass, matrix.kept = mass, np.concatenate([empty.astype(np.float64), *kept])  # type: ignore[attr-defined]
    return matrix


def sparse_attention_affinities(
    A: Any, *, exclude: ArrayLike | None = None, dtype: DTypeLike = np.float32, mass: float = DEFAULT_MASS
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
    dt = float_dtype(dtype)
    if sp.issparse(A):
        M = _canonical(A)
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
    kept_mass = float(M.data.sum(dtype=np.float64)) / max(float(full.sum()), np.finfo(float).tiny)
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


# ---------------------------------------------------------------------------------- M + M^T, P in another order


def _symmetric_P(M: sp.spmatrix, dtype: DTypeLike) -> sp.csr_matrix:
    """The package's sparse P of M + M^T (M non-negative): diagonal and zeros dropped (also those that underflow
    in ``dtype``), divided by its sum, in ``dtype``, sorted int32 indices (:func:`symmetric_P_arrays`)."""
    M = _canonical(M)
    n = M.shape[0]
    indices = M.indices.astype(np.int32, copy=False)  # (a copy of 38 M indices: up to 0.5 s of page faults)
    arrays = symmetric_P_arrays(M.indptr.astype(np.int64), indices, M.data, n, np.dtype(dtype))
    P = sp.csr_matrix(arrays[::-1], shape=(n, n))
    if P.nnz and not P.data.all():  # an entry below float32's least (a far kNN neighbour): not stored
        P.eliminate_zeros()
    return P


def _canonical(M: Any) -> sp.csr_matrix:
    """M as a canonical CSR matrix (sorted indices, no duplicates) of float32 or float64 values, sharing M's
    arrays where M already is one (a float32 head's rows are not copied to float64: 0.75 s at 30 M entries)."""
    C = sp.csr_matrix(M)
    if C.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
        C = C.astype(np.float64)
    if not C.has_canonical_format:
        C = C.copy()  # (sum_duplicates works in place: never on the caller's arrays)
        C.sum_duplicates()
    return C


def row_shares(cumulative: np.ndarray, count: int) -> np.ndarray:
    """Row edges (at most ``count`` + 1) cutting rows 0 .. n - 1 into ranges of about equal work,
    ``cumulative[i]`` the work of the rows before i (length n + 1)."""
    targets = np.linspace(0, cumulative[-1], count + 1)
    edges = np.searchsorted(cumulative, targets, side="left")
    edges[0], edges[-1] = 0, cumulative.shape[0] - 1
    return np.unique(edges)


def in_row_shares(edges: np.ndarray, part: Callable[[int, int], object]) -> None:
    """``part(lo, hi)`` for each range of :func:`row_shares`' ``edges``, on this thread and the workers."""
    shares(len(edges) - 1, lambda k: part(int(edges[k]), int(edges[k + 1])))


def symmetric_P_arrays(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, n: int, dtype: np.dtype
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(indptr int64, indices int32, data in ``dtype``) of (M + M^T) / sum(M + M^T) without its diagonal and zeros,
    indices sorted, for a canonical CSR M (n, n) given as int64 ``indptr``, int32 ``indices``, float32 or float64
    ``data``: the transpose (:func:`transposed`), then two passes over ranges of rows of equal work on the worker
    threads (count and sum, then write). Raises :class:`DegenerateAffinitiesError` where no mass is off the
    diagonal."""
    from . import sparse_kernels as kernels  # numba: imported on first use

    t_ptr, t_idx, t_val = transposed(indptr, indices, data, n)
    edges = row_shares(indptr + t_ptr, _SHARES)
    counts, sums = np.zeros(n + 1, np.int64), np.zeros(n)
    in_row_shares(edges, lambda lo, hi: kernels.merged_counts(indptr, indices, data, t_ptr, t_idx, t_val, n, counts,
                                                               sums, lo, hi))  # fmt: skip
    total = float(sums.sum())
    if not total > 0.0:
        raise DegenerateAffinitiesError(
            "no affinity mass is left off the diagonal (every kept token attends only to itself), "
            "so P is undefined; pick another head or keep more mass"
        )
    out_ptr = np.cumsum(counts)
    out_idx, out_val = fresh_empty(out_ptr[n], np.int32), fresh_empty(out_ptr[n], dtype)
    in_row_shares(edges, lambda lo, hi: kernels.merge_rows(indptr, indices, data, t_ptr, t_idx, t_val, n, total,
                                                            out_ptr, out_idx, out_val, lo, hi))  # fmt: skip
    return out_ptr, out_idx, out_val


def transposed(
    indptr: np.ndarray, indices: np.ndarray, data: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """M^T as CSR (indptr int64, indices int32 increasing in each row, data in M's dtype) of a CSR M (n, n) with
    int64 ``indptr`` and int32 ``indices``: a counting sort in ranges of rows of equal entries on the worker
    threads, each range counting its columns, then writing them from its own places (every column's entries of
    the earlier ranges first)."""
    from . import sparse_kernels as kernels  # numba: imported on first use

    workers = threads()
    edges = row_shares(indptr, 1 if workers == 1 else min(_SHARES, 2 * workers))  # (one thread: one range)
    ranges = len(edges) - 1
    counts = np.zeros((ranges, n), np.int64)
    shares(ranges, lambda r: kernels.column_counts(indptr, indices, int(edges[r]), int(edges[r + 1]), counts[r]))
    t_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(counts.sum(axis=0), out=t_ptr[1:])
    fill = t_ptr[:-1] + np.cumsum(counts, axis=0) - counts  # range r's first place in each column
    t_idx, t_val = fresh_empty(int(t_ptr[n]), np.int32), fresh_empty(int(t_ptr[n]), data.dtype)
    shares(ranges, lambda r: kernels.scatter_columns(indptr, indices, data, int(edges[r]), int(edges[r + 1]), fill[r],
                                                     t_idx, t_val))  # fmt: skip
    return t_ptr, t_idx, t_val


def permuted(S: SparseAffinities, order: np.ndarray) -> SparseAffinities:
    """S with its points in ``order`` (``order[k]``: the point at place k): row k is row ``order[k]``, column j
    is renamed ``place[j]`` (``place`` the inverse of ``order``); the entries of a row keep their sequence, so
    its indices are no longer sorted. Ranges of rows of equal work on the worker threads."""
    from . import sparse_kernels as kernels  # numba: imported on first use

    place = np.empty_like(order)
    place[order] = np.arange(order.shape[0], dtype=order.dtype)
    out_ptr = np.zeros(S.n + 1, np.int64)
    np.cumsum(np.diff(S.indptr)[order], out=out_ptr[1:])
    out_idx, out_val = fresh_empty(S.indices.size, S.indices.dtype), fresh_empty(S.data.size, S.data.dtype)
    edges = row_shares(out_ptr + np.arange(S.n + 1), _SHARES)
    in_row_shares(edges, lambda lo, hi: kernels.permute_rows(S.indptr, S.indices, S.data, order, place, out_ptr,
                                                              out_idx, out_val, lo, hi))  # fmt: skip
    return SparseAffinities(out_ptr, out_idx, out_val)


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
        return SparseAffinities(
            C.indptr.astype(np.int64, copy=False), C.indices.astype(np.int32, copy=False), C.data.astype(dt, copy=False)
        )
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
