"""Compiled O(nnz) pass for a sparse P: the entries of M + M^T off the diagonal, from a canonical CSR M.

scipy builds M + M^T from a transposed copy (``tocsr``), a merge (``csr_plus_csr``), then drops the diagonal
by inserting it first (``setdiag``) and sorts again: 5.4 s for 30 M kept entries of a 65536-token head, most of a
head change's wait. :func:`symmetric_sum` transposes by a counting sort (columns come out in row order, so
sorted), and merges each row with its column in one pass; the sums are float64 (a + b of two float32 or float64
values, as scipy's), zero sums and the diagonal are left out. The helpers are inlined (``inline="always"``): no
cached kernel calls another (the rule of :mod:`..embedding.kernels`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["symmetric_sum"]


@njit(inline="always")
def _transpose(indptr, indices, data, n):  # pragma: no cover - compiled
    """M^T as CSR (indptr, indices, float64 data), the indices of each row increasing."""
    t_ptr = np.zeros(n + 1, np.int64)
    for k in range(indptr[n]):
        t_ptr[indices[k] + 1] += 1
    for i in range(n):
        t_ptr[i + 1] += t_ptr[i]
    t_idx = np.empty(indptr[n], np.int32)
    t_val = np.empty(indptr[n], np.float64)
    fill = t_ptr[:-1].copy()
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            at = fill[indices[k]]
            t_idx[at] = i
            t_val[at] = data[k]
            fill[indices[k]] = at + 1
    return t_ptr, t_idx, t_val


@njit(inline="always")
def _merge_row(i, indptr, indices, data, t_ptr, t_idx, t_val, n, out_idx, out_val, at):  # pragma: no cover
    """Row i of M + M^T off the diagonal, non-zero sums only, written from ``at`` (``out_val`` empty: counted
    only, the first of :func:`symmetric_sum`'s two passes, so that its output is allocated at its exact size);
    returns the position after the row."""
    a, a_end, b, b_end = indptr[i], indptr[i + 1], t_ptr[i], t_ptr[i + 1]
    while a < a_end or b < b_end:
        ja = indices[a] if a < a_end else n
        jb = t_idx[b] if b < b_end else n
        j = min(ja, jb)
        value = 0.0
        if ja == j:
            value += data[a]
            a += 1
        if jb == j:
            value += t_val[b]
            b += 1
        if j != i and value != 0.0:
            if out_val.shape[0]:
                out_idx[at] = j
                out_val[at] = value
            at += 1
    return at


@njit(cache=True, nogil=True)
def symmetric_sum(indptr, indices, data, n):  # pragma: no cover - compiled
    """(indptr int64, indices int32, data float64) of M + M^T without its diagonal and zeros, indices sorted;
    M a canonical CSR (n, n): sorted indices, no duplicates."""
    t_ptr, t_idx, t_val = _transpose(indptr, indices, data, n)
    out_ptr = np.zeros(n + 1, np.int64)
    none_idx, none_val = np.empty(0, np.int32), np.empty(0, np.float64)
    for i in range(n):
        out_ptr[i + 1] = _merge_row(i, indptr, indices, data, t_ptr, t_idx, t_val, n, none_idx, none_val, out_ptr[i])
    out_idx = np.empty(out_ptr[n], np.int32)
    out_val = np.empty(out_ptr[n], np.float64)
    for i in range(n):
        _merge_row(i, indptr, indices, data, t_ptr, t_idx, t_val, n, out_idx, out_val, out_ptr[i])
    return out_ptr, out_idx, out_val
