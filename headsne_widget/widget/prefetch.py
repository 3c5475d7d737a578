"""Work done before a click asks for it: every head's attention while the grid is looked at, and the P of
the head the pointer rests on.

A head click at 8192 tokens spends about 0.35 s before t-SNE can start: the head's attention recomputed
from the captured queries and keys (0.11 s), then P's census and symmetrisation (0.22 s on two cores).
The pointer rests on a grid row for a few hundred milliseconds before a click, so the page reports the
head it rests on (``hovered_head``, after :data:`DWELL_MS`) and :class:`HoverPrefetch` builds that head's
P in a background thread; the click then takes it (or waits for the one being built) instead of starting
over. One P is kept at most: 4 n^2 bytes more (256 MiB at 8192 tokens, 1 GiB at 16384), only from
:data:`PREFETCH_MIN_N` tokens, where it pays (at 512 a P takes 2 ms).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

from ._buffers import SparePool

__all__ = ["DWELL_MS", "PREFETCH_MIN_N", "HoverPrefetch", "prefetch_attention"]

#: from this many tokens the page reports the head the pointer rests on (js/widget.js mirrors it)
PREFETCH_MIN_N = 2048
#: how long the pointer rests on a grid row before the page reports it (js/widget.js)
DWELL_MS = 120


def prefetch_attention(ex: Any, spare_P: SparePool | None = None) -> None:
    """Every head's attention recomputed into the extraction's cache while the user looks at the grid
    (when all heads fit its budget), so that a click does not wait for its layer (70-145 ms of a 512-token
    click under load); on long texts, the arrays the first click writes its head and its P into, written
    once now (``spare_P``: the widget's pool of P arrays). Only an optimisation: an error here is the
    click's to report, where it happens."""
    try:
        ex.attention_source.prefetch()
        if spare_P is not None and ex.n_tokens >= PREFETCH_MIN_N:
            spare_P.reserve((ex.n_tokens, ex.n_tokens), np.float32)
    except Exception:  # reported by the click that needs the head
        pass


class HoverPrefetch:
    """The result of ``compute(key)`` for the latest key aimed at, built in one background thread.

    :meth:`aim` asks for a key (the latest wins; a key already built or being built is not redone);
    :meth:`take` hands the result over to the caller, waiting for it when it is being built, and None when
    it is neither built nor being built (then the caller computes it: a key not yet started is dropped).
    An error in ``compute`` is dropped too: the click computes the key again and reports it. Holds no
    reference to the widget, only to ``compute``; :meth:`close` ends the thread and drops the result.
    """

    def __init__(self, compute: Callable[[Any], Any], name: str = "headsne-hover-prefetch") -> None:
        self._compute: Callable[[Any], Any] | None = compute
        self._name = name
        self._cond = threading.Condition()
        self._wanted: Hashable | None = None
        self._busy: Hashable | None = None
        self._ready: tuple[Hashable, Any] | None = None
        self._claimed = False  # a take() waits for the build in progress: its result must not be dropped
        self._thread: threading.Thread | None = None
        self._closed = False

    def aim(self, key: Hashable) -> None:
        """Build ``key``'s result next (replacing any key not yet started)."""
        with self._cond:
            if self._closed or key == self._busy or (self._ready is not None and self._ready[0] == key):
                return
            self._wanted = key
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def take(self, key: Hashable) -> Any | None:
        """``key``'s result if built (waiting while it is being built), removed from here; else None."""
        with self._cond:
            if self._wanted == key:
                self._wanted = None  # not started: the caller computes it now
            self._claimed = self._busy == key
            while self._busy == key and not self._closed:
                self._cond.wait()
            self._claimed = False
            self._cond.notify_all()
            if self._ready is not None and self._ready[0] == key:
                result, self._ready = self._ready[1], None
                return result
            return None

    @property
    def ready_key(self) -> Hashable | None:
        """The key whose result is built and waiting, if any."""
        with self._cond:
            return None if self._ready is None else self._ready[0]

    def close(self) -> None:
        """End the thread (after the build in progress) and drop what is kept."""
        with self._cond:
            self._closed, self._wanted, self._ready, self._compute = True, None, None, None
            self._cond.notify_all()

    def _work(self) -> None:
        while True:
            with self._cond:
                while (self._wanted is None or self._claimed) and not self._closed:
                    self._cond.wait()
                if self._closed or self._compute is None:
                    return
                key, self._wanted, self._busy = self._wanted, None, self._wanted
                self._ready, compute = None, self._compute  # one result kept at most, also while building
            try:
                result = compute(key)
            except Exception:  # the click computes it again and reports it
                result = None
            with self._cond:
                self._busy = None
                if result is not None and not self._closed:
                    self._ready = (key, result)
                self._cond.notify_all()
