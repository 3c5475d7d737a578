"""Compiled passes over an n x n matrix, in square tiles: a fast acceptance test of P, P = (A + A^T) * s,
and each token's strongest partners in a head.

At n = 8192 (256 MiB in float32) numpy needs a pass per property (finite, min, max, symmetric, diagonal,
sum), with transposed block copies: about 0.7 s before the first t-SNE step of a head click; its
row-wise top-k (argpartition, three times) took 4 s. These kernels read the matrix once (the partners
twice), in square tiles: the mirror tile is first copied transposed into a small buffer that stays in
cache, so that the inner loops read contiguous memory.
"""

from __future__ import annotations

import numpy as np
from numba import njit

#: rows and columns of a square tile (its float32 transposed copy, 256 KiB, stays in L2; rows of 1 KiB stream well)
TILE = 256


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _transposed_tile(M, bi, ei, bj, ej, T):  # pragma: no cover - compiled
    """T[i - bi, j - bj] = M[j, i]: the mirror of tile (rows bi:ei, columns bj:ej), read row by row."""
    for j in range(bj, ej):
        for i in range(bi, ei):
            T[i - bi, j - bj] = M[j, i]


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def census(M, tile=TILE):  # pragma: no cover - compiled (covered through check_affinities)
    """(sum, negative entries, pairs with m_ij != m_ji, non-zero diagonal entries, sum off the diagonal) of
    a square matrix, in one pass; sums in float64, the off-diagonal one accumulated apart (not the sum
    less the trace, which cancels on a head attending almost only to itself). Counts rather than
    extremes, so every loop vectorises; the sum is not finite exactly when an entry is not (NaN, or an
    infinity; float32 entries cannot overflow a float64 sum).
    """
    n = M.shape[0]
    T = np.empty((tile, tile), dtype=M.dtype)
    off, trace, negative, unequal, diagonal = 0.0, 0.0, 0, 0, 0
    for i in range(n):
        trace += M[i, i]
        negative += M[i, i] < 0.0
        diagonal += M[i, i] != 0.0
    for bi in range(0, n, tile):
        ei = min(bi + tile, n)
        for bj in range(bi, n, tile):
            ej = min(bj + tile, n)
            _transposed_tile(M, bi, ei, bj, ej, T)
            for i in range(bi, ei):
                row, below, differ = 0.0, 0, 0
                start = max(bj, i + 1)
                for j in range(start, ej):
                    a, b = M[i, j], T[i - bi, j - bj]
                    row += np.float64(a) + np.float64(b)
                    below += (a < 0.0) + (b < 0.0)
                    differ += a != b
                off += row
                negative += below
                unequal += differ
    return off + trace, negative, unequal, diagonal, off


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def symmetrise(A, total, out, tile=TILE):  # pragma: no cover - compiled (covered through attention_affinities)
    """out_ij = out_ji = (A_ij + A_ji) / total, computed in float64 and rounded once to out's dtype (so out
    is exactly symmetric); out_ii = 0. One pass over A in mirrored tiles. A division, not a product with
    1 / total: a subnormal total (a rescaled head whose off-diagonal mass is 1e-309 of its largest entry)
    has an infinite reciprocal."""
    n = A.shape[0]
    T = np.empty((tile, tile), dtype=A.dtype)
    for bi in range(0, n, tile):
        ei = min(bi + tile, n)
        for bj in range(bi, n, tile):
            ej = min(bj + tile, n)
            _transposed_tile(A, bi, ei, bj, ej, T)
            for i in range(bi, ei):
                for j in range(bj, ej):
                    out[i, j] = (np.float64(A[i, j]) + np.float64(T[i - bi, j - bj])) / total
            if bj != bi:  # the mirror tile: a copy of this one, transposed (a + b == b + a exactly)
                for j in range(bj, ej):
                    for i in range(bi, ei):
                        out[j, i] = out[i, j]
    for i in range(n):
        out[i, i] = 0.0


@njit(cache=True, nogil=True, inline="always")
def _offer(weights, indices, value, index):  # pragma: no cover - compiled
    """Put (value, index) into a row's top-k kept largest first (equal values: lower index first, as j
    rises), if it beats the k-th."""
    k = weights.shape[0]
    if not value > weights[k - 1]:
        return
    p = k - 1
    while p > 0 and weights[p - 1] < value:
        weights[p] = weights[p - 1]
        indices[p] = indices[p - 1]
        p -= 1
    weights[p] = value
    indices[p] = index


@njit(cache=True, nogil=True)
def partners(A, partner, weights, indices, tile=TILE):  # pragma: no cover - compiled (through partners.py)
    """Each token i's k strongest partners j != i with ``partner[j]``, in three rankings: row i of A
    ("attends to"), column i ("attended by") and max(A_ij, A_ji) (the edges). ``weights`` (3, n, k) and
    ``indices`` (3, n, k) are filled largest first; k is their last dimension, at most the partners."""
    n = A.shape[0]
    weights[:] = -np.inf
    indices[:] = -1
    T = np.empty((tile, tile), dtype=A.dtype)
    for bi in range(0, n, tile):
        ei = min(bi + tile, n)
        for bj in range(0, n, tile):
            ej = min(bj + tile, n)
            _transposed_tile(A, bi, ei, bj, ej, T)
            for i in range(bi, ei):
                for j in range(bj, ej):
                    if j == i or not partner[j]:
                        continue
                    a, b = A[i, j], T[i - bi, j - bj]
                    _offer(weights[0, i], indices[0, i], a, j)
                    _offer(weights[1, i], indices[1, i], b, j)
                    _offer(weights[2, i], indices[2, i], max(a, b), j)
