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

__all__ = ["GRID_NORMS", "max_attention", "max_attention_above_uniform", "max_attention_update"]

#: the grid's normalisations: the thesis's raw maximum, and the maximum above uniform attention
GRID_NORMS = ("raw", "above_uniform")


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


def max_attention_above_uniform(attentions: ArrayLike) -> np.ndarray:
    """The maximum-attention grid compared with uniform attention over the keys each query may see.

    ``MA_u(A)_j = max(0, max over rows i with m_i >= 2 of (A_ij m_i - 1) / (m_i - 1))``, with ``m_i`` the number of
    keys row i may attend to (its non-zero entries). A query attending uniformly to what it sees gives 0, a query
    attending only to j gives 1, as in the raw grid. A causal mask makes the raw grid's column 0 exactly 1 in every
    head (the first query sees only token 0) and column j fall like 1 / (j + 1) under attention spread evenly: the
    raw grid draws the mask. Rows with one visible key are left out, and each row is measured against its own
    uniform level, so this grid shows the heads (``benchmarks/grid_norm.py`` measures both on causal,
    sliding-window and bidirectional models). Float64 in, float64 out; else float32.
    """
    A = np.asarray(attentions)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"attentions must have shape (..., n, n), got shape {A.shape}")
    A = real_array(A, "attentions")
    dtype = np.float64 if A.dtype == np.float64 else np.float32
    m = np.count_nonzero(A, axis=-1)[..., None].astype(np.float64)
    seen = m >= 2
    with np.errstate(divide="ignore", invalid="ignore"):
        above = np.where(seen, (A * m - 1.0) / (m - 1.0), 0.0)
    return np.maximum(above.max(axis=-2), 0.0).astype(dtype)


def max_attention_update(grid: torch.Tensor | None, rows: torch.Tensor) -> torch.Tensor:
    """Def. 4.2 folded over query chunks: the running maximum of ``grid`` ``(..., n)`` and ``rows`` ``(..., c, n)``.

    ``rows`` are consecutive query rows of the same matrices; folding every chunk of them gives ``max_attention``
    of the whole ``(..., n, n)`` without holding it, on the device the rows live on. ``grid`` None starts the fold.
    """
    chunk = rows.amax(dim=-2)
    return chunk if grid is None else grid.maximum(chunk)
