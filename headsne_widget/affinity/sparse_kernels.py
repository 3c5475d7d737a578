"""Compiled O(nnz) passes over a sparse P: the entries of M + M^T off the diagonal from a canonical CSR M, and
P's points put in another order.

scipy builds M + M^T from a transposed copy (``tocsr``), a merge (``csr_plus_csr``), then drops the diagonal
by inserting it first (``setdiag``) and sorts again: 5.4 s for 30 M kept entries of a 65536-token head, most of a
head change's wait. Here every pass works on a range of rows (``lo .. hi``) and writes only what that range owns,
so that ranges run on the worker threads of :mod:`.._parallel` (:func:`.sparse.symmetric_P_arrays`):
:func:`column_counts` and :func:`scatter_columns` transpose by a counting sort (columns come out in row order, so
sorted); :func:`merged_counts` and :func:`merge_rows` merge each row with its column, the first counting each
row's entries and summing them, the second writing them divided by the total. The sums are float64 (a + b of two
float32 or float64 values, as scipy's), zero sums and the diagonal are left out; the division is float64 too,
then stored in P's dtype (no float64 copy of P). :func:`permute_rows` writes rows of a CSR matrix in a new order
with their columns renamed (scipy's ``P[order][:, order]`` copies twice and sorts). The helpers are inlined
(``inline="always"``): no cached kernel calls another (the rule of :mod:`..embedding.kernels`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["column_counts", "merge_rows", "merged_counts", "permute_rows", "scatter_columns"]


@njit(cache=True, nogil=True)
def column_counts(indptr, indices, lo, hi, counts):  # pragma: no cover - compiled
    """``counts[j]`` += the entries of rows lo .. hi - 1 in column j (the first pass of the transpose)."""
    for k in range(indptr[lo], indptr[hi]):
        counts[indices[k]] += 1


@njit(cache=True, nogil=True)
def scatter_columns(indptr, indices, data, lo, hi, fill, t_idx, t_val):  # pragma: no cover - compiled
    """The entries of rows lo .. hi - 1 into M^T's arrays, column j's from ``fill[j]`` on (advanced): rows in
    increasing order, so that each row of M^T holds its indices increasing (the second pass of the transpose)."""
    for i in range(lo, hi):
        for k in range(indptr[i], indptr[i + 1]):
            j = indices[k]
            at = fill[j]
            t_idx[at] = i
            t_val[at] = data[k]
            fill[j] = at + 1


@njit(inline="always")
def _merge_row(i, indptr, indices, data, t_ptr, t_idx, t_val, n, total_all, out_idx, out_val, at):  # pragma: no cover
    """Row i of M + M^T off the diagonal, non-zero sums only (float64), each over ``total_all``, written from ``at``
    (``out_val`` empty: counted only, the first of the two passes, so that the output is allocated at its exact
    size); returns the position after the row and the sum of its entries (before the division)."""
    a, a_end, b, b_end = indptr[i], indptr[i + 1], t_ptr[i], t_ptr[i + 1]
    total = 0.0
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
                out_val[at] = value / total_all
            total += value
            at += 1
    return at, total


@njit(cache=True, nogil=True)
def merged_counts(indptr, indices, data, t_ptr, t_idx, t_val, n, counts, sums, lo, hi):  # pragma: no cover
    """For rows i in lo .. hi - 1 of M + M^T off the diagonal: ``counts[i + 1]``, its entries with a non-zero sum,
    and ``sums[i]``, their sum (float64)."""
    none_idx, none_val = np.empty(0, np.int32), np.empty(0, np.float64)
    for i in range(lo, hi):
        count, total = _merge_row(i, indptr, indices, data, t_ptr, t_idx, t_val, n, 1.0, none_idx, none_val, 0)
        counts[i + 1] = count
        sums[i] = total


@njit(cache=True, nogil=True)
def merge_rows(  # pragma: no cover - compiled
    indptr, indices, data, t_ptr, t_idx, t_val, n, total, out_ptr, out_idx, out_val, lo, hi
):
    """Rows lo .. hi - 1 of M + M^T off the diagonal, sorted indices, each float64 sum over ``total`` stored in
    ``out_val``'s dtype, at ``out_ptr``'s places."""
    for i in range(lo, hi):
        _merge_row(i, indptr, indices, data, t_ptr, t_idx, t_val, n, total, out_idx, out_val, out_ptr[i])


@njit(cache=True, nogil=True)
def permute_rows(indptr, indices, data, order, place, out_ptr, out_idx, out_val, lo, hi):  # pragma: no cover
    """Rows lo .. hi - 1 of the matrix in the new order: new row k is old row ``order[k]``, each old column j
    renamed ``place[j]`` (a row's entries keep their old sequence), at ``out_ptr``'s places."""
    for k in range(lo, hi):
        at = out_ptr[k]
        row = order[k]
        for e in range(indptr[row], indptr[row + 1]):
            out_idx[at] = place[indices[e]]
            out_val[at] = data[e]
            at += 1
