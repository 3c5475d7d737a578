"""A pool of threads for work split into pieces: a piece at a time to whichever thread is free.

Work that must not wait for a busy core (a click's head and P, and each t-SNE iteration, while the browser
shares the machine) goes here. numba's parallel loops and torch's operations split the work in fixed shares
between threads and meet at a barrier, so a core taken by another process delays the whole pass (at 8192
tokens on two cores with one core kept busy, a head's recompute took 0.34-0.54 s on torch's two threads
and 0.16-0.19 s in pieces on two of these threads; at 2048 points, a t-SNE pass in a numba ``prange`` loop took
11.4 ms against 2.3 ms serial). The package therefore launches no numba parallel loop: numba's workqueue layer
also aborts the process when two threads launch one at once.

BLAS on one thread where the package's own threads do the splitting: :func:`one_blas_thread`. numpy's OpenBLAS
splits a product of some 0.3 M multiply-adds or more between its own threads, which then spin for about 0.1 s
waiting for the next call, and so take a core from the compiled passes that follow (at 512 tokens on two cores,
a third of a head-output click's time; see ``docs/benchmarks.md``).

torch's OpenMP threads (libgomp) spin for some milliseconds after each parallel region by default, waiting for
the next one, and so take the cores from the work this package's threads do between torch's operations: the
capture's folds (:mod:`.capture.folds`) run after each chunk's scores and softmax. The package's ``__init__``
therefore sets ``OMP_WAIT_POLICY=PASSIVE`` where the environment has no setting and torch is not yet imported
(libgomp reads it once, at torch's import; :func:`torch_threads_sleep`): the tiny causal Llama's capture at 16384
tokens on two cores took 10.9-11.8 s against 12.7-14.4 s, and with its kept rows, their selection then shared
between the threads, 16.2-17.2 s against 21.6-21.7 s (docs/long-texts.md). Where
torch came first and spins, work that a torch thread would contend for stays on the calling thread.

How many threads: :func:`threads`, one per core this process may use (``os.sched_getaffinity``; the environment
variable ``NUMBA_NUM_THREADS``, where set, stands for the core count, so that a small machine can be asked what a
large one would do), less the cores :func:`set_spare_cores` (or ``HEADSNE_SPARE_CORES``) keeps free for other
work, such as the browser beside a notebook's kernel.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

__all__ = [
    "cores", "each", "in_shares", "in_worker", "one_blas_thread", "set_spare_cores", "shares", "threads",
    "torch_threads_sleep", "workers",
]  # fmt: skip

#: environment variable: cores kept free of this package's threads (default 0)
SPARE_ENV = "HEADSNE_SPARE_CORES"

_POOL: list[tuple[ThreadPoolExecutor | None, int]] = []  # the pool and its thread count, made at first use
_POOL_LOCK = threading.Lock()
_THREAD = threading.local()  # ``worker`` is True on the pool's own threads, set by its initializer
_SPARE: list[int] = []  # set_spare_cores' count, else the environment's
_BLAS_LOCK = threading.Lock()
_BLAS: dict[str, Any] = {"users": 0, "limiter": None, "controller": None}  # one_blas_thread's shared limit


def torch_threads_sleep() -> bool:
    """Whether torch's OpenMP threads sleep between its parallel regions (``OMP_WAIT_POLICY=PASSIVE``, as the
    package's ``__init__`` sets it before torch's import) rather than spin (module doc)."""
    return os.environ.get("OMP_WAIT_POLICY", "").strip().upper() == "PASSIVE"


def _mark_worker() -> None:
    _THREAD.worker = True


def in_worker() -> bool:
    """Whether this thread is one of the pool's workers (marked when the pool started it, whatever its name)."""
    return getattr(_THREAD, "worker", False)


def cores() -> int:
    """The cores this process may use: ``NUMBA_NUM_THREADS`` where set, else ``os.sched_getaffinity``'s count."""
    told = os.environ.get("NUMBA_NUM_THREADS", "").strip()
    if told:
        return max(1, int(told))
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def spare_cores() -> int:
    """The cores kept free (:func:`set_spare_cores`, else ``HEADSNE_SPARE_CORES``, else 0)."""
    if _SPARE:
        return _SPARE[0]
    return max(0, int(os.environ.get(SPARE_ENV, "").strip() or 0))


def set_spare_cores(count: int | None) -> None:
    """Keep ``count`` of this process's cores free of the package's threads (None: back to ``HEADSNE_SPARE_CORES``);
    at least one thread remains. The pool is made again at its next use."""
    with _POOL_LOCK:
        _SPARE.clear()
        if count is not None:
            _SPARE.append(max(0, int(count)))
        if _POOL:
            pool = _POOL.pop()[0]
            if pool is not None:
                pool.shutdown(wait=False)


