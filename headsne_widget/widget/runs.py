"""The run job: one t-SNE of the selected head (or hidden states) for the widget, as a background job.

:func:`run_job` builds P into leased arrays (or takes the P built while the pointer rested on the head),
hands the owner the tokens P covers, then streams frames: paced to a playback ``speed`` (iterations per
second), at most about ``MAX_FPS`` a second (see :func:`frame_due`), the last one always, the exact KL at most
every ``KL_EVERY`` iterations. Each partner ranking (the hover lines) comes with the start on short texts and
after the first frame on long ones. A finished run on up to ``BEST_CHECK_MAX_TOKENS`` tokens goes on with
``BEST_OF`` restarts of other seeds, whose best KL tells whether the map on screen is a good one. Every step
is a cancel point (:class:`~headsne_widget.widget.jobs.Job`); the leases are given back when the job ends.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
import warnings
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, cast

import numpy as np

from ..affinity.selection import Selection, selection_affinities
from ..embedding.tsne import Frame, tsne_frames, warmup
from .jobs import Job
from .partners import partner_traits
from .prefetch import Prefetch
from .sparse_runs import RowsHold, build_sparse, is_sparse, sparse_partner_traits
from .workspace import Lease, OwnArray, Workspace

__all__ = [
    "BEST_CHECK_MAX_TOKENS",
    "BEST_OF",
    "FRAME_MARGIN",
    "KL_EVERY",
    "MAX_EVERY",
    "MAX_FPS",
    "PARTNERS_AT_ONCE_MAX",
    "QUERY_KEY_MAX_TOKENS",
    "BestKL",
    "Pace",
    "Partners",
    "RealClock",
    "RunFrame",
    "RunRequest",
    "RunStarted",
    "SelectionKey",
    "build_selection",
    "closing_frames",
    "frame_due",
    "report_every",
    "run_job",
    "start_warmup",
    "status_line",
]

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
#: fewest iterations between two exact KLs of a run: the KL pass takes a float32 logarithm per pair, about
#: 2-3 force passes (60 ms at 8192 tokens), so every 50 iterations it is about 5% of the run
KL_EVERY = 50
#: up to this many kept tokens the partners come with the run's start; above, after its first frame (at
#: 8192 tokens they take 0.3 s, which the first frame of a click would otherwise wait for)
PARTNERS_AT_ONCE_MAX = 2048
#: most tokens of a query-key run: its P is (2m) x (2m) float32, the run's own array outside the workspace (256 MiB
#: at 4096 tokens), and each t-SNE step costs four times a head's
QUERY_KEY_MAX_TOKENS = 4096
#: restarts of the best-of check; 10 restarts at n = 271 cost 1.5 s (thesis abstract, MiniLM)
BEST_OF = 10
#: above this many tokens one restart takes seconds: no best-of check
BEST_CHECK_MAX_TOKENS = 2048


@dataclass(frozen=True)
class SelectionKey:
    """What P depends on: the selection and, in hidden mode, the perplexity."""

    mode: str
    layer: int
    head: int
    exclude_special: bool
    perplexity: float


@dataclass(frozen=True)
class RunRequest:
    """One run as the owner asks for it."""

    run_id: int
    key: SelectionKey
    options: dict[str, Any]  # tsne_frames keywords
    edge_k: int


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


# --------------------------------------------------------------------------------- results for the owner


@dataclass(frozen=True)
class RunStarted:
    """P is built: the tokens it covers, and the note of a lowered perplexity."""

    run_id: int
    kept: np.ndarray
    note: str
    partners_later: bool  # a long text: the partners come after the first frame (the old ones go now)


@dataclass(frozen=True)
class RunFrame:
    """A reported step: the raw embedding, its KL (the latest exact one) and the KL history's length."""

    run_id: int
    iteration: int
    kl: float | None
    embedding: np.ndarray
    kl_count: int
    done: bool
    replaces: str = "frame"  # only the newest frame waits for the owner


