"""The head map: every head of a model as one mark, placed by how alike the heads are, coloured by their kind.

It is the model-wide overview the atlas (a t-SNE per head) cannot afford at scale: the head features of
:mod:`headsne_widget.affinity.heads` (scores, maximum-attention row, received attention; O(n) per head, already
folded during the capture) are embedded in 2-D by the package's exact t-SNE with Gaussian affinities (perplexity
``min(30, (N - 1) / 3)`` for N heads, seed ``seed``: the same positions for the same extraction and seed), or by
their first two principal components when a model has fewer than ``TSNE_MIN_HEADS`` heads. Positions are centred
and scaled into [-1, 1]. Composing the affinity stage (features) with the embedding stage (t-SNE), it is a view's
data, like the token map, and lives with the widget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..affinity.affinities import gaussian_affinities
from ..affinity.heads import default_grid_norm, head_features, related_heads
from ..capture.scores import head_scores
from ..widget.runs import closing_frames

if TYPE_CHECKING:
    from ..capture.extraction import Extraction

__all__ = ["HEAD_MAP_ITER", "TSNE_MIN_HEADS", "HeadMap", "HeadMapDone", "head_map", "head_map_job"]

#: fewest heads laid out by t-SNE; fewer are placed by their first two principal components
TSNE_MIN_HEADS = 16
#: t-SNE iterations of the head map (512 heads: about a second)
HEAD_MAP_ITER = 750


@dataclass(frozen=True, eq=False)
class HeadMap:
    """``positions`` float32 (L * H, 2) in [-1, 1], rows in model order; ``kinds`` per head; ``method`` "t-SNE" or
    "PCA"; ``grid_norm`` the grid normalisation of the features; ``features`` (for :meth:`related`)."""

    positions: np.ndarray
    kinds: list[str]
    method: str
    grid_norm: str
    features: np.ndarray
    n_heads: int

    def related(self, layer: int, head: int, k: int = 8) -> list[dict[str, Any]]:
        """The ``k`` heads most similar to (layer, head) (:func:`~headsne_widget.affinity.heads.related_heads`)."""
        return related_heads(self.features, layer * self.n_heads + head, k, self.n_heads)


def head_map(
    ex: Extraction, *, seed: int = 0, grid_norm: str | None = None, check: Callable[[], None] | None = None
) -> HeadMap:
    """The head map of an extraction (see the module doc); ``check()`` is called between t-SNE steps (a cancel
    point for the widget's job)."""
    norm = default_grid_norm(ex) if grid_norm is None else grid_norm
    features = head_features(ex, norm)
    kinds = head_scores(ex)["kind"].tolist()
    if len(features) >= TSNE_MIN_HEADS:
        P = gaussian_affinities(features, perplexity=min(30.0, (len(features) - 1) / 3))
        last = None
        with closing_frames(P, n_iter=HEAD_MAP_ITER, seed=seed, every=50) as frames:
            for last in frames:  # noqa: B007 - the last frame is the map
                if check is not None:
                    check()
        assert last is not None
        positions, method = np.asarray(last.embedding, dtype=np.float64), "t-SNE"
    else:
        centred = features - features.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        positions = centred @ vt[:2].T if vt.shape[0] >= 2 else np.zeros((len(features), 2))
        positions = np.pad(positions, ((0, 0), (0, 2 - positions.shape[1])))
        positions *= np.where(positions.sum(axis=0) < 0, -1.0, 1.0)  # a fixed sign for each axis
        method = "PCA"
    positions = positions - positions.mean(axis=0)
    scale = float(np.abs(positions).max())
    positions = positions / scale if scale > 0 else positions
    return HeadMap(positions.astype(np.float32), kinds, method, norm, features, ex.n_heads)


@dataclass(frozen=True)
class HeadMapDone:
    """The widget's head map is computed."""

    positions: np.ndarray
    method: str


def head_map_job(job: Any, ex: Extraction) -> None:
    """The head map for the widget, as a background job (a cancel point at every reported t-SNE step)."""
    layout = head_map(ex, check=job.check)
    job.emit(HeadMapDone(layout.positions, layout.method))
