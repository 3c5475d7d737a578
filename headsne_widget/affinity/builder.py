"""The one P builder: every P of a selection (the widget's runs, the prefetch, the atlas, a long text, the studies)
is built by :func:`build_p`, so a head means the same P everywhere.

Dense or sparse is one visible branch here: a sparse P (``scipy.sparse``, O(n x keys)) from
:data:`~.sparse.SPARSE_MIN_TOKENS` kept tokens on where the source has one, unless the caller decides. The
caller's memory is handed in as hooks: ``out`` (a leased array P is written into) and ``matrix`` (the head's
matrix, already computed into a lease); ``progress`` is called while a long head's rows are selected and may
raise to stop the build.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .selection import Selection
from .sources.base import Progress, PSource
from .sparse import SPARSE_MIN_TOKENS
from .spec import Spec

__all__ = ["build_p", "wants_sparse"]


def wants_sparse(src: PSource, m: int, sparse: bool | None = None) -> bool:
    """Whether the P of ``m`` kept tokens from ``src`` is sparse: as asked (``sparse``), else from
    ``SPARSE_MIN_TOKENS`` kept tokens on where the source has a sparse P."""
    if sparse is not None:
        return sparse
    return src.has_sparse and m >= SPARSE_MIN_TOKENS


def build_p(
    ex: Any, spec: Spec, *, sparse: bool, dtype: Any = np.float32, out: np.ndarray | None = None,
    matrix: np.ndarray | None = None, progress: Progress | None = None,
) -> Selection:  # fmt: skip
    """P of the checked selection ``spec`` (see the module doc); the arguments are trusted (checked by the caller:
    :func:`~.selection.selection_affinities` or the widget's protocol)."""
    src = spec.source
    if sparse:
        built = src.sparse(ex, spec, dtype=dtype, progress=progress, matrix=matrix)
    else:
        built = src.dense(ex, spec, dtype=dtype, out=out, matrix=matrix)
    return Selection(built.P, built.points, spec.label, built.perplexity, built.note, built.mass, built.rows)
