"""The owner and its text: the captured text received (its data, the selection asked for or the opening head, the head
map and the first run), its capture's failure, and the end (``close``)."""

from __future__ import annotations

import functools

import traitlets as t

from ...affinity.heads import default_grid_norm, head_features
from ...affinity.neighbours import prepare as prepare_neighbours
from ...capture.extraction import Extraction
from ..head_map import head_map_job
from ..jobs import Job
from ..loading import NOT_GIVEN, OPENING_NOTE, Loaded, check_tokens, data_traits, make_prefetch, opening_selection
from ..workspace import Workspace
from .results import RunResults

__all__ = ["Text"]


class Text(RunResults):
    """The captured text and the end (see the module doc)."""

    def on_loaded(self, job: Job, loaded: Loaded) -> None:
        self.receive(loaded.ex)

    def on_load_failed(self, job: Job, error: BaseException) -> None:
        self.load_error = error
        self.write({"state": "error", "status": f"could not capture the text: {error}", "progress": None})

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

    def take_extraction(self, ex: Extraction) -> bool:
        """The data traits, the selection asked for at construction, the workspace and the prefetch; False (and
        ``load_error`` set, shown as the widget's error) for a text too short or a selection out of range."""
        widget, asked = self.widget, self.asked
        try:
            check_tokens(ex)
        except ValueError as err:
            return self.refuse(err)
        with widget.hold_sync():
            if not widget.tokens:  # not given at construction: the data traits now
                self.write(data_traits(ex))
            layer, head, chosen = opening_selection(asked, widget.scores, widget.score_names, widget.head_kinds,
                                                    ex.n_layers)  # fmt: skip
            try:
                widget.layer, widget.head, widget.mode = layer, head, asked.mode
            except t.TraitError as err:
                return self.refuse(err)
            self.opened = (layer, head) if chosen else None
            if asked.grid_norm is NOT_GIVEN:  # the grid that shows the heads: above uniform for causal models
                widget.grid_norm = default_grid_norm(ex)
            widget.state, widget.progress = "idle", None
            opened = f"; {OPENING_NOTE}" if chosen else ""
            widget.status = f"idle - {ex.model_name}, {ex.n_tokens} tokens: click a head or press play{opened}"
        self.ex, self.workspace = ex, Workspace(ex.n_tokens)
        self.prefetch = make_prefetch(ex, self.workspace, self.slots["prefetch"])
        return True

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