def threads() -> int:
    """The threads work is split between: :func:`cores` less :func:`spare_cores`, at least 1 (read when the pool is
    made: at its first use, and again after :func:`set_spare_cores`)."""
    return _pool()[1]


def _pool() -> tuple[ThreadPoolExecutor | None, int]:
    with _POOL_LOCK:
        if not _POOL:
            count = max(1, cores() - spare_cores())
            pool = ThreadPoolExecutor(count, "headsne-worker", initializer=_mark_worker) if count > 1 else None
            _POOL.append((pool, count))
        return _POOL[0]


def workers() -> ThreadPoolExecutor | None:
    """The shared pool, :func:`threads` threads; None where that is one."""
    return _pool()[0]


def _pool_here() -> ThreadPoolExecutor | None:
    """The pool, unless there is none (one thread) or this thread is one of its workers, which must never wait
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


def shares(count: int, work: Callable[[int], object]) -> None:
    """``work(k)`` for k in 0 .. count - 1, this thread taking part: it and up to :func:`threads` - 1 workers each
    take the next piece until none is left, and this returns when every piece is done (a worker still queued
    behind other work by then is not waited for). In order in this thread where :func:`_pool_here` gives no pool.

    One task per helping thread rather than one per piece, and no wait for a thread to wake up before the work
    starts: a dispatch costs some 20-40 us rather than :func:`each`'s 150-500 us (see
    ``docs/benchmarks.md``), and a thread another process holds back takes fewer pieces rather than delaying
    the others.
    """
    pool = _pool_here()
    helpers = min(count, threads()) - 1
    if pool is None or helpers < 1:
        for k in range(count):
            work(k)
        return
    lock = threading.Lock()
    done = threading.Event()
    errors: list[BaseException] = []
    state = [0, 0]  # next piece, pieces finished

    def drain() -> None:
        while True:
            with lock:
                k = state[0]
                if k >= count:
                    return
                state[0] = k + 1
            try:
                work(k)
            except BaseException as error:
                errors.append(error)
            with lock:
                state[1] += 1
                if state[1] == count:
                    done.set()

    tasks = [pool.submit(drain) for _ in range(helpers)]
    drain()
    done.wait()
    for task in tasks:
        task.cancel()  # still queued: nothing left for it
    if errors:
        raise errors[0]


def in_shares(n: int, part: Callable[[int, int], object], count: int = 16, multiple: int = 1) -> None:
    """``part(lo, hi)`` over ``count`` consecutive shares of [0, n), each starting at a multiple of
    ``multiple``, on this thread and the workers (:func:`shares`); ``part(0, n)`` in this thread where
    :func:`_pool_here` gives no pool."""
    if _pool_here() is None or count <= 1:
        part(0, n)
        return
    units = n // multiple
    edges = [units * k // count * multiple for k in range(count)] + [n]
    shares(count, lambda k: part(edges[k], edges[k + 1]))


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """The BLAS libraries loaded when first called (numpy's OpenBLAS, MKL, BLIS) on one thread while the block
    runs, whichever thread runs it (the count is the process's): for small products and decompositions, whose
    BLAS threads would spin on after them (module doc), and for products split into shares on the package's
    threads. Nested and overlapping blocks share one limit: the first sets it, the last restores the counts it
    found (a user's own numpy in another thread meanwhile gets one thread too)."""
    with _BLAS_LOCK:
        if _BLAS["users"] == 0:
            if _BLAS["controller"] is None:
                from threadpoolctl import ThreadpoolController

                _BLAS["controller"] = ThreadpoolController().select(user_api="blas")
            _BLAS["limiter"] = _as_owner(lambda: _BLAS["controller"].limit(limits=1))
        _BLAS["users"] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS["users"] -= 1
            if _BLAS["users"] == 0:
                _as_owner(_BLAS["limiter"].restore_original_limits)
                _BLAS["limiter"] = None


def _as_owner(change: Callable[[], Any]) -> Any:
    """``change()`` (a BLAS count set or restored) with no thread owning OpenBLAS's counts before or after it.
    threadpoolctl (3.8 on) lets only the first thread that set them set them again while it lives, and makes the
    others' calls do nothing: a count set from a job thread would be ignored after a user's
    ``threadpool_limits(2)`` in the main thread, and a restore from another job thread than the one that set it."""
    from threadpoolctl import OpenBLASController

    clear = getattr(OpenBLASController, "clear_controlling_thread", None)  # absent before threadpoolctl 3.8
    if clear is not None:
        clear(force=True)
    try:
        return change()
    finally:
        if clear is not None:
            clear(force=True)
