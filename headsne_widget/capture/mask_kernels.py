"""The compiled masking of a chunk's scores outside each row's run of keys (:func:`.masks.mask_spans`).

Imported on first use (numba is not needed to start). torch's comparison of every column with every row's first
and last key, then ``masked_fill_``, took three passes and a boolean of the chunk's size: at 65536 tokens of a
1024-token window, 0.3 s of a head change's 1.5 s of rows on one core. Here each row's blocked columns (before
its first key, after its last) are written directly: the same entries get the same value.
"""

from __future__ import annotations

from numba import njit

__all__ = ["fill_outside"]


@njit(cache=True, nogil=True)
def fill_outside(logits, first, last, value):  # pragma: no cover - compiled
    """Set ``logits`` (h, r, k; float32 or float64, C-contiguous) to ``value`` outside columns ``first[i]``..
    ``last[i]`` of row i (int64 (r,), relative to the chunk's first key; either may lie outside 0..k-1)."""
    h, r, k = logits.shape
    for head in range(h):
        for i in range(r):
            row = logits[head, i]
            for j in range(0, min(max(first[i], 0), k)):
                row[j] = value
            for j in range(max(last[i] + 1, 0), k):
                row[j] = value
