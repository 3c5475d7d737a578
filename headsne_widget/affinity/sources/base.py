"""What every source of P is: one small interface, so that a new kind of P is one module plus its tests.

A source says what it needs from an extraction, which points it embeds, how it builds P dense or sparse for a
checked selection (:class:`~..spec.Spec`), and what the widget shows for it (its label, whether a run depends on
the head or on the perplexity, what the hover lines come from). Two families share most of the work:

- :class:`HeadMatrixSource`: P from one head's (n, n) row-stochastic matrix M (attention, value-weighted
  attention): dense from M, sparse from each row's largest entries; the hover lines are M's rows.
- :class:`PointSource`: P from points in a space (hidden states, what a head writes): perplexity-calibrated
  Gaussians, dense, or on each point's nearest neighbours when sparse; the hover lines are nearest neighbours.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, cast

import numpy as np

from ..sparse import SPARSE_MIN_TOKENS

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

__all__ = ["Built", "Check", "HeadMatrixSource", "Limits", "PSource", "PointSource", "Progress", "Spec"]

#: ``progress(share)``: called now and then while a sparse head's rows are selected; may raise to stop
Progress = Callable[[float], None]
#: ``check()``: called now and then during a long dense build; may raise to stop
Check = Callable[[], None] | None
#: tokens [from, below) for which the widget builds a head matrix's P before the click (below None: no bound).
#: Below 2048 tokens its P takes a few milliseconds, less than the hover's message would cost a click.
HEAD_PREFETCH: tuple[int, int | None] = (2048, None)
#: the same for a source of points: its exact Gaussians take 14 ms at 512 tokens (most of a click) and 0.2 s at
#: 2048; from ``SPARSE_MIN_TOKENS`` their nearest-neighbour search takes seconds of every core, which a pointer
#: passing over rows should not start.
POINT_PREFETCH: tuple[int, int | None] = (256, SPARSE_MIN_TOKENS)


@dataclass(frozen=True, eq=False)
class Spec:
    """One checked selection: the source of P, its layer and head (0 where the source has no heads), the mask of
    excluded tokens and the kept tokens' indices, the perplexity asked for and the mass a sparse P keeps."""

    source: PSource
    layer: int
    head: int
    exclude: np.ndarray
    kept: np.ndarray
    perplexity: float
    mass: float

    @property
    def label(self) -> str:
        return self.source.label(self.layer, self.head)

    @property
    def n_points(self) -> int:
        """The points t-SNE places: the kept tokens times the source's points per token."""
        return len(self.kept) * self.source.points_per_token


@dataclass(frozen=True)
class Limits:
    """What a sparse build may keep: at most ``max_keys`` entries a row, ``max_entries`` in all (None: no
    bound). The builder sets them from the memory budget (:mod:`headsne_widget.budget`)."""

    max_keys: int | None = None
    max_entries: int | None = None


@dataclass(frozen=True, eq=False)
class Built:
    """P as a source builds it: the array (dense or sparse), the points' token indices, and what was used."""

    P: np.ndarray | csr_matrix
    points: np.ndarray
    perplexity: float | None = None
    note: str = ""
    mass: float | None = None
    rows: Any = None  # a sparse head source's kept rows (the hover lines come from them)


class PSource:
    """One kind of P (see the module doc). Subclasses set the class attributes and implement the builds."""

    name: ClassVar[str]
    #: a run depends on the head (False: on the layer only)
    per_head: ClassVar[bool] = True
    #: a run depends on the perplexity
    uses_perplexity: ClassVar[bool] = False
    #: points t-SNE places per kept token (query-key: a query and a key)
    points_per_token: ClassVar[int] = 1
    #: a long text gets a sparse P (else it is refused above ``max_tokens``)
    has_sparse: ClassVar[bool] = True
    #: most kept tokens, None for no limit; ``too_many`` says why
    max_tokens: ClassVar[int | None] = None
    too_many: ClassVar[str] = ""
    #: tokens [from, below) for which the widget builds the P of the grid row the pointer rests on before the
    #: click (below None: no bound; None: never)
    prefetch: ClassVar[tuple[int, int | None] | None] = None
    #: the hover lines: "rows" of the head's matrix, or nearest "neighbours" in the source's space
    partners: ClassVar[Literal["rows", "neighbours"]] = "rows"
    #: a short description for legends and ``help``
    describes: ClassVar[str] = ""
    #: what a page or a plot of its map is called
    title: ClassVar[str] = "t-SNE"
    #: the mode control's text for it
    option: ClassVar[str] = ""

    def label(self, layer: int, head: int) -> str:
        return f"layer {layer} head {head}"

    def prefetches(self, n_tokens: int) -> bool:
        """Whether the widget builds the hovered row's P before the click for a text of ``n_tokens``."""
        if self.prefetch is None:
            return False
        start, below = self.prefetch
        return start <= n_tokens and (below is None or n_tokens < below)

    def points(self, kept: np.ndarray) -> np.ndarray:
        """The token index of each point t-SNE places."""
        return kept

    def dense(
        self, ex: Any, spec: Spec, *, dtype: Any, out: np.ndarray | None, matrix: np.ndarray | None, check: Check = None
    ) -> Built:
        """P as an (m, m) array, written into ``out`` when given; ``matrix`` the head's matrix if already made;
        ``check()`` called now and then during a long build (a cancel point)."""
        raise NotImplementedError

    def dense_bytes(self, n: int, points: int, itemsize: int) -> int:
        """Peak bytes of a dense build for ``n`` tokens and ``points`` points: P and its temporaries."""
        return points * points * itemsize

    def sparse(self, ex: Any, spec: Spec, *, dtype: Any, progress: Progress | None, limits: Limits) -> Built:
        """P as a CSR matrix (long texts), within ``limits``."""
        raise NotImplementedError(f"{self.name} mode has no sparse P")


