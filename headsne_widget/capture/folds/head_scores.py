"""Every head's scores as a fold: :class:`..scores.LayerScores` fed the capture's chunks, ``Extraction.head_stats``.

The sums are float64 and added in query order on one thread, so they never depend on which worker computed a
chunk (:mod:`..scores` has the formulas).
"""

from __future__ import annotations

import numpy as np
import torch

from ..scores import HeadStatistics, LayerScores
from .base import Fold, LayerShape

__all__ = ["HeadScores"]


class HeadScores(Fold):
    """The sums and profiles of :class:`..scores.HeadStatistics`, a layer at a time."""

    name = "head_stats"

    def start(self, layer: LayerShape) -> None:
        self.scores = LayerScores(layer.n_heads, layer.n_tokens, layer.device)

    def chunk(self, rows: slice, keys: slice, weights: torch.Tensor) -> None:
        self.scores.update(rows, keys, weights)

    def end_layer(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self.scores.finish()

    def finish(self, layers: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> HeadStatistics:
        return HeadStatistics.stack(layers)
