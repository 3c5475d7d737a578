"""Compiled selection of each row's largest entries reaching a share of its total (:func:`.sparse.top_mass`).

One pass a row bins its positive float32 entries by their top bits (exponent and 4 mantissa bits: bins a sixteenth
of an octave wide; a positive float's bits grow with it), counting and summing each bin in float64. Walking the bins
from the largest finds the cut bin, where the sum reaches the row's target or the count ``limit``: every entry above
it is kept, and only the cut bin's entries are ranked (a stable radix sort of their bits, the lower column first
among equal ones) and added one by one. The rule sums the kept entries in rank order; these sums are the same to the
bit whenever they are exact, which :func:`_exact_cut` proves from the span of exponents and the count (a softmax
row's kept entries almost always qualify). Any other row, and a float64 row, takes the general path: every entry
that may be kept ranked (:func:`_candidates`, a radix or merge sort) and summed in rank order. The kept columns are
written in increasing order (a CSR row as scipy keeps it, so the matrix needs no sort afterwards). It replaced
``torch.topk`` / ``torch.sort`` of each chunk (issue 31: at 65536 tokens of a 1024-token window the rows were most
of a head change's wait); it releases the GIL, so the capture's worker threads rank their chunks at once.

Its float32 form is compiled by the background warm-up (``embedding.background``): at a fresh install it took 16 s
to compile, which the first long text's first frame waited for; with loops instead of slice assignments (whose
shape checks compile seconds of error formatting) it takes 10 s.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["mass_rows"]

#: a positive float32's bits shifted by this many: its exponent and 4 leading mantissa bits, bins a sixteenth of
#: an octave wide, :data:`_BINS` of them (:func:`_candidates`); a bin shifted by :data:`_OCTAVE` is the exponent
_SHIFT = 19
_BINS = 1 << (31 - _SHIFT)
_OCTAVE = 23 - _SHIFT
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
        for q in range(m):  # loops, not slices: a slice's shape check compiles seconds of error formatting
            keys[q], columns[q] = spare_keys[q], spare_columns[q]


@njit(inline="always")
def _candidates(
    row: np.ndarray, need: float, limit: int, ranked: np.ndarray, keys: np.ndarray, counts: np.ndarray, sums: np.ndarray
) -> int:  # pragma: no cover - compiled
    """The columns of the float32 ``row``'s positive entries that may be kept, in increasing order, into ``ranked``
    (their radix keys into ``keys``); returns how many. The entries are binned by their top bits (:data:`_SHIFT`),
    each bin's count and float64 sum taken in one pass; walking the bins from the largest, the bin where the
    sum reaches ``need`` or the count ``limit`` is the last one any kept entry can be in, so the bins below it
    are left out. ``counts`` and ``sums`` (:data:`_BINS` each) are zero on entry and on return."""
    top, bottom = _binned(row, counts, sums)
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
    order = np.argsort(negated[:m], kind="mergesort")
    for q in range(m):
        spare[q] = ranked[order[q]]
    for q in range(m):
        ranked[q] = spare[q]
    return m


@njit(inline="always")
def _binned(row: np.ndarray, counts: np.ndarray, sums: np.ndarray) -> tuple[int, int]:  # pragma: no cover - compiled
    """Count and float64-sum the float32 ``row``'s positive entries into their bins (:data:`_SHIFT`), in column
    order; returns the top and bottom bins used (-1, _BINS for a row with none)."""
    top, bottom = -1, _BINS
    for j in range(row.shape[0]):
        if row[j] > 0:
            b = np.int64(np.float32(row[j]).view(np.uint32) >> _SHIFT)
            counts[b] += 1
            sums[b] += np.float64(row[j])
            top, bottom = max(top, b), min(bottom, b)
    return top, bottom


@njit(inline="always")
def _exact_cut(
    target: float, limit: int, counts: np.ndarray, sums: np.ndarray, top: int, bottom: int
) -> tuple[int, float, int]:  # pragma: no cover - compiled
    """``(cut, total, count)``: the bin where the sum from the largest entries reaches ``target`` or the count
    ``limit`` (``bottom`` if none does), and the sum and count of the bins above it; cut -1 where those sums may
    be rounded. They are exact (and so is every sum of the entries of bins ``cut``..``top``, whatever their
    order) when those entries' float32 values, as integers in units of the cut bin's lowest normal float32, sum
    below 2**53: their exponents span at most ``29 - bit_length(count)`` octaves (a softmax row's kept entries
    almost always do)."""
    total, count, cut = 0.0, 0, bottom
    for b in range(top, bottom, -1):
        if total + sums[b] >= target or count + counts[b] >= limit:
            cut = b
            break
        total += sums[b]
        count += counts[b]
    within = count + counts[cut]
    span = (top >> _OCTAVE) - (cut >> _OCTAVE)  # octaves between the float32 exponents
    bits = 0
    while within > 0:
        bits += 1
        within >>= 1
    if cut >> _OCTAVE == 0 or span + 24 + bits > 53:
        return -1, 0.0, 0
    return cut, total, count


@njit(inline="always")
def _exact_row(
    row: np.ndarray,
    target: float,
    limit: int,
    cut: int,
    total: float,
    count: int,
    ranked: np.ndarray,
    keys: np.ndarray,
    spare_keys: np.ndarray,
    spare: np.ndarray,
    flags: np.ndarray,
) -> tuple[float, int]:  # pragma: no cover - compiled
    """Rank the entries of bin ``cut`` (the bins above it are all kept, with sum ``total`` and ``count``) and flag
    those kept, from the largest until the sum reaches ``target`` or ``limit`` entries are kept; returns the
    sum and count kept. Sums are exact here (:func:`_exact_cut`), so they are the rule's ranked sums to the bit."""
    m = 0
    for j in range(row.shape[0]):
        bits = np.float32(row[j]).view(np.uint32)
        if row[j] > 0 and np.int64(bits >> _SHIFT) == cut:
            ranked[m] = j
            keys[m] = np.uint32(0x7FFFFFFF) - bits
            m += 1
    _radix_rank(keys, ranked, spare_keys, spare, m)
    return _take_ranked(row, ranked, m, target, limit, total, count, flags)


