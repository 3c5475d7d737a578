"""The widget's P: a run's, the hovered head's (prefetch) and the atlas's, all through the one P builder
(:func:`~headsne_widget.affinity.builder.build_p`), with the widget's memory handed to it as hooks.

A dense P (up to ``SPARSE_MIN_TOKENS`` kept tokens) is written into a leased array of the workspace and a head
source's matrix is computed into another lease, which the caller keeps for the hover lines (query-key mode's
(2m)^2 P is an array of the run's own: :class:`~.workspace.OwnArray`). A long text's P is sparse, built from the
head's kept rows (O(n k), nothing leased), one build at a time in the process; what holds it is a
:class:`RowsHold` (the lease a dense run would hold). The hover lines come from the source
(``PSource.partners``), given what the build left at hand (``Selection.at_hand``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import DEFAULT_MASS
from .._parallel import one_blas_thread
from ..affinity.builder import build_p, wants_sparse
from ..affinity.selection import Selection
from ..affinity.sources import source
from ..affinity.sources.base import Spec
from ..affinity.spec import checked_spec
from .jobs import Job, Progress
from .workspace import Lease, OwnArray, Workspace

if TYPE_CHECKING:
    from ..capture.extraction import Extraction

__all__ = ["SPARSE_MASS", "Arrays", "Hold", "RowsHold", "SelectionKey", "build_selection"]

#: the share of each query row's weights a long text's P keeps (``selection_affinities``'s default)
SPARSE_MASS = DEFAULT_MASS
#: one sparse P built at a time in the process (a run's, the hovered head's, the atlas's): each build's
#: temporaries are several times its P (float64 copies, the transpose, the sum)
_BUILDING = threading.Lock()


@dataclass(frozen=True)
class SelectionKey:
    """What P depends on: the selection and, for the sources of points, the perplexity (0 for the others, and
    head 0 for the sources without heads, so that equal P's have equal keys)."""

    mode: str
    layer: int
    head: int
    exclude_special: bool
    perplexity: float

    def __post_init__(self) -> None:
        src = source(self.mode)
        if not src.per_head:
            object.__setattr__(self, "head", 0)
        if not src.uses_perplexity:
            object.__setattr__(self, "perplexity", 0.0)

    def spec(self, ex: Extraction) -> Spec:
        """The checked selection (the widget's traits are checked by the protocol; this checks the text)."""
        perplexity = self.perplexity if source(self.mode).uses_perplexity else 20.0
        return checked_spec(ex, self.mode, self.layer, self.head, exclude_special=self.exclude_special,
                            perplexity=perplexity, mass=SPARSE_MASS)  # fmt: skip


class RowsHold:
    """What a sparse run holds in place of a lease: the head's kept rows (None for sources of points)."""

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


#: what holds a run's P: a lease, an array of its own, or a sparse P's rows
Hold = Lease | OwnArray | RowsHold


class Arrays:
    """The arrays a dense build or the partners ask for (``alloc``), leased from the workspace (query-key mode's
    (2m)^2 P: an array of the run's own), by role: "matrix" (the head's, kept for the hover lines) and "P"."""

    def __init__(self, workspace: Workspace, n: int) -> None:
        self.workspace, self.n = workspace, n
        self.held: dict[str, Lease | OwnArray] = {}

    def alloc(self, shape: tuple[int, int], role: str) -> np.ndarray:
        size = shape[0] * shape[1]
        hold = OwnArray(size) if size > self.n * self.n else self.workspace.lease()
        self.held[role] = hold
        return hold.array(shape)

    def release(self) -> None:
        for hold in self.held.values():
            hold.release()


def build_selection(
    job: Job, ex: Extraction, key: SelectionKey, workspace: Workspace
) -> tuple[Selection, Hold, Lease | None]:
    """P of ``key`` (the one builder, deciding dense or sparse) and what holds it, and for a dense head source the
    head's matrix in another lease (for the hover lines; the caller releases both). Sparse builds one at a time
    in the process; a cancel point before each n x n pass and while a long head's rows are selected (their
    progress goes to the status line)."""
    spec = key.spec(ex)
    arrays = Arrays(workspace, ex.n_tokens)
    lock = _BUILDING if wants_sparse(spec.source, len(spec.kept)) else None
    progress = lambda share: job.emit(Progress(f"selecting each token's keys ({share:.0%})", share))  # noqa: E731
    try:
        with _held(job, lock), one_blas_thread():
            job.check()
            sel = build_p(ex, spec, sparse=None, dtype=np.float32, progress=progress, alloc=arrays.alloc,
                          check=job.check)  # fmt: skip
    except BaseException:
        arrays.release()
        raise
    if "P" not in arrays.held:
        return sel, RowsHold(sel.rows), None
    matrix = arrays.held.get("matrix")
    return sel, arrays.held["P"], matrix if isinstance(matrix, Lease) else None


@contextlib.contextmanager
def _held(job: Job, lock: threading.Lock | None) -> Iterator[None]:
    """``lock`` held (None: none), waiting with cancel points (a sparse build: one at a time in the process)."""
    if lock is None:
        yield
        return
    while not lock.acquire(timeout=0.05):
        job.check()
    try:
        yield
    finally:
        lock.release()
