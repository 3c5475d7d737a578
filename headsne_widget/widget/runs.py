"""Run control: one live t-SNE optimisation at a time, in a background thread, without traitlets.

:class:`RunController` starts, cancels, pauses, resumes and waits for runs of
:func:`~headsne_widget.t_sne.tsne_frames`. It paces frames to a playback ``speed`` (iterations per
second), reports frames at about the display rate ``MAX_FPS`` (see :func:`frame_due`; always the last
one), aligns each reported frame to the previous one for display, and tells its owner what happened
through two callbacks:

- ``on_frame(report)`` for each reported :class:`FrameReport`, the last one with ``done=True`` (called in
  the run's thread; it returns False when the owner dropped it, e.g. because a newer run started);
- ``on_end(run_id, "error", message, error)`` when a run that was not cancelled fails.

Exactly one run computes at a time: a new run's thread first waits for the previous one to finish its
current step, so a cancel never has to block the caller. A paused run waits on an event and uses no CPU.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
import warnings
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..embedding.alignment import align_rows
from ..embedding.tsne import tsne_frames, warmup

__all__ = [
    "FRAME_MARGIN",
    "KL_EVERY",
    "MAX_EVERY",
    "MAX_FPS",
    "Coalescer",
    "FrameReport",
    "Run",
    "RunController",
    "frame_due",
    "report_every",
    "run_options",
    "start_warmup",
    "status_line",
]  # fmt: skip

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
#: fewest iterations between two exact KLs of a run (``tsne_frames(kl_every=)``): the KL pass takes a
#: logarithm per pair. With libm's log (which did not vectorise) it cost about 10 force passes, held the
#: frame rate at 8192 tokens to about 4 a second when taken at every report, and stalled the animation
#: for 0.35 s every 50 iterations; with the kernels' own float32 log (``vector_log``) it costs about 2-3
#: passes (60 ms at 8192, idle), so every 50 iterations it is about 5% of the run
KL_EVERY = 50
#: name prefix of the run threads (tests count them)
THREAD_PREFIX = "headsne-run"


@dataclass(frozen=True, eq=False)
class FrameReport:
    """One reported step of a run: the raw embedding and its display (aligned) version.

    ``kl`` is the latest exact KL of the run, computed after ``kl_iteration`` steps (see ``KL_EVERY``):
    this step's own when ``kl_fresh``; both None before the run's first KL (its first frames go out
    without one, see ``run_options``).
    """

    run_id: int
    iteration: int
    kl: float | None
    embedding: np.ndarray  # float32 (m, 2), raw: the same for the same seed and settings
    display: np.ndarray  # float32 (m, 2), Procrustes-aligned to the previously reported frame
    kept: np.ndarray
    done: bool
    kl_iteration: int | None

    @property
    def kl_fresh(self) -> bool:
        """Whether ``kl`` is the KL of this very step."""
        return self.kl_iteration == self.iteration


@dataclass(eq=False)
class Run:
    """One optimisation: its inputs, its thread, the events that steer it and its KL history."""

    run_id: int
    P: np.ndarray
    kept: np.ndarray
    options: dict[str, Any]
    cancel: threading.Event = field(default_factory=threading.Event)
    go: threading.Event = field(default_factory=threading.Event)  # cleared = paused
    thread: threading.Thread | None = None
    state: str = "running"  # running, paused, done, error, cancelled
    error: BaseException | None = None
    kl_history: list[float] = field(default_factory=list)  # every exact KL computed (see KL_EVERY)
    kl_iterations: list[int] = field(default_factory=list)
    embedding: np.ndarray | None = None  # raw latest frame

    @property
    def n_iter(self) -> int:
        return int(self.options["n_iter"])

    @property
    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()


def frame_due(since_last: float) -> bool:
    """Whether a frame may be sent ``since_last`` seconds after the last one (see ``FRAME_MARGIN``)."""
    return since_last >= 1.0 / MAX_FPS - FRAME_MARGIN


def report_every(n: int, restarts: int, speed: float) -> int:
    """Iterations between reported frames: about one frame period of work, at most ``MAX_EVERY``.

    A report is where a run can be cancelled or paused, so this also bounds how long a click waits.
    """
    per_iteration = SECONDS_PER_PAIR * n * n * restarts
    by_time = int(1.0 / MAX_FPS // per_iteration)
    by_speed = int(speed // MAX_FPS) if speed > 0 else by_time
    return max(1, min(by_time, by_speed, MAX_EVERY))


class RunController:
    """Start, cancel, pause, resume and wait for background t-SNE runs; see the module docstring."""

    def __init__(
        self,
        on_frame: Callable[[FrameReport], bool],
        on_end: Callable[[int, str, str, BaseException | None], None],
    ) -> None:
        self._on_frame = on_frame
        self._on_end = on_end
        self._lock = threading.Lock()
        self._run: Run | None = None
        self._next_id = 0
        self._reference: tuple[np.ndarray, np.ndarray] | None = None  # last display frame and its tokens
        self.speed = 0.0  # playback speed, iterations per second; 0 = as fast as computed; read at each frame

    # ---------------------------------------------------------------------------------- state

    @property
    def run(self) -> Run | None:
        """The latest run (running, paused or ended), or None."""
        return self._run

    def is_current(self, run_id: int) -> bool:
        """Whether ``run_id`` is the latest run and was not cancelled."""
        run = self._run
        return run is not None and run.run_id == run_id and not run.cancel.is_set()

    def forget_reference(self) -> None:
        """Align the next frame to nothing (e.g. the tokens changed)."""
        self._reference = None

    # -------------------------------------------------------------------------------- control

    def start(self, P: np.ndarray, kept: np.ndarray, options: dict[str, Any], run_id: int | None = None) -> Run:
        """Cancel the current run and start a new one on ``P`` with ``tsne_frames(P, **options)``."""
        with self._lock:
            previous = self._run
            if previous is not None:
                previous.cancel.set()
                previous.go.set()
            self._next_id = self._next_id + 1 if run_id is None else int(run_id)
            run = Run(self._next_id, P, np.asarray(kept, dtype=np.int64), dict(options))
            run.go.set()
            run.thread = threading.Thread(
                target=self._work, args=(run, previous), name=f"{THREAD_PREFIX}-{run.run_id}", daemon=True
            )
            self._run = run
            run.thread.start()
            return run

    def cancel(self, *, wait: bool = True) -> None:
        """Stop the current run; with ``wait`` join its thread (it exits at its next report)."""
        run = self._run
        if run is None:
            return
        run.cancel.set()
        run.go.set()  # wake it if paused
        if run.state in ("running", "paused"):
            run.state = "cancelled"
        if wait and run.thread is not None and run.thread is not threading.current_thread():
            run.thread.join()

    def pause(self) -> bool:
        """Hold the running run between two steps; False when there is none."""
        run = self._run
        if run is None or run.state != "running":
            return False
        run.go.clear()
        run.state = "paused"
        return True

    def resume(self) -> bool:
        """Continue a paused run; False when there is none."""
        run = self._run
        if run is None or run.state != "paused":
            return False
        run.state = "running"
        run.go.set()
        return True

    def wait(self, timeout: float | None = None) -> Run | None:
        """Block until the current run ends; raise TimeoutError after ``timeout`` s, RuntimeError if paused."""
        run = self._run
        if run is None or run.thread is None:
            return run
        if run.state == "paused":
            raise RuntimeError("the run is paused and would never end: resume() it first")
        run.thread.join(timeout)
        if run.thread.is_alive():
            raise TimeoutError(f"the run is still going after {timeout} s")
        return run

    # --------------------------------------------------------------------------------- worker

    def _work(self, run: Run, previous: Run | None) -> None:
        if previous is not None and previous.thread is not None:
            previous.thread.join()  # one run computes at a time
        if run.cancel.is_set():
            return
        frames: Generator[Any, None, None] | None = None
        try:
            frames = tsne_frames(run.P, **run.options)  # type: ignore[assignment]
            self._consume(run, frames)
        except Exception as err:  # reported to the owner: shown in the status line, re-raised by wait()
            self._end(run, "error", f"t-SNE failed: {err}", err)
        finally:
            if frames is not None:
                frames.close()

    def _consume(self, run: Run, frames: Any) -> None:
        last, sent_at, clock = None, -math.inf, None
        for frame in frames:
            if not run.go.is_set():
                run.go.wait()
                clock = None  # re-anchor the playback clock after a pause
            if run.cancel.is_set():
                return
            if not ((frame.kl is None or math.isfinite(frame.kl)) and np.isfinite(frame.embedding).all()):
                self._end(
                    run,
                    "error",
                    f"the optimisation produced non-finite values at iteration {frame.iteration}; "
                    "stopped (try a smaller learning_rate)",
                    FloatingPointError("non-finite t-SNE values"),
                )
                return
            last = frame
            if frame.fresh:  # a frame between two KLs repeats the last one
                run.kl_history.append(float(frame.kl))
                run.kl_iterations.append(int(frame.iteration))
            run.embedding = frame.embedding
            speed = self.speed
            if speed > 0:  # playback: iteration i is due at anchor + i / speed
                now = time.perf_counter()
                if clock is None or clock[2] != speed:
                    clock = (now, frame.iteration, speed)
                delay = clock[0] + (frame.iteration - clock[1]) / speed - now
                if delay > 0 and run.cancel.wait(delay):
                    return
            now = time.perf_counter()
            if frame_due(now - sent_at):
                if not self._report(run, frame, done=False):
                    return
                sent_at = now
        if run.cancel.is_set():
            return
        if last is None:
            self._end(run, "error", "the optimisation reported no frame", RuntimeError("no frame"))
            return
        run.state = "done"
        self._report(run, last, done=True)  # always: it carries done=True

    def _report(self, run: Run, frame: Any, *, done: bool) -> bool:
        display = frame.embedding
        if self._reference is not None:
            display = align_rows(display, run.kept, *self._reference)
        report = FrameReport(
            run.run_id,
            int(frame.iteration),
            None if frame.kl is None else float(frame.kl),
            frame.embedding,
            display,
            run.kept,
            done,
            frame.kl_iteration,
        )
        if run.cancel.is_set():
            return False
        delivered = self._on_frame(report)
        if delivered:
            self._reference = (display, run.kept)
        return delivered

    def _end(self, run: Run, state: str, message: str, error: BaseException | None) -> None:
        if run.cancel.is_set():
            return
        run.state, run.error = state, error
        self._on_end(run.run_id, state, message, error)


def status_line(what: str, label: str, iteration: int, n_iter: int, kl: float | None = None, note: str = "") -> str:
    """The widget's one human line for a run: "running layer 2 head 5 - iteration 300/1000", ..."""
    text = {
        "starting": f"running {label} - starting",
        "running": f"running {label} - iteration {iteration}/{n_iter}",
        "paused": f"paused {label} at iteration {iteration}/{n_iter}",
        "stopped": f"stopped {label} at iteration {iteration}/{n_iter}",
        "done": f"done {label} - KL {kl if kl is not None else float('nan'):.4f} after {iteration} iterations",
    }[what]
    return f"{text} ({note})" if note and what != "stopped" else text