@njit(inline="always")
def _take_ranked(
    row: np.ndarray,
    ranked: np.ndarray,
    m: int,
    target: float,
    limit: int,
    total: float,
    count: int,
    flags: np.ndarray,
) -> tuple[float, int]:  # pragma: no cover - compiled
    """The rule's sum: the ``m`` entries ``ranked`` (largest first) added in float64 to ``total`` one by one, and
    flagged, until the sum reaches ``target`` or ``count`` reaches ``limit``; returns the sum and the count."""
    q = 0
    while q < m and count < limit:
        total += np.float64(row[ranked[q]])
        count += 1
        flags[ranked[q]] = True
        q += 1
        if total >= target:
            break
    return total, count


@njit(inline="always")
def _binned_cut(
    row: np.ndarray, target: float, limit: int, counts: np.ndarray, sums: np.ndarray
) -> tuple[int, float, int]:  # pragma: no cover - compiled
    """:func:`_exact_cut` of the float32 ``row`` (-1: no positive entry, or sums that may round); ``counts`` and
    ``sums`` are zero on entry and on return."""
    top, bottom = _binned(row, counts, sums)
    if top < 0:
        return -1, 0.0, 0
    cut, total, count = _exact_cut(target, limit, counts, sums, top, bottom)
    for b in range(bottom, top + 1):
        counts[b], sums[b] = 0, 0.0
    return cut, total, count


