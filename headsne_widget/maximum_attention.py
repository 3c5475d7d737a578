"""Layer-wise maximum attention (thesis Def. 4.2): how strongly any query attends to each token.

For one head, ``MA(A)_j = max_i A_ij`` reduces the n x n attention matrix to one value per token; stacked
over the heads of a layer this is the h x n map of the widget's grid. A bright cell (head k, token j) says
that some token takes most of its information in head k from token j, which makes the heads worth a
t-SNE easy to spot.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["max_attention"]


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
    if not np.issubdtype(A.dtype, np.floating):
        if not np.issubdtype(A.dtype, np.number) or np.issubdtype(A.dtype, np.complexfloating):
            raise TypeError(f"attentions must be real numbers, got dtype {A.dtype}")
        A = A.astype(np.float64)
    if not np.isfinite(A).all():
        raise ValueError("attentions contain NaN or infinite values")
    return A.max(axis=-2)
