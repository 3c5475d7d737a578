"""The sparse P of ``selection_affinities`` for long texts (issue 21): the function calls :func:`sparse_selection`
when :func:`wants_sparse` says so, so that every caller gets the same P for a selection.

A P is sparse (a ``scipy.sparse.csr_matrix``, see :mod:`.sparse`) from :data:`.sparse.SPARSE_MIN_TOKENS` kept
tokens on, or whenever ``sparse=True``; ``sparse=False`` keeps it dense at any length, and so does a call with
``out=`` (a dense buffer to write P into). Attention mode keeps each query's smallest set of largest keys
reaching ``mass`` of its attention (``Extraction.sparse_attention(layer, head, mass)`` where the extraction
has it, else from the dense head), and the result's ``mass`` says how much of the attention P carries.
Hidden mode gives the k-nearest-neighbour Gaussian P (k = 3 x perplexity, as openTSNE), ``mass`` None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .selection import Selection, checked_selection, effective_perplexity
from .sparse import (
    SPARSE_MIN_TOKENS,
    check_mass,
    knn_gaussian_affinities,
    largest_entries,
    sparse_attention_affinities,
)

__all__ = ["SPARSE_MODES", "SparseSelection", "sparse_selection", "wants_sparse"]

#: the modes that have a sparse P (query-key stays dense: it refuses long texts)
SPARSE_MODES = ("attention", "hidden")


@dataclass(frozen=True, eq=False)
class SparseSelection(Selection):
    """A :class:`~.selection.Selection` whose P is sparse; ``mass``: the share of the head's attention its
    entries carry (attention mode), None in hidden mode."""

    mass: float | None = None


def wants_sparse(ex: Any, sparse: bool | None, out: np.ndarray | None, exclude_special: bool, mass: Any) -> bool:
    """Whether ``selection_affinities`` gives a sparse P (see the module doc); the sparse options checked."""
    check_mass(mass)
    if sparse not in (None, True, False):
        raise TypeError(f"sparse must be None (by length), True or False, got {sparse!r}")
    if sparse and out is not None:
        raise ValueError("out= receives a dense P; it cannot be combined with sparse=True")
    if sparse is not None or out is not None:
        return bool(sparse)
    m = ex.n_tokens - (int(np.count_nonzero(ex.special)) if exclude_special else 0)
    return m >= SPARSE_MIN_TOKENS


def sparse_selection(
    ex: Any,
    mode: str,
    layer: int,
    head: int,
    *,
    perplexity: float,
    exclude_special: bool,
    dtype: Any,
    attention: np.ndarray | None,
    mass: float,
) -> SparseSelection:
    """The sparse P of one selection (``selection_affinities``'s arguments, checked the same way)."""
    layer, head, exclude, kept, label = checked_selection(ex, mode, layer, head, exclude_special, SPARSE_MODES)
    if mode == "attention":
        if attention is None and hasattr(ex, "sparse_attention"):
            rows = ex.sparse_attention(layer, head, mass=mass)
        else:
            rows = largest_entries(ex.attention(layer, head) if attention is None else attention, mass)
        P, kept_mass, kept = sparse_attention_affinities(rows, exclude=exclude, dtype=dtype)  # type: ignore[misc]
        return SparseSelection(P, kept, label, mass=kept_mass)
    used, note = effective_perplexity(perplexity, len(kept))
    X = np.asarray(ex.layer_output(layer), dtype=np.float64)[kept]
    P = knn_gaussian_affinities(X, used, dtype=dtype)
    return SparseSelection(P, kept, label, used, note, mass=None)
