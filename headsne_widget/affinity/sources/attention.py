"""Attention mode: P = (A + A^T) of one head, zero diagonal, normalised (thesis Def. 3.1)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .base import HeadMatrixSource, Limits, Progress

if TYPE_CHECKING:
    from ...capture.extraction import Extraction

__all__ = ["Attention"]


class Attention(HeadMatrixSource):
    """One attention head's weights A, exactly as the model computes them."""

    name = "attention"
    describes = "attention-head t-SNE: P = A + A^T of the selected head"
    title = "attention-head t-SNE"
    option = "attention head"

    def matrix(self, ex: Extraction, layer: int, head: int) -> np.ndarray:
        return np.asarray(ex.attention(layer, head))

    def matrix_into(self, ex: Extraction, layer: int, head: int, out: np.ndarray) -> np.ndarray:
        return np.asarray(ex.attention_into(layer, head, out))

    def kept_keys(self, ex: Extraction) -> int | None:
        """The keys a row the capture kept (``ex.kept_row_keys``, ``extract(..., rows=)``): where P is sparse anyway
        (the dense P does not fit the budget) each row keeps its mass within them, so that a head change reads
        them instead of recomputing the head (docs/long-texts.md, "The cap")."""
        return getattr(ex, "kept_row_keys", None)

    def rows(
        self, ex: Extraction, layer: int, head: int, mass: float, progress: Progress | None, limits: Limits
    ) -> Any:
        """The capture's own rows (never the n x n head): read from the rows the capture kept where every row's
        answer lies within them (``limits.max_keys`` at most what was kept), else recomputed."""
        if hasattr(ex, "sparse_attention"):
            bounds = {"max_keys": limits.max_keys, "max_entries": limits.max_entries}
            return ex.sparse_attention(layer, head, mass=mass, progress=progress, **bounds)
        return super().rows(ex, layer, head, mass, progress, limits)