class HeadMatrixSource(PSource):
    """P from one head's (n, n) matrix (see the module doc)."""

    prefetch: ClassVar[tuple[int, int | None] | None] = HEAD_PREFETCH

    def matrix(self, ex: Any, layer: int, head: int) -> np.ndarray:
        """The head's float32 (n, n) matrix, rows = queries."""
        raise NotImplementedError

    def matrix_into(self, ex: Any, layer: int, head: int, out: np.ndarray) -> np.ndarray:
        """:meth:`matrix` written into ``out`` (a leased float32 (n, n) array)."""
        np.copyto(out, self.matrix(ex, layer, head))
        return out

    def rows(self, ex: Any, layer: int, head: int, mass: float, progress: Progress | None, limits: Limits) -> Any:
        """Each row's smallest set of largest entries reaching ``mass`` of it, as a CSR matrix, within ``limits``
        (``MemoryBudgetError`` as soon as it would exceed ``limits.max_entries``)."""
        from ..sparse import largest_entries

        M = self.matrix(ex, layer, head)
        return largest_entries(M, mass, max_keys=limits.max_keys, max_entries=limits.max_entries)

    def dense(
        self, ex: Any, spec: Spec, *, dtype: Any, out: np.ndarray | None, matrix: np.ndarray | None, check: Check = None
    ) -> Built:
        from ..affinities import attention_P

        M = self.matrix(ex, spec.layer, spec.head) if matrix is None else matrix
        P, kept = attention_P(M, exclude=spec.exclude, dtype=dtype, out=out)
        return Built(P, kept)

    def dense_bytes(self, n: int, points: int, itemsize: int) -> int:
        """P, and the head's float32 (n, n) matrix beside it."""
        return points * points * itemsize + 4 * n * n

    def sparse(self, ex: Any, spec: Spec, *, dtype: Any, progress: Progress | None, limits: Limits) -> Built:
        from ..sparse import sparse_attention_affinities

        rows = self.rows(ex, spec.layer, spec.head, spec.mass, progress, limits)
        P, mass, kept = cast(
            "tuple[csr_matrix, float, np.ndarray]", sparse_attention_affinities(rows, exclude=spec.exclude, dtype=dtype)
        )
        return Built(P, kept, mass=mass, rows=rows)


class PointSource(PSource):
    """P from points in a space (see the module doc); the perplexity is lowered to ``(m - 1) / 3`` when too
    large for the m kept points, as openTSNE does, and the note says so."""

    uses_perplexity = True
    partners = "neighbours"
    prefetch = POINT_PREFETCH

    def space(self, ex: Any, layer: int, head: int) -> np.ndarray:
        """float (n, d) points, one per token, whose euclidean distances P is built from."""
        raise NotImplementedError

    def dense(
        self, ex: Any, spec: Spec, *, dtype: Any, out: np.ndarray | None, matrix: np.ndarray | None, check: Check = None
    ) -> Built:
        from ..affinities import gaussian_affinities

        used, note = effective_perplexity(spec.perplexity, len(spec.kept))
        X = np.asarray(self.space(ex, spec.layer, spec.head), dtype=np.float64)[spec.kept]
        P = gaussian_affinities(X, perplexity=used, check=check, dtype=dtype, out=out)
        return Built(P, spec.kept, used, note)

    def dense_bytes(self, n: int, points: int, itemsize: int) -> int:
        """P and the exact Gaussians' two float64 temporaries (the Gram matrix then the distances, and the
        conditional P)."""
        return points * points * (itemsize + 2 * 8)

    def sparse(self, ex: Any, spec: Spec, *, dtype: Any, progress: Progress | None, limits: Limits) -> Built:
        """The k-nearest-neighbour P (k = 3 x perplexity); the perplexity is lowered where the m x k neighbours
        would exceed ``limits.max_entries``, and the note says so."""
        from ..sparse import knn_gaussian_affinities

        m = len(spec.kept)
        used, note = effective_perplexity(spec.perplexity, m)
        if limits.max_entries is not None and 3 * used * m > limits.max_entries:
            used = max(1.0, limits.max_entries / (3 * m))
            note = f"perplexity lowered to {used:.3g}: more neighbours a token would exceed the memory budget"
        X = np.asarray(self.space(ex, spec.layer, spec.head))[spec.kept]  # in float64 by the kNN P's one copy
        return Built(knn_gaussian_affinities(X, used, dtype=dtype), spec.kept, used, note)


def effective_perplexity(perplexity: float, m: int) -> tuple[float, str]:
    """The perplexity used for ``m`` points (``perplexity`` is checked), and a note when it had to be lowered:
    each Gaussian cannot have more effective neighbours than a third of the points."""
    limit = (m - 1) / 3
    if perplexity > limit:
        return limit, f"perplexity {perplexity:g} is too large for {m} tokens: using {limit:.3g}"
    return perplexity, ""