@njit(inline="always")
def _write_exact(
    row: np.ndarray, cut: int, flags: np.ndarray, columns: np.ndarray, at: int
) -> int:  # pragma: no cover - compiled
    """Write the kept columns in increasing order from ``columns[at]`` (every entry above the cut bin, the cut
    bin's flagged ones, whose flags are cleared); returns the end. Without a branch on the entry (a random row
    keeps about half its entries, so a branch would be mispredicted as often): each column is written and the end
    moved past it only when it is kept (``columns`` holds one spare entry past the last kept one)."""
    for j in range(row.shape[0]):
        bits = np.float32(row[j]).view(np.uint32)
        columns[at] = j
        at += (row[j] > 0) & ((np.int64(bits >> _SHIFT) > cut) | flags[j])
        flags[j] = False
    return at


@njit(inline="always")
def _general_row(
    row: np.ndarray,
    target: float,
    limit: int,
    scratch: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    bins: tuple[np.ndarray, np.ndarray],
    columns: np.ndarray,
    at: int,
) -> tuple[float, int, int]:  # pragma: no cover - compiled
    """The row's candidates ranked (:func:`_ranked_row`) and summed in rank order from the largest until the sum
    reaches ``target`` or ``limit`` entries are kept, their columns written in increasing order from
    ``columns[at]``; returns the sum, the count and the end."""
    ranked, keys, spare_keys, spare, negated, flags = scratch
    m = _ranked_row(row, target * (1.0 + _MARGIN), limit, ranked, keys, spare_keys, spare, negated, bins)
    total, c = _take_ranked(row, ranked, m, target, limit, 0.0, 0, flags)
    for j in range(row.shape[0]):
        if flags[j]:
            columns[at] = j
            at += 1
            flags[j] = False
    return total, c, at


@njit(cache=True, nogil=True)
def mass_rows(
    w: np.ndarray, target: np.ndarray, totals: np.ndarray, limit: int, columns: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """``(counts (r,) int64, columns int64, values (w's dtype), kept (r,) float64)`` of the rows of ``w`` (r, k)
    float32 or float64, non-negative: each row's kept entries by increasing column, rows one after the other;
    ``kept`` the share of the row's ``totals`` kept (1 where nothing is kept or the total is 0). ``target``:
    float64 (r,), the sum a row's entries must reach (inf: every positive entry, up to ``limit``). ``columns``:
    int64 scratch of at least ``r x min(k, limit) + 1`` entries (the caller's thread's, reused from chunk to chunk).
    A float32 row whose kept sums are exact (:func:`_exact_cut`) ranks only its cut bin's entries; any other
    row every entry it may keep (:func:`_general_row`)."""
    r, width = w.shape
    counts = np.zeros(r, np.int64)
    kept = np.ones(r, np.float64)
    ranked, keys = np.empty(width, np.int64), np.empty(width, np.uint32)
    scratch = (ranked, keys, np.empty(width, np.uint32), np.empty(width, np.int64), np.empty(width, w.dtype))
    flags = np.zeros(width, np.bool_)
    bins = (np.zeros(_BINS, np.int64), np.zeros(_BINS, np.float64))
    at = 0
    for i in range(r):
        cut, total, c = -1, 0.0, 0
        if w.itemsize == 4:
            cut, total, c = _binned_cut(w[i], target[i], limit, bins[0], bins[1])
        if cut >= 0:
            total, c = _exact_row(w[i], target[i], limit, cut, total, c, ranked, keys, scratch[2], scratch[3], flags)
            at = _write_exact(w[i], cut, flags, columns, at)
        else:
            total, c, at = _general_row(w[i], target[i], limit, (*scratch, flags), bins, columns, at)
        counts[i] = c
        if c > 0 and totals[i] > 0:
            kept[i] = total / totals[i]
    values = np.empty(at, w.dtype)
    at = 0
    for i in range(r):
        for q in range(counts[i]):
            values[at + q] = w[i, columns[at + q]]
        at += counts[i]
    return counts, columns[:at].copy(), values, kept
