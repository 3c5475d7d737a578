"""The run job: one t-SNE of the selected head (or hidden states) for the widget, as a background job.

:func:`run_job` builds P (:mod:`.selections`; or takes the P built while the pointer rested on the head), hands
the owner the tokens P covers, then streams frames paced by :mod:`.pacing`, the exact KL at most every
``KL_EVERY`` iterations. The partners (the hover lines) are the source's (``PSource.partners``), from what the
build of P left at hand (``Selection.at_hand``): they come with the start where they are a dense head's rows on a
short text (its matrix, at hand), and after the first frame otherwise, on the owner's partners slot beside the
frames (:func:`partners_job`): on long texts, where a sparse head's partners took 3.1 s at 65536 tokens, a gap
in the frames when the run's own thread ranked them, and for a source of points, whose nearest-neighbour search
(5-6 ms at 512 tokens, a fifth of a head-output click) the first frame need not wait for. A finished run on up
to ``BEST_CHECK_MAX_TOKENS`` tokens goes on with ``BEST_OF`` restarts of other seeds, whose best KL tells whether
the map on screen is a good one. Every step is a cancel point (:class:`~headsne_widget.widget.jobs.Job`); the
leases are given back when the job ends.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse

from ..affinity.partners import AtHand, Ranked, TokenPartners
from ..affinity.sources.base import Spec
from ..embedding.background import closing_frames
from .jobs import Job
from .pacing import Pace, RunRecord, paced_frames
from .prefetch import Prefetch
from .run_messages import BestKL, Partners, PartnersDue, RunFrame, RunRequest, RunStarted
from .selections import Arrays, Hold, SelectionKey, build_selection
from .workspace import Workspace

if TYPE_CHECKING:
    from ..capture.extraction import Extraction

__all__ = [
    "BEST_CHECK_MAX_TOKENS",
    "BEST_OF",
    "KL_EVERY",
    "PARTNERS_AT_ONCE_MAX",
    "partners_job",
    "run_job",
    "run_options",
]

#: fewest iterations between two exact KLs of a run: the KL pass takes a float32 logarithm per pair, about
#: 2-3 force passes (60 ms at 8192 tokens), so every 50 iterations it is about 5% of the run
KL_EVERY = 50
#: up to this many kept tokens the partners come with the run's start; above, after its first frame (at
#: 8192 tokens they take 0.3 s, which the first frame of a click would otherwise wait for)
PARTNERS_AT_ONCE_MAX = 2048
#: restarts of the best-of check; 10 restarts at n = 271 cost 1.5 s (thesis abstract, MiniLM)
BEST_OF = 10
#: above this many tokens one restart takes seconds: no best-of check
BEST_CHECK_MAX_TOKENS = 2048


def run_options(params: Any, every: int) -> dict[str, Any]:
    """``tsne_frames`` keywords from the run parameters: the exact KL at most every ``KL_EVERY`` iterations and
    at the last frame but not at the first (a click waits for its first frame), and P taken as built by
    the P builder (valid by construction: the O(n^2) checks are skipped)."""
    return dict(
        n_iter=params.n_iter, learning_rate="auto" if params.learning_rate is None else params.learning_rate,
        early_exaggeration=params.early_exaggeration, exaggeration_iters=params.exaggeration_iters,
        seed=params.seed, restarts=params.restarts, every=every, kl_every=max(every, KL_EVERY), first_kl=False,
        check_input=False,
    )  # fmt: skip


def run_job(
    job: Job, ex: Extraction, request: RunRequest, record: RunRecord, workspace: Workspace, *,
    prefetch: Prefetch | None, pace: Pace,
) -> None:  # fmt: skip
    """One run (see the module doc): P, then frames, then the best-of check; every result to the owner."""
    key = request.key
    with contextlib.ExitStack() as held:
        taken = prefetch.take(key, job) if prefetch is not None else None
        hold: Hold
        if taken is not None:
            sel, hold = taken
            M_lease = None
        else:
            sel, hold, M_lease = build_selection(job, ex, key, workspace)
        held.callback(hold.release)
        if M_lease is not None:
            held.callback(M_lease.release)  # (released below once the partners are out; a cancel may come first)
        spec, sparse = key.spec(ex), scipy.sparse.issparse(sel.P)
        at_once = len(sel.kept) <= PARTNERS_AT_ONCE_MAX and not sparse and spec.source.partner_kind == "rows"
        job.emit(RunStarted(request.run_id, sel.kept, sel.note, partners_later=not at_once, sparse=sparse))
        if at_once:
            matrix = None if M_lease is None else M_lease.array((ex.n_tokens, ex.n_tokens))
            _partners(job, ex, spec, request, sel.at_hand(matrix))
        if M_lease is not None:
            M_lease.release()
        last = None
        for frame, due in paced_frames(job, sel.P, request.options, pace, record):
            last = frame
            if due and frame.iteration != request.options["n_iter"]:
                job.emit(RunFrame(request.run_id, frame.iteration, frame.kl, frame.embedding,
                                  len(record.kl_history), done=False))  # fmt: skip
                if not at_once:  # a long text: the partners once the first frame is out, on their own slot
                    at_once = True
                    job.emit(PartnersDue(request.run_id, sel.at_hand()))
        if last is None:
            raise RuntimeError("the optimisation reported no frame")
        job.emit(RunFrame(request.run_id, last.iteration, last.kl, last.embedding, len(record.kl_history), done=True))
        if not at_once:
            job.emit(PartnersDue(request.run_id, sel.at_hand()))
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


def _partners(
    job: Job, ex: Extraction, spec: Spec, request: RunRequest, at_hand: AtHand, workspace: Workspace | None = None
) -> None:
    """The partners of run ``request``, to the owner: the source's, from what its P left ``at_hand``; a dense head's
    matrix computed again goes into a lease of ``workspace`` (None: an array of the source's, at once on a short
    text)."""
    arrays = None if workspace is None else Arrays(workspace, ex.n_tokens)
    try:
        alloc = None if arrays is None else arrays.alloc
        found = spec.source.partners(ex, spec, request.edge_k, at_hand=at_hand, alloc=alloc, check=job.check)
    finally:
        if arrays is not None:
            arrays.release()
    job.emit(Partners(request.run_id, partner_traits(found)))


def partner_traits(found: TokenPartners) -> dict[str, Any]:
    """The widget's partner traits ``edges``, ``attends_to``, ``attended_by``: each ``{"indices", "weights"}``, or
    None (a source of points has no directions)."""

    def pack(ranked: Ranked | None) -> dict[str, np.ndarray] | None:
        return None if ranked is None else {"indices": ranked.indices, "weights": ranked.weights}

    return {"edges": pack(found.edges), "attends_to": pack(found.attends_to), "attended_by": pack(found.attended_by)}


def partners_job(
    job: Job, ex: Extraction, *, run_id: int, key: SelectionKey, k: int, workspace: Workspace, at_hand: AtHand
) -> None:
    """The partners of the run ``run_id`` on the partners slot, beside its frames: a long text's once its first
    frame is out (``at_hand``: what its P left, :class:`~.run_messages.PartnersDue`), or again for a new ``edge_k``
    (``AtHand(sparse=...)``: what that P held is given back, so a sparse head's rows are selected again)."""
    _partners(job, ex, key.spec(ex), RunRequest(run_id, key, {}, k), at_hand, workspace)
