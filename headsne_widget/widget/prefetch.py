"""The P of the grid row the pointer rests on, built before the click asks for it.

A head click at 8192 tokens spends 0.1-0.2 s before t-SNE can start: the head's attention recomputed from the
captured queries and keys, then P's census and symmetrisation; a head-output or hidden-state click at 512 tokens
spends 14 ms of its 25 on the exact Gaussians. The pointer rests on a grid row for a few hundred milliseconds
before a click, so where the mode's P is worth it (``PSource.prefetch``: a head matrix's from 2048 tokens, a
source of points' from 256 until its P turns sparse) the page reports the row it rests on (``hovered_head``, after
:data:`DWELL_MS`; ``js/store/prefetch.js`` mirrors it, the ranges come with the protocol's ``SOURCES``) and
:class:`Prefetch` builds that row's P in its own job slot. The click's run job then takes it (or waits for the
one being built) instead of starting over. One P is kept at most, in a leased array (:mod:`.workspace`): the one
built last, released as soon as another head is aimed at, handed over (with its lease) to the run that takes it.
The row rested on is forgotten (``hovered_head`` None) when the mode, the perplexity or ``exclude_special``
changes, so that resting on it again builds the new P.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

from .jobs import Job, Slot
from .workspace import Lease

__all__ = ["DWELL_MS", "Prefetch"]

#: how long the pointer rests on a grid row before the page reports it (js/store/prefetch.js)
DWELL_MS = 120


class Prefetch:
    """``build(job, key) -> (selection, lease)`` for the latest key aimed at, kept until a run takes it.

    :meth:`aim` (owner thread) starts building ``key`` in the prefetch slot unless it is built or being built;
    :meth:`take` (a run job) hands the result over, waiting while that very key is being built, else None (the
    run then builds its own). Between the prefetch job and the run job this is the only shared state.
    """

    def __init__(self, slot: Slot, build: Callable[[Job, Any], tuple[Any, Lease]]) -> None:
        self._slot, self._build = slot, build
        self._cond = threading.Condition()
        self._building: Hashable | None = None
        self._ready: tuple[Hashable, Any, Lease] | None = None

    def aim(self, key: Hashable) -> None:
        """Build ``key``'s P next, replacing what is built or being built for another key."""
        with self._cond:
            if key == self._building or (self._ready is not None and self._ready[0] == key):
                return
        self._slot.start(lambda job: self._work(job, key))

    def take(self, key: Hashable, job: Job) -> tuple[Any, Lease] | None:
        """``key``'s (selection, lease), now owned by the caller; waits while it is being built (``job`` may
        cancel the wait); None when it is neither built nor being built."""
        with self._cond:
            while self._building == key and not job.cancelled:
                self._cond.wait(0.05)
            if self._ready is not None and self._ready[0] == key:
                _, selection, lease = self._ready
                self._ready = None
                return selection, lease
            return None

    def close(self) -> None:
        """Stop building and give back what is kept."""
        self._slot.cancel()
        self._drop()

    def _drop(self) -> None:
        with self._cond:
            ready, self._ready = self._ready, None
        if ready is not None:
            ready[2].release()

    def _work(self, job: Job, key: Hashable) -> None:
        self._drop()  # one P at most: the one aimed at before is not wanted any more
        with self._cond:
            self._building = key
        built = None
        try:
            built = self._build(job, key)
        finally:
            with self._cond:
                self._building = None
                if built is not None and not job.cancelled:
                    self._ready, built = (key, *built), None
                self._cond.notify_all()
            if built is not None:  # cancelled meanwhile: nobody will take it
                built[1].release()
