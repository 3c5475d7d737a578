"""The owner's panels: the decomposition (each token's state split by what wrote it, :mod:`..decomposition_view`
computes it), and why a head attends (one edge's attribution, the selected head's composition links,
:mod:`..attribution_view` computes them). The views compute in the background and hand over values; the owner
starts their jobs and writes what they show.
"""

from __future__ import annotations

import functools
from typing import Any

from ..attribution_view import (
    AttributionDone,
    CompositionDone,
    attribution_job,
    composition_job,
    composition_links,
    known_composition,
)
from ..decomposition_view import DecompositionDone, decomposition_job
from ..jobs import Job
from .control import RunControl

__all__ = ["Panels"]


class Panels(RunControl):
    """The decomposition, attribution and composition panels (see the module doc)."""

    # ---------------------------------------------------------------------------------- decomposition

    def start_decomposition(self) -> None:
        """The selected layer's decomposition for the panel, in the background; from now on it follows the layer."""
        ex, w = self.ready(), self.widget
        self.decomposition_wanted = True
        if w.decomposition_layer == w.layer and w.decomposition_state == "done":
            return
        self.slots["decomposition"].start(functools.partial(decomposition_job, ex=ex, layer=w.layer))
        w.decomposition_state = "running"

    def follow_layer(self, change: Any) -> None:
        """A new layer: its decomposition, once the panel or the colour mode has asked for one; a new head: its shares
        as the colours in "head_share" mode."""
        if change.name == "layer" and self.decomposition_wanted and self.ex is not None:
            self.start_decomposition()
        if change.name in ("layer", "head") and self.widget.color_mode == "head_share" and self.ex is not None:
            self.colour_by_share()

    def colour_by_share(self) -> None:
        """``color_values`` in "head_share" mode: the selected head's share of each token's state at its layer, from
        the decomposition (asked for now when it is not there yet: the colours come with it)."""
        w = self.widget
        heads = w.decomposition_heads
        if w.decomposition_state == "done" and w.decomposition_layer == w.layer and heads is not None:
            self.write({"color_values": heads[w.head], "color_categories": []})
            return
        w.color_values = None
        if w.decomposition_state != "running":
            self.start_decomposition()

    def on_decomposition(self, job: Job, done: DecompositionDone) -> None:
        """The job's result: the panel's arrays, or the refusal in the status line."""
        w = self.widget
        if done.layer != w.layer:
            return  # an earlier layer's: the current one is on its way
        with w.hold_sync():
            if done.error:
                w.decomposition_state, w.status = "error", done.error
                return
            w.decomposition_terms, w.decomposition_heads = done.terms, done.heads
            w.decomposition_layer, w.decomposition_state = done.layer, "done"
            if w.color_mode == "head_share":
                self.colour_by_share()

    # ------------------------------------------------------------------------ attribution and composition

    def on_attribution_request(self, change: Any) -> None:
        """The browser (or Python) asked for one edge's attribution: start its job, show it running."""
        if change.new is None or self.ex is None:
            return
        layer, head, i, j = (int(v) for v in change.new)
        request = {"layer": layer, "head": head, "i": i, "j": j}
        self.widget.attribution = {**request, "state": "running", "error": ""}
        self.slots["attribution"].start(functools.partial(attribution_job, ex=self.ex, request=request))

    def on_attribution(self, job: Job, done: AttributionDone) -> None:
        self.widget.attribution = done.payload

    def start_composition(self) -> None:
        """The control message "composition": compute the table (once per extraction), then list the links."""
        ex = self.ready()
        frame = known_composition(ex)
        if frame is not None:
            self.update_composition(frame)
            return
        w = self.widget
        w.composition = {"state": "running", "error": "", "layer": w.layer, "head": w.head, "links": []}
        self.slots["composition"].start(functools.partial(composition_job, ex=ex))

    def on_composition(self, job: Job, done: CompositionDone) -> None:
        w = self.widget
        if done.frame is None:
            w.composition = {"state": "error", "error": done.error, "layer": w.layer, "head": w.head, "links": []}
            return
        self.update_composition(done.frame, done.seconds)

    def update_composition(self, frame: Any = None, seconds: float | None = None) -> None:
        """``composition`` for the selected head (after a selection change: only once the table is there)."""
        w, ex = self.widget, self.ex
        frame = frame if frame is not None else (known_composition(ex) if ex is not None else None)
        if frame is None:
            return
        done = {"state": "done", "error": "", "layer": w.layer, "head": w.head}
        if seconds is None and isinstance(w.composition, dict):
            seconds = w.composition.get("seconds")
        w.composition = {**done, "links": composition_links(frame, w.layer, w.head), "seconds": seconds}
