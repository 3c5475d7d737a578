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

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

    from ..spec import Spec

__all__ = ["Built", "HeadMatrixSource", "PSource", "PointSource", "Progress"]

#: ``progress(share)``: called now and then while a sparse head's rows are selected; may raise to stop
Progress = Callable[[float], None]


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
    #: the widget builds the P of the head the pointer rests on before the click (long texts)
    prefetch: ClassVar[bool] = False
    #: the hover lines: "rows" of the head's matrix, or nearest "neighbours" in the source's space
    partners: ClassVar[Literal["rows", "neighbours"]] = "rows"
    #: a short description for legends and ``help``
    describes: ClassVar[str] = ""
    #: what a page or a plot of its map is called
    title: ClassVar[str] = "t-SNE"

    def label(self, layer: int, head: int) -> str:
        return f"layer {layer} head {head}"

    def points(self, kept: np.ndarray) -> np.ndarray:
        """The token index of each point t-SNE places."""
        return kept

    def dense(self, ex: Any, spec: Spec, *, dtype: Any, out: np.ndarray | None, matrix: np.ndarray | None) -> Built:
        """P as an (m, m) array, written into ``out`` when given; ``matrix`` the head's matrix if already made."""
        raise NotImplementedError

    def sparse(self, ex: Any, spec: Spec, *, dtype: Any, progress: Progress | None, matrix: np.ndarray | None) -> Built:
        """P as a CSR matrix (long texts); ``matrix`` the head's matrix if already made."""
        raise NotImplementedError(f"{self.name} mode has no sparse P")


class HeadMatrixSource(PSource):
    """P from one head's (n, n) matrix (see the module doc)."""

    prefetch = True

    def matrix(self, ex: Any, layer: int, head: int) -> np.ndarray:
        """The head's float32 (n, n) matrix, rows = queries."""
        raise NotImplementedError

    def matrix_into(self, ex: Any, layer: int, head: int, out: np.ndarray) -> np.ndarray:
        """:meth:`matrix` written into ``out`` (a leased float32 (n, n) array)."""
        np.copyto(out, self.matrix(ex, layer, head))
        return out

    def rows(self, ex: Any, layer: int, head: int, mass: float, progress: Progress | None) -> Any:
        """Each row's smallest set of largest entries reaching ``mass`` of it, as a CSR matrix."""
        from ..sparse import largest_entries

        return largest_entries(self.matrix(ex, layer, head), mass)

    def dense(self, ex: Any, spec: Spec, *, dtype: Any, out: np.ndarray | None, matrix: np.ndarray | None) -> Built:
        from ..affinities import attention_P

        M = self.matrix(ex, spec.layer, spec.head) if matrix is None else matrix
        P, kept = attention_P(M, exclude=spec.exclude, dtype=dtype, out=out)
        return Built(P, kept)

    def sparse(self, ex: Any, spec: Spec, *, dtype: Any, progress: Progress | None, matrix: np.ndarray | None) -> Built:
        from ..sparse import largest_entries, sparse_attention_affinities

        if matrix is None:
            rows = self.rows(ex, spec.layer, spec.head, spec.mass, progress)
        else:
            rows = largest_entries(matrix, spec.mass)
        P, mass, kept = cast(
            "tuple[csr_matrix, float, np.ndarray]", sparse_attention_affinities(rows, exclude=spec.exclude, dtype=dtype)
        )
        return Built(P, kept, mass=mass, rows=rows)


class PointSource(PSource):
    """P from points in a space (see the module doc); the perplexity is lowered to ``(m - 1) / 3`` when too
    large for the m kept points, as openTSNE does, and the note says so."""

    uses_perplexity = True
    partners = "neighbours"

    def space(self, ex: Any, layer: int, head: int) -> np.ndarray:
        """float (n, d) points, one per token, whose euclidean distances P is built from."""
        raise NotImplementedError

    def dense(self, ex: Any, spec: Spec, *, dtype: Any, out: np.ndarray | None, matrix: np.ndarray | None) -> Built:
        from ..affinities import gaussian_affinities

        used, note = effective_perplexity(spec.perplexity, len(spec.kept))
        X = np.asarray(self.space(ex, spec.layer, spec.head), dtype=np.float64)[spec.kept]
        P = gaussian_affinities(X, perplexity=used).astype(dtype, copy=False)
        if out is not None:
            np.copyto(out, P)
            P = out
        return Built(P, spec.kept, used, note)

    def sparse(self, ex: Any, spec: Spec, *, dtype: Any, progress: Progress | None, matrix: np.ndarray | None) -> Built:
        from ..sparse import knn_gaussian_affinities

        used, note = effective_perplexity(spec.perplexity, len(spec.kept))
        X = np.asarray(self.space(ex, spec.layer, spec.head), dtype=np.float64)[spec.kept]
        return Built(knn_gaussian_affinities(X, used, dtype=dtype), spec.kept, used, note)


def effective_perplexity(perplexity: float, m: int) -> tuple[float, str]:
    """The perplexity used for ``m`` points (``perplexity`` is checked), and a note when it had to be lowered:
    each Gaussian cannot have more effective neighbours than a third of the points."""
    limit = (m - 1) / 3
    if perplexity > limit:
        return limit, f"perplexity {perplexity:g} is too large for {m} tokens: using {limit:.3g}"
    return perplexity, ""
