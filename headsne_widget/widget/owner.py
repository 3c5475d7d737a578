"""The owner thread's side of a widget: its state, its jobs, and how changes and results become traits.

:class:`Owner` is what :class:`~headsne_widget.widget.headsne.HeadSNE` delegates to. It observes the synced
model, turns changes into jobs (a change of the selection or a run parameter schedules one run for the whole
batch of changes), and applies the jobs' results through one table, :data:`HANDLERS` (result type -> handler; the
handlers are its methods, from :class:`~.results.Results`). It alone assigns its fields; it is made by
:meth:`Owner.from_extraction` or :meth:`Owner.start_loading`. Everything here runs on the owner thread;
:meth:`Owner.sync` is called first by every public method and attribute (see :mod:`.jobs` for the model).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

import numpy as np

from ..affinity.heads import head_features, related_heads
from ..affinity.neighbours import prepare as prepare_neighbours
from ..affinity.sources import source
from ..capture.extraction import Extraction
from ..capture.scores import SCORES
from . import attribution_view as why
from . import decomposition_view as parts
from .atlas import AtlasDone, AtlasHead, AtlasStarted, atlas_job
from .colors import color_traits
from .head_map import HeadMapDone, head_map_job
from .inbox import Inbox
from .jobs import Failed, Job, Progress, Slot
from .loading import Asked, Loaded, prefetch_job
from .model import HeadSNEModel, display_only
from .pacing import Pace, report_every
from .protocol import RESTARTS_RUN, RUN_PARAMETERS
from .results import Results, RunState
from .run_messages import BestKL, Partners, RunFrame, RunRequest, RunStarted
from .runs import partners_job, run_job, run_options
from .selections import SelectionKey
from .workspace import Workspace

__all__ = ["HANDLERS", "RELATED_K", "SLOTS", "Owner", "head_order"]

#: the kinds of background work, one job at a time each
SLOTS = ("load", "run", "prefetch", "partners", "atlas", "heads", "attribution", "composition", "decomposition")
#: how many related heads ``related`` lists
RELATED_K = 8
#: the traits a selection's P depends on besides its row (layer, head): a change forgets the row rested on
KEY_TRAITS = tuple(f.name for f in fields(SelectionKey) if f.name not in ("layer", "head"))


def head_order(scores: np.ndarray, names: list[str], sort: str) -> np.ndarray:
    """int32 (L, H): each layer's heads by the score ``sort``, largest first, ties and missing (-1) scores in model
    order; the identity for ``sort == ""``."""
    n_layers, n_heads = scores.shape[:2]
    identity = np.tile(np.arange(n_heads, dtype=np.int32), (n_layers, 1))
    if not sort:
        return identity
    values = scores[..., names.index(sort)]
    return np.stack([np.lexsort((identity[k], -values[k])) for k in range(n_layers)]).astype(np.int32)


class Owner(Results):
    """State, jobs and trait updates of one widget (owner thread only)."""

    def __init__(self, widget: HeadSNEModel, asked: Asked) -> None:
        self.widget = widget
        self.inbox = Inbox(self.apply)
        self.slots = {name: Slot(name, self.inbox.put) for name in SLOTS}
        self.pace = Pace(widget.speed)
        self.asked = asked  # applied once the text is captured
        self.ex, self.load_error, self.workspace, self.prefetch = None, None, None, None
        self.run = None
        self.reference = self.embedding = None
        self.user_colors = None
        self.features: np.ndarray | None = None  # every head's feature vector (affinity/heads.py), once loaded
        self.pending = self.closed = False
        self.decomposition = parts.DecompositionState()  # the decomposition panel's (decomposition_view.py)
        widget.on_browser, widget.on_control, widget.hand_over = self.on_browser, self.on_control, self.handed_over
        widget.observe(self.on_run_trait, names=sorted(RESTARTS_RUN))
        widget.observe(self.on_hovered_head, names="hovered_head")
        widget.observe(self.on_p_trait, names=list(KEY_TRAITS))
        widget.observe(self.on_display, names=["edge_k", "color_mode", "speed"])
        widget.observe(self.on_selection, names=["layer", "head", "mode"])
        widget.observe(self.on_sort, names="sort_heads")
        widget.observe(functools.partial(why.on_attribution_request, self), names="attribution_request")

    @classmethod
    def from_extraction(cls, widget: HeadSNEModel, ex: Extraction, asked: Asked) -> Owner:
        """The owner of a widget made from a ready extraction; a selection out of range closes it and raises
        (the constructor's caller sees it, nothing is left open)."""
        owner = cls(widget, asked)
        owner.receive(ex)
        if owner.load_error is not None:
            error = owner.load_error
            owner.close()
            raise error
        owner.slots["load"].start(functools.partial(prefetch_job, ex=ex))  # every head into the cache
        return owner

    @classmethod
    def start_loading(cls, widget: HeadSNEModel, asked: Asked, load: Callable[[Job], None]) -> Owner:
        """The owner of a widget whose text ``load`` captures in the background (it hands over :class:`Loaded`)."""
        owner = cls(widget, asked)
        owner.slots["load"].start(load)
        return owner

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
        """End the run; one that showed no frame yet leaves no earlier run's frame, KL or map shown as its own."""
        self.sync()
        run, w = self.run, self.widget
        if run is None or run.ended:
            return
        self.slots["run"].cancel()
        run.ended = True
        if run.frames:
            w.state, w.status = "idle", self.status("stopped", w.iteration)
            return
        with w.hold_sync():
            self.withdraw_frame()
            w.kl, w.iteration, w.progress, w.edges, w.attends_to, w.attended_by = None, 0, None, None, None, None
            w.state, w.status = "idle", f"stopped {source(w.mode).label(w.layer, w.head)} before its first frame"

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
        with w.hold_sync():  # running for its layer at once: a polling loop never reads the previous atlas as this one
            w.atlas, w.atlas_kl, w.atlas_heads = None, None, []
            w.atlas_layer, w.atlas_state, w.atlas_n_iter, w.atlas_seed = w.layer, "running", n_iter, w.seed

    def stop_atlas(self) -> None:
        self.sync()
        self.slots["atlas"].cancel()
        if self.widget.atlas_state == "running":
            self.widget.atlas_state = "idle"

    # -------------------------------------------------------------------------------------- results

    def apply(self, job: Job, result: Any) -> None:
        """Apply one job result (called by the inbox on the owner thread), by its handler in :data:`HANDLERS`."""
        HANDLERS[type(result)](self, job, result)

    def on_loaded(self, job: Job, loaded: Loaded) -> None:
        self.receive(loaded.ex)

    def receive(self, ex: Extraction) -> None:
        """The captured text: the widget's data and the selection asked for, the head map and, when asked for,
        the first run."""
        if not self.take_extraction(ex) or not self.take_colors(ex):
            return
        prepare_neighbours(ex.n_tokens)  # a long text's hidden mode searches approximately: compiled ahead
        if ex.has_attention:  # the heads' features and map come from each head's attention in the text
            self.features = head_features(ex)  # in the model's default grid, as the head map
            self.update_related()
            self.update_order()
            self.slots["heads"].start(functools.partial(head_map_job, ex=ex))
        if self.asked.autostart:
            self.schedule()
            self.flush()

    def take_colors(self, ex: Extraction) -> bool:
        """The colouring asked for at construction (``HeadSNE.contexts``'s labels); False (the widget's error)
        when it does not fit the points."""
        colors = self.asked.colors
        if colors is None:
            return True
        if hasattr(colors, "__len__") and not isinstance(colors, str) and len(colors) != ex.n_tokens:
            word = getattr(ex, "word", "")
            return self._refuse(ValueError(f"labels has {len(colors)} entries but {word!r} has {ex.n_tokens} "
                                           f"occurrences in the texts: give one label each"))  # fmt: skip
        try:
            self.colour_by(colors)
        except (TypeError, ValueError) as err:
            return self._refuse(err)
        return True

    def colour_by(self, value: Any) -> None:
        """The user's colouring: a mode name, or values per token kept for "user" mode (checked first)."""
        traits = color_traits(value, self.ready().n_tokens)  # raises before anything changes
        if traits.get("color_mode") == "user":  # kept for "your values" after another mode
            self.user_colors = value
        with self.widget.hold_sync():
            for name, item in traits.items():
                setattr(self.widget, name, item)

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
            or (change.name == "perplexity" and not source(w.mode).uses_perplexity)
            or (change.name == "head" and not source(w.mode).per_head)  # hidden mode depends on the layer only
        )
        if not unchanged:
            self.schedule()

    def on_selection(self, change: Any) -> None:
        self.update_related()
        parts.follow_layer(self, change)
        why.update_composition(self)

    def on_sort(self, change: Any) -> None:
        self.update_order()

    def update_related(self) -> None:
        """``related``: the heads most like the selected one (none in hidden mode)."""
        w = self.widget
        if self.features is None or self.ex is None:
            return
        index = w.layer * self.ex.n_heads + w.head
        w.related = related_heads(self.features, index, RELATED_K, self.ex.n_heads) if source(w.mode).per_head else []

    def update_order(self) -> None:
        """``head_order``: each layer's heads sorted by ``sort_heads``."""
        w = self.widget
        if w.scores is not None:
            w.head_order = head_order(w.scores, list(SCORES), w.sort_heads)

    def on_hovered_head(self, change: Any) -> None:
        """The pointer rests on a grid row: build that head's P now, for the click that may follow."""
        w = self.widget
        if self.prefetch is None or self.ex is None or change.new is None:
            return
        if not source(w.mode).prefetches(self.ex.n_tokens):
            return
        key = self.selection_key(*change.new)
        if key != self.selection_key(w.layer, w.head):  # (hidden: another layer)
            self.prefetch.aim(key)

    def selection_key(self, layer: int, head: int) -> SelectionKey:
        """The key of row (layer, head) under the widget's mode, ``exclude_special`` and perplexity."""
        w = self.widget
        return SelectionKey(w.mode, layer, head, w.exclude_special, w.perplexity)

    def on_p_trait(self, change: Any) -> None:
        """A trait P depends on besides the row changed: the row rested on before is forgotten, so that resting
        on it again is a change (a new P to build; js/store/intents.js scopes its dwell by the same traits)."""
        self.widget.hovered_head = None

    def on_display(self, change: Any) -> None:
        if change.name == "speed":
            self.pace.speed = change.new
        elif change.name == "color_mode":
            self.recolour(change.old)
        elif self.run is not None and self.run.kept is not None and self.ex is not None:  # edge_k
            ex, workspace = self.loaded()
            request, kept = self.run.request, self.run.kept
            work = functools.partial(partners_job, ex=ex, run_id=request.run_id, key=request.key, k=change.new,
                                     kept=kept, workspace=workspace, sparse=self.run.sparse)  # fmt: skip
            self.slots["partners"].start(work)

    def handed_over(self, method: Callable[..., None], *args: Any) -> bool:
        """A browser message that arrived on another thread goes to the owner thread's event loop (True). ipykernel
        7 hands a comm's messages to the subshell that last made the comm publish: after the echo of a browser
        write, the buttons' messages came on a subshell's thread and check_owner refused them (nothing happened)."""
        loop = self.inbox.loop
        if self.inbox.on_owner_thread or loop is None:
            return False
        loop.call_soon_threadsafe(method, *args)
        return True

    def on_browser(self, names: set[str], error: Exception | None) -> None:
        """After each browser update: an invalid run parameter stops the run and shows why; a refused or
        invalid display value is only shown."""
        if self.handed_over(self.on_browser, names, error):
            return
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

        if self.handed_over(self.on_control, action):
            return
        if action == "atlas":
            self.start_atlas(ATLAS_N_ITER)
            return
        if action == "composition":
            why.start_composition(self)
            return
        if action == "decomposition":
            parts.start_decomposition(self)
            return
        {"pause": self.pause, "resume": self.resume, "restart": self.restart, "stop": self.stop,
         "atlas_stop": self.stop_atlas}[action]()  # fmt: skip


#: the one table of results: each kind a job hands over, and the owner's method that applies it
HANDLERS: dict[type, Callable[[Owner, Job, Any], None]] = {
    Loaded: Owner.on_loaded,
    Progress: Owner.on_progress,
    Failed: Owner.on_failed,
    RunStarted: Owner.on_started,
    RunFrame: Owner.on_frame,
    Partners: Owner.on_partners,
    BestKL: Owner.on_best_kl,
    AtlasStarted: Owner.on_atlas_started,
    AtlasHead: Owner.on_atlas_head,
    AtlasDone: Owner.on_atlas_done,
    HeadMapDone: Owner.on_head_map,
    parts.DecompositionDone: parts.on_decomposition,
    why.AttributionDone: why.on_attribution,
    why.CompositionDone: why.on_composition,
}