@dataclass(frozen=True)
class Partners:
    """The partner traits (edges, attends_to, attended_by) of a run."""

    run_id: int
    traits: dict[str, Any]


@dataclass(frozen=True)
class BestKL:
    """The best KL so far of the run and its best-of restarts."""

    run_id: int
    kl: float
    replaces: str = "best"


@dataclass
class RunRecord:
    """What a run keeps for the owner to read: its exact KLs and their iterations (appended by the job)."""

    kl_history: list[float] = field(default_factory=list)
    kl_iterations: list[int] = field(default_factory=list)


# --------------------------------------------------------------------------------------------- helpers


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


def run_options(params: Any, every: int) -> dict[str, Any]:
    """``tsne_frames`` keywords from the run parameters: the exact KL at most every ``KL_EVERY`` iterations and
    at the last frame but not at the first (a click waits for its first frame), and P taken as built by
    ``selection_affinities`` (valid by construction: the O(n^2) checks are skipped)."""
    return dict(
        n_iter=params.n_iter, learning_rate="auto" if params.learning_rate is None else params.learning_rate,
        early_exaggeration=params.early_exaggeration, exaggeration_iters=params.exaggeration_iters,
        seed=params.seed, restarts=params.restarts, every=every, kl_every=max(every, KL_EVERY), first_kl=False,
        check_input=False,
    )  # fmt: skip


def status_line(what: str, label: str, iteration: int, n_iter: int, kl: float | None = None, note: str = "") -> str:
    """The widget's one human line for a run: "running layer 2 head 5 - iteration 300/1000", ..."""
    text = {
        "building": f"running {label} - building P",
        "starting": f"running {label} - starting",
        "running": f"running {label} - iteration {iteration}/{n_iter}",
        "paused": f"paused {label} at iteration {iteration}/{n_iter}",
        "stopped": f"stopped {label} at iteration {iteration}/{n_iter}",
        "done": f"done {label} - KL {kl if kl is not None else float('nan'):.4f} after {iteration} iterations",
    }[what]
    return f"{text} ({note})" if note and what != "stopped" else text


def build_selection(
    job: Job, ex: Any, key: SelectionKey, workspace: Workspace
) -> tuple[Selection, Lease | OwnArray | RowsHold, Lease | None]:
    """P of ``key`` in a leased array (query-key mode: an array of the run's own), and in the head modes the head's
    attention A in another (for the partners; the caller releases both). A cancel point before each n x n pass.
    From ``SPARSE_MIN_TOKENS`` kept tokens on, a sparse P and the head's rows, nothing leased (:mod:`.sparse_runs`)."""
    if is_sparse(ex, key.mode, key.exclude_special):
        return (*build_sparse(job, ex, key), None)
    m = ex.n_tokens - (int(np.count_nonzero(ex.special)) if key.exclude_special else 0)
    if key.mode == "query-key" and m > QUERY_KEY_MAX_TOKENS:
        raise ValueError(
            f"query-key mode embeds 2 x {m} points and holds their (2m)^2 P; it takes at most "
            f"{QUERY_KEY_MAX_TOKENS} tokens (use attention mode, or max_tokens=)"
        )
    P_lease: Lease | OwnArray = workspace.lease()
    A_lease = None
    try:
        job.check()
        if key.mode == "query-key":
            P_lease.release()
            P_lease = OwnArray(4 * m * m)
            A_lease = workspace.lease()
            n = ex.n_tokens
            A = ex.attention_into(key.layer, key.head, A_lease.array((n, n)))
            job.check()
            sel = selection_affinities(
                ex, "query-key", key.layer, key.head, exclude_special=key.exclude_special, dtype=np.float32,
                out=P_lease.array((2 * m, 2 * m)), attention=A,
            )  # fmt: skip
        elif key.mode == "attention":
            A_lease = workspace.lease()
            n = ex.n_tokens
            A = ex.attention_into(key.layer, key.head, A_lease.array((n, n)))
            job.check()
            sel = selection_affinities(
                ex, "attention", key.layer, key.head, exclude_special=key.exclude_special, dtype=np.float32,
                out=P_lease.array((m, m)), attention=A,
            )  # fmt: skip
        else:
            sel = selection_affinities(
                ex, "hidden", key.layer, perplexity=key.perplexity, exclude_special=key.exclude_special,
                dtype=np.float32,
            )  # fmt: skip
            m = len(sel.kept)
            P = P_lease.array((m, m))
            np.copyto(P, sel.P)
            sel = replace(sel, P=P)
        return sel, P_lease, A_lease
    except BaseException:
        P_lease.release()
        if A_lease is not None:
            A_lease.release()
        raise


