"""The head atlas: a small t-SNE of every head of a layer, to compare all heads at a glance.

:func:`head_atlas` is the pure computation (arrays out). :func:`atlas_job` computes the same for the widget as
a background job (:mod:`.jobs`): a head at a time in leased arrays, a cancel point at every reported step of
every head's t-SNE (a stop returns at once, and the job ends within a few iterations), each finished head
handed to the owner as it comes. An atlas belongs to its layer; heads not finished are missing, never zeros.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..affinity.selection import selection_affinities
from ..affinity.spec import kept_count
from ..embedding.background import closing_frames
from ..embedding.tsne import tsne
from .jobs import Job
from .selections import RowsHold, SelectionKey, build_selection
from .workspace import Workspace

if TYPE_CHECKING:
    from ..capture.extraction import Extraction

__all__ = ["ATLAS_EVERY", "ATLAS_N_ITER", "Atlas", "AtlasDone", "AtlasHead", "AtlasStarted", "atlas_job", "head_atlas"]

#: iterations of each atlas thumbnail: enough for the structure, a fraction of a full run
ATLAS_N_ITER = 300
#: iterations between two cancel points of a thumbnail's run
ATLAS_EVERY = 10


@dataclass(frozen=True, eq=False)
class Atlas:
    """Per head of one layer: an embedding (H, m, 2) over the tokens ``kept`` and its exact KL (H,)."""

    layer: int
    embeddings: np.ndarray
    kls: np.ndarray
    kept: np.ndarray


def head_atlas(
    ex: Extraction, layer: int, *, n_iter: int = ATLAS_N_ITER, seed: int = 0, exclude_special: bool = False
) -> Atlas:
    """A small attention-head t-SNE of every head of ``layer`` (same seed and settings for each)."""
    embeddings, kls, kept = [], [], np.arange(0)
    for head in range(ex.n_heads):
        sel = selection_affinities(ex, "attention", layer, head, exclude_special=exclude_special)
        result = tsne(sel.P, n_iter=n_iter, seed=seed)
        embeddings.append(np.asarray(result.embedding, dtype=np.float32))
        kls.append(float(result.kl))
        kept = sel.kept
    return Atlas(layer, np.stack(embeddings), np.array(kls), kept)


@dataclass(frozen=True)
class AtlasStarted:
    """An atlas of ``layer`` is being computed: ``n_heads`` thumbnails over ``m`` tokens, each a run of ``n_iter``
    iterations from ``seed``."""

    layer: int
    n_heads: int
    m: int
    n_iter: int = ATLAS_N_ITER
    seed: int = 0


@dataclass(frozen=True)
class AtlasHead:
    """One finished thumbnail."""

    layer: int
    head: int
    embedding: np.ndarray
    kl: float


@dataclass(frozen=True)
class AtlasDone:
    """Every head of the layer is done."""

    layer: int


def atlas_job(
    job: Job, ex: Extraction, layer: int, *, n_iter: int, seed: int, exclude_special: bool, workspace: Workspace
) -> None:
    """The atlas of ``layer`` for the widget, a head at a time (see the module doc)."""
    m = kept_count(ex, exclude_special)
    job.emit(AtlasStarted(layer, ex.n_heads, m, n_iter, seed))
    for head in range(ex.n_heads):
        key = SelectionKey("attention", layer, head, exclude_special, 0.0)
        sel, hold, M_lease = build_selection(job, ex, key, workspace)
        with hold:
            if M_lease is not None:
                M_lease.release()
            if isinstance(hold, RowsHold):
                hold.release()  # a sparse head's rows: the thumbnail needs only P
            last = None
            options = dict(n_iter=n_iter, seed=seed, every=ATLAS_EVERY, kl_every=n_iter, first_kl=False)
            with closing_frames(sel.P, check_input=False, **options) as frames:
                for last in frames:  # noqa: B007 - the last frame is the thumbnail
                    job.check()
        if last is None or last.kl is None:
            raise RuntimeError(f"the atlas run of head {head} reported no final frame")
        job.emit(AtlasHead(layer, head, last.embedding, float(last.kl)))
    job.emit(AtlasDone(layer))
