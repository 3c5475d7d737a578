"""Compiled selection of each row's largest entries reaching a share of its total (:func:`.sparse.top_mass`).

One pass a row: the row's positive entries ranked by a stable radix sort of their float32 bits (the largest first,
the lower column first among equal ones; a positive float's bits grow with it), summed in float64 from the
largest until the sum reaches the row's target or ``limit`` entries are kept, then the kept columns written in
increasing order (a CSR row as scipy keeps it, so the matrix needs no sort afterwards). Only the entries that may
be kept are ranked: a first pass bins them by their top bits, and the bins below the one where the sum reaches
the target are left out (:func:`_candidates`; a row of a random 1024-token window keeps about a third of its
entries, a trained head's far fewer). It replaced
``torch.topk`` / ``torch.sort`` of each chunk and numpy's ranking of the candidates (issue 31: at 65536 tokens of
a 1024-token window the rows were most of a head change's wait); it releases the GIL, so the capture's worker
threads rank their chunks at once. float64 rows (a dense head given as float64) take a stable merge sort.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["mass_rows"]

#: a positive float32's bits shifted by this many: its exponent and 3 leading mantissa bits, bins an eighth of an
#: octave wide, :data:`_BINS` of them (:func:`_candidates`)
_SHIFT = 19
_BINS = 1 << (31 - _SHIFT)
#: the bins' sums are taken in column order, the kept entries' in rank order (float64 both, at most a few
#: thousand float32 terms: they differ by about 1e-13 of the sum at most); a bin is cut where its sum reaches the
#: target raised by this much, so that the ranked sum surely reaches the target within the bins kept
_MARGIN = 1e-9


@njit(inline="always")
def _radix_rank(
    keys: np.ndarray, columns: np.ndarray, spare_keys: np.ndarray, spare_columns: np.ndarray, m: int
) -> None:  # pragma: no cover - compiled
    """``columns[:m]`` ordered by increasing ``keys[:m]`` (uint32), stably: four passes of 8 bits, a pass skipped
    where every key has the same byte; the result is in ``columns`` (the spares are scratch)."""
    count = np.empty(257, np.int64)
    for shift in range(0, 32, 8):
        count[:] = 0
        for q in range(m):
            count[((keys[q] >> shift) & 0xFF) + 1] += 1
        if count.max() == m:  # one bucket: the order stands
            continue
        for b in range(256):
            count[b + 1] += count[b]
        for q in range(m):
            b = (keys[q] >> shift) & 0xFF
            spare_keys[count[b]] = keys[q]
            spare_columns[count[b]] = columns[q]
            count[b] += 1
        keys[:m], columns[:m] = spare_keys[:m], spare_columns[:m]


@njit(inline="always")
def _candidates(
    row: np.ndarray, need: float, limit: int, ranked: np.ndarray, keys: np.ndarray, counts: np.ndarray, sums: np.ndarray
) -> int:  # pragma: no cover - compiled
    """The columns of the float32 ``row``'s positive entries that may be kept, in increasing order, into ``ranked``
    (their radix keys into ``keys``); returns how many. The entries are binned by their top bits (:data:`_SHIFT`),
    each bin's count and float64 sum taken in one pass; walking the bins from the largest, the bin where the
    sum reaches ``need`` or the count ``limit`` is the last one any kept entry can be in, so the bins below it
    are left out. ``counts`` and ``sums`` (:data:`_BINS` each) are zero on entry and on return."""
    top, bottom = -1, _BINS
    for j in range(row.shape[0]):
        if row[j] > 0:
            b = np.float32(row[j]).view(np.uint32) >> _SHIFT
            counts[b] += 1
            sums[b] += np.float64(row[j])
            top, bottom = max(top, b), min(bottom, b)
    cut, total, count = bottom, 0.0, 0
    for b in range(top, bottom - 1, -1):
        total += sums[b]
        count += counts[b]
        if total >= need or count >= limit:
            cut = b
            break
    for b in range(bottom, top + 1):
        counts[b], sums[b] = 0, 0.0
    m = 0
    for j in range(row.shape[0]):
        if row[j] > 0:
            bits = np.float32(row[j]).view(np.uint32)
            if bits >> _SHIFT >= cut:
                ranked[m] = j
                keys[m] = np.uint32(0x7FFFFFFF) - bits
                m += 1
    return m


@njit(inline="always")
def _ranked_row(
    row: np.ndarray,
    need: float,
    limit: int,
    ranked: np.ndarray,
    keys: np.ndarray,
    spare_keys: np.ndarray,
    spare: np.ndarray,
    negated: np.ndarray,
    bins: tuple[np.ndarray, np.ndarray],
) -> int:  # pragma: no cover - compiled
    """The columns of ``row``'s positive entries that may be kept into ``ranked``, the largest first and the lower
    column first among equal ones; returns how many. float32: those of :func:`_candidates`, ranked by a radix
    sort of their bits; float64: every positive entry, by a stable merge sort."""
    if row.itemsize == 4:
        m = _candidates(row, need, limit, ranked, keys, bins[0], bins[1])
        _radix_rank(keys, ranked, spare_keys, spare, m)
        return m
    m = 0
    for j in range(row.shape[0]):
        if row[j] > 0:
            ranked[m] = j
            negated[m] = -row[j]
            m += 1
    ranked[:m] = ranked[:m][np.argsort(negated[:m], kind="mergesort")]
    return m


@njit(cache=True, nogil=True)
def mass_rows(
    w: np.ndarray, target: np.ndarray, totals: np.ndarray, limit: int, columns: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``(counts (r,) int64, columns int64, values (w's dtype), kept (r,) float64)`` of the rows of ``w`` (r, k)
    float32 or float64, non-negative: each row's kept entries by increasing column, rows one after the other;
    ``kept`` the share of the row's ``totals`` kept (1 where nothing is kept or the total is 0). ``target``:
    float64 (r,), the sum a row's entries must reach (inf: every positive entry, up to ``limit``). ``columns``:
    int64 scratch of at least ``r x min(k, limit)`` entries (the caller's thread's, reused from chunk to chunk)."""
    r, width = w.shape
    counts = np.zeros(r, np.int64)
    kept = np.ones(r, np.float64)
    keys, spare_keys = np.empty(width, np.uint32), np.empty(width, np.uint32)
    ranked, spare = np.empty(width, np.int64), np.empty(width, np.int64)
    negated = np.empty(width, w.dtype)
    flags = np.zeros(width, np.bool_)
    bins = (np.zeros(_BINS, np.int64), np.zeros(_BINS, np.float64))
    at = 0
    for i in range(r):
        need = target[i] * (1.0 + _MARGIN)
        m = _ranked_row(w[i], need, limit, ranked, keys, spare_keys, spare, negated, bins)
        total, c = 0.0, 0
        while c < m and c < limit:  # from the largest until the sum reaches the target
            total += np.float64(w[i, ranked[c]])
            c += 1
            if total >= target[i]:
                break
        counts[i] = c
        if c > 0 and totals[i] > 0:
            kept[i] = total / totals[i]
        flags[ranked[:c]] = True
        for j in range(width):  # the kept columns in increasing order
            if flags[j]:
                columns[at] = j
                at += 1
                flags[j] = False
    values = np.empty(at, w.dtype)
    at = 0
    for i in range(r):
        for q in range(counts[i]):
            values[at + q] = w[i, columns[at + q]]
        at += counts[i]
    return counts, columns[:at].copy(), values, kept
