"""How the owner applies the results jobs hand over (owner thread only; see :mod:`.jobs`).

:class:`Results` holds the owner's handlers, one method per kind of result, and its status line; it is mixed
into :class:`~.owner.Owner`, whose fields are declared here and set in ``Owner.__init__``, so only the owner
ever assigns them (``owner.HANDLERS`` is the one table from a result's type to its handler). A result of a
run that is no longer the current one is dropped here (a cancelled job's never reaches this far).
:class:`RunState` is the owner's view of a run.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import traitlets as t

from ..affinity.heads import default_grid_norm
from ..affinity.sources import source
from ..capture.extraction import Extraction
from ..embedding.alignment import align_rows
from ..errors import HeadSNEError
from .atlas import AtlasDone, AtlasHead, AtlasStarted
from .colors import color_traits
from .decomposition_view import colour_by_share
from .head_map import HeadMapDone
from .jobs import Failed, Job, Progress, Slot
from .loading import NOT_GIVEN, Asked, check_tokens, data_traits, make_prefetch
from .model import HeadSNEModel
from .pacing import RunRecord
from .prefetch import Prefetch
from .run_messages import BestKL, Partners, RunFrame, RunRequest, RunStarted, status_line
from .workspace import Workspace

__all__ = ["Results", "RunState"]


@dataclass(eq=False)
class RunState:
    """The owner's view of one run."""

    request: RunRequest
    record: RunRecord = field(default_factory=RunRecord)
    job: Job | None = None
    kept: np.ndarray | None = None
    kl_count: int = 0  # entries of record.kl_history up to the frame shown
    frames: int = 0  # frames of this run shown so far (none: what is shown is an earlier run's)
    note: str = ""  # why the perplexity was lowered, shown with every status line
    sparse: bool = False  # the builder made P sparse (not decided by length: a broad head's P may be dense)
    ended: bool = False
    error: BaseException | None = None


