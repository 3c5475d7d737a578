"""A pool of threads for work split into pieces: a piece at a time to whichever thread is free.

Work that must not wait for a busy core (a click's head and P, and each t-SNE iteration, while the browser
shares the machine) goes here. numba's parallel loops and torch's operations split the work in fixed shares
between threads and meet at a barrier, so a core taken by another process delays the whole pass (at 8192
tokens on two cores with one core kept busy, a head's recompute took 0.34-0.54 s on torch's two threads
and 0.16-0.19 s in pieces on two of these threads). The package therefore launches no numba parallel
loop: numba's workqueue layer also aborts the process when two threads launch one at once.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

__all__ = ["each", "in_shares", "in_worker", "workers"]

_POOL: list[ThreadPoolExecutor | None] = []
_POOL_LOCK = threading.Lock()
_THREAD = threading.local()  # ``worker`` is True on the pool's own threads, set by its initializer


def _mark_worker() -> None:
    _THREAD.worker = True


def in_worker() -> bool:
    """Whether this thread is one of the pool's workers (marked when the pool started it, whatever its name)."""
    return getattr(_THREAD, "worker", False)


def workers() -> ThreadPoolExecutor | None:
    """The shared pool, one thread per core this process may use; None on a single core."""
    with _POOL_LOCK:
        if not _POOL:
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
            pool = ThreadPoolExecutor(cores, "headsne-worker", initializer=_mark_worker) if cores > 1 else None
            _POOL.append(pool)
        return _POOL[0]


def _pool_here() -> ThreadPoolExecutor | None:
    """The pool, unless there is none (one core) or this thread is one of its workers, which must never wait
    for its own pool (with every worker inside such a wait, none would be left to do the work)."""
    pool = workers()
    return None if pool is None or in_worker() else pool


def each(count: int, work: Callable[[int], object]) -> None:
    """``work(k)`` for k in 0 .. count - 1, each to whichever worker thread is free; in order in this thread
    where :func:`_pool_here` gives no pool."""
    pool = _pool_here()
    if pool is None:
        for k in range(count):
            work(k)
    else:
        list(pool.map(work, range(count)))


def in_shares(n: int, part: Callable[[int, int], object], shares: int = 16, multiple: int = 1) -> None:
    """``part(lo, hi)`` over ``shares`` consecutive shares of [0, n), each starting at a multiple of
    ``multiple``, on the worker threads; ``part(0, n)`` in this thread where :func:`_pool_here` gives no pool."""
    if _pool_here() is None:
        part(0, n)
        return
    edges = [int(e) * multiple for e in np.linspace(0, n // multiple, shares + 1).astype(np.int64)]
    edges[-1] = n
    each(shares, lambda k: part(edges[k], edges[k + 1]))
