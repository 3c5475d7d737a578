"""Head-output mode: the t-SNE of o_{l,h,t}, the vector head h of layer l adds to token t, with perplexity-calibrated
Gaussians as hidden mode. The distances are exact without forming the (n, d) outputs: the points are the head's
(n, d_h) context times a factor of W_O^h's Gram matrix (``capture.decompose.head_outputs``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .base import PointSource

if TYPE_CHECKING:
    from ...capture.extraction import Extraction

__all__ = ["HeadOutput"]


class HeadOutput(PointSource):
    """What one head writes into each token."""

    name = "head-output"
    describes = "what the selected head writes into each token (its output vectors)"
    title = "head-output t-SNE"
    option = "what the head writes"

    def label(self, layer: int, head: int) -> str:
        return f"output of layer {layer} head {head}"

    def space(self, ex: Extraction, layer: int, head: int) -> np.ndarray:
        from ...capture.decompose import head_outputs

        return head_outputs(ex, layer, head).points()
