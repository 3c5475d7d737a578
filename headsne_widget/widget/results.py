"""How the owner applies the results jobs hand over (owner thread only; see :mod:`.jobs`).

:func:`apply_result` turns one job result into trait changes; :class:`RunState` is the owner's view of a run.
A result of a run that is no longer the current one is dropped here (a cancelled job's never reaches this far).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..affinity.selection import selection_label
from ..embedding.alignment import align_rows
from ..errors import HeadSNEError
from .atlas import AtlasDone, AtlasHead, AtlasStarted
from .head_map import HeadMapDone
from .jobs import Failed, Job
from .loading import Progress, apply_progress
from .runs import BestKL, Partners, RunFrame, RunRecord, RunRequest, RunStarted

if TYPE_CHECKING:
    from .owner import Owner

__all__ = ["RunState", "apply_result"]


@dataclass(eq=False)
class RunState:
    """The owner's view of one run."""

    request: RunRequest
    record: RunRecord = field(default_factory=RunRecord)
    job: Job | None = None
    kept: np.ndarray | None = None
    kl_count: int = 0  # entries of record.kl_history up to the frame shown
    note: str = ""  # why the perplexity was lowered, shown with every status line
    ended: bool = False
    error: BaseException | None = None


def apply_result(owner: Owner, job: Job, result: Any) -> None:
    """Apply one job result on the owner thread."""
    if isinstance(result, Progress):
        apply_progress(owner, job, result)
    elif isinstance(result, Failed):
        _failed(owner, job, result.error)
    elif isinstance(result, AtlasStarted | AtlasHead | AtlasDone):
        _atlas(owner, result)
    elif isinstance(result, HeadMapDone):
        owner.widget.head_map = result.positions
    else:
        run = owner.run
        if run is None or not (run.job is job or job.slot == "partners"):
            return  # a replaced run's
        if getattr(result, "run_id", None) == run.request.run_id:
            _run_result(owner, run, result)


def _failed(owner: Owner, job: Job, error: BaseException) -> None:
    if job.slot == "load":
        owner.load_error = error
        owner.widget.state, owner.widget.status, owner.widget.progress = (
            "error",
            f"could not capture the text: {error}",
            None,
        )
    elif job.slot == "atlas":
        owner.widget.atlas_state = "error"
        owner.widget.status = f"the head atlas failed: {error}"
    elif job.slot == "heads":
        owner.widget.status = f"the head map failed: {error}"
    elif job.slot == "run" and owner.run is not None and owner.run.job is job:
        label = selection_label(owner.widget.mode, owner.widget.layer, owner.widget.head)
        expected = isinstance(error, HeadSNEError | ValueError | TypeError)  # P undefined for this head, ...
        owner.fail(error, f"{label}: {error}" if expected else f"{label}: t-SNE failed: {error}", warn=False)
    # prefetch and partners: the click (or the next run) computes it again and reports there


def _run_result(owner: Owner, run: RunState, result: Any) -> None:
    if isinstance(result, RunStarted):
        _started(owner, run, result)
    elif isinstance(result, RunFrame):
        _frame(owner, run, result)
    elif isinstance(result, Partners):
        with owner.widget.hold_sync():
            for name, value in result.traits.items():
                setattr(owner.widget, name, value)
    elif isinstance(result, BestKL):
        owner.widget.best_kl = result.kl


def _started(owner: Owner, run: RunState, started: RunStarted) -> None:
    run.kept, run.note = started.kept, started.note
    with owner.widget.hold_sync():
        if owner.widget.kept != started.kept.tolist():  # the old frame's rows no longer match: withdraw it
            owner.widget.frame, owner.reference, owner.embedding = None, None, None
        owner.widget.kept = started.kept.tolist()
        owner.widget.query_rows = len(started.kept) // 2 if run.request.key.mode == "query-key" else 0
        owner.widget.iteration, owner.widget.kl, owner.widget.progress = 0, None, None
        owner.widget.status = owner.status("starting")
        if started.partners_later:  # the new partners come after the first frame: the old ones go now
            owner.widget.edges = owner.widget.attends_to = owner.widget.attended_by = None
        owner.recolour()


def _frame(owner: Owner, run: RunState, frame: RunFrame) -> None:
    assert run.kept is not None
    display = frame.embedding
    if owner.reference is not None:
        display = align_rows(display, run.kept, *owner.reference)
    owner.embedding, run.kl_count = frame.embedding, frame.kl_count
    state = owner.widget.state
    if frame.done:
        run.ended, state = True, "done"
        status = owner.status("done", frame.iteration, frame.kl)
    else:
        status = owner.status("running", frame.iteration) if state != "paused" else owner.widget.status
    with owner.widget.hold_sync():
        if not (frame.done and frame.iteration == owner.widget.iteration and owner.widget.frame is not None):
            owner.widget.frame = display  # the final report may repeat the last sent frame: not resent
        owner.widget.iteration, owner.widget.kl, owner.widget.status, owner.widget.state = (
            frame.iteration,
            frame.kl,
            status,
            state,
        )
    owner.reference = (display, run.kept)


def _atlas(owner: Owner, result: AtlasStarted | AtlasHead | AtlasDone) -> None:
    widget = owner.widget
    if isinstance(result, AtlasStarted):
        with widget.hold_sync():
            widget.atlas = np.zeros((result.n_heads, result.m, 2), np.float32)
            widget.atlas_kl = np.zeros(result.n_heads, np.float32)
            widget.atlas_heads, widget.atlas_layer, widget.atlas_state = [], result.layer, "running"
            widget.atlas_n_iter, widget.atlas_seed = result.n_iter, result.seed
    elif isinstance(result, AtlasHead) and widget.atlas is not None:
        embeddings, kls = widget.atlas.copy(), widget.atlas_kl.copy()
        embeddings[result.head], kls[result.head] = result.embedding, result.kl
        with widget.hold_sync():
            widget.atlas, widget.atlas_kl = embeddings, kls
            widget.atlas_heads = sorted({*widget.atlas_heads, result.head})
    elif isinstance(result, AtlasDone):
        widget.atlas_state = "done"
