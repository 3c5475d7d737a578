"""Affinities between heads: which heads of a model are alike, from O(n) profiles per head, never an n x n per pair.

Each head becomes one feature vector of three blocks, each scaled to unit length (a block of zeros stays zero):

- ``scores``: its scores (:data:`~headsne_widget.capture.scores.SCORES`: sink, previous, next, self, local,
  entropy, special, future; NaN taken as 0);
- ``max_attention``: its row of the maximum-attention grid, in the grid's default normalisation (above uniform for
  causal models, raw for the others: :func:`default_grid_norm`), i.e. which tokens it singles out;
- ``received``: the mean attention each token receives from it (its column means), i.e. where its mass goes.

The similarity of two heads (:func:`head_similarity`) is the mean of the three blocks' cosines, in [0, 1] (every
entry is non-negative); the related heads of a head (:func:`related_heads`) are the ``k`` others most similar to it.
The head map (:mod:`headsne_widget.widget.head_map`) places the heads by the euclidean distances of the same
vectors (``|f_a - f_b|^2 = 6 (1 - similarity)`` when no block is zero), so related heads are its near neighbours.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..capture.scores import SCORES, statistics

if TYPE_CHECKING:
    from ..capture.extraction import Extraction

__all__ = ["FEATURE_BLOCKS", "default_grid_norm", "grid", "head_features", "head_similarity", "related_heads"]

FEATURE_BLOCKS = ("scores", "max_attention", "received")


def default_grid_norm(ex: Extraction) -> str:
    """``"above_uniform"`` for a model in which no head attends to a later token (causal), else ``"raw"`` (and for
    points without attention between them: a word's occurrences across texts)."""
    if not getattr(ex, "has_attention", True):
        return "raw"
    return "above_uniform" if statistics(ex).causal else "raw"


def grid(ex: Extraction, norm: str | None = None) -> np.ndarray:
    """The maximum-attention grid float32 (L, H, n) in normalisation ``norm`` (None: :func:`default_grid_norm`)."""
    from ..capture.maximum_attention import GRID_NORMS

    norm = default_grid_norm(ex) if norm is None else norm
    if norm not in GRID_NORMS:
        raise ValueError(f"grid normalisation must be one of {', '.join(map(repr, GRID_NORMS))}, got {norm!r}")
    return ex.max_attention if norm == "raw" else statistics(ex).above_uniform


def _unit_rows(block: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(block, axis=1, keepdims=True)
    return np.divide(block, norms, out=np.zeros_like(block), where=norms > 0)


def head_features(ex: Extraction, norm: str | None = None) -> np.ndarray:
    """float64 (L * H, F): every head's feature vector (see the module doc), rows in model order (layer * H + head)."""
    stats = statistics(ex)
    table = stats.table(np.asarray(ex.special, dtype=bool))
    scores = np.nan_to_num(np.stack([table[name] for name in SCORES], axis=-1).reshape(-1, len(SCORES)))
    rows = ex.n_layers * ex.n_heads
    blocks = (scores, grid(ex, norm).reshape(rows, -1), stats.received.reshape(rows, -1))
    return np.concatenate([_unit_rows(np.asarray(b, dtype=np.float64)) for b in blocks], axis=1)


def head_similarity(features: np.ndarray, index: int | None = None) -> np.ndarray:
    """The mean of the blocks' cosines: (N, N) between all heads, or (N,) of head ``index`` to every head."""
    rows = features if index is None else features[index : index + 1]
    similarity = rows @ features.T / len(FEATURE_BLOCKS)
    return similarity if index is None else similarity[0]


def related_heads(features: np.ndarray, index: int, k: int, n_heads: int) -> list[dict[str, Any]]:
    """The ``k`` heads most similar to head ``index`` (flat: layer * n_heads + head), most similar first (ties: model
    order), as ``{"layer", "head", "similarity"}``."""
    similarity = head_similarity(features, index)
    order = [int(j) for j in np.lexsort((np.arange(len(similarity)), -similarity)) if j != index][:k]
    return [{"layer": j // n_heads, "head": j % n_heads, "similarity": float(similarity[j])} for j in order]