class Results:
    """The owner's result handlers and status line (see the module doc); fields set in ``Owner.__init__``."""

    widget: HeadSNEModel
    slots: dict[str, Slot]
    asked: Asked
    ex: Extraction | None
    load_error: BaseException | None
    workspace: Workspace | None
    prefetch: Prefetch | None
    run: RunState | None
    reference: tuple[np.ndarray, np.ndarray] | None  # last display frame and its tokens
    embedding: np.ndarray | None  # the raw embedding of the frame shown
    user_colors: Any

    # ------------------------------------------------------------------------------ the status line

    def status(self, what: str, iteration: int = 0, kl: float | None = None) -> str:
        w = self.widget
        note = "" if self.run is None else self.run.note
        return status_line(what, source(w.mode).label(w.layer, w.head), iteration, w.n_iter, kl, note)

    def fail(self, err: BaseException, message: str, *, warn: bool) -> None:
        """Show an error in the status line (state "error"); from Python's side also warn."""
        if self.run is not None:
            self.run.error, self.run.ended = err, True
        self.widget.state, self.widget.status = "error", message
        if warn:
            warnings.warn(message, UserWarning, stacklevel=3)

    def recolour(self, previous: str = "position") -> None:
        """Colour values for "max_attention" mode (the selected head's, none for a source without heads) and for
        "user" mode (the user's values again, after another mode replaced them). "user" without values (the
        browser chose it before ``w.color_by = values``) goes back to ``previous`` and the status says how to give
        them: never another mode's values shown as the user's."""
        w = self.widget
        if self.ex is None:
            return
        if w.color_mode == "max_attention":
            w.color_values = self.ex.max_attention[w.layer, w.head] if source(w.mode).per_head else None
            w.color_categories = []
        elif w.color_mode == "head_share":  # the selected head's share of each token's state (decomposition_view)
            colour_by_share(self)
        elif w.color_mode == "user" and self.user_colors is None:
            with w.hold_sync():
                w.color_mode = previous if previous != "user" else "position"
                w.status = "no values of yours to colour by: give one per token with w.color_by = values"
        elif w.color_mode == "user":
            traits = color_traits(self.user_colors, self.ex.n_tokens)
            with w.hold_sync():
                w.color_values, w.color_categories = traits["color_values"], traits["color_categories"]

    def withdraw_frame(self) -> None:
        """Take the shown frame away (its rows no longer match, or it was an earlier run's)."""
        self.widget.frame, self.reference, self.embedding = None, None, None

    # ----------------------------------------------------------------------------------- the text

    def take_extraction(self, ex: Extraction) -> bool:
        """The data traits, the selection asked for at construction, the workspace and the prefetch; False (and
        ``load_error`` set, shown as the widget's error) for a text too short or a selection out of range."""
        widget, asked = self.widget, self.asked
        try:
            check_tokens(ex)
        except ValueError as err:
            return self._refuse(err)
        with widget.hold_sync():
            if not widget.tokens:  # not given at construction: the data traits now
                for name, value in data_traits(ex).items():
                    setattr(widget, name, value)
            try:
                layer = ex.n_layers - 1 if asked.layer is NOT_GIVEN else asked.layer
                widget.layer, widget.head, widget.mode = layer, asked.head, asked.mode
            except t.TraitError as err:
                return self._refuse(err)
            if asked.grid_norm is NOT_GIVEN:  # the grid that shows the heads: above uniform for causal models
                widget.grid_norm = default_grid_norm(ex)
            widget.state, widget.progress = "idle", None
            widget.status = f"idle - {ex.model_name}, {ex.n_tokens} tokens: click a head or press play"
        self.ex, self.workspace = ex, Workspace(ex.n_tokens)
        self.prefetch = make_prefetch(ex, self.workspace, self.slots["prefetch"])
        return True

    def _refuse(self, err: BaseException) -> bool:
        """The text or the selection asked for is refused: the widget's error (``wait_ready`` raises it)."""
        self.load_error = err
        self.widget.state, self.widget.status, self.widget.progress = "error", str(err), None
        return False

    def on_progress(self, job: Job, progress: Progress) -> None:
        """A load's progress in the status line, or that of the current run's P before its first frame (a long
        text's rows); a replaced run's or another job's is dropped."""
        run = self.run
        if self.ex is None:
            self.widget.status, self.widget.progress = progress.what, progress.fraction
        elif run is not None and run.job is job and run.kept is None and not run.ended:
            self.widget.status, self.widget.progress = f"{self.status('building')}: {progress.what}", progress.fraction

    # -------------------------------------------------------------------------------------- failures

    def on_failed(self, job: Job, failed: Failed) -> None:
        """A job's error, by the slot that ran it; a prefetch's or partners' is dropped (the click, or the next
        run, computes it again and reports there)."""
        handler = _FAILURES.get(job.slot)
        if handler is not None:
            handler(self, job, failed.error)

    def _load_failed(self, job: Job, error: BaseException) -> None:
        self.load_error = error
        self.widget.state, self.widget.status, self.widget.progress = (
            "error",
            f"could not capture the text: {error}",
            None,
        )

    def _atlas_failed(self, job: Job, error: BaseException) -> None:
        self.widget.atlas_state, self.widget.status = "error", f"the head atlas failed: {error}"

    def _heads_failed(self, job: Job, error: BaseException) -> None:
        self.widget.status = f"the head map failed: {error}"

    def _run_failed(self, job: Job, error: BaseException) -> None:
        if self.run is None or self.run.job is not job:
            return
        w = self.widget
        label = source(w.mode).label(w.layer, w.head)
        expected = isinstance(error, HeadSNEError | ValueError | TypeError)  # P undefined for this head, ...
        self.fail(error, f"{label}: {error}" if expected else f"{label}: t-SNE failed: {error}", warn=False)

    # ------------------------------------------------------------------------------------------ runs

    def current_run(self, job: Job, run_id: int, *, any_job: bool = False) -> RunState | None:
        """The current run when ``run_id`` is its id and (unless ``any_job``: partners) ``job`` its job."""
        run = self.run
        if run is None or run.request.run_id != run_id or not (any_job or run.job is job):
            return None  # a replaced run's
        return run

    def on_started(self, job: Job, started: RunStarted) -> None:
        run, w = self.current_run(job, started.run_id), self.widget
        if run is None:
            return
        run.kept, run.note, run.sparse = started.kept, started.note, started.sparse
        with w.hold_sync():
            if w.kept != started.kept.tolist():  # the old frame's rows no longer match: withdraw it
                self.withdraw_frame()
            w.kept = started.kept.tolist()
            per_token = source(run.request.key.mode).points_per_token
            w.query_rows = len(started.kept) // per_token if per_token > 1 else 0  # query-key: the queries first
            w.iteration, w.kl, w.progress = 0, None, None
            w.status = self.status("starting")
            if started.partners_later:  # the new partners come after the first frame: the old ones go now
                w.edges = w.attends_to = w.attended_by = None
            self.recolour()

    def on_frame(self, job: Job, frame: RunFrame) -> None:
        run = self.current_run(job, frame.run_id)
        if run is None:
            return
        assert run.kept is not None
        display = frame.embedding
        if self.reference is not None:
            display = align_rows(display, run.kept, *self.reference)
        self.embedding, run.kl_count, run.frames = frame.embedding, frame.kl_count, run.frames + 1
        w = self.widget
        state = w.state
        if frame.done:
            run.ended, state = True, "done"
            status = self.status("done", frame.iteration, frame.kl)
        else:
            status = self.status("running", frame.iteration) if state != "paused" else w.status
        with w.hold_sync():
            if not (frame.done and frame.iteration == w.iteration and w.frame is not None):
                w.frame = display  # the final report may repeat the last sent frame: not resent
            w.iteration, w.kl, w.status, w.state = frame.iteration, frame.kl, status, state
        self.reference = (display, run.kept)

    def on_partners(self, job: Job, partners: Partners) -> None:
        """The hover lines, from the run's job or a partners job (``edge_k`` changed) of the current run."""
        if self.current_run(job, partners.run_id, any_job=True) is not None:
            with self.widget.hold_sync():
                for name, value in partners.traits.items():
                    setattr(self.widget, name, value)

    def on_best_kl(self, job: Job, best: BestKL) -> None:
        if self.current_run(job, best.run_id) is not None:
            self.widget.best_kl = best.kl

    # --------------------------------------------------------------------------- atlas and head map

    def on_atlas_started(self, job: Job, started: AtlasStarted) -> None:
        widget = self.widget
        with widget.hold_sync():
            widget.atlas = np.zeros((started.n_heads, started.m, 2), np.float32)
            widget.atlas_kl = np.zeros(started.n_heads, np.float32)
            widget.atlas_heads, widget.atlas_layer, widget.atlas_state = [], started.layer, "running"
            widget.atlas_n_iter, widget.atlas_seed = started.n_iter, started.seed

    def on_atlas_head(self, job: Job, head: AtlasHead) -> None:
        widget = self.widget
        if widget.atlas is None:
            return
        embeddings, kls = widget.atlas.copy(), widget.atlas_kl.copy()
        embeddings[head.head], kls[head.head] = head.embedding, head.kl
        with widget.hold_sync():
            widget.atlas, widget.atlas_kl = embeddings, kls
            widget.atlas_heads = sorted({*widget.atlas_heads, head.head})

    def on_atlas_done(self, job: Job, done: AtlasDone) -> None:
        self.widget.atlas_state = "done"

    def on_head_map(self, job: Job, done: HeadMapDone) -> None:
        self.widget.head_map = done.positions


#: a failed job's handler by the slot that ran it (prefetch and partners: none, see ``Results.on_failed``)
_FAILURES = {
    "load": Results._load_failed,
    "atlas": Results._atlas_failed,
    "heads": Results._heads_failed,
    "run": Results._run_failed,
}
