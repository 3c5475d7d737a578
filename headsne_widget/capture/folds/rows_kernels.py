"""The compiled store of :mod:`.rows`: a chunk's selected entries, each row's ranked, written to the kept rows.

A row's entries come from :func:`..sparse.top_mass` by increasing column; they are stored by the rule's rank
(value down, the lower column first among equal ones: a stable sort of the values, descending), so that any
smaller selection is a prefix of them. numpy's lexsort and fancy assignment of the same cost 4 ms a chunk of 64
rows (of 9 ms in all with the selection); this, well under 1.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["store_ranked"]


@njit(cache=True, nogil=True)
def store_ranked(
    counts: np.ndarray,
    columns: np.ndarray,
    values: np.ndarray,
    rows: int,
    row0: int,
    key0: int,
    out_columns: np.ndarray,
    out_values: np.ndarray,
    out_counts: np.ndarray,
) -> None:  # pragma: no cover - compiled
    """Row ``g`` of the chunk's ``(h x rows)`` (head ``g // rows``, query ``row0 + g % rows``) keeps its
    ``counts[g]`` entries (``columns`` relative to ``key0``, float32 ``values``, rows one after the other) ranked
    into ``out_columns`` / ``out_values`` ``(H, n, K)``, its count into ``out_counts`` ``(H, n)``."""
    at = 0
    for g in range(counts.size):
        c = counts[g]
        head, query = g // rows, row0 + g % rows
        order = np.argsort(-values[at : at + c], kind="mergesort")  # stable: equal values keep column order
        for q in range(c):
            out_columns[head, query, q] = columns[at + order[q]] + key0
            out_values[head, query, q] = values[at + order[q]]
        out_counts[head, query] = c
        at += c


@njit(cache=True, nogil=True)
def gather_sorted(
    columns: np.ndarray, values: np.ndarray, indptr: np.ndarray, indices: np.ndarray, data: np.ndarray
) -> None:  # pragma: no cover - compiled
    """Row ``i``'s first ``indptr[i + 1] - indptr[i]`` ranked entries of ``columns`` / ``values`` ``(n, K)``
    written to ``indices`` / ``data`` from ``indptr[i]`` by increasing column (a CSR row as scipy keeps it)."""
    for i in range(indptr.size - 1):
        at, c = indptr[i], indptr[i + 1] - indptr[i]
        order = np.argsort(columns[i, :c])
        for q in range(c):
            indices[at + q] = columns[i, order[q]]
            data[at + q] = values[i, order[q]]
