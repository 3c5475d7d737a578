"""The owner's view of the heads: the head atlas (a small t-SNE per head of a layer), the head map, the heads most
like the selected one, each layer's heads in the order asked for (a score, or a dependency relation of the text),
and the P built ahead for the row the pointer rests on."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...affinity.heads import related_heads
from ...affinity.sources import source
from ...capture.scores import SCORES
from ..atlas import AtlasDone, AtlasHead, AtlasStarted, atlas_job
from ..head_map import HeadMapDone
from ..jobs import Job
from ..syntax_view import check_sort, relation_scores
from .colours import Colours

__all__ = ["RELATED_K", "Heads", "head_order", "order_by"]

#: how many related heads ``related`` lists
RELATED_K = 8


def head_order(scores: np.ndarray, names: list[str], sort: str) -> np.ndarray:
    """int32 (L, H): each layer's heads by the score ``sort``, largest first, ties and missing (-1) scores in model
    order; the identity for ``sort == ""``."""
    n_layers, n_heads = scores.shape[:2]
    if not sort:
        return np.tile(np.arange(n_heads, dtype=np.int32), (n_layers, 1))
    return order_by(scores[..., names.index(sort)])


def order_by(values: np.ndarray) -> np.ndarray:
    """int32 (L, H): each layer's heads by ``values`` (L, H), largest first, ties in model order and NaN last."""
    n_layers, n_heads = values.shape
    identity = np.arange(n_heads)
    return np.stack([np.lexsort((identity, -values[k])) for k in range(n_layers)]).astype(np.int32)


class Heads(Colours):
    """The atlas, the head map, related heads, the heads' order and the hovered row (see the module doc)."""

    # ------------------------------------------------------------------------------------------ atlas

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

    def on_atlas_started(self, job: Job, started: AtlasStarted) -> None:
        w = self.widget
        with w.hold_sync():
            w.atlas = np.zeros((started.n_heads, started.m, 2), np.float32)
            w.atlas_kl = np.zeros(started.n_heads, np.float32)
            w.atlas_heads, w.atlas_layer, w.atlas_state = [], started.layer, "running"
            w.atlas_n_iter, w.atlas_seed = started.n_iter, started.seed

    def on_atlas_head(self, job: Job, head: AtlasHead) -> None:
        w = self.widget
        if w.atlas is None:
            return
        embeddings, kls = w.atlas.copy(), w.atlas_kl.copy()
        embeddings[head.head], kls[head.head] = head.embedding, head.kl
        with w.hold_sync():
            w.atlas, w.atlas_kl = embeddings, kls
            w.atlas_heads = sorted({*w.atlas_heads, head.head})

    def on_atlas_done(self, job: Job, done: AtlasDone) -> None:
        self.widget.atlas_state = "done"

    def on_atlas_failed(self, job: Job, error: BaseException) -> None:
        self.widget.atlas_state, self.widget.status = "error", f"the head atlas failed: {error}"

    # ------------------------------------------------------------------------ head map, related, order

    def on_head_map(self, job: Job, done: HeadMapDone) -> None:
        self.widget.head_map = done.positions

    def on_head_map_failed(self, job: Job, error: BaseException) -> None:
        self.widget.status = f"the head map failed: {error}"

    def update_related(self) -> None:
        """``related``: the heads most like the selected one (none in hidden mode)."""
        w = self.widget
        if self.features is None or self.ex is None:
            return
        index = w.layer * self.ex.n_heads + w.head
        w.related = related_heads(self.features, index, RELATED_K, self.ex.n_heads) if source(w.mode).per_head else []

    def update_order(self) -> None:
        """``head_order``: each layer's heads sorted by ``sort_heads``, a score or a relation of the text (each head's
        accuracy on it here, :mod:`..syntax_view`); a relation the text lacks, or no parser, goes back to the model's
        order with the reason in the status line (a name given before the text was captured is checked here)."""
        w = self.widget
        if w.scores is None:
            return
        if w.sort_heads in ("", *SCORES) or self.ex is None:
            w.head_order = head_order(w.scores, list(SCORES), w.sort_heads if w.sort_heads in SCORES else "")
            return
        try:
            values = relation_scores(self.ex, w.sort_heads)
        except (ImportError, ValueError) as err:  # ImportError: ParserUnavailableError, which names the extra
            self.write({"sort_heads": "", "status": f"cannot sort the heads: {err}"})
            return
        w.head_order = order_by(values)

    def check_sort(self, value: str) -> str:
        """The model's check of ``sort_heads`` (:func:`..syntax_view.check_sort` against the captured text)."""
        return check_sort(value, self.ex)

    def on_sort(self, change: Any) -> None:
        self.update_order()

    # ------------------------------------------------------------------------------- the hovered row

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

    def on_p_trait(self, change: Any) -> None:
        """A trait P depends on besides the row changed: the row rested on before is forgotten, so that resting
        on it again is a change (a new P to build; js/store/intents.js scopes its dwell by the same traits)."""
        self.widget.hovered_head = None
