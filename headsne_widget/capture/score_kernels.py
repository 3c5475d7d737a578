"""The compiled pass of :mod:`.scores`: a block of one head's query rows folded into its sums and profiles.

Imported on first use (numba is not needed to start). torch's operations took a pass over the chunk per
quantity (the non-zero count, the entropy's logarithms, the column sums, the grid above uniform, the attention to
later keys): about 18 passes of a 32-head x 128-row x 2048-key chunk, 35 times the raw grid's one maximum. Here
each row is read once for the count, entropy, column sums and later keys, and once more (from cache) for the grid.
The entropy's logarithms come in, taken by numpy over the block (its float32 ``log`` runs in SIMD lanes; a
compiled scalar ``log`` a weight was half the pass on one core: 15.3 against 7.6 ns a weight, a 32 x 128 x 2048
chunk; in a 2048-token capture of 16 x 32 heads the fold took 12.2-13.3 s against 16.3-17.2). A call folds a piece
of several heads (:func:`fold_heads`): the capture's 2 MiB chunks hold a few rows of each head, and one call a head
cost more in dispatch than in folding (the fold 9.2-9.8 s against 11.1-14.6 there).
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["fold_heads", "fold_rows"]

# rows of the sums, as scores._SUMS names them
SINK, PREVIOUS, NEXT, SELF, LOCAL, ENTROPY, ENTROPY_ROWS, FUTURE = range(8)


@njit(cache=True, nogil=True, fastmath={"reassoc", "contract", "nsz"})
def fold_rows(w, logs, h, i0, k0, window, sums, received, uniform):  # pragma: no cover - compiled
    """Fold ``w`` (float32 (r, k): head ``h``'s query rows i0.., keys k0..k0+k) into ``sums`` (S, H) float64,
    ``received`` (H, n) float64 (column sums) and ``uniform`` (H, n) float32 (the grid above uniform); ``logs``
    (r, k) float32 the weights' logarithms, each weight floored at the least positive float32 (a masked key's
    0 * log(floor) is 0)."""
    r, k = w.shape
    sink = previous = following = itself = local = entropy_sum = rows_seen = future = 0.0
    for ii in range(r):
        i = i0 + ii
        row = w[ii]
        log_row = logs[ii]
        count = 0
        entropy = 0.0  # float64: a row's 2048 terms summed in float32 lost 1e-5 of the normalised entropy
        for j in range(k):
            x = row[j]
            count += x != 0
            entropy -= np.float64(x * log_row[j])
            received[h, k0 + j] += x
        later = 0.0
        for j in range(max(i - k0 + 1, 0), k):
            later += row[j]
        future += later
        for offset in range(-window, window + 1):
            j = i + offset - k0
            if 0 <= j < k:
                local += row[j]
                if offset == 0:
                    itself += row[j]
                elif offset == -1:
                    previous += row[j]
                elif offset == 1:
                    following += row[j]
        if k0 == 0:
            sink += row[0]
        if count >= 2:
            entropy_sum += entropy / np.log(np.float64(count))
            rows_seen += 1.0
            scale = np.float32(count / (count - 1.0))
            shift = np.float32(1.0 / (count - 1.0))
            for j in range(k):
                v = row[j] * scale - shift
                if v > uniform[h, k0 + j]:
                    uniform[h, k0 + j] = v
    sums[SINK, h] += sink
    sums[PREVIOUS, h] += previous
    sums[NEXT, h] += following
    sums[SELF, h] += itself
    sums[LOCAL, h] += local
    sums[ENTROPY, h] += entropy_sum
    sums[ENTROPY_ROWS, h] += rows_seen
    sums[FUTURE, h] += future


@njit(cache=True, nogil=True)
def fold_heads(w, logs, h0, i0, k0, window, sums, received, uniform):  # pragma: no cover - compiled
    """:func:`fold_rows` for each head of ``w`` (float32 (b, r, k): heads h0.., query rows i0.., keys k0..) and its
    logarithms ``logs`` (b, r, k): one call for a piece of a chunk."""
    for b in range(w.shape[0]):
        fold_rows(w[b], logs[b], h0 + b, i0, k0, window, sums, received, uniform)
