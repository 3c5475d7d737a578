"""Hidden mode: perplexity-calibrated Gaussians on a layer's output hidden states (standard t-SNE)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .base import PointSource

if TYPE_CHECKING:
    from ...capture.extraction import Extraction

__all__ = ["Hidden"]


class Hidden(PointSource):
    """The hidden states output by a layer; the head is not used."""

    name = "hidden"
    per_head = False
    describes = "standard t-SNE of the layer's output hidden states"
    title = "hidden-state t-SNE"
    option = "hidden states"

    def label(self, layer: int, head: int) -> str:
        return f"hidden states of layer {layer}"

    def space(self, ex: Extraction, layer: int, head: int) -> np.ndarray:
        return np.asarray(ex.layer_output(layer))