def selection_partners(ex: Any, key: SelectionKey, A: np.ndarray | None, k: int, kept: np.ndarray) -> dict[str, Any]:
    """The partner traits of a selection: from the head's attention A, or hidden-space neighbours (per token: in
    query-key mode ``kept`` lists the tokens twice, the partners are the tokens')."""
    X = ex.layer_output(key.layer) if key.mode == "hidden" else None
    if key.mode == "query-key":
        kept = kept[: len(kept) // 2]
    return partner_traits(A, X, k, kept)


def closing_frames(P: np.ndarray, **options: Any) -> contextlib.closing[Generator[Frame, None, None]]:
    """``tsne_frames(P, **options)`` closed at the end of a ``with`` block (its optimisation stops there)."""
    return contextlib.closing(cast(Generator[Frame, None, None], tsne_frames(P, **options)))


# ----------------------------------------------------------------------------------------------- the job


def run_job(
    job: Job, ex: Any, request: RunRequest, record: RunRecord, workspace: Workspace, *, prefetch: Prefetch | None,
    pace: Pace,
) -> None:  # fmt: skip
    """One run (see the module doc): P, then frames, then the best-of check; every result to the owner."""
    key = request.key
    with contextlib.ExitStack() as held:
        taken = prefetch.take(key, job) if prefetch is not None and key.mode == "attention" else None
        P_lease: Lease | OwnArray | RowsHold
        if taken is not None:
            sel, P_lease = taken
            A_lease = None
        else:
            sel, P_lease, A_lease = build_selection(job, ex, key, workspace)
        held.callback(P_lease.release)
        if A_lease is not None:
            held.callback(A_lease.release)  # (released below once the partners are out; a cancel may come first)
        rows = P_lease if isinstance(P_lease, RowsHold) else None  # a sparse run's head, until its partners are out
        at_once = len(sel.kept) <= PARTNERS_AT_ONCE_MAX and not is_sparse(ex, key.mode, key.exclude_special)
        job.emit(RunStarted(request.run_id, sel.kept, sel.note, partners_later=not at_once))
        if at_once:
            A = None if A_lease is None else A_lease.array((ex.n_tokens, ex.n_tokens))
            if key.mode == "attention" and A is None:
                A = ex.attention(key.layer, key.head)  # a prefetched P on a short text: the head is cached
            job.emit(Partners(request.run_id, selection_partners(ex, key, A, request.edge_k, sel.kept)))
        if A_lease is not None:
            A_lease.release()
        last = None
        for frame, due in _paced_frames(job, sel.P, request.options, pace, record):
            last = frame
            if due and frame.iteration != request.options["n_iter"]:
                job.emit(RunFrame(request.run_id, frame.iteration, frame.kl, frame.embedding,
                                  len(record.kl_history), done=False))  # fmt: skip
                if not at_once:  # a long text: the partners once the first frame is out
                    at_once = True
                    _partners_now(job, ex, request, sel.kept, workspace, rows)
        if last is None:
            raise RuntimeError("the optimisation reported no frame")
        job.emit(RunFrame(request.run_id, last.iteration, last.kl, last.embedding, len(record.kl_history), done=True))
        if not at_once:
            _partners_now(job, ex, request, sel.kept, workspace, rows)
        if len(sel.kept) <= BEST_CHECK_MAX_TOKENS and last.kl is not None:
            _best_of(job, sel.P, request, last.kl)


def _best_of(job: Job, P: np.ndarray, request: RunRequest, kl: float) -> None:
    """``BEST_OF`` more runs with the next seeds, one at a time; the best KL so far after each."""
    options = {k: request.options[k] for k in ("n_iter", "learning_rate", "early_exaggeration", "exaggeration_iters")}
    best = kl
    for r in range(BEST_OF):
        last = None
        seed = request.options["seed"] + 1 + r
        with closing_frames(P, seed=seed, every=50, check_input=False, **options) as frames:
            for last in frames:  # noqa: B007 - the last frame has the final KL
                job.check()
        if last is not None and last.kl is not None:
            best = min(best, last.kl)
        job.emit(BestKL(request.run_id, best))


def _partners_now(
    job: Job, ex: Any, request: RunRequest, kept: np.ndarray, workspace: Workspace, rows: RowsHold | None = None
) -> None:
    """The partners of a long text's run, after its first frame (the head recomputed into a lease; a sparse run's
    from the head's ``rows``, computed again when None)."""
    key = request.key
    if is_sparse(ex, key.mode, key.exclude_special):
        traits = sparse_partner_traits(ex, key, None if rows is None else rows.rows, request.edge_k, kept)
        if rows is not None:
            rows.release()  # P stays; the rows are not needed any more
        job.emit(Partners(request.run_id, traits))
        return
    if key.mode == "hidden":
        job.emit(Partners(request.run_id, selection_partners(ex, key, None, request.edge_k, kept)))
        return
    with workspace.lease() as lease:
        n = ex.n_tokens
        A = ex.attention_into(key.layer, key.head, lease.array((n, n)))
        job.check()
        job.emit(Partners(request.run_id, selection_partners(ex, key, A, request.edge_k, kept)))


def partners_job(
    job: Job, ex: Any, *, run_id: int, key: SelectionKey, k: int, kept: np.ndarray, workspace: Workspace
) -> None:
    """The partners again (``edge_k`` changed), for the run ``run_id``."""
    _partners_now(job, ex, RunRequest(run_id, key, {}, k), kept, workspace)


def _paced_frames(
    job: Job, P: np.ndarray, options: dict[str, Any], pace: Pace, record: RunRecord
) -> Iterator[tuple[Frame, bool]]:
    """Every frame of ``tsne_frames(P, **options)`` with whether it is due for the display: paced to
    ``pace.speed``, at most one per display frame (``frame_due``), each checked finite, every exact KL
    recorded in ``record``."""
    sent_at, clock = -math.inf, None
    with closing_frames(P, **options) as frames:
        for frame in frames:
            if job.paused:
                clock = None  # re-anchor the playback clock after a pause
            job.check()
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
            now = pace.clock.now()
            due = frame_due(now - sent_at)
            if due:
                sent_at = now
            yield frame, due


# ------------------------------------------------------------------------------------------------ warm-up

_warmup_lock = threading.Lock()
_warmup_thread: threading.Thread | None = None


def _warm() -> None:
    try:
        warmup()
        from ..affinity.sparse_kernels import symmetric_sum  # a long text's P (numba)

        symmetric_sum(np.zeros(2, np.int64), np.zeros(0, np.int32), np.zeros(0), 1)
    except Exception as err:  # only an optimisation: the run itself reports real failures
        warnings.warn(f"t-SNE warm-up failed ({err}); the first run compiles instead", RuntimeWarning, stacklevel=2)


def start_warmup() -> threading.Thread:
    """Compile (or load from numba's cache) the t-SNE kernels once per process, in the background, so that the
    first click does not wait for them (a process-wide thread, not a widget's job: it holds no widget state)."""
    global _warmup_thread
    with _warmup_lock:
        if _warmup_thread is None:
            _warmup_thread = threading.Thread(target=_warm, name="headsne-warmup", daemon=True)
            _warmup_thread.start()
        return _warmup_thread
