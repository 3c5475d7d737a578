"""The one P builder: every P of a selection (the widget's runs, the prefetch, the atlas, a long text, the studies)
is built by :func:`build_p`, so a head means the same P everywhere.

Dense or sparse is one visible branch here. A sparse P (``scipy.sparse``, O(n x keys)) is tried from
:data:`~.sparse.SPARSE_MIN_TOKENS` kept tokens on where the source has one, unless the caller decides. Every
allocation that grows with n^2 or with a row's width is budgeted before it is made (:mod:`headsne_widget.budget`):

- a sparse head keeps its rows within the budget's entries; where they would hold more entries than the dense P
  costs in bytes (a broad head: near-uniform rows keep n^2 / 2 entries at mass 0.99) and the dense P fits, the
  dense P is built instead (chosen by length alone, the two differed 5x in time at the threshold);
- where neither fits, each row keeps at most its ``budget / n`` largest keys: P then holds less than ``mass`` of
  the head's weights, which ``Selection.mass`` (in all) and the rows' ``kept`` (per row) report and the note says;
- a source of points lowers the perplexity until its neighbours fit; a dense P over the budget is refused
  (``MemoryBudgetError``) naming what to set.

The caller's memory comes in as hooks: ``alloc(shape, role)`` gives the arrays a dense build writes ("matrix": the
head's (n, n) matrix, "P"), ``check()`` is called before each n x n pass (a cancel point), ``progress(share)``
while a long head's rows are selected; both may raise to stop the build.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse

from ..budget import SPARSE_ENTRY_BYTES, memory_budget_bytes, within_budget
from .partners import AtHand
from .sources.base import Alloc, Built, HeadMatrixSource, Limits, Progress, PSource, Spec, fitted
from .sparse import SPARSE_MIN_TOKENS

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

    from ..capture.extraction import Extraction

__all__ = ["Alloc", "Selection", "build_p", "wants_sparse"]


@dataclass(frozen=True, eq=False)
class Selection:
    """P of one selection and what it covers.

    Attributes
    ----------
    P : float64 or float32 (m, m) array (the ``dtype`` asked for), or a ``scipy.sparse.csr_matrix`` (long texts);
        symmetric, zero diagonal, sums to 1.
    kept : int64 (m,), the token index of each row of P (query-key mode: the kept tokens twice).
    label : "layer 2 head 5" or "hidden states of layer 2".
    perplexity : the perplexity used (the modes of points, e.g. hidden), else None.
    note : "" or why the perplexity was lowered.
    mass : a sparse head P: the share of the head's weights its entries carry; else None.
    rows : a sparse head P: the head's kept rows it was built from (the widget's hover lines); else None.
    """

    P: np.ndarray | csr_matrix
    kept: np.ndarray
    label: str
    perplexity: float | None = None
    note: str = ""
    mass: float | None = None
    rows: Any = None

    def at_hand(self, matrix: np.ndarray | None = None) -> AtHand:
        """What this P leaves for its partners (``PSource.partners``): a sparse head's rows, a kNN P's own search,
        and ``matrix``, the head's dense matrix where the caller still holds it."""
        sparse = scipy.sparse.issparse(self.P)
        return AtHand(sparse, matrix, self.rows, getattr(self.P, "neighbours", None))


def wants_sparse(src: PSource, m: int, sparse: bool | None = None) -> bool:
    """Whether the P of ``m`` kept tokens from ``src`` is tried sparse: as asked (``sparse``), else from
    ``SPARSE_MIN_TOKENS`` kept tokens on where the source has a sparse P."""
    if sparse is not None:
        return sparse
    return src.has_sparse and m >= SPARSE_MIN_TOKENS


def build_p(
    ex: Extraction, spec: Spec, *, sparse: bool | None, dtype: Any = np.float32, out: np.ndarray | None = None,
    matrix: np.ndarray | None = None, progress: Progress | None = None, alloc: Alloc | None = None,
    check: Callable[[], None] | None = None,
) -> Selection:  # fmt: skip
    """P of the checked selection ``spec`` (see the module doc): ``sparse`` True / False, or None to decide by
    length and memory; the arguments are trusted (checked by :func:`~.selection.selection_affinities` or the
    widget's protocol)."""
    src, n, budget = spec.source, ex.n_tokens, memory_budget_bytes()
    dense_cost = src.dense_bytes(n, spec.n_points, np.dtype(dtype).itemsize)
    if wants_sparse(src, len(spec.kept), sparse):
        instead = dense_cost if sparse is None and dense_cost <= budget else None
        built = _sparse(ex, spec, dtype, progress, budget, instead)
        if built is not None:
            return _selection(spec, built)
    elif out is None:
        within_budget(
            dense_cost,
            f"a dense P of {spec.label} for {len(spec.kept)} tokens would",
            "sparse=None (a sparse P for long texts), fewer tokens (max_tokens=)",
        )
    return _selection(spec, _dense(ex, spec, dtype, out, matrix, alloc=alloc, check=check))


def _sparse(
    ex: Extraction, spec: Spec, dtype: Any, progress: Progress | None, budget: int, instead: int | None
) -> Built | None:
    """The sparse P within the budget (a head's capped where its rows' mass does not fit, :func:`.sources.base.fitted`;
    a source of points lowers its perplexity, or refuses); None where the dense P (``instead`` bytes, fitting) is
    the smaller."""
    src, entries = spec.source, budget // SPARSE_ENTRY_BYTES
    switch = None if instead is None else instead // SPARSE_ENTRY_BYTES
    make = lambda limits: src.sparse(ex, spec, dtype=dtype, progress=progress, limits=limits)  # noqa: E731
    if not isinstance(src, HeadMatrixSource):
        limit = entries if switch is None else min(entries, switch)
        return make(Limits(max_entries=max(limit, 1)))
    keys = src.kept_keys(ex) if instead is None else None  # P sparse anyway: within the rows the capture kept
    found = fitted(make, ex.n_tokens, entries, switch=switch, keys=keys)
    if found is None:
        return None
    built, cap = found
    shares = getattr(built.rows, "kept", None)  # each row's share kept: below the mass only where the cap bit
    if cap is None or (shares is not None and len(shares) and float(np.min(shares)) >= spec.mass * (1 - 1e-9)):
        return built
    held = f"{built.mass:.1%}" if built.mass is not None else "less"
    why = "kept at capture: extract(..., rows=)" if cap == keys else "memory budget"
    note = f"each token keeps at most its {cap} largest keys ({why}): P holds {held} of the head's weights"
    return replace(built, note=note)


def _dense(
    ex: Extraction, spec: Spec, dtype: Any, out: np.ndarray | None, matrix: np.ndarray | None, *, alloc: Alloc | None,
    check: Callable[[], None] | None,
) -> Built:  # fmt: skip
    """The dense P, its arrays from ``alloc`` where given (the head's matrix first, then P)."""
    src, n = spec.source, ex.n_tokens
    if alloc is not None and matrix is None and isinstance(src, HeadMatrixSource):
        if check is not None:
            check()
        matrix = src.matrix_into(ex, spec.layer, spec.head, alloc((n, n), "matrix"))
    if alloc is not None and out is None:
        if check is not None:
            check()
        out = alloc((spec.n_points, spec.n_points), "P")
    return src.dense(ex, spec, dtype=dtype, out=out, matrix=matrix, check=check)


def _selection(spec: Spec, built: Built) -> Selection:
    return Selection(built.P, built.points, spec.label, built.perplexity, built.note, built.mass, built.rows)
