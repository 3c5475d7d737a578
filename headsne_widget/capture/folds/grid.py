"""The maximum-attention grid as a fold (thesis Def. 4.2): each key's largest weight from any query, per head.

Each chunk's maximum over its query rows joins the layer's running maximum (:func:`..maximum_attention.
max_attention_update`) on the layer's device; the result is float32 ``(L, H, n)``, ``Extraction.max_attention``.
"""

from __future__ import annotations

import numpy as np
import torch

from ..maximum_attention import max_attention_update
from .base import Fold, LayerShape

__all__ = ["MaxAttentionGrid"]


class MaxAttentionGrid(Fold):
    """``max_i A[i, j]`` of every head, folded over the query chunks."""

    name = "max_attention"

    def start(self, layer: LayerShape) -> None:
        self.grid = torch.zeros((layer.n_heads, layer.n_tokens), dtype=torch.float32, device=layer.device)

    def chunk(self, rows: slice, keys: slice, weights: torch.Tensor) -> None:
        self.grid[:, keys] = max_attention_update(self.grid[:, keys], weights)

    def end_layer(self) -> np.ndarray:
        return self.grid.cpu().numpy()

    def finish(self, layers: list[np.ndarray]) -> np.ndarray:
        return np.stack(layers)
