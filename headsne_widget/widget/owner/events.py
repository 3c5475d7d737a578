"""The Owner itself: its construction (the synced model made with its first values, its observers wired), the
model's events and the browser's messages, the user's writes, and :data:`HANDLERS`, the one table from a job's
result to the method that applies it."""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

from ...capture.extraction import Extraction
from ..atlas import ATLAS_N_ITER, AtlasDone, AtlasHead, AtlasStarted
from ..attribution_view import AttributionDone, CompositionDone
from ..decomposition_view import DecompositionDone
from ..head_map import HeadMapDone
from ..jobs import Failed, Job, Progress
from ..loading import Asked, Loaded, data_traits, prefetch_job
from ..model import HeadSNEModel, display_only
from ..pacing import Stopped
from ..protocol import RESTARTS_RUN
from ..run_messages import BestKL, Partners, PartnersDue, RunFrame, RunStarted
from .state import KEY_TRAITS
from .text import Text

__all__ = ["CONTROLS", "HANDLERS", "Owner"]


class Owner(Text):
    """State, jobs and trait updates of one widget (owner thread only): see :mod:`headsne_widget.widget.owner`."""

    def __init__(self, widget: HeadSNEModel, asked: Asked) -> None:
        super().__init__(widget, asked, self.apply)
        widget.on_browser, widget.on_control, widget.hand_over = self.on_browser, self.on_control, self.handed_over
        widget.check_sort = self.check_sort  # sort_heads: a relation found in the text
        widget.observe(self.on_run_trait, names=sorted(RESTARTS_RUN))
        widget.observe(self.on_hovered_head, names="hovered_head")
        widget.observe(self.on_p_trait, names=list(KEY_TRAITS))
        widget.observe(self.on_display, names=["edge_k", "color_mode", "speed"])
        widget.observe(self.on_selection, names=["layer", "head", "mode"])
        widget.observe(self.on_sort, names="sort_heads")
        widget.observe(self.on_attribution_request, names="attribution_request")
        widget.observe(self.on_cluster_labels, names="cluster_labels")

    @classmethod
    def from_extraction(cls, ex: Extraction, asked: Asked, traits: Mapping[str, Any]) -> Owner:
        """The owner of a new widget (its first values: the extraction's data and ``traits``) made from a ready
        extraction; a selection out of range closes it and raises (the constructor's caller sees it, nothing is
        left open)."""
        owner = cls(HeadSNEModel(**data_traits(ex), **traits), asked)
        owner.receive(ex)
        if owner.load_error is not None:
            error = owner.load_error
            owner.close()
            raise error
        owner.slots["load"].start(functools.partial(prefetch_job, ex=ex))  # every head into the cache
        return owner

    @classmethod
    def start_loading(cls, asked: Asked, load: Callable[[Job], None], traits: Mapping[str, Any]) -> Owner:
        """The owner of a new widget (its first values ``traits``) whose text ``load`` captures in the background (it
        hands over :class:`Loaded`)."""
        owner = cls(HeadSNEModel(state="loading", status="loading the model", **traits), asked)
        owner.slots["load"].start(load)
        return owner

    def apply(self, job: Job, result: Any) -> None:
        """Apply one job result (called by the inbox on the owner thread), by its handler in :data:`HANDLERS`."""
        HANDLERS[type(result)](self, job, result)

    def on_failed(self, job: Job, failed: Failed) -> None:
        """A job's error, by the slot that ran it; a prefetch's or partners' is dropped (the click, or the next
        run, computes it again and reports there)."""
        handler = {"load": self.on_load_failed, "atlas": self.on_atlas_failed, "heads": self.on_head_map_failed,
                   "run": self.on_run_failed}.get(job.slot)  # fmt: skip
        if handler is not None:
            handler(job, failed.error)
        elif self.run is not None and self.run.partners_job is job:
            self.run.partners_job = None  # nothing more to wait for

    # ------------------------------------------------------------------------------ the user's writes

    def set_by_user(self, name: str, value: Any, *, restarts: bool) -> None:
        """``w.name = value`` from Python (owner thread only): a change that ``restarts`` the run waits for the text
        (changes made together start one run: the scheduled one starts later)."""
        self.inbox.check_owner("this HeadSNE widget")
        if restarts:
            self.ready(flush=False)
        setattr(self.widget, name, value)

    # ------------------------------------------------------------------------------------ model events

    def on_selection(self, change: Any) -> None:
        if self.opened != (self.widget.layer, self.widget.head):
            self.opened = None  # another head chosen: the status no longer says why the widget opened where it did
        self.update_related()
        self.follow_layer(change)
        self.update_composition()

    def on_display(self, change: Any) -> None:
        if change.name == "speed":
            self.pace.speed = change.new
        elif change.name == "color_mode":
            self.recolour(change.old)
        else:  # edge_k
            self.new_partners(change.new)

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
        if self.handed_over(self.on_control, action):
            return
        CONTROLS[action](self)


#: the browser's control messages (protocol.CONTROL_ACTIONS, tests/test_protocol.py holds them equal) and the
#: owner's method that acts on each
CONTROLS: dict[str, Callable[[Owner], None]] = {
    "pause": Owner.pause,
    "resume": Owner.resume,
    "restart": Owner.restart,
    "stop": Owner.stop,
    "atlas": lambda owner: owner.start_atlas(ATLAS_N_ITER),
    "atlas_stop": Owner.stop_atlas,
    "composition": Owner.start_composition,
    "decomposition": Owner.start_decomposition,
}

#: the one table of results: each kind a job hands over, and the owner's method that applies it
HANDLERS: dict[type, Callable[[Owner, Job, Any], None]] = {
    Loaded: Owner.on_loaded,
    Progress: Owner.on_progress,
    Failed: Owner.on_failed,
    RunStarted: Owner.on_started,
    RunFrame: Owner.on_frame,
    Stopped: Owner.on_stopped,
    Partners: Owner.on_partners,
    PartnersDue: Owner.on_partners_due,
    BestKL: Owner.on_best_kl,
    AtlasStarted: Owner.on_atlas_started,
    AtlasHead: Owner.on_atlas_head,
    AtlasDone: Owner.on_atlas_done,
    HeadMapDone: Owner.on_head_map,
    DecompositionDone: Owner.on_decomposition,
    AttributionDone: Owner.on_attribution,
    CompositionDone: Owner.on_composition,
}
