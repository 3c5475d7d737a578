"""From a selection to affinities: the public boundary where (extraction, mode, layer, head, perplexity,
exclude_special, mass) is checked once and becomes P, the tokens it covers and a label.

The widget, the analyses, the corpus study and the export build every P with the same builder
(:func:`~.builder.build_p`), so a head means the same P everywhere; :func:`selection_affinities` is its
function API. The modes are the sources of :mod:`.sources` (``"attention"``, ``"hidden"``, ``"query-key"``, ...).

Perplexity policy (the sources of points, e.g. hidden mode), one for every caller: a perplexity above
``(m - 1) / 3`` for ``m`` kept tokens cannot be calibrated (each Gaussian would need more effective neighbours
than a third of the points), so it is lowered to ``(m - 1) / 3``, as openTSNE does. The value used is returned
as ``Selection.perplexity`` and explained in ``Selection.note``; callers show the note (widget status) or
record the value (analyses rows) and warn. A perplexity that is not a finite number > 0 is an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .._checks import DEFAULT_MASS, float_dtype
from .builder import Selection, build_p
from .sources import HeadMatrixSource, source
from .spec import MIN_TOKENS, checked_spec

if TYPE_CHECKING:
    from ..capture.extraction import Extraction

__all__ = ["MIN_TOKENS", "Selection", "selection_affinities", "selection_label"]


def selection_label(mode: str, layer: int, head: int) -> str:
    """How a selection is named in status lines, titles and tables."""
    return source(mode).label(layer, head)


def _check_sparse(sparse: Any, out: np.ndarray | None) -> bool | None:
    if sparse is not None and not isinstance(sparse, (bool, np.bool_)):
        raise TypeError(f"sparse must be None (by length), True or False, got {sparse!r}")
    if sparse and out is not None:
        raise ValueError("out= receives a dense P; it cannot be combined with sparse=True")
    return False if out is not None else (None if sparse is None else bool(sparse))


def _check_matrix(ex: Extraction, mode: str, attention: Any) -> np.ndarray | None:
    """``attention=``: the head's (n, n) matrix in place of the extraction's, for the modes built from one."""
    if attention is None:
        return None
    if not isinstance(source(mode), HeadMatrixSource):
        raise ValueError(f"attention= is a head's (n, n) matrix; {mode} mode is not built from one")
    A = np.asarray(attention)
    n = ex.n_tokens
    if A.shape != (n, n):
        raise ValueError(f"attention must be the head's ({n}, {n}) matrix for this {n}-token text, got {A.shape}")
    return A


def selection_affinities(
    ex: Extraction,
    mode: str = "attention",
    layer: int = 0,
    head: int = 0,
    *,
    perplexity: float = 20.0,
    exclude_special: bool = False,
    dtype: Any = np.float64,
    out: np.ndarray | None = None,
    attention: np.ndarray | None = None,
    sparse: bool | None = None,
    mass: float = DEFAULT_MASS,
) -> Selection:
    """P for one selection of an :class:`~headsne_widget.extraction.Extraction`.

    Parameters
    ----------
    ex : the extraction (tokens, per-head attention, layer outputs).
    mode : a source of :mod:`.sources`: ``"attention"``: P = (A + A^T) of head ``head`` of layer ``layer``, zero
        diagonal, normalised (thesis Def. 3.1); ``"hidden"``: perplexity-calibrated Gaussians on layer
        ``layer``'s output hidden states (``ex.layer_output(layer)``); ``head`` is ignored; ``"query-key"``: the
        bipartite P of the head's queries and keys (:func:`~.affinities.query_key_affinities`), (2m, 2m),
        ``kept`` listing the kept tokens twice (queries, then keys).
    perplexity : the modes of points (hidden); lowered to ``(m - 1) / 3`` when too large (see the module doc).
    exclude_special : drop special tokens ([CLS], [SEP], ...) from P.
    dtype : P's dtype, float64 or float32 (what t-SNE runs on: the widget asks for it, which saves an
        n x n copy and half the memory; at n = 8192 P is 256 MiB in float32).
    out : an array of P's shape (m, m) and ``dtype`` to write P into (a dense P).
    attention : the head modes: the head's (n, n) matrix to use instead of ``ex.attention(layer, head)``.
    sparse : None: a sparse P (``scipy.sparse``) from ``SPARSE_MIN_TOKENS`` kept tokens on, unless ``out`` is
        given; True / False: always / never.
    mass : a sparse head P: the share of each query row's weights kept (the result's ``mass`` says how much of
        the head's weights P carries).

    Raises
    ------
    TypeError, ValueError : a bad mode, index, perplexity or mass, or fewer than ``MIN_TOKENS`` kept tokens.
    """
    spec = checked_spec(
        ex, mode, layer, head, exclude_special=exclude_special, perplexity=perplexity, mass=mass
    )  # fmt: skip
    dt, asked = float_dtype(dtype), _check_sparse(sparse, out)
    matrix = _check_matrix(ex, spec.source.name, attention)
    return build_p(ex, spec, sparse=asked, dtype=dt, out=out, matrix=matrix)
