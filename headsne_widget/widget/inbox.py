"""The hand-off from background jobs to the owner thread (see :mod:`headsne_widget.widget.jobs`).

Jobs :meth:`Inbox.put` results from any thread; only the owner thread applies them, in order, with
:meth:`Inbox.drain`. When an asyncio event loop runs on the owner thread (a Jupyter or marimo kernel), a put
schedules a drain on it with ``call_soon_threadsafe``, so results show while the kernel is idle; without one
(a script) the owner drains at its next public call, and :meth:`Inbox.wait` drains while it waits. A result
with a ``replaces`` key replaces the pending result of the same job and key, in its place in the queue (only
the newest frame of a run waits), so a busy owner never piles up work. Results of a cancelled job are dropped,
never applied.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .jobs import Job

__all__ = ["Inbox", "OwnerThreadError"]


class OwnerThreadError(RuntimeError):
    """A widget was called from a thread other than its owner's."""


class Inbox:
    """Results waiting for the owner thread, applied by ``apply(job, result)`` there."""

    def __init__(self, apply: Callable[[Job, Any], None]) -> None:
        self._apply = apply
        self._owner = threading.get_ident()
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:  # no event loop runs here: results are applied at the owner's calls
            self._loop = None
        self._cond = threading.Condition()
        self._items: deque[tuple[Job, Any]] = deque()
        self._scheduled = False
        self._closed = False

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The owner thread's event loop, if one was running when the inbox was made."""
        return self._loop

    @property
    def on_owner_thread(self) -> bool:
        """Whether the caller runs on the owner thread."""
        return threading.get_ident() == self._owner

    def check_owner(self, what: str = "this widget") -> None:
        """Raise :class:`OwnerThreadError` unless called on the owner thread."""
        if not self.on_owner_thread:
            raise OwnerThreadError(
                f"{what} belongs to the thread that made it (in a notebook, the kernel's); call it from there"
            )

    def put(self, job: Job, result: Any) -> None:
        """Queue ``result`` for the owner (any thread)."""
        key = getattr(result, "replaces", None)
        with self._cond:
            if self._closed:
                _discard(result)
                return
            for i, (other, pending) in enumerate(self._items if key is not None else ()):
                if other is job and getattr(pending, "replaces", None) == key:
                    self._items[i] = (job, result)  # in its place: what came after it still comes after
                    _discard(pending)
                    self._cond.notify_all()
                    return  # a drain is due already: the replaced result was waiting for it
            self._items.append((job, result))
            self._cond.notify_all()
            if self._loop is None or self._scheduled:
                return
            self._scheduled = True
        try:
            self._loop.call_soon_threadsafe(self._drain_from_loop)
        except RuntimeError:  # the loop is closed (the kernel is shutting down)
            pass

    def drain(self) -> None:
        """Apply every pending result, oldest first (owner thread only; re-entrant from an observer)."""
        while True:
            with self._cond:
                if not self._items:
                    return
                job, result = self._items.popleft()
            if job.cancelled:
                _discard(result)
            else:
                self._apply(job, result)

    def wait(self, done: Callable[[], bool], timeout: float | None = None) -> bool:
        """Apply results until ``done()`` (True) or ``timeout`` seconds (False); owner thread only."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self.drain()
            if done():
                return True
            with self._cond:
                if self._items:
                    continue
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(0.1 if remaining is None else min(remaining, 0.1))

    def close(self) -> None:
        """Drop what is pending and refuse what comes later."""
        with self._cond:
            self._closed = True
            self._apply = _nothing  # the owner is gone: a job finishing now holds no reference to it
            items, self._items = list(self._items), deque()
        for _, result in items:
            _discard(result)

    def _drain_from_loop(self) -> None:
        with self._cond:
            self._scheduled = False
        self.drain()


def _nothing(job: Job, result: Any) -> None:
    """What a closed inbox applies."""


def _discard(result: Any) -> None:
    """Give back what a dropped result holds (a leased array), if anything."""
    discard = getattr(result, "discard", None)
    if callable(discard):
        discard()
