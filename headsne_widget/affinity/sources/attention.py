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

    def rows(
        self, ex: Extraction, layer: int, head: int, mass: float, progress: Progress | None, limits: Limits
    ) -> Any:
        """The capture's own rows (never the n x n head) where the extraction has them; where the capture kept each
        row's largest keys (``ex.kept_row_keys``, a cap chosen for the map: capture/folds/rows.py) a row keeps no
        more of them, so that they are read, not recomputed."""
        if hasattr(ex, "sparse_attention"):
            kept = getattr(ex, "kept_row_keys", None)
            cap = limits.max_keys if kept is None else min(kept, limits.max_keys or kept)
            bounds = {"max_keys": cap, "max_entries": limits.max_entries}
            return ex.sparse_attention(layer, head, mass=mass, progress=progress, **bounds)
        return super().rows(ex, layer, head, mass, progress, limits)
