"""Layer-wise maximum attention (thesis Def. 4.2): how strongly any query attends to each token.

For one head, ``MA(A)_j = max_i A_ij`` reduces the n x n attention matrix to one value per token; stacked
over the heads of a layer this is the h x n map of the widget's grid. A bright cell (head k, token j) says
that some token takes most of its information in head k from token j, which makes the heads worth a
t-SNE easy to spot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from .._checks import real_array

if TYPE_CHECKING:
    import torch

__all__ = ["max_attention", "max_attention_update"]


def max_attention(attentions: ArrayLike) -> np.ndarray:
    """Maximum over the query axis ``i`` of attention matrices ``A[..., i, j]``.

    ``attentions`` has shape ``(..., n, n)`` (one head, a layer ``(H, n, n)`` or a whole model
    ``(L, H, n, n)``); the result has shape ``(..., n)`` and keeps the input's float dtype.
    """
    A = np.asarray(attentions)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"attentions must have shape (..., n, n), got shape {A.shape}")
    if A.shape[-1] == 0:
        raise ValueError("attentions are empty (n = 0 tokens)")
    A = real_array(A, "attentions")
    if not np.issubdtype(A.dtype, np.floating):
        A = A.astype(np.float64)
    return A.max(axis=-2)


def max_attention_update(grid: torch.Tensor | None, rows: torch.Tensor) -> torch.Tensor:
    """Def. 4.2 folded over query chunks: the running maximum of ``grid`` ``(..., n)`` and ``rows`` ``(..., c, n)``.

    ``rows`` are consecutive query rows of the same matrices; folding every chunk of them gives ``max_attention``
    of the whole ``(..., n, n)`` without holding it, on the device the rows live on. ``grid`` None starts the fold.
    """
    chunk = rows.amax(dim=-2)
    return chunk if grid is None else grid.maximum(chunk)
