"""Background work of a widget: jobs in slots, each job cancellable at its next step.

The concurrency model of the widget, in one place:

1. The owner thread (the one that made the widget: in a notebook, the kernel's) alone reads and writes the
   synced traits and starts or cancels jobs; nothing else ever sets a trait.
2. Work that takes time (loading the model, a run, the P of the hovered head, partners, the atlas) runs as a
   :class:`Job` in a :class:`Slot`, one thread per slot; its results go to the owner's
   :class:`~headsne_widget.widget.inbox.Inbox`, never to a trait.
3. The owner applies results: at once through the event loop when one runs, else at its next public call.
4. Cancelling sets a flag and returns at once; the job stops at its next :meth:`Job.check` (every frame of a
   run, every head of the atlas). Finishing (a run's stop) also returns at once: the work ends at its next frame as
   it would end by itself, handing over its last word first. A slot starts its next job only after the previous
   one returned, so one job per slot computes and holds memory, and a start replaces a job that has not begun yet.
5. Large arrays are leased from the widget's :class:`~headsne_widget.widget.workspace.Workspace` and given
   back in the job's ``with`` blocks.

No lock is held while a job computes or while the owner applies a result, and a job never waits for the
owner, so no user call, observer or browser message can deadlock with a job.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Cancelled", "Failed", "Job", "Progress", "Slot"]


class Cancelled(Exception):
    """Raised at a job's cancel point once the job is cancelled: unwinds it and releases what it holds."""


@dataclass(frozen=True)
class Progress:
    """What a job is computing, for the status line, and the fraction done."""

    what: str
    fraction: float | None
    replaces: str = "progress"


@dataclass(frozen=True)
class Failed:
    """A job ended with an error (handed to the owner like any result)."""

    error: BaseException


class Job:
    """One job: the owner's controls (cancel, pause) and the work's cancel points (check, sleep, emit)."""

    def __init__(self, deliver: Callable[[Job, Any], None], slot: str = "") -> None:
        self._deliver = deliver
        self.slot = slot  # the name of the slot that runs it
        self._cancel = threading.Event()
        self._finish = threading.Event()
        self._wake = threading.Event()  # set by cancel and finish: ends a pacing sleep
        self._go = threading.Event()  # cleared while paused
        self._go.set()

    # --- the owner's side

    def cancel(self) -> None:
        """Stop at the next cancel point; returns at once."""
        self._cancel.set()
        self._wake.set()
        self._go.set()

    def finish(self) -> None:
        """End the work at its next frame as it would end by itself, with its last word (a run: the exact KL of the
        frame it sent last, :func:`~headsne_widget.widget.pacing.paced_frames`); returns at once, and wakes a
        paused or sleeping job."""
        self._finish.set()
        self._wake.set()
        self._go.set()

    def pause(self) -> None:
        """Hold the job at its next cancel point, using no CPU, until :meth:`resume` or :meth:`cancel`."""
        self._go.clear()

    def resume(self) -> None:
        self._go.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def finishing(self) -> bool:
        """Asked to :meth:`finish` (and not cancelled)."""
        return self._finish.is_set() and not self.cancelled

    @property
    def paused(self) -> bool:
        return not self._go.is_set() and not self.cancelled

    # --- the work's side

    def check(self) -> None:
        """A cancel point: wait while paused, raise :class:`Cancelled` once cancelled."""
        if not self._go.is_set():
            self._go.wait()
        if self._cancel.is_set():
            raise Cancelled

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (pacing), or less when cancelled or asked to finish, then :meth:`check`."""
        if seconds > 0:
            self._wake.wait(seconds)
        self.check()

    def emit(self, result: Any) -> None:
        """Hand ``result`` to the owner (after a cancel point: a cancelled job hands over nothing)."""
        self.check()
        self._deliver(self, result)


#: every slot alive, so that the interpreter's exit stops their jobs first (see :func:`_stop_all`)
_SLOTS: weakref.WeakSet[Slot] = weakref.WeakSet()
#: how long the exit waits for a cancelled job to reach its next cancel point
EXIT_WAIT_S = 5.0


class Slot:
    """One kind of background work: at most one job computes at a time, and a new start replaces the old."""

    def __init__(self, name: str, deliver: Callable[[Job, Any], None]) -> None:
        self.name = name
        self._deliver = deliver
        self._lock = threading.Lock()
        self._next: tuple[Job, Callable[[Job], None]] | None = None
        self._thread: threading.Thread | None = None  # the thread running the slot's jobs; None once idle
        self._last: threading.Thread | None = None  # the thread started last (idle, it may still be ending)
        self.job: Job | None = None  # the latest job started (running, waiting to run, or ended)
        _SLOTS.add(self)

    def start(self, work: Callable[[Job], None]) -> Job:
        """Cancel the slot's job and run ``work(job)`` once it has stopped; returns the new job at once."""
        job = Job(self._deliver, self.name)
        with self._lock:
            if self.job is not None:
                self.job.cancel()
            self.job, self._next = job, (job, work)
            if self._thread is None:
                self._thread = self._last = threading.Thread(
                    target=self._serve, args=(self._last,), name=f"headsne-{self.name}", daemon=True
                )
                self._thread.start()
        return job

    def cancel(self) -> None:
        """Cancel the slot's job (returns at once; the job stops at its next cancel point)."""
        with self._lock:
            self._next = None
            if self.job is not None:
                self.job.cancel()

    @property
    def busy(self) -> bool:
        """Whether the slot's thread is still running a job (a cancelled one included, until it stops)."""
        with self._lock:
            return self._thread is not None

    def join(self, timeout: float | None = None) -> bool:
        """Wait until the slot's threads have ended (after :meth:`cancel`), not only until the slot is idle; False
        after ``timeout`` seconds."""
        with self._lock:
            thread = self._last
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            return not thread.is_alive()
        return True

    def _serve(self, previous: threading.Thread | None) -> None:
        if previous is not None:
            previous.join()  # idle already, it is ending: joining the slot's latest thread joins them all
        while True:
            with self._lock:
                if self._next is None:
                    self._thread = None
                    return
                job, work = self._next
                self._next = None
            if not job.cancelled:
                try:
                    work(job)
                except Cancelled:
                    pass
                except Exception as err:  # handed to the owner, who shows it (and wait() raises it)
                    if not job.cancelled:
                        self._deliver(job, Failed(err))
            # What the job held (its work's arguments: an extraction and its torch tensors) is freed here, while
            # the slot is busy, not after it went idle: a tensor freed by this daemon thread once the interpreter
            # finalises aborts the process (torch lets the GIL go to free it, and taking it back then ends the
            # thread inside a C++ destructor: "terminate called without an active exception").
            del job, work


@atexit.register
def _stop_all() -> None:
    """At exit, cancel every job and let it unwind, and wait until the slots' threads have ended (a daemon thread
    killed inside a compiled kernel or a torch operation, or freeing a tensor, aborts the process)."""
    slots = list(_SLOTS)
    for slot in slots:
        slot.cancel()
    for slot in slots:
        slot.join(EXIT_WAIT_S)
