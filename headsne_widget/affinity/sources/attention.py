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
        """The capture's own rows (never the n x n head) where the extraction has them: read from the rows the
        capture kept (``ex.kept_row_keys``) where every row's answer lies within them, else recomputed. P is the
        thesis's at ``mass`` either way: the kept rows' cap is not imposed on P (a broad head's rows capped at 90
        keys would keep the first 90 of near-equal keys, about 1 % of a uniform row at 8192 tokens)."""
        if hasattr(ex, "sparse_attention"):
            bounds = {"max_keys": limits.max_keys, "max_entries": limits.max_entries}
            return ex.sparse_attention(layer, head, mass=mass, progress=progress, **bounds)
        return super().rows(ex, layer, head, mass, progress, limits)
