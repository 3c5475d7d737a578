"""Compiled passes over an n x n matrix, in square tiles: a fast acceptance test of P, P = (A + A^T) * s,
and each token's strongest partners in a head (and in a long text's kept rows of one, :func:`kept_row_partners`).

At n = 8192 (256 MiB in float32) numpy needs a pass per property (finite, min, max, symmetric, diagonal,
sum), with transposed block copies: about 0.7 s before the first t-SNE step of a head click; its
row-wise top-k (argpartition, three times) took 4 s. These kernels read the matrix once (the partners
twice), in square tiles: the mirror tile is first copied transposed into a small buffer that stays in
cache, so that the inner loops read contiguous memory. From PARALLEL_MIN_N tokens P's two passes run on
every core: tile rows paired (k, nb - 1 - k), so that each pair has the same number of tiles, handed to the
worker threads of _parallel.py one pair at a time (a core taken by the browser does not hold the others
back), band sums kept apart and added in band order (the result is the serial one bit for bit). A head as
the capture gives it needs no symmetry count: its census (:func:`row_census`) reads rows, in this thread. At
8192 on two idle cores: census 0.07 -> 0.045 s (0.01 s row by row) and symmetrise 0.13 -> 0.05 s since the
transposed copies take eight rows at a time.

Measured again on the 2-core machine shared with other jobs (load 5-9, ms, best / median of 7-9 interleaved
rounds): the eight-row transposed tiles pay (census at 8192 178 / 315 against 306 / 492 one row at a time,
symmetrise 214 / 287 against 387 / 705; 2048: census 8.9 against 20, symmetrise 12 against 29); the passes on
the worker threads tie with one thread when the other core is busy (census at 8192 157 / 234 against 151 / 194,
symmetrise 163 / 225 against 158 / 228; 2048 census 10.7 / 17.2 against 13.2 / 15.8) and were 1.7-1.9 times
faster on idle cores (commit 2b29162), so they stay.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numba import njit

from .._parallel import each

#: rows and columns of a square tile (its float32 transposed copy, 256 KiB, stays in L2; rows of 1 KiB stream well)
TILE = 256
#: from this size P's census and symmetrisation run on every core (at n = 2048 a pass takes several ms)
PARALLEL_MIN_N = 2048


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _transposed_tile(M, bi, ei, bj, ej, T):  # pragma: no cover - compiled
    """T[i - bi, j - bj] = M[j, i]: the mirror of tile (rows bi:ei, columns bj:ej), read row by row, eight
    rows of M at a time so that each row of T gets 32 contiguous bytes per visit (a 256 x 256 float32 tile:
    25 us, against 97 us one row of M at a time, which wrote T one scattered entry at a time)."""
    top = bj + (ej - bj) // 8 * 8
    for j in range(bj, top, 8):
        r0, r1, r2, r3, r4, r5, r6, r7 = M[j], M[j + 1], M[j + 2], M[j + 3], M[j + 4], M[j + 5], M[j + 6], M[j + 7]
        c = j - bj
        for i in range(bi, ei):
            row = T[i - bi]
            row[c], row[c + 1], row[c + 2], row[c + 3] = r0[i], r1[i], r2[i], r3[i]
            row[c + 4], row[c + 5], row[c + 6], row[c + 7] = r4[i], r5[i], r6[i], r7[i]
    for j in range(top, ej):
        source = M[j]
        for i in range(bi, ei):
            T[i - bi, j - bj] = source[i]


@njit(cache=True, nogil=True, fastmath={"reassoc"}, inline="always")
def _census_band(M, b, tile, T):  # pragma: no cover - compiled
    """(off-diagonal sum, trace, negative, unequal pairs, non-zero diagonal) of tile row b's upper tiles
    (b, c >= b) and their mirrors; T is the caller's (tile, tile) buffer.

    Numba IR inlined into :func:`_census_pair` (``inline="always"``), not called: a call links a private
    copy of this function into the caller, optimised again there, and the JIT runs whichever copy of the
    symbol it loaded first (this function's own in a process that compiles it, _census_pair's in one that
    reads numba's cache). Its float64 sums are re-associated (``reassoc``), so two copies may round
    differently, and P's normaliser with them. (The other kernels called from kernels only copy values
    or add two numbers: every copy gives the same bits.)"""
    n = M.shape[0]
    bi, ei = b * tile, min(b * tile + tile, n)
    off, trace, negative, unequal, diagonal = 0.0, 0.0, 0, 0, 0
    for i in range(bi, ei):
        trace += M[i, i]
        negative += M[i, i] < 0.0
        diagonal += M[i, i] != 0.0
    for bj in range(bi, n, tile):
        ej = min(bj + tile, n)
        _transposed_tile(M, bi, ei, bj, ej, T)
        for i in range(bi, ei):
            row, below, differ = 0.0, 0, 0
            start = max(bj, i + 1)
            for j in range(start, ej):
                a, b2 = M[i, j], T[i - bi, j - bj]
                row += np.float64(a) + np.float64(b2)
                below += (a < 0.0) + (b2 < 0.0)
                differ += a != b2
            off += row
            negative += below
            unequal += differ
    return off, trace, negative, unequal, diagonal


@njit(cache=True, nogil=True, fastmath={"reassoc"})  # the flags of the band it inlines
def _census_pair(M, k, tile, sums, counts):  # pragma: no cover - compiled
    """Tile rows k and nb - 1 - k into ``sums[b] = (off, trace)`` and ``counts[b]``: every pair has nb + 1
    tiles, so that pairs split evenly between threads."""
    nb = (M.shape[0] + tile - 1) // tile
    T = np.empty((tile, tile), dtype=M.dtype)
    for b in range(k, nb - k, max(nb - 1 - 2 * k, 1)):  # k, then nb - 1 - k unless it is k
        off, trace, negative, unequal, diagonal = _census_band(M, b, tile, T)
        sums[b, 0], sums[b, 1] = off, trace
        counts[b, 0], counts[b, 1], counts[b, 2] = negative, unequal, diagonal


@njit(cache=True, nogil=True)
def _census_total(sums, counts):  # pragma: no cover - compiled
    """Band results added in band order, whichever thread made them (the result does not depend on it)."""
    off, trace = 0.0, 0.0
    for b in range(sums.shape[0]):
        off += sums[b, 0]
        trace += sums[b, 1]
    return off + trace, counts[:, 0].sum(), counts[:, 1].sum(), counts[:, 2].sum(), off


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _symmetrise_band(A, total, out, b, tile, T, V):  # pragma: no cover - compiled
    """Tile row b of :func:`symmetrise`: tiles (b, c >= b), each mirror copied, and b's diagonal. The mirror
    is written row by row from V, the new tile transposed, rather than read a column at a time from ``out``
    (193 us a 256 x 256 tile, against 2 x 25 us)."""
    n = A.shape[0]
    bi, ei = b * tile, min(b * tile + tile, n)
    for bj in range(bi, n, tile):
        ej = min(bj + tile, n)
        _transposed_tile(A, bi, ei, bj, ej, T)
        for i in range(bi, ei):
            a, t, o = A[i][bj:ej], T[i - bi], out[i][bj:ej]
            for jj in range(ej - bj):
                o[jj] = (np.float64(a[jj]) + np.float64(t[jj])) / total
        if bj != bi:  # the mirror tile: a copy of this one, transposed (a + b == b + a exactly)
            _transposed_tile(out, bj, ej, bi, ei, V)
            for j in range(bj, ej):
                out[j][bi:ei] = V[j - bj][: ei - bi]
    for i in range(bi, ei):
        out[i, i] = 0.0


@njit(cache=True, nogil=True)
def _symmetrise_pair(A, total, out, k, tile):  # pragma: no cover - compiled
    nb = (A.shape[0] + tile - 1) // tile
    T = np.empty((tile, tile), dtype=A.dtype)
    V = np.empty((tile, tile), dtype=out.dtype)
    _symmetrise_band(A, total, out, k, tile, T, V)
    if nb - 1 - k != k:
        _symmetrise_band(A, total, out, nb - 1 - k, tile, T, V)


def _each_pair(n: int, tile: int, pair: Callable[[int], None]) -> None:
    """``pair(k)`` for every pair of tile rows (k, nb - 1 - k) of an n x n matrix: in this thread, or from
    PARALLEL_MIN_N on the worker threads, each pair to whichever is free (the compiled pair functions
    release the GIL)."""
    pairs = ((n + tile - 1) // tile + 1) // 2
    if n >= PARALLEL_MIN_N:
        each(pairs, pair)
    else:
        for k in range(pairs):
            pair(k)


def census(M: np.ndarray, tile: int = TILE) -> tuple[float, int, int, int, float]:
    """(sum, negative entries, pairs with m_ij != m_ji, non-zero diagonal entries, sum off the diagonal) of
    a square matrix, in one pass; sums in float64, the off-diagonal one accumulated apart (not the sum
    less the trace, which cancels on a head attending almost only to itself). Counts rather than
    extremes, so every loop vectorises; the sum is not finite exactly when an entry is not (NaN, or an
    infinity; float32 entries cannot overflow a float64 sum). The same bits whichever threads ran it.
    """
    nb = (M.shape[0] + tile - 1) // tile
    sums, counts = np.zeros((nb, 2)), np.zeros((nb, 3), dtype=np.int64)
    _each_pair(M.shape[0], tile, lambda k: _census_pair(M, k, tile, sums, counts))
    return _census_total(sums, counts)


@njit(cache=True, nogil=True, fastmath={"reassoc"})
def _row_census_part(M, lo, hi, sums, negative):  # pragma: no cover - compiled
    """Rows lo .. hi - 1 into ``sums[i] = (off-diagonal sum, diagonal entry)`` and ``negative[i]`` (entries not
    >= 0, NaN included); each row in one contiguous loop, the diagonal masked in it (as the t-SNE kernels)."""
    n = M.shape[1]
    for i in range(lo, hi):
        row = M[i]
        off, below = 0.0, 0
        for j in range(n):
            v = np.float64(row[j])
            off += 0.0 if j == i else v
            below += not v >= 0.0
        sums[i, 0], sums[i, 1] = off, row[i]
        negative[i] = below


def row_census(M: np.ndarray) -> tuple[float, int, float]:
    """(sum, entries not >= 0 (NaN included), sum off the diagonal) of a square matrix, row by row with the
    off-diagonal sum accumulated apart, in this thread: what P of an attention head needs, without
    :func:`census`'s symmetry count and so without its transposed tiles (at 8192 on two cores shared with the
    browser: 0.10-0.19 s in a click, against 0.02-0.04 s row by row). Not in shares on the worker threads:
    they were slower on the 2-core machine at load 5-9 (ms, best / median, one thread / shares: 2048 0.69 /
    0.76 against 1.11 / 2.58, 4096 2.6 / 3.0 against 6.0 / 11.1, 8192 15.9 / 22.3 against 18.3 / 30.4).
    Row results are added in row order; the sum is not finite exactly when an entry is not."""
    n = M.shape[0]
    sums, negative = np.zeros((n, 2)), np.zeros(n, dtype=np.int64)
    _row_census_part(M, 0, n, sums, negative)
    off = float(sums[:, 0].sum())
    return off + float(sums[:, 1].sum()), int(negative.sum()), off


def symmetrise(A: np.ndarray, total: float, out: np.ndarray, tile: int = TILE) -> None:
    """out_ij = out_ji = (A_ij + A_ji) / total, computed in float64 and rounded once to out's dtype (so out
    is exactly symmetric); out_ii = 0. One pass over A in mirrored tiles. A division, not a product with
    1 / total: a subnormal total (a rescaled head whose off-diagonal mass is 1e-309 of its largest entry)
    has an infinite reciprocal."""
    _each_pair(A.shape[0], tile, lambda k: _symmetrise_pair(A, total, out, k, tile))


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


@njit(cache=True, nogil=True)
def kept_row_partners(rp, ri, rd, cp, ci, cd, partner, weights, indices):  # pragma: no cover - compiled
    """:func:`partners` of a head given as its kept rows (CSR ``rp, ri, rd``) and their transpose (``cp, ci, cd``),
    columns sorted within each row: row i and column i merged by column, so that j rises and equal weights keep
    the lower index first. ``weights`` (3, n, k) come filled with 0 and ``indices`` with -1: only entries > 0
    enter, and a token with fewer than k keeps the padding. O(nnz x k)."""
    n = rp.shape[0] - 1
    for i in range(n):
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
            _offer(weights[0, i], indices[0, i], wa, j)
            _offer(weights[1, i], indices[1, i], wb, j)
            _offer(weights[2, i], indices[2, i], max(wa, wb), j)


@njit(cache=True, nogil=True)
def gram_to_squared_distances(G, sq, lo, hi):  # pragma: no cover - compiled
    """Rows lo .. hi - 1 of a Gram matrix ``G = X X^T`` turned in place into ``max(|x_i|^2 + |x_j|^2 - 2 x_i.x_j,
    0)`` (``sq``: the squared norms): the expansion's three n x n numpy passes and their temporaries in one
    contiguous pass (at 2048 points, 129 ms for numpy's whole ``squared_distances``)."""
    n = G.shape[1]
    for i in range(lo, hi):
        row, s = G[i], sq[i]
        for j in range(n):
            v = s + sq[j] - 2.0 * row[j]
            row[j] = v if v > 0.0 else 0.0
