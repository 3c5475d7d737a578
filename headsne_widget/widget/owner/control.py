"""The owner's first concern after its state: keeping up with the jobs (``sync``, ``ready``, ``wait``) and the run's
controls (a batch of changes schedules one run; pause, resume, stop, restart; new partners for a new ``edge_k``).

A stop ends a run that showed frames the way it would end by itself: its job is asked to finish
(:meth:`~headsne_widget.widget.jobs.Job.finish`) and hands over, at its next frame, the exact KL of the last frame it
sent (:func:`~headsne_widget.widget.pacing.paced_frames`); ``sync`` waits for that word, so that what Python reads
after ``stop()`` (``kl``, ``embedding``, ``wait()``, a saved page) is one frame and its own KL.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from ...affinity.partners import AtHand
from ...affinity.sources import source
from ...capture.extraction import Extraction
from ..pacing import report_every
from ..protocol import RUN_PARAMETERS
from ..run_messages import RunRequest
from ..runs import partners_job, run_job, run_options
from .state import OwnerState, RunState

__all__ = ["RunControl"]


class RunControl(OwnerState):
    """Reading, waiting and the run's controls (see the module doc)."""

    # ------------------------------------------------------------------------------ reading and waiting

    def sync(self, *, flush: bool = True) -> None:
        """Apply what the jobs handed over (a stopping run's last word included) and (``flush``) start a scheduled
        run."""
        self.inbox.check_owner("this HeadSNE widget")
        self.inbox.drain()
        run = self.run
        if run is not None and run.stopping and not run.ended and not self.closed:
            self.inbox.wait(lambda: run.ended)  # one frame's steps and its exact KL
        if flush:
            self.flush()

    def ready(self, timeout: float | None = None, *, flush: bool = True) -> Extraction:
        """The extraction, once captured (waiting for it); the capture's error, raised."""
        self.sync(flush=flush)
        if self.closed:
            raise RuntimeError("this HeadSNE widget is closed; make a new one")
        if not self.inbox.wait(lambda: self.ex is not None or self.load_error is not None, timeout):
            raise TimeoutError(f"the text is still being captured after {timeout} s")
        if self.load_error is not None:
            raise self.load_error
        assert self.ex is not None
        return self.ex

    def wait(self, timeout: float | None) -> float | None:
        """Wait for the run of the current settings (see ``HeadSNE.wait``)."""
        self.ready(timeout)

        def ended() -> bool:
            self.flush()  # an observer may have changed the settings meanwhile: wait for that run
            run = self.run
            if run is not None and not run.ended and self.widget.state == "paused":
                raise RuntimeError("the run is paused and would never end: resume() it first")
            return run is None or (run.ended and run.partners_job is None)  # its hover lines in too

        if not self.inbox.wait(ended, timeout):
            raise TimeoutError(f"the run is still going after {timeout} s")
        if self.run is not None and self.run.error is not None:
            raise self.run.error
        return self.widget.kl

    # ------------------------------------------------------------------------------------------ runs

    def schedule(self) -> None:
        """Cancel the run and start the new one once the current batch of changes is applied (at the next
        turn of the event loop, at the end of a browser message, or at the next public call)."""
        if self.closed:
            raise RuntimeError("this HeadSNE widget is closed; make a new one")
        if self.pending or self.ex is None:
            return
        self.pending = True
        self.slots["run"].cancel()
        self.slots["partners"].cancel()  # the old run's: they would take a core from the new run's P
        if self.run is not None:
            self.run.ended = True
        w = self.widget
        self.write({"run_id": w.run_id + 1, "state": "running", "status": self.status("building"), "best_kl": None,
                    "progress": None})  # fmt: skip
        if self.inbox.loop is not None:
            self.inbox.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Start the scheduled run, if any."""
        if not self.pending or self.closed or self.ex is None:
            return
        self.pending = False
        w, (ex, workspace) = self.widget, self.loaded()
        key = self.selection_key(w.layer, w.head)
        request = RunRequest(w.run_id, key, {}, w.edge_k)
        try:  # checked before its run: a selection too small for t-SNE (or too large for its mode) is refused here
            points = key.spec(ex).n_points
        except (ValueError, TypeError) as err:
            self.run = RunState(request)
            self.fail(err, f"{source(w.mode).label(w.layer, w.head)}: {err}", warn=False)
            return
        request = replace(request, options=run_options(w, report_every(points, w.restarts, w.speed)))
        self.run = run = RunState(request)
        work = functools.partial(run_job, ex=ex, request=request, record=run.record, workspace=workspace,
                                 prefetch=self.prefetch, pace=self.pace)  # fmt: skip
        run.job = self.slots["run"].start(work)

    def pause(self) -> None:
        self.sync()
        if self.run is not None and self.run.job is not None and self.widget.state == "running":
            self.run.job.pause()
            self.widget.state, self.widget.status = "paused", self.status("paused", self.widget.iteration)

    def resume(self) -> None:
        self.sync()
        if self.run is not None and self.run.job is not None and self.widget.state == "paused":
            self.run.job.resume()
            self.widget.state, self.widget.status = "running", self.status("running", self.widget.iteration)

    def stop(self) -> None:
        """End the run. One that showed frames keeps the last, and its job hands over that frame's exact KL at its
        next frame (``sync`` waits for it); one that showed none leaves no earlier run's frame, KL or map shown as
        its own."""
        self.sync()
        run, w = self.run, self.widget
        if run is None or run.ended:
            return
        if run.frames and run.job is not None:
            run.stopping = True
            run.job.finish()
            w.state, w.status = "idle", self.status("stopped", w.iteration)
            return
        self.slots["run"].cancel()
        run.ended = True
        status = f"stopped {source(w.mode).label(w.layer, w.head)} before its first frame"
        with w.hold_sync():
            self.withdraw_frame()
            self.write({"kl": None, "iteration": 0, "progress": None, "edges": None, "attends_to": None,
                        "attended_by": None, "state": "idle", "status": status})  # fmt: skip

    def restart(self) -> None:
        self.ready()
        self.schedule()
        self.flush()

    def on_run_trait(self, change: Any) -> None:
        """A selection trait or a run parameter changed: a new run (see ``HeadSNE``'s doc for which changes)."""
        w = self.widget
        unchanged = (
            self.ex is None
            or change.old == change.new
            or (change.name in RUN_PARAMETERS and w.state == "idle" and not self.pending)
            or (change.name == "perplexity" and not source(w.mode).uses_perplexity)
            or (change.name == "head" and not source(w.mode).per_head)  # hidden mode depends on the layer only
        )
        if not unchanged:
            self.schedule()

    def new_partners(self, k: int, at_hand: AtHand | None = None) -> None:
        """The partners of the current run for ``k`` partners a token, on the partners slot beside the run's frames:
        from what its P left ``at_hand`` (a long text's run once its first frame is out), or again from the source
        (``edge_k`` changed)."""
        if self.run is None or self.run.kept is None or self.ex is None:
            return
        ex, workspace = self.loaded()
        request = self.run.request
        at_hand = AtHand(sparse=self.run.sparse) if at_hand is None else at_hand
        work = functools.partial(partners_job, ex=ex, run_id=request.run_id, key=request.key, k=k,
                                 workspace=workspace, at_hand=at_hand)  # fmt: skip
        self.run.partners_job = self.slots["partners"].start(work)
