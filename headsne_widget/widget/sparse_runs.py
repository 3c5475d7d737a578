"""A widget run on a long text (issue 21): a sparse P from the head's kept rows, with no n x n array.

From :data:`~headsne_widget.affinity.sparse.SPARSE_MIN_TOKENS` kept tokens on (the rule of
``selection_affinities``), attention and hidden runs take their P sparse: attention mode builds it from
``ex.sparse_attention(layer, head, SPARSE_MASS)`` (the head's rows, O(n k)) with the same function
``selection_affinities`` uses, so the P is that of the studies, the atlas and the export; hidden mode takes
``selection_affinities``'s k-nearest-neighbour Gaussian P. The run streams frames from the sparse t-SNE as a
dense run does (``tsne_frames`` dispatches on a sparse P). The rows travel with P in a :class:`RowsHold` (the
lease a dense run would hold), so the partners come from them after the first frame without computing the
head again (:mod:`.sparse_partners`); hidden mode's partners are the nearest neighbours in hidden space, in
blocks of rows. Nothing is leased from the workspace: its n x n arrays are never made at these lengths.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from ..affinity.selection import Selection, selection_affinities, selection_label
from ..affinity.sparse import sparse_attention_affinities
from ..affinity.sparse_selection import SPARSE_MODES, SparseSelection, wants_sparse
from .jobs import Job, Progress
from .partners import partner_traits

__all__ = ["SPARSE_MASS", "RowsHold", "build_sparse", "is_sparse", "sparse_partner_traits"]

#: the share of each query row's attention a long text's P keeps (``selection_affinities``'s default)
SPARSE_MASS = 0.99
#: one sparse P built at a time in the process (a run's, the hovered head's, the atlas's): each build's
#: temporaries are several times its P (float64 copies, the transpose, the sum)
_BUILDING = threading.Lock()


class RowsHold:
    """What a sparse run holds in place of a lease: the head's kept rows (None in hidden mode), until released."""

    def __init__(self, rows: Any = None) -> None:
        self.rows = rows

    def array(self, shape: tuple[int, int]) -> np.ndarray:
        raise RuntimeError("a sparse run holds no n x n array")

    def release(self) -> None:
        self.rows = None

    def __enter__(self) -> RowsHold:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def is_sparse(ex: Any, mode: str, exclude_special: bool) -> bool:
    """Whether a run of ``mode`` takes a sparse P: ``selection_affinities``'s rule, for the modes that have one."""
    return mode in SPARSE_MODES and wants_sparse(ex, None, None, exclude_special, SPARSE_MASS)


def build_sparse(job: Job, ex: Any, key: Any) -> tuple[Selection, RowsHold]:
    """The sparse P of ``key`` (a :class:`~.runs.SelectionKey`) and the rows it came from, one build at a time
    in the process; cancel points while it waits and between the steps."""
    while not _BUILDING.acquire(timeout=0.05):
        job.check()
    try:
        return _build(job, ex, key)
    finally:
        _BUILDING.release()


def _build(job: Job, ex: Any, key: Any) -> tuple[Selection, RowsHold]:
    job.check()
    if key.mode == "hidden":
        sel = selection_affinities(
            ex, "hidden", key.layer, perplexity=key.perplexity, exclude_special=key.exclude_special,
            dtype=np.float32,
        )  # fmt: skip
        return sel, RowsHold()
    rows = ex.sparse_attention(key.layer, key.head, mass=SPARSE_MASS, progress=lambda share: _rows_done(job, share))
    exclude = np.asarray(ex.special, dtype=bool) if key.exclude_special else np.zeros(ex.n_tokens, dtype=bool)
    P, mass, kept = sparse_attention_affinities(rows, exclude=exclude, dtype=np.float32)  # type: ignore[misc]
    label = selection_label("attention", key.layer, key.head)
    return SparseSelection(P, kept, label, mass=mass), RowsHold(rows)


def _rows_done(job: Job, share: float) -> None:
    """The rows' progress to the status line (a run's; another job's is dropped), and a cancel point."""
    job.emit(Progress(f"selecting each token's keys ({share:.0%})", share))


def sparse_partner_traits(ex: Any, key: Any, rows: Any, k: int, kept: np.ndarray) -> dict[str, Any]:
    """The partner traits of a sparse run: from the head's kept rows (computed again when ``rows`` is None), or
    the hidden-space neighbours."""
    if key.mode == "hidden":
        return partner_traits(None, ex.layer_output(key.layer), k, kept)
    from .sparse_partners import sparse_head_partners  # numba: imported on first use

    if rows is None:
        rows = ex.sparse_attention(key.layer, key.head, mass=SPARSE_MASS)
    to, by, edges = sparse_head_partners(rows, k, kept)
    pack = lambda pair: {"indices": pair[0], "weights": pair[1]}  # noqa: E731
    return {"edges": pack(edges), "attends_to": pack(to), "attended_by": pack(by)}
