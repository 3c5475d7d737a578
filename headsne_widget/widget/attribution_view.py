"""Why a head attends, in the widget: one edge's score split into (query-side, key-side) component pairs, and the
selected head's strongest composition links.

The browser asks; Python computes in the background and answers with one small trait each:

- ``attribution_request`` = ``[layer, head, i, j]`` (the browser's write: a click on a token's partner) starts an
  ``attribution`` job: :func:`~headsne_widget.capture.attribution.score_attribution` for that one edge. Its reply,
  ``attribution``, holds the request, ``state`` ("running", "done", "error"), the ``error`` (the library's message),
  the model's ``score`` and the ``ATTRIBUTION_TOP`` largest pairs by size (labels, part of the score, share).
- the control message ``"composition"`` starts a ``composition`` job:
  :func:`~headsne_widget.capture.composition.head_composition` (``data=False``), once per extraction (kept with it);
  ``composition`` then lists, for the selected head, the ``COMPOSITION_TOP`` earlier heads that feed most its queries,
  its keys and its values, and follows the selection.

Both need the model's components (:func:`~headsne_widget.capture.components.trace_of`): the extraction's own
(``extract(..., components=True)``), else one forward pass with them on the model the widget's text was given with
(kept with the extraction), refused beforehand past the memory budget (``MemoryBudgetError``). The owner
(:mod:`.owner.panels`) starts the jobs and writes the traits.
"""

from __future__ import annotations

import math
import threading
import time
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from ..capture.extraction import Extraction
    from .jobs import Job

__all__ = [
    "ATTRIBUTION_TOP",
    "COMPOSITION_TOP",
    "AttributionDone",
    "CompositionDone",
    "attribution_job",
    "attribution_payload",
    "component_label",
    "composition_job",
    "composition_links",
    "known_composition",
]

#: pairs listed for one edge, largest first by size
ATTRIBUTION_TOP = 8
#: earlier heads listed per kind (queries, keys, values) of the selected head
COMPOSITION_TOP = 3
#: head_composition(ex, data=False) per extraction, computed once
_COMPOSITIONS: weakref.WeakKeyDictionary[Extraction, pd.DataFrame] = weakref.WeakKeyDictionary()
#: one forward pass with components at a time (the two jobs may both need the trace)
_TRACE_LOCK = threading.Lock()


@dataclass(frozen=True)
class AttributionDone:
    """An edge's attribution (or its error), as the ``attribution`` trait shows it."""

    payload: dict[str, Any]


@dataclass(frozen=True)
class CompositionDone:
    """The extraction's composition table is computed (``frame``), or could not be (``error``)."""

    frame: Any
    error: str
    seconds: float


def _trace(ex: Extraction) -> None:
    """Make sure ``ex`` has its components: its own, else one forward pass with them on the model the widget's text
    was given with (``allow_components``), refused beforehand past the memory budget; else the library's error."""
    from ..capture.components import trace_of

    with _TRACE_LOCK:
        trace_of(ex)


def component_label(term: str, layer: int, head: int) -> str:
    """A component's name as the panel shows it: "L0 H2", "L3 MLP", "embedding", "L1 query bias"."""
    if term == "input":
        return "embedding"
    if term == "head":
        return f"L{layer} H{head}"
    if term == "mlp":
        return f"L{layer} MLP"
    return f"L{layer} {term}" if layer >= 0 else term


def attribution_payload(frame: pd.DataFrame, top: int = ATTRIBUTION_TOP) -> dict[str, Any]:
    """The ``top`` pairs of :func:`score_attribution`'s ``frame`` by size, largest first (ties in its order), with
    each one's share of the model's score."""
    score = float(frame.attrs["score"])
    order = frame["score"].abs().sort_values(ascending=False, kind="stable").index[:top]
    pairs = []
    for row in frame.loc[order].itertuples(index=False):
        value = float(row.score)
        pairs.append({
            "query": component_label(row.query_term, int(row.query_layer), int(row.query_head)),
            "key": component_label(row.key_term, int(row.key_layer), int(row.key_head)),
            "score": value,
            "share": value / score if score != 0 and math.isfinite(value / score) else None,
        })  # fmt: skip
    return {"score": score, "pairs": pairs, "n_pairs": len(frame)}


def known_composition(ex: Extraction) -> pd.DataFrame | None:
    """The composition table of ``ex`` when a ``composition`` job has computed it, else None."""
    return _COMPOSITIONS.get(ex)


def composition_links(frame: pd.DataFrame, layer: int, head: int, top: int = COMPOSITION_TOP) -> list[dict[str, Any]]:
    """The earlier heads composing most with (layer, head): per kind q, k, v the ``top`` largest scores."""
    rows = frame[(frame["dst_layer"] == layer) & (frame["dst_head"] == head)]
    links: list[dict[str, Any]] = []
    for kind in ("q", "k", "v"):
        best = rows[rows[kind].notna()].sort_values(kind, ascending=False, kind="stable").head(top)
        links.extend(
            {"kind": kind, "layer": int(r.src_layer), "head": int(r.src_head), "score": float(getattr(r, kind))}
            for r in best.itertuples(index=False)
        )
    return links


# ------------------------------------------------------------------------------------------------- jobs


def attribution_job(job: Job, *, ex: Extraction, request: dict[str, Any]) -> None:
    """One edge's attribution, in the background; any error is the reply's ``error``."""
    from ..capture.attribution import _checked, score_attribution

    start = time.perf_counter()
    try:
        _checked(ex, request["layer"], request["head"], {"i": request["i"], "j": request["j"]})  # before the pass
        _trace(ex)
        job.check()
        payload = attribution_payload(
            score_attribution(ex, request["layer"], request["head"], request["i"], request["j"])
        )
        payload.update(state="done", error="")
    except Exception as err:
        job.check()
        payload = {"state": "error", "error": f"{type(err).__name__}: {err}" if not str(err) else str(err)}
    payload.update(request, seconds=round(time.perf_counter() - start, 3))
    job.emit(AttributionDone(payload))


def composition_job(job: Job, *, ex: Extraction) -> None:
    """The extraction's composition table, once (kept with it)."""
    from ..capture.composition import head_composition

    start = time.perf_counter()
    try:
        frame = _COMPOSITIONS.get(ex)
        if frame is None:
            _trace(ex)
            job.check()
            frame = _COMPOSITIONS.setdefault(ex, head_composition(ex, data=False))
        done = CompositionDone(frame, "", time.perf_counter() - start)
    except Exception as err:
        job.check()
        done = CompositionDone(None, str(err) or type(err).__name__, time.perf_counter() - start)
    job.emit(done)