def run_options(params: Any, device: Any, every: int) -> dict[str, Any]:
    """``tsne_frames`` keywords from an object holding the run parameters (the widget's traits); the exact
    KL at most every ``KL_EVERY`` iterations and at the last report, but not at the first, and P taken as
    built by :func:`~headsne_widget.selection.selection_affinities` (unchecked, see ``tsne_frames``): a head click
    waits for its first frame, and at n = 8192 the KL pass (a logarithm per pair) is 60 ms of it (it was
    0.35 s with libm's log)."""
    return dict(
        n_iter=params.n_iter, learning_rate="auto" if params.learning_rate is None else params.learning_rate,
        early_exaggeration=params.early_exaggeration, exaggeration_iters=params.exaggeration_iters,
        seed=params.seed, restarts=params.restarts, device=device, every=every, kl_every=max(every, KL_EVERY),
        first_kl=False, check_input=False,  # P comes from selection_affinities: valid by construction
    )  # fmt: skip


class Coalescer:
    """Calls ``flush`` once for a batch of changes: at the next turn of the running event loop (all the
    changes of a notebook cell), or ``delay`` seconds later without a loop (a script); the owner may also
    call ``flush`` itself first (``flush`` must do nothing when there is nothing pending)."""

    def __init__(self, flush: Callable[[], None], delay: float = 0.005) -> None:
        self._flush, self._delay = flush, delay
        self._timer: threading.Timer | None = None

    def arm(self) -> None:
        try:
            asyncio.get_running_loop().call_soon(self._flush)
        except RuntimeError:  # no running loop in this thread
            self._timer = threading.Timer(self._delay, self._flush)
            self._timer.daemon = True
            self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


# ------------------------------------------------------------------------------------------- warm-up

_warmup_lock = threading.Lock()
_warmup_thread: threading.Thread | None = None


def _warm() -> None:
    try:
        warmup()
    except Exception as err:  # only an optimisation: the run itself reports real failures
        warnings.warn(f"t-SNE warm-up failed ({err}); the first run compiles instead", RuntimeWarning, stacklevel=2)


def start_warmup() -> threading.Thread:
    """Compile the t-SNE kernels once per process in the background, so the first click is fast."""
    global _warmup_thread
    with _warmup_lock:
        if _warmup_thread is None:
            _warmup_thread = threading.Thread(target=_warm, name="headsne-warmup", daemon=True)
            _warmup_thread.start()
        return _warmup_thread
