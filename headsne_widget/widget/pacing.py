"""How a run's frames are paced: to a playback speed (iterations per second) and at most one a display frame.

:func:`paced_frames` wraps a run's frame stream: it sleeps to the playback clock, checks every frame finite,
records each exact KL, and says which frames are due for the display (:func:`frame_due`); asked to finish (a
stop), it hands over the exact KL of the last due frame, the one the owner shows (:class:`Stopped`), and ends the
run. :func:`report_every` picks the iterations between reports, which are also a run's cancel points.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np
import scipy.sparse

from ..budget import within_budget
from ..embedding.background import closing_frames
from ..embedding.tsne import Frame, kl_divergence
from ..errors import MemoryBudgetError
from .jobs import Cancelled, Job

__all__ = ["FRAME_MARGIN", "MAX_EVERY", "MAX_FPS", "Pace", "RealClock", "RunRecord", "Stopped", "frame_due",
           "paced_frames", "report_every"]  # fmt: skip

#: the display rate frames are paced to: one report at most every 1 / MAX_FPS - FRAME_MARGIN seconds
MAX_FPS = 60.0
#: how much sooner than 1 / MAX_FPS after the last sent frame the next one may go. Frames can only be sent
#: at reports (every few iterations), so a strict 1/60 s gap plus the wait for the next report gave about
#: 53 frames a second and left vsyncs of a 60 Hz display without a new frame; with the margin the gaps are
#: 13.7 to 16.7 ms (at most 73 frames a second, about 66 at n = 512), so each vsync has a new frame to draw
FRAME_MARGIN = 0.003
#: most iterations between two reported frames (bounds the KL history's resolution and cancel latency)
MAX_EVERY = 10
#: cost of one t-SNE iteration per pair of tokens, a cautious bound: 1.2e-9 s measured on an idle
#: 2-core machine at n = 512 (0.3 ms per iteration), rounded up for loaded or slower machines
SECONDS_PER_PAIR = 4e-9


class RealClock:
    """Time as it passes: what a run paces its frames by (tests inject a clock that only moves when told)."""

    def now(self) -> float:
        return time.perf_counter()

    def sleep(self, job: Job, seconds: float) -> None:
        job.sleep(seconds)


@dataclass
class Pace:
    """The playback speed, set by the owner and read by the run at each frame (iterations per second), and the
    clock the run paces by."""

    speed: float = 0.0
    clock: Any = field(default_factory=RealClock)


@dataclass
class RunRecord:
    """What a run keeps for the owner to read: its exact KLs and their iterations (appended by the job)."""

    kl_history: list[float] = field(default_factory=list)
    kl_iterations: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Stopped:
    """A stopped run's last word: the iteration of the last frame it sent (the one shown), that frame's exact KL (None,
    and ``why``, when it could not be computed) and the length of the KL history up to it, that KL included."""

    iteration: int
    kl: float | None
    kl_count: int
    why: str = ""


def frame_due(since_last: float) -> bool:
    """Whether a frame may be sent ``since_last`` seconds after the last one (see ``FRAME_MARGIN``)."""
    return since_last >= 1.0 / MAX_FPS - FRAME_MARGIN


def report_every(n: int, restarts: int, speed: float) -> int:
    """Iterations between reported frames for ``n`` points: about one frame period of work, at most
    ``MAX_EVERY``. A report is where a run can be cancelled or paused, so this also bounds how long a click
    waits."""
    per_iteration = SECONDS_PER_PAIR * max(n, 1) ** 2 * restarts
    by_time = int(1.0 / MAX_FPS // per_iteration)
    by_speed = int(speed // MAX_FPS) if speed > 0 else by_time
    return max(1, min(by_time, by_speed, MAX_EVERY))


def paced_frames(
    job: Job, P: Any, options: dict[str, Any], pace: Pace, record: RunRecord
) -> Iterator[tuple[Frame, bool]]:
    """Every frame of ``tsne_frames(P, **options)`` with whether it is due for the display (the caller sends each
    due frame): paced to ``pace.speed``, at most one per display frame (``frame_due``), each checked finite, every
    exact KL recorded in ``record``. Once the job is asked to finish, the run ends at the next frame with
    :func:`_finish`."""
    sent: Frame | None = None
    sent_at, clock = -math.inf, None
    with closing_frames(P, **options) as frames:
        for frame in frames:
            if job.paused:
                clock = None  # re-anchor the playback clock after a pause
            job.check()
            if job.finishing:
                _finish(job, P, sent, record)
            if not ((frame.kl is None or math.isfinite(frame.kl)) and np.isfinite(frame.embedding).all()):
                raise FloatingPointError(
                    f"the optimisation produced non-finite values at iteration {frame.iteration}; stopped "
                    "(try a smaller learning_rate)"
                )
            if frame.fresh and frame.kl is not None:  # a frame between two KLs repeats the last one
                record.kl_history.append(float(frame.kl))
                record.kl_iterations.append(int(frame.iteration))
            speed = pace.speed
            if speed > 0:  # playback: iteration i is due at anchor + i / speed
                now = pace.clock.now()
                if clock is None or clock[2] != speed:
                    clock = (now, frame.iteration, speed)
                pace.clock.sleep(job, clock[0] + (frame.iteration - clock[1]) / speed - now)
                if job.finishing:  # asked while it slept
                    _finish(job, P, sent, record)
            now = pace.clock.now()
            due = frame_due(now - sent_at)
            if due:
                sent, sent_at = frame, now
            yield frame, due


def _finish(job: Job, P: Any, sent: Frame | None, record: RunRecord) -> NoReturn:
    """Hand over the exact KL of the last frame sent (``kl_divergence`` in float64; its own when the frame has a fresh
    one), the KL history cut after it with that KL last, then end the run: a stopped run's frame, KL and history
    are one. A dense P's float64 copy is checked against the memory budget first; beyond it the KL is None and
    ``why`` says so."""
    if sent is None:
        job.emit(Stopped(0, None, 0, "no frame was shown"))
        raise Cancelled
    kl, why = None, ""
    try:
        if sent.fresh and sent.kl is not None:
            kl = float(sent.kl)
        else:
            if not scipy.sparse.issparse(P) and np.asarray(P).dtype != np.float64:
                n = P.shape[0]
                within_budget(8 * n * n, "the exact KL of the stopped frame would", "wait() for the run's end")
            kl = kl_divergence(P, sent.embedding)
    except MemoryBudgetError as err:
        why = str(err)
    count = sum(1 for i in record.kl_iterations if i <= sent.iteration)  # the history up to the frame shown
    del record.kl_history[count:], record.kl_iterations[count:]  # KLs of frames never shown (the owner reads none)
    if kl is not None and not sent.fresh:
        record.kl_history.append(kl)
        record.kl_iterations.append(sent.iteration)
    job.emit(Stopped(sent.iteration, kl, len(record.kl_history), why))
    raise Cancelled
