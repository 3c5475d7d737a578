"""From a selection to affinities: the one place where (extraction, mode, layer, head, perplexity,
exclude_special) becomes P, the tokens it covers and a label.

The widget, the analyses, the corpus study and the export all call :func:`selection_affinities`, so a
head means the same P everywhere.

Perplexity policy (hidden mode), one for every caller: a perplexity above ``(m - 1) / 3`` for ``m`` kept
tokens cannot be calibrated (each Gaussian would need more effective neighbours than a third of the
points), so it is lowered to ``(m - 1) / 3``, as openTSNE does. The value used is returned as
``Selection.perplexity`` and explained in ``Selection.note``; callers show the note (widget status) or
record the value (analyses rows) and warn. A perplexity that is not a finite number > 0 is an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from .affinities import attention_affinities, gaussian_affinities, query_key_affinities

__all__ = ["MIN_TOKENS", "MODES", "Selection", "check_index", "effective_perplexity", "selection_affinities"]

#: the least number of tokens t-SNE can place
MIN_TOKENS = 4
#: where P comes from: one attention head, a head's queries and keys together, or a layer's output hidden states
MODES = ("attention", "hidden", "query-key")


@dataclass(frozen=True, eq=False)
class Selection:
    """P of one selection and what it covers.

    Attributes
    ----------
    P : float64 or float32 (m, m) (the ``dtype`` asked for), symmetric, zero diagonal, sums to 1.
    kept : int64 (m,), the token index of each row of P.
    label : "layer 2 head 5" or "hidden states of layer 2".
    perplexity : the perplexity used (hidden mode), else None.
    note : "" or why the perplexity was lowered.
    """

    P: np.ndarray
    kept: np.ndarray
    label: str
    perplexity: float | None = None
    note: str = ""


def check_index(value: Any, count: int, name: str, unit: str) -> int:
    """A 0-based index in ``[0, count)``; a bool or a non-integer is refused (``True`` is not layer 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if not 0 <= value < count:
        raise ValueError(f"{name} {value} is out of range: the model has {count} {unit} (0 to {count - 1})")
    return int(value)


def effective_perplexity(perplexity: Any, m: int) -> tuple[float, str]:
    """The perplexity used for ``m`` points, and a note when it had to be lowered (see the module doc)."""
    if isinstance(perplexity, bool) or not isinstance(perplexity, (int, float, np.integer, np.floating)):
        raise TypeError(f"perplexity must be a number, got {type(perplexity).__name__}")
    value = float(perplexity)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"perplexity must be a finite number > 0, got {perplexity!r}")
    limit = (m - 1) / 3
    if value > limit:
        return limit, f"perplexity {value:g} is too large for {m} tokens: using {limit:.3g}"
    return value, ""


def selection_label(mode: str, layer: int, head: int) -> str:
    """How a selection is named in status lines, titles and tables."""
    if mode == "query-key":
        return f"queries and keys of layer {layer} head {head}"
    return f"hidden states of layer {layer}" if mode == "hidden" else f"layer {layer} head {head}"


def checked_selection(
    ex: Any, mode: str, layer: int, head: int, exclude_special: bool, modes: tuple[str, ...]
) -> tuple[int, int, np.ndarray, np.ndarray, str]:
    """A selection's checked layer and head, the mask of excluded tokens, the kept tokens' indices and its label;
    a ValueError for a mode not in ``modes``, a bad index or fewer than MIN_TOKENS kept tokens."""
    if mode not in modes:
        raise ValueError(f"mode must be one of {', '.join(map(repr, modes))}, got {mode!r}")
    layer = check_index(layer, ex.n_layers, "layer", "layers")
    if mode != "hidden":
        head = check_index(head, ex.n_heads, "head", "heads per layer")
    exclude = np.asarray(ex.special, dtype=bool) if exclude_special else np.zeros(ex.n_tokens, dtype=bool)
    kept = np.flatnonzero(~exclude).astype(np.int64)
    if len(kept) < MIN_TOKENS:
        raise ValueError(f"only {len(kept)} tokens are kept; t-SNE needs at least {MIN_TOKENS}")
    return layer, head, exclude, kept, selection_label(mode, layer, head)


def selection_affinities(
    ex: Any,
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
    mass: float = 0.99,
) -> Selection:
    """P for one selection of an :class:`~headsne_widget.extraction.Extraction`.

    Parameters
    ----------
    ex : the extraction (tokens, per-head attention, layer outputs).
    mode : ``"attention"``: P = (A + A^T) of head ``head`` of layer ``layer``, zero diagonal, normalised
        (thesis Def. 3.1); ``"hidden"``: perplexity-calibrated Gaussians on layer ``layer``'s output
        hidden states (``ex.layer_output(layer)``); ``head`` is ignored; ``"query-key"``: the bipartite P of the
        head's queries and keys (:func:`~headsne_widget.affinity.affinities.query_key_affinities`), (2m, 2m),
        ``kept`` listing the kept tokens twice (queries, then keys).
    perplexity : hidden mode only; lowered to ``(m - 1) / 3`` when too large (see the module doc).
    exclude_special : drop special tokens ([CLS], [SEP], ...) from P.
    dtype : P's dtype, float64 or float32 (what t-SNE runs on: the widget asks for it, which saves an
        n x n copy and half the memory; at n = 8192 P is 256 MiB in float32).
    out : attention mode: an array of P's shape (m, m) and ``dtype`` to write P into (see
        :func:`~headsne_widget.affinities.attention_affinities`); ignored in hidden mode.
    attention : attention mode: the head's (n, n) attention to use instead of ``ex.attention(layer, head)``.
    sparse : None: a sparse P (``scipy.sparse``) from ``SPARSE_MIN_TOKENS`` kept tokens on, unless ``out`` is
        given; True / False: always / never (see :mod:`.sparse_selection`).
    mass : a sparse attention P: the share of each query row's attention kept (the result's ``mass`` says how
        much of the head's attention P carries).

    Raises
    ------
    TypeError, ValueError : a bad mode, index or perplexity, or fewer than ``MIN_TOKENS`` kept tokens.
    """
    from .sparse_selection import sparse_selection, wants_sparse  # (it imports this module's helpers)

    if wants_sparse(ex, sparse, out, exclude_special, mass):
        return sparse_selection(
            ex, mode, layer, head, perplexity=perplexity, exclude_special=exclude_special, dtype=dtype,
            attention=attention, mass=mass,
        )  # fmt: skip
    layer, head, exclude, kept, label = checked_selection(ex, mode, layer, head, exclude_special, MODES)
    if mode == "attention":
        A = ex.attention(layer, head) if attention is None else attention
        if exclude.any():
            P = attention_affinities(A, exclude=exclude, dtype=dtype, out=out)[0]
        else:
            P = attention_affinities(A, dtype=dtype, out=out)
        return Selection(cast(np.ndarray, P), kept, label)
    if mode == "query-key":
        A = ex.attention(layer, head) if attention is None else attention
        P = query_key_affinities(A, exclude=exclude, dtype=dtype, out=out)[0]
        return Selection(cast(np.ndarray, P), np.concatenate([kept, kept]), label)
    used, note = effective_perplexity(perplexity, len(kept))
    X = np.asarray(ex.layer_output(layer), dtype=np.float64)[kept]
    P = gaussian_affinities(X, perplexity=used).astype(dtype, copy=False)
    return Selection(P, kept, label, used, note)
