"""What every source of P is: one small interface, so that a new kind of P is one module plus its tests.

A source says what it needs from an extraction, which points it embeds, how it builds P dense or sparse for a
checked selection (:class:`~..spec.Spec`), each token's partners (the hover lines, :meth:`PSource.partners`), and
what the widget shows for it (its label, whether a run depends on the head or on the perplexity, what a token's
points are). Two families share most of the work:

- :class:`HeadMatrixSource`: P from one head's (n, n) row-stochastic matrix M (attention, value-weighted
  attention): dense from M, sparse from each row's largest entries; the partners are M's strongest entries.
- :class:`PointSource`: P from points in a space (hidden states, what a head writes): perplexity-calibrated
  Gaussians, dense, or on each point's nearest neighbours when sparse; the partners are nearest neighbours.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar, cast

import numpy as np

from ..._parallel import one_blas_thread
from ...budget import entries_within
from ...errors import MemoryBudgetError
from ..partners import AtHand, TokenPartners
from ..sparse import SPARSE_MIN_TOKENS

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

    from ...capture.extraction import Extraction

__all__ = ["Alloc", "Built", "Check", "HeadMatrixSource", "Limits", "PSource", "PointSource", "Progress", "Spec",
           "capped_keys", "fitted"]  # fmt: skip

T = TypeVar("T")

#: ``progress(share)``: called now and then while a sparse head's rows are selected; may raise to stop
Progress = Callable[[float], None]
#: ``check()``: called now and then during a long dense build; may raise to stop
Check = Callable[[], None] | None
#: ``alloc(shape, role)``: a float32 array of ``shape`` for ``role`` ("matrix" or "P"), the caller's to release
Alloc = Callable[[tuple[int, int], str], np.ndarray]
#: nothing at hand: the partners of a selection not built
NOTHING = AtHand()
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


def capped_keys(n: int, entries: int, least: int = 1) -> int:
    """The keys each of ``n`` rows may keep when every row's mass would exceed ``entries`` kept entries: an equal
    share of them, at least ``least`` (the one rule of a capped sparse head, for P and for its partners)."""
    return max(least, entries // n)


def fitted(
    make: Callable[[Limits], T], n: int, entries: int, *, least: int = 1, switch: int | None = None,
    keys: int | None = None,
) -> tuple[T, int | None] | None:  # fmt: skip
    """``make(limits)`` (a head's kept rows, or a P from them) within ``entries`` kept entries: each of the n rows
    its mass (within ``keys`` largest keys where given) where that fits, else (``MemoryBudgetError``) its
    :func:`capped_keys` largest keys, at least ``least``: (what it made, the keys a row was capped at or None).
    ``switch``: fewer entries than the budget's above which a dense P is the smaller, tried first; None where they
    did not fit and the dense P does."""
    limit = entries if switch is None else min(entries, switch)
    try:
        return make(Limits(max_keys=keys, max_entries=max(limit, 1))), keys
    except MemoryBudgetError:
        if switch is not None and switch <= entries:
            return None
    cap = capped_keys(n, entries, least)
    cap = cap if keys is None else min(cap, keys)
    return make(Limits(max_keys=cap)), cap


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
    #: what each of a token's points is, in the order of P's rows (query-key: its query, then its key; the page draws
    #: the first filled and the second as a ring); () where a token is one point
    point_roles: ClassVar[tuple[str, ...]] = ()
    #: the hover lines (:meth:`partners`): "rows" of the head's matrix, or nearest "neighbours" in the source's space
    partner_kind: ClassVar[Literal["rows", "neighbours"]] = "rows"
    #: a short description for legends and ``help``
    describes: ClassVar[str] = ""
    #: what a page or a plot of its map is called
    title: ClassVar[str] = "t-SNE"
    #: the mode control's text for it
    option: ClassVar[str] = ""
    #: the page's caption of its map where it says more than ``title`` (which of a token's points is which)
    caption: ClassVar[str] = ""

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
        self,
        ex: Extraction,
        spec: Spec,
        *,
        dtype: Any,
        out: np.ndarray | None,
        matrix: np.ndarray | None,
        check: Check = None,
    ) -> Built:
        """P as an (m, m) array, written into ``out`` when given; ``matrix`` the head's matrix if already made;
        ``check()`` called now and then during a long build (a cancel point)."""
        raise NotImplementedError

    def dense_bytes(self, n: int, points: int, itemsize: int) -> int:
        """Peak bytes of a dense build for ``n`` tokens and ``points`` points: P and its temporaries."""
        return points * points * itemsize

    def sparse(self, ex: Extraction, spec: Spec, *, dtype: Any, progress: Progress | None, limits: Limits) -> Built:
        """P as a CSR matrix (long texts), within ``limits``."""
        raise NotImplementedError(f"{self.name} mode has no sparse P")

    def partners(
        self, ex: Extraction, spec: Spec, k: int, *, at_hand: AtHand = NOTHING, alloc: Alloc | None = None,
        check: Check = None,
    ) -> TokenPartners:  # fmt: skip
        """Each token's ``k`` strongest partners among the kept tokens of ``spec`` (:mod:`..partners`), from what
        the build of its P left ``at_hand`` where it holds them; ``alloc`` gives an n x n array it must make (where
        given), ``check()`` is called before the ranking (a cancel point)."""
        raise NotImplementedError


class HeadMatrixSource(PSource):
    """P from one head's (n, n) matrix (see the module doc)."""

    prefetch: ClassVar[tuple[int, int | None] | None] = HEAD_PREFETCH

    def matrix(self, ex: Extraction, layer: int, head: int) -> np.ndarray:
        """The head's float32 (n, n) matrix, rows = queries."""
        raise NotImplementedError

    def matrix_into(self, ex: Extraction, layer: int, head: int, out: np.ndarray) -> np.ndarray:
        """:meth:`matrix` written into ``out`` (a leased float32 (n, n) array)."""
        np.copyto(out, self.matrix(ex, layer, head))
        return out

    def kept_keys(self, ex: Extraction) -> int | None:
        """The keys a row the capture kept of this source's heads (None: none kept, or not this source's rows)."""
        return None

    def rows(
        self, ex: Extraction, layer: int, head: int, mass: float, progress: Progress | None, limits: Limits
    ) -> Any:
        """Each row's smallest set of largest entries reaching ``mass`` of it, as a CSR matrix, within ``limits``
        (``MemoryBudgetError`` as soon as it would exceed ``limits.max_entries``)."""
        from ..sparse import largest_entries

        M = self.matrix(ex, layer, head)
        return largest_entries(M, mass, max_keys=limits.max_keys, max_entries=limits.max_entries)

    def dense(
        self,
        ex: Extraction,
        spec: Spec,
        *,
        dtype: Any,
        out: np.ndarray | None,
        matrix: np.ndarray | None,
        check: Check = None,
    ) -> Built:
        from ..affinities import attention_P

        M = self.matrix(ex, spec.layer, spec.head) if matrix is None else matrix
        P, kept = attention_P(M, exclude=spec.exclude, dtype=dtype, out=out)
        return Built(P, kept)

    def dense_bytes(self, n: int, points: int, itemsize: int) -> int:
        """P, and the head's float32 (n, n) matrix beside it."""
        return points * points * itemsize + 4 * n * n

    def sparse(self, ex: Extraction, spec: Spec, *, dtype: Any, progress: Progress | None, limits: Limits) -> Built:
        from ..sparse import sparse_attention_affinities

        rows = self.rows(ex, spec.layer, spec.head, spec.mass, progress, limits)
        P, mass, kept = cast(
            "tuple[csr_matrix, float, np.ndarray]", sparse_attention_affinities(rows, exclude=spec.exclude, dtype=dtype)
        )
        return Built(P, kept, mass=mass, rows=rows)

    def partners(
        self, ex: Extraction, spec: Spec, k: int, *, at_hand: AtHand = NOTHING, alloc: Alloc | None = None,
        check: Check = None,
    ) -> TokenPartners:  # fmt: skip
        """The head's rows ranked (:func:`~..partners.head_partners`): the dense matrix at hand, or a sparse P's
        kept rows (:func:`~..partners.sparse_head_partners`; selected again within the memory budget where they
        were given back, capped at the keys a row it allows but at least k); else the matrix, computed into
        ``alloc((n, n), "matrix")`` where given."""
        from ..partners import head_partners, sparse_head_partners

        if at_hand.matrix is None and (at_hand.rows is not None or at_hand.sparse):
            rows = at_hand.rows
            if rows is None:
                make = lambda limits: self.rows(ex, spec.layer, spec.head, spec.mass, None, limits)  # noqa: E731
                found = fitted(make, ex.n_tokens, entries_within(), least=k)
                assert found is not None  # (None only with a switch to a dense P)
                rows = found[0]
            if check is not None:
                check()
            return sparse_head_partners(rows, k, spec.kept)
        matrix, n = at_hand.matrix, ex.n_tokens
        if matrix is None:
            if alloc is None:
                matrix = self.matrix(ex, spec.layer, spec.head)
            else:
                matrix = self.matrix_into(ex, spec.layer, spec.head, alloc((n, n), "matrix"))
        if check is not None:
            check()
        return head_partners(matrix, k, spec.kept)


class PointSource(PSource):
    """P from points in a space (see the module doc); the perplexity is lowered to ``(m - 1) / 3`` when too
    large for the m kept points, as openTSNE does, and the note says so."""

    uses_perplexity = True
    partner_kind = "neighbours"
    prefetch = POINT_PREFETCH

    def space(self, ex: Extraction, layer: int, head: int) -> np.ndarray:
        """float (n, d) points, one per token, whose euclidean distances P is built from."""
        raise NotImplementedError

    def dense(
        self,
        ex: Extraction,
        spec: Spec,
        *,
        dtype: Any,
        out: np.ndarray | None,
        matrix: np.ndarray | None,
        check: Check = None,
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

    def sparse(self, ex: Extraction, spec: Spec, *, dtype: Any, progress: Progress | None, limits: Limits) -> Built:
        """The k-nearest-neighbour P (k = 3 x perplexity); the perplexity is lowered where the m x k neighbours
        would exceed ``limits.max_entries``, and the note says so."""
        from ..knn import knn_gaussian_affinities

        m = len(spec.kept)
        used, note = effective_perplexity(spec.perplexity, m)
        if limits.max_entries is not None and 3 * used * m > limits.max_entries:
            used = max(1.0, limits.max_entries / (3 * m))
            note = f"perplexity lowered to {used:.3g}: more neighbours a token would exceed the memory budget"
        X = np.asarray(self.space(ex, spec.layer, spec.head))[spec.kept]  # in float64 by the kNN P's one copy
        return Built(knn_gaussian_affinities(X, used, dtype=dtype), spec.kept, used, note)

    def partners(
        self, ex: Extraction, spec: Spec, k: int, *, at_hand: AtHand = NOTHING, alloc: Alloc | None = None,
        check: Check = None,
    ) -> TokenPartners:  # fmt: skip
        """Nearest neighbours in the source's space (:func:`~..partners.neighbour_partners`): a kNN P's own search
        at hand, the search a kNN P takes for a sparse P whose search is not, else the exact search; numpy's BLAS on
        one thread (the products are small: no BLAS threads spinning on after them)."""
        from ..partners import neighbour_partners

        method = None if at_hand.sparse else "exact"
        with one_blas_thread():
            X = self.space(ex, spec.layer, spec.head)
            if check is not None:
                check()
            found = neighbour_partners(X, k, spec.kept, searched=at_hand.searched, method=method)
        return TokenPartners(None, None, found)


def effective_perplexity(perplexity: float, m: int) -> tuple[float, str]:
    """The perplexity used for ``m`` points (``perplexity`` is checked), and a note when it had to be lowered:
    each Gaussian cannot have more effective neighbours than a third of the points."""
    limit = (m - 1) / 3
    if perplexity > limit:
        return limit, f"perplexity {perplexity:g} is too large for {m} tokens: using {limit:.3g}"
    return perplexity, ""
