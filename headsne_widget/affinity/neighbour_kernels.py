"""The nearest-neighbour searches' compiled passes, each over a range of rows so that ranges run on the worker
threads of :mod:`.._parallel`.

- :func:`ordered_distances`: the float64 squared distances of each point to the neighbours a search found, and
  those neighbours in order, nearest first and the lower index first among equals. Gathered and subtracted by
  numpy (``X[found] - X[:, None]``), the 65536 x 60 neighbours of 64-dimensional points took 2.1 s of a 10 s
  hidden-mode click: 2 GB of differences written and read back; here each distance is summed as it is read, and
  each row ordered as it is made (numpy's row-wise ``argsort`` and ``take_along_axis`` after the distances were
  0.4-0.6 s of the 65536-point search, in one thread).
- :func:`smallest`: each row's s smallest entries of distances, a tile of columns at a time, the exact search's
  candidates (``torch.topk`` took 7 s of the 65536-point search; this pass skips 32 entries at a time that are
  none of them below the row's s-th smallest so far).
- :func:`nearest_by_differences`: the exact search's last resort for rows that products cannot decide.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["nearest_by_differences", "ordered_distances", "smallest", "smallest_both"]


@njit(cache=True, nogil=True)
def _squared_distance(X, j, p):  # pragma: no cover - compiled
    """|X[j] - X[p]|^2 summed over the features in order, from the differences (no cancellation)."""
    s = 0.0
    for c in range(X.shape[1]):
        t = X[j, c] - X[p, c]
        s += t * t
    return s


@njit(cache=True, nogil=True)
def ordered_distances(X, points, found, lo, hi, out_found, out):  # pragma: no cover - compiled
    """For rows lo .. hi - 1: ``found[i]``'s points (any order; -1 for none) ordered by their squared distances
    to X[points[i]], nearest first and the lower index first among equals, into ``out_found[i]``, and those
    distances (summed over the features in order; infinity for none) into ``out[i]``."""
    for i in range(lo, hi):
        p = points[i]
        columns = np.sort(found[i])
        distances = np.empty(columns.shape[0])
        for a in range(columns.shape[0]):
            distances[a] = np.inf if columns[a] < 0 else _squared_distance(X, columns[a], p)
        order = np.argsort(distances, kind="mergesort")  # stable: the lower index first among equals
        for a in range(columns.shape[0]):
            out_found[i, a], out[i, a] = columns[order[a]], distances[order[a]]


@njit(cache=True, nogil=True)
def _sift_down(values, at, s):  # pragma: no cover - compiled
    """Restore the max-heap ``values[:s]`` (with ``at`` alongside) after its root was replaced."""
    i = 0
    v, a = values[0], at[0]
    while True:
        c = 2 * i + 1
        if c >= s:
            break
        if c + 1 < s and values[c + 1] > values[c]:
            c += 1
        if values[c] <= v:
            break
        values[i], at[i] = values[c], at[c]
        i = c
    values[i], at[i] = v, a


@njit(cache=True, nogil=True)
def _into_heap(row, width, first, own, found, values):  # pragma: no cover - compiled
    """Take ``row[:width]`` (the columns ``first ..``) into the max-heap ``values`` (``found`` alongside: the
    columns) of the s = len(found) smallest so far, column ``own`` left out (set to infinity); 32 entries at a
    time are passed over when none is below the heap's root."""
    s = found.shape[0]
    if first <= own < first + width:
        row[own - first] = np.inf
    root = values[0]
    for lo in range(0, width, 32):
        hi = min(lo + 32, width)
        below = False  # an OR of comparisons, which LLVM vectorises (a running float minimum it cannot): 8 % of
        for j in range(lo, hi):  # the search of 65536 points of 64 dimensions (4.63 against 5.06 s)
            below |= row[j] < root
        if below:
            for j in range(lo, hi):
                if row[j] < root:
                    values[0], found[0] = row[j], first + j
                    _sift_down(values, found, s)
                    root = values[0]


@njit(cache=True, nogil=True)
def smallest(D, rows, width, first, own, found, values):  # pragma: no cover - compiled
    """For each row r < ``rows`` of the tile ``D[:rows, :width]`` (the columns ``first ..``): its entries taken
    into row r's max-heap, ``values[r]`` (``found[r]``: their columns), of the s = ``found.shape[1]`` smallest
    so far, column ``own[r]`` left out. Heaps start as infinity and -1; after the last tile, ``found[r]`` holds
    the row's s smallest (any order) and ``values[r, 0]`` the largest of them. D's entries are numbers (no NaN);
    one that is infinity is never taken: a row with fewer than s others below it keeps -1 columns."""
    for r in range(rows):
        _into_heap(D[r], width, first, own[r], found[r], values[r])


@njit(cache=True, nogil=True)
def smallest_both(D, rows, width, first_row, first_column, found_rows, values_rows, found_columns, values_columns):
    """:func:`smallest` both ways for a tile ``D[:rows, :width]`` of two disjoint blocks of points (rows ``first_row
    ..``, columns ``first_column ..``; D's entries are symmetric in the points): row r's entries into the max-heap
    ``values_rows[r]`` (``found_rows[r]``: their columns), column j's into ``values_columns[j]``
    (``found_columns[j]``: their rows). The exact search's half of the products: the tile of the two blocks the
    other way round is never computed. 32 rows at a time; a column is read for its heap only where one of its 32
    entries is below the heap's root (marked row by row against the roots' contiguous copy: a running minimum
    of the column, read and written for each entry, took 3x as long)."""
    s = found_columns.shape[1]
    roots = np.empty(width, D.dtype)
    below = np.empty(width, np.uint8)
    for j in range(width):
        roots[j] = values_columns[j, 0]
    for lo in range(0, rows, 32):
        hi = min(lo + 32, rows)
        for r in range(lo, hi):
            _into_heap(D[r], width, first_column, -1, found_rows[r], values_rows[r])
        below[:] = 0
        for i in range(lo, hi):
            for j in range(width):
                below[j] |= D[i, j] < roots[j]
        for j in range(width):
            if below[j]:
                for i in range(lo, hi):
                    if D[i, j] < values_columns[j, 0]:
                        values_columns[j, 0], found_columns[j, 0] = D[i, j], first_row + i
                        _sift_down(values_columns[j], found_columns[j], s)
                roots[j] = values_columns[j, 0]


@njit(cache=True, nogil=True)
def nearest_by_differences(X, points, lo, hi, found):  # pragma: no cover - compiled
    """``found[i]`` = the ``found.shape[1]`` points nearest to X[points[i]] (itself left out), any order, for rows
    lo .. hi - 1: every squared distance summed from the differences of X's rows (no cancellation), then
    :func:`_into_heap`. O(n d) a row: the exact search's last resort."""
    n = X.shape[0]
    row = np.empty(n)
    values = np.empty(found.shape[1])
    for i in range(lo, hi):
        p = points[i]
        for j in range(n):
            row[j] = _squared_distance(X, j, p)
        values[:] = np.inf
        found[i] = -1
        _into_heap(row, n, 0, p, found[i], values)
