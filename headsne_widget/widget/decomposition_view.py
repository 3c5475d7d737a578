"""The widget's decomposition: each token's state at the selected layer split by what wrote it (Mickus et al. 2022,
:func:`~headsne_widget.capture.decompose.decompose`), for the decomposition panel and ``w.decomposition``.

It costs one more forward pass with the component hooks and (K, n, d) float64 vectors (K = 1 + (layer + 1)(H + 2)
components), so it is computed only when asked for (the panel's button sends the control action
``"decomposition"``; ``w.decomposition`` in Python), in the background slot ``"decomposition"``, and kept per
extraction and layer (:func:`widget_decomposition`). Before anything is allocated, :func:`decomposition_bytes`
estimates the peak and a text beyond ``budget.memory_budget_bytes()`` is refused with a ``MemoryBudgetError``
whose message the widget's status line shows. The browser receives two small float32 arrays per layer:
``decomposition_terms`` (4, n), the shares summed per term kind, and ``decomposition_heads`` (H, n), the
selected layer's heads' shares (``t . e / ||e||^2``, negative where a term points against the state). The owner
(:mod:`.owner.panels`) starts the job and writes what it hands over.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..budget import within_budget
from ..capture.components import trace_bytes, trace_of
from ..capture.decompose import Decomposition, decompose

if TYPE_CHECKING:
    from ..capture.extraction import Extraction

__all__ = [
    "PEAK_VECTORS",
    "TERM_KINDS",
    "DecompositionDone",
    "decomposition_bytes",
    "decomposition_job",
    "head_shares",
    "term_shares",
    "widget_decomposition",
]

#: the term kinds of ``Decomposition.terms``, in the rows of ``decomposition_terms`` (the panel says "input",
#: "attention", "feed-forward", "correction")
TERM_KINDS = ("input", "head", "mlp", "correction")
#: peak bytes of a decomposition in units of its (K, n, d) float64 vectors: the list of components and their
#: stacked copy live together, and the trace (``capture.components.trace_bytes``) comes on top
PEAK_VECTORS = 2

_CACHE: weakref.WeakKeyDictionary[Extraction, dict[int, Decomposition]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def decomposition_bytes(ex: Extraction, layer: int) -> int:
    """The estimated peak bytes of ``decompose(ex, layer)``, the trace's forward pass included."""
    n, d = ex.n_tokens, ex.d_model
    components = 1 + (layer + 1) * (ex.n_heads + 2)
    return PEAK_VECTORS * components * n * d * 8 + trace_bytes(ex)


def widget_decomposition(ex: Extraction, layer: int) -> Decomposition:
    """``decompose(ex, layer)`` kept with ``ex`` (a second call returns the same object); the trace comes from the
    model the widget's load job allowed for ``ex`` (``capture.components.allow_components``) when ``ex`` holds none.
    Beyond the memory budget: ``MemoryBudgetError`` before anything is allocated."""
    with _LOCK:
        done = _CACHE.get(ex, {}).get(layer)
    if done is not None:
        return done
    within_budget(
        decomposition_bytes(ex, layer),
        f"the decomposition of layer {layer} at {ex.n_tokens} tokens would",
        "an earlier layer, a shorter text (max_tokens=)",
    )
    trace_of(ex)  # the forward pass, once per extraction
    result = decompose(ex, layer)
    with _LOCK:
        return _CACHE.setdefault(ex, {}).setdefault(layer, result)


def term_shares(dec: Decomposition) -> np.ndarray:
    """float32 (4, n): each token's share summed per term kind, rows in the order of :data:`TERM_KINDS`."""
    shares = dec.shares
    kinds = dec.terms["term"].to_numpy()
    return np.stack([shares[kinds == kind].sum(axis=0) for kind in TERM_KINDS]).astype(np.float32)


def head_shares(dec: Decomposition) -> np.ndarray:
    """float32 (H, n): the share of each head of the decomposition's own layer in each token's state."""
    terms = dec.terms
    rows = terms.index[(terms["term"] == "head") & (terms["layer"] == dec.layer)].to_numpy()
    order = np.argsort(terms["head"].to_numpy()[rows], kind="stable")
    return dec.shares[rows[order]].astype(np.float32)


@dataclass(frozen=True)
class DecompositionDone:
    """The decomposition of ``layer`` for the widget (``error`` set, and no arrays, when it was refused)."""

    layer: int
    terms: np.ndarray | None = None
    heads: np.ndarray | None = None
    error: str = ""


def decomposition_job(job: Any, ex: Extraction, layer: int) -> None:
    """The selected layer's decomposition, as a background job; a refusal or error is handed over as a message."""
    job.check()
    try:
        dec = widget_decomposition(ex, layer)
    except (MemoryError, ValueError, RuntimeError, OSError) as err:
        job.emit(DecompositionDone(layer, error=f"cannot decompose layer {layer}: {err}"))
        return
    job.emit(DecompositionDone(layer, term_shares(dec), head_shares(dec)))
