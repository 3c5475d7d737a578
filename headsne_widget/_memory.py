"""Large arrays written once, from memory the kernel hands over without stalling.

numpy advises the kernel to back every array of 4 MiB or more with huge pages (``madvise(MADV_HUGEPAGE)``).
Where transparent huge pages are on with ``defrag=madvise`` (the common Linux default), a page fault in such an
array waits while the kernel compacts memory for a 2 MiB page, and a machine whose memory is filled with page
cache is short of free huge pages. Measured on this project's machine: a 65536-token head change wrote about
1.2 GB of new P arrays and showed its first frame after 6.3 s, against 3.5-3.7 s with the advice off
(``NUMPY_MADVISE_HUGEPAGE=0``, same runs interleaved), and the iterations after ran as fast (6.7-7.2 frames a
second either way): the arrays are read in order, where small pages cost nothing. :func:`fresh_empty` gives
such an array without the advice: private anonymous memory (``mmap``), freed with its last view, as numpy's.
"""

from __future__ import annotations

import mmap
import sys
from typing import Any

import numpy as np

__all__ = ["ADVICE_MIN_BYTES", "fresh_empty"]

#: numpy's own threshold for the huge-page advice: smaller arrays come from ``np.empty`` as they are
ADVICE_MIN_BYTES = 4 * 2**20


def fresh_empty(count: int, dtype: Any) -> np.ndarray:
    """``np.empty(count, dtype)`` (1-D, writable, contents undefined) from private anonymous memory without the
    huge-page advice, where numpy would give that advice (Linux, ``ADVICE_MIN_BYTES`` and more); else np.empty.
    Memory that cannot be had is a MemoryError, as np.empty's."""
    dt = np.dtype(dtype)
    nbytes = int(count) * dt.itemsize
    if nbytes < ADVICE_MIN_BYTES or sys.platform != "linux":
        return np.empty(count, dt)
    try:
        memory = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except OSError as err:  # (ENOMEM): the MemoryError numpy's np.empty raises
        raise MemoryError(f"Unable to allocate {nbytes / 2**30:.2f} GiB for an array of {count} {dt}") from err
    return np.frombuffer(memory, dtype=dt, count=int(count))
