"""Running work on every core: numba's lock, and a pool of threads for work split into equal pieces.

numba's default threading layer without TBB or OpenMP (workqueue) aborts the process when two threads
launch parallel regions at once; the widget runs t-SNE, the P of a click and the atlas in different
threads, so every parallel launch holds ``KERNEL_LOCK``.

Work that must not wait for a busy core (a click's head and P, while the browser shares the machine) goes
to :func:`workers` instead: a piece at a time to whichever thread is free. numba's parallel loops and
torch's operations split the work in fixed shares between threads and meet at a barrier, so a core taken
by another process delays the whole pass (at 8192 tokens on two cores with one core kept busy, a head's
recompute took 0.34-0.54 s on torch's two threads and 0.16-0.19 s in pieces on two of these threads).
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

__all__ = ["KERNEL_LOCK", "workers"]

KERNEL_LOCK = threading.Lock()
_POOL: list[ThreadPoolExecutor | None] = []
_POOL_LOCK = threading.Lock()


def _one_torch_thread() -> None:
    """A worker runs torch on one thread (its own setting; see capture.LayerAttention.heads for the default
    torch keeps for threads that start later)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def workers() -> ThreadPoolExecutor | None:
    """The shared pool, one thread per core this process may use; None on a single core."""
    with _POOL_LOCK:
        if not _POOL:
            cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
            pool = ThreadPoolExecutor(cores, "headsne-worker", initializer=_one_torch_thread) if cores > 1 else None
            _POOL.append(pool)
        return _POOL[0]
