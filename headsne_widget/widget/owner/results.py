"""The owner's handlers of a run's results (see :mod:`..jobs`): its start, its frames, a stop's last word, its
partners, its best-of check, its progress and its failure. A result of a run that is no longer the current one is
dropped here (a cancelled job's never reaches this far).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...affinity.sources import source
from ...embedding.alignment import align_rows
from ...errors import HeadSNEError
from ..clusters import MAX_POINTS, cluster_labels
from ..jobs import Job, Progress
from ..pacing import Stopped
from ..run_messages import BestKL, Partners, PartnersDue, RunFrame, RunStarted
from .heads import Heads
from .state import RunState

__all__ = ["RunResults"]


class RunResults(Heads):
    """What a run hands over, applied (see the module doc)."""

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
            w.cluster_names, w.cluster_of = [], None  # the last run's clusters: named again when this one ends
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
        elif run.stopping:  # sent before the job saw the stop: its KL comes with the job's last word
            status = self.status("stopped", frame.iteration)
        else:
            status = self.status("running", frame.iteration) if state != "paused" else w.status
        with w.hold_sync():
            if not (frame.done and frame.iteration == w.iteration and w.frame is not None):
                w.frame = display  # the final report may repeat the last sent frame: not resent
            w.iteration, w.kl, w.status, w.state = frame.iteration, frame.kl, status, state
            if frame.done:
                self.write(self.clusters(frame.embedding, run.kept))
        self.reference = (display, run.kept)

    def clusters(self, embedding: np.ndarray | None, kept: np.ndarray | None) -> dict[str, Any]:
        """``cluster_names`` and ``cluster_of`` for a finished run's map (:mod:`..clusters`): none when
        ``cluster_labels`` is off or the map has more than ``MAX_POINTS`` rows."""
        w = self.widget
        if not w.cluster_labels or embedding is None or kept is None or len(kept) > MAX_POINTS:
            return {"cluster_names": [], "cluster_of": None}
        rows = [int(i) for i in kept]
        labels = [w.point_labels[i] for i in rows] if w.point_labels else []
        names, of = cluster_labels(
            embedding, [w.tokens[i] for i in rows], labels=labels, skip=[w.special[i] for i in rows]
        )
        return {"cluster_names": names, "cluster_of": of}

    def on_cluster_labels(self, change: Any) -> None:
        """``cluster_labels`` turned on or off: a map that has ended (done or stopped) is named, or its names go, at
        once; a run still going names its map when it ends (its points still move)."""
        run = self.run
        if run is None or not run.ended or self.pending:
            if not change.new:
                self.write({"cluster_names": [], "cluster_of": None})
            return
        self.write(self.clusters(self.embedding if run.frames else None, run.kept))

    def on_stopped(self, job: Job, stopped: Stopped) -> None:
        """A stopped run's last word: the exact KL of the frame shown (its last sent), or why it has none."""
        run = self.run
        if run is None or run.job is not job or run.ended:
            return
        run.ended, run.kl_count = True, stopped.kl_count
        kl = f"KL {stopped.kl:.4f}" if stopped.kl is not None else f"no KL: {stopped.why}"
        status = f"{self.status('stopped', stopped.iteration)} - {kl}"
        named = self.clusters(self.embedding if run.frames else None, run.kept)  # no frame: an earlier run's
        self.write({"kl": stopped.kl, "state": "idle", "status": status, **named})

    def on_partners(self, job: Job, partners: Partners) -> None:
        """The hover lines, from the run's job or a partners job (``edge_k`` changed) of the current run."""
        run = self.current_run(job, partners.run_id, any_job=True)
        if run is not None:
            self.write(partners.traits)
            if run.partners_job is job:
                run.partners_job = None

    def on_partners_due(self, job: Job, due: PartnersDue) -> None:
        """A long text's run showed its first frame: its partners, ranked on the partners slot (not its own thread,
        whose frames would stop meanwhile), for the ``edge_k`` in force."""
        if self.current_run(job, due.run_id) is not None:
            self.new_partners(self.widget.edge_k, due.at_hand)

    def on_best_kl(self, job: Job, best: BestKL) -> None:
        if self.current_run(job, best.run_id) is not None:
            self.widget.best_kl = best.kl

    def on_progress(self, job: Job, progress: Progress) -> None:
        """A load's progress in the status line, or that of the current run's P before its first frame (a long
        text's rows); a replaced run's or another job's is dropped."""
        run = self.run
        if self.ex is None:
            self.widget.status, self.widget.progress = progress.what, progress.fraction
        elif run is not None and run.job is job and run.kept is None and not run.ended:
            self.widget.status, self.widget.progress = f"{self.status('building')}: {progress.what}", progress.fraction

    def on_run_failed(self, job: Job, error: BaseException) -> None:
        if self.run is None or self.run.job is not job:
            return
        w = self.widget
        label = source(w.mode).label(w.layer, w.head)
        expected = isinstance(error, HeadSNEError | ValueError | TypeError)  # P undefined for this head, ...
        self.fail(error, f"{label}: {error}" if expected else f"{label}: t-SNE failed: {error}", warn=False)
