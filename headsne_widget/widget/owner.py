"""The owner thread's side of a widget: its state, its jobs, and how changes and results become traits.

:class:`Owner` is what :class:`~headsne_widget.widget.headsne.HeadSNE` delegates to. It observes the synced
model, turns changes into jobs (a change of the selection or a run parameter schedules one run for the whole
batch of changes), and applies the jobs' results (:mod:`.results`). Everything here runs on the owner thread;
:meth:`Owner.sync` is called first by every public method and attribute (see :mod:`.jobs` for the model).
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import numpy as np

from ..affinity.heads import head_features, related_heads
from ..affinity.selection import selection_label
from ..capture.extraction import Extraction
from ..capture.scores import SCORES
from .atlas import atlas_job
from .colors import color_traits
from .head_map import head_map_job
from .inbox import Inbox
from .jobs import Job, Slot
from .loading import Loaded, apply_loaded
from .model import HeadSNEModel, display_only
from .prefetch import Prefetch
from .protocol import RESTARTS_RUN, RUN_PARAMETERS
from .results import RunState, apply_result
from .runs import Pace, RunRequest, SelectionKey, partners_job, report_every, run_job, run_options, status_line
from .workspace import Workspace

__all__ = ["RELATED_K", "SLOTS", "Owner", "head_order"]

#: the kinds of background work, one job at a time each
SLOTS = ("load", "run", "prefetch", "partners", "atlas", "heads")
#: how many related heads ``related`` lists
RELATED_K = 8


def head_order(scores: np.ndarray, names: list[str], sort: str) -> np.ndarray:
    """int32 (L, H): each layer's heads by the score ``sort``, largest first, ties and missing (-1) scores in model
    order; the identity for ``sort == ""``."""
    n_layers, n_heads = scores.shape[:2]
    identity = np.tile(np.arange(n_heads, dtype=np.int32), (n_layers, 1))
    if not sort:
        return identity
    values = scores[..., names.index(sort)]
    return np.stack([np.lexsort((identity[k], -values[k])) for k in range(n_layers)]).astype(np.int32)


class Owner:
    """State, jobs and trait updates of one widget (owner thread only)."""

    def __init__(self, widget: HeadSNEModel, selection: tuple[int, int, str], autostart: bool) -> None:
        self.widget = widget
        self.inbox = Inbox(self.apply)
        self.slots = {name: Slot(name, self.inbox.put) for name in SLOTS}
        self.pace = Pace(widget.speed)
        self.selection, self.autostart = selection, autostart  # asked for at construction, applied once loaded
        self.loading = False  # the text is captured in the background (not given as an Extraction)
        self.ex: Extraction | None = None
        self.load_error: BaseException | None = None
        self.workspace: Workspace | None = None
        self.prefetch: Prefetch | None = None
        self.run: RunState | None = None
        self.reference: tuple[np.ndarray, np.ndarray] | None = None  # last display frame and its tokens
        self.embedding: np.ndarray | None = None  # the raw embedding of the frame shown
        self.user_colors: Any = None
        self.features: np.ndarray | None = None  # every head's feature vector (affinity/heads.py), once loaded
        self.grid_norm_given = False  # HeadSNE(grid_norm=...): not replaced by the model's default at load
        self.pending = self.closed = False
        widget.on_browser, widget.on_control = self.on_browser, self.on_control
        widget.observe(self.on_run_trait, names=sorted(RESTARTS_RUN))
        widget.observe(self.on_hovered_head, names="hovered_head")
        widget.observe(self.on_display, names=["edge_k", "color_mode", "speed"])
        widget.observe(self.on_selection, names=["layer", "head", "mode"])
        widget.observe(self.on_sort, names="sort_heads")

    # ------------------------------------------------------------------------------ reading and waiting

    def sync(self, *, flush: bool = True) -> None:
        """Apply what the jobs handed over and (``flush``) start a scheduled run."""
        self.inbox.check_owner("this HeadSNE widget")
        self.inbox.drain()
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

    def loaded(self) -> tuple[Extraction, Workspace]:
        """The extraction and the workspace (the caller waited for the capture)."""
        if self.ex is None or self.workspace is None:
            raise RuntimeError("the text is not captured yet")
        return self.ex, self.workspace

    def wait(self, timeout: float | None) -> float | None:
        """Wait for the run of the current settings (see ``HeadSNE.wait``)."""
        self.ready(timeout)

        def ended() -> bool:
            self.flush()  # an observer may have changed the settings meanwhile: wait for that run
            run = self.run
            if run is not None and not run.ended and self.widget.state == "paused":
                raise RuntimeError("the run is paused and would never end: resume() it first")
            return run is None or run.ended

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
        if self.run is not None:
            self.run.ended = True
        with self.widget.hold_sync():
            self.widget.run_id += 1
            self.widget.state, self.widget.status, self.widget.best_kl = "running", self.status("building"), None
            self.widget.progress = None
        if self.inbox.loop is not None:
            self.inbox.loop.call_soon(self.flush)

    def flush(self) -> None:
        """Start the scheduled run, if any."""
        if not self.pending or self.closed or self.ex is None:
            return
        self.pending = False
        w, (ex, workspace) = self.widget, self.loaded()
        key = SelectionKey(w.mode, w.layer, w.head, w.exclude_special, w.perplexity)
        m = ex.n_tokens - (int(np.count_nonzero(ex.special)) if w.exclude_special else 0)
        m *= 2 if w.mode == "query-key" else 1  # a query and a key point per token
        request = RunRequest(w.run_id, key, run_options(w, report_every(m, w.restarts, w.speed)), w.edge_k)
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
        self.sync()
        if self.run is not None and not self.run.ended:
            self.slots["run"].cancel()
            self.run.ended = True
            self.widget.state, self.widget.status = "idle", self.status("stopped", self.widget.iteration)

    def restart(self) -> None:
        self.ready()
        self.schedule()
        self.flush()

    def start_atlas(self, n_iter: int) -> None:
        self.ready()
        (ex, workspace), w = self.loaded(), self.widget
        work = functools.partial(atlas_job, ex=ex, layer=w.layer, n_iter=n_iter, seed=w.seed,
                                 exclude_special=w.exclude_special, workspace=workspace)  # fmt: skip
        self.slots["atlas"].start(work)

    def stop_atlas(self) -> None:
        self.sync()
        self.slots["atlas"].cancel()
        if self.widget.atlas_state == "running":
            self.widget.atlas_state = "idle"

    def fail(self, err: BaseException, message: str, *, warn: bool) -> None:
        """Show an error in the status line (state "error"); from Python's side also warn."""
        if self.run is not None:
            self.run.error, self.run.ended = err, True
        self.widget.state, self.widget.status = "error", message
        if warn:
            warnings.warn(message, UserWarning, stacklevel=3)

    def status(self, what: str, iteration: int = 0, kl: float | None = None) -> str:
        w = self.widget
        note = "" if self.run is None else self.run.note
        return status_line(what, selection_label(w.mode, w.layer, w.head), iteration, w.n_iter, kl, note)

    def recolour(self, previous: str = "position") -> None:
        """Colour values for "max_attention" mode (the selected head's, none in hidden mode) and for "user" mode
        (the user's values again, after another mode replaced them). "user" without values (the browser chose
        it before ``w.color_by = values``) goes back to ``previous`` and the status says how to give them:
        never another mode's values shown as the user's."""
        w = self.widget
        if self.ex is None:
            return
        if w.color_mode == "max_attention":
            w.color_values = self.ex.max_attention[w.layer, w.head] if w.mode != "hidden" else None
            w.color_categories = []
        elif w.color_mode == "user" and self.user_colors is None:
            with w.hold_sync():
                w.color_mode = previous if previous != "user" else "position"
                w.status = "no values of yours to colour by: give one per token with w.color_by = values"
        elif w.color_mode == "user":
            traits = color_traits(self.user_colors, self.ex.n_tokens)
            with w.hold_sync():
                w.color_values, w.color_categories = traits["color_values"], traits["color_categories"]

    # -------------------------------------------------------------------------------------- results

    def apply(self, job: Job, result: Any) -> None:
        """Apply one job result (called by the inbox on the owner thread)."""
        if isinstance(result, Loaded):
            self.on_loaded(result)
        else:
            apply_result(self, job, result)

    def on_loaded(self, loaded: Loaded) -> None:
        apply_loaded(self, loaded)
        if self.ex is not None:
            self.features = head_features(self.ex)  # in the model's default grid, as the head map
            self.update_related()
            self.update_order()
            self.slots["heads"].start(functools.partial(head_map_job, ex=self.ex))
        if self.autostart and self.ex is not None:
            self.schedule()
            self.flush()

    def close(self) -> None:
        """Stop every job (they end at their next step), give back every array, close the comm."""
        if self.closed:
            return
        self.closed = True
        for slot in self.slots.values():
            slot.cancel()
        if self.prefetch is not None:
            self.prefetch.close()
        self.inbox.close()
        if self.workspace is not None:
            self.workspace.close()
        self.widget.close()
        self.ex = self.workspace = self.prefetch = self.run = self.reference = self.user_colors = None
        self.embedding = self.features = None

    # ------------------------------------------------------------------------------------ model events

    def on_run_trait(self, change: Any) -> None:
        w = self.widget
        unchanged = (
            self.ex is None
            or change.old == change.new
            or (change.name in RUN_PARAMETERS and w.state == "idle" and not self.pending)
            or (change.name == "perplexity" and w.mode != "hidden")
            or (change.name == "head" and w.mode == "hidden")  # hidden mode depends on the layer only
        )
        if not unchanged:
            self.schedule()

    def on_selection(self, change: Any) -> None:
        self.update_related()

    def on_sort(self, change: Any) -> None:
        self.update_order()

    def update_related(self) -> None:
        """``related``: the heads most like the selected one (none in hidden mode)."""
        w = self.widget
        if self.features is None or self.ex is None:
            return
        index = w.layer * self.ex.n_heads + w.head
        w.related = [] if w.mode == "hidden" else related_heads(self.features, index, RELATED_K, self.ex.n_heads)

    def update_order(self) -> None:
        """``head_order``: each layer's heads sorted by ``sort_heads``."""
        w = self.widget
        if w.scores is not None:
            w.head_order = head_order(w.scores, list(SCORES), w.sort_heads)

    def on_hovered_head(self, change: Any) -> None:
        """The pointer rests on a grid row: build that head's P now, for the click that may follow."""
        w = self.widget
        if self.prefetch is None or change.new is None or w.mode != "attention":
            return
        layer, head = change.new
        if (layer, head) != (w.layer, w.head):
            self.prefetch.aim(SelectionKey("attention", layer, head, w.exclude_special, w.perplexity))

    def on_display(self, change: Any) -> None:
        if change.name == "speed":
            self.pace.speed = change.new
        elif change.name == "color_mode":
            self.recolour(change.old)
        elif self.run is not None and self.run.kept is not None and self.ex is not None:  # edge_k
            ex, workspace = self.loaded()
            work = functools.partial(partners_job, ex=ex, run_id=self.run.request.run_id, key=self.run.request.key,
                                     k=change.new, kept=self.run.kept, workspace=workspace)  # fmt: skip
            self.slots["partners"].start(work)

    def on_browser(self, names: set[str], error: Exception | None) -> None:
        """After each browser update: an invalid run parameter stops the run and shows why; a refused or
        invalid display value is only shown."""
        if error is not None:
            if isinstance(error, PermissionError) or display_only(names):
                self.widget.status = str(error) if isinstance(error, PermissionError) else (
                    f"invalid value from the browser ({', '.join(sorted(names))}): {error}"
                )  # fmt: skip
            else:
                self.slots["run"].cancel()
                self.fail(error, f"invalid value from the browser ({', '.join(sorted(names))}): {error}", warn=False)
        self.flush()  # one message = one run

    def on_control(self, action: str) -> None:
        from .atlas import ATLAS_N_ITER

        if action == "atlas":
            self.start_atlas(ATLAS_N_ITER)
            return
        {"pause": self.pause, "resume": self.resume, "restart": self.restart, "stop": self.stop,
         "atlas_stop": self.stop_atlas}[action]()  # fmt: skip
