"""Large arrays reused instead of allocated anew.

A fresh n x n float32 array (256 MiB at 8192 tokens) is faulted in page by page on its first write: 30-65
ms each time, and 0.6-1 s when the kernel first compacts memory for huge pages (measured in a JupyterLab
kernel: ``np.zeros((8192, 8192), np.float32)`` filled took 945 ms the first time, then 35-65 ms). A head
click writes two: the head's attention and P. A :class:`SparePool` keeps arrays their maker no longer needs
and hands one back only once nothing else refers to it (a caller's reference, a view, a run thread), so
that no array in use is ever overwritten.
"""

from __future__ import annotations

import sys
import threading

import numpy as np
from numpy.typing import DTypeLike

__all__ = ["SPARE_BYTES", "SparePool"]

#: what a pool keeps at most: one float32 n x n up to 8192 tokens (beyond, nothing is kept)
SPARE_BYTES = 256 * 2**20


#: references to a kept array that nobody else holds, as sys.getrefcount sees it in ``empty``: the list's
#: and getrefcount's own argument
_IDLE_REFS = 2


class SparePool:
    """Arrays kept for reuse, at most ``max_bytes`` of them (the oldest dropped first)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = int(max_bytes)
        self._spares: list[np.ndarray] = []
        self._lock = threading.Lock()
        self.reused = 0  # arrays handed back out so far

    @property
    def nbytes(self) -> int:
        """Bytes kept (idle or not yet)."""
        with self._lock:
            return sum(a.nbytes for a in self._spares)

    def keep(self, array: np.ndarray | None) -> None:
        """Offer ``array`` (a base array, not a view) for reuse once nothing else refers to it."""
        if array is None or array.base is not None or array.nbytes > self.max_bytes:
            return
        with self._lock:
            if any(a is array for a in self._spares):
                return
            self._spares.append(array)
            while sum(a.nbytes for a in self._spares) > self.max_bytes:
                self._spares.pop(0)

    def empty(self, shape: tuple[int, ...], dtype: DTypeLike) -> np.ndarray:
        """An idle kept array of this shape and dtype (its old values left in it), else a new ``np.empty``."""
        dtype = np.dtype(dtype)
        with self._lock:
            for i in range(len(self._spares)):
                if (
                    self._spares[i].shape == shape and self._spares[i].dtype == dtype
                    and sys.getrefcount(self._spares[i]) <= _IDLE_REFS
                ):  # fmt: skip
                    self.reused += 1
                    return self._spares.pop(i)
        return np.empty(shape, dtype)

    def reserve(self, shape: tuple[int, ...], dtype: DTypeLike) -> None:
        """Keep a new array of this shape, its pages written once now (in a background thread at start), so
        that the first click does not pay the first touch."""
        if int(np.prod(shape)) * np.dtype(dtype).itemsize <= self.max_bytes:  # (no array made beyond the pool)
            array = np.empty(shape, dtype)
            array.fill(0)
            self.keep(array)

    def clear(self) -> None:
        with self._lock:
            self._spares.clear()
