"""Norm mode: value-weighted attention, N_ij = alpha_ij ||f_h(x_j)|| with each row renormalised (Kobayashi et al.,
"Attention is not only a weight", 2020), and P built from N exactly as attention mode builds it from A.

f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h is what head h adds to a token per unit of attention to key j (GQA: the
key/value head the query head reads), from the capture's components (``extract(..., components=True)``). A
long text's P keeps the attention's kept keys (``mass`` of each attention row) reweighted by their norms, each
row holding the share of its weight that the attention row kept: with ``mass=1`` it is the dense P.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from .attention import Attention
from .base import Limits, Progress

if TYPE_CHECKING:
    from ...capture.extraction import Extraction

__all__ = ["Norm"]


class Norm(Attention):
    """Where a head's attention moves something: each weight times the norm of what its key sends."""

    name = "norm"
    describes = "value-weighted attention: each weight times the norm of what its key sends"
    title = "value-weighted attention t-SNE"
    option = "value-weighted attention"

    def label(self, layer: int, head: int) -> str:
        return f"value-weighted layer {layer} head {head}"

    def matrix(self, ex: Extraction, layer: int, head: int) -> np.ndarray:
        from ...capture.decompose import norm_attention

        return np.asarray(norm_attention(ex, layer, head))

    def matrix_into(self, ex: Extraction, layer: int, head: int, out: np.ndarray) -> np.ndarray:
        """Written in ``out`` in place (no (n, n) beside it: attention mode's memory)."""
        from ...capture.decompose import norm_attention_into

        return norm_attention_into(ex, layer, head, out)

    def rows(
        self, ex: Extraction, layer: int, head: int, mass: float, progress: Progress | None, limits: Limits
    ) -> Any:
        """The attention's kept rows (a column rescaling by the value norms), each scaled back to the share of its
        row the attention kept: with equal norms the attention's rows, with every key kept the dense N."""
        from ...capture.decompose import value_norms

        A = sp.csr_matrix(super().rows(ex, layer, head, mass, progress, limits), dtype=np.float64)
        norms = np.asarray(value_norms(ex)[layer, head], dtype=np.float64)
        N = sp.csr_matrix(A.multiply(norms[None, :]))
        sums, kept = np.asarray(N.sum(axis=1)).ravel(), np.asarray(A.sum(axis=1)).ravel()
        scale = np.divide(kept, sums, out=np.zeros_like(sums), where=sums > 0)
        N = sp.csr_matrix(sp.diags(scale) @ N)
        N.eliminate_zeros()
        N.sort_indices()
        return N
