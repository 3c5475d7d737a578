"""The export's ``"bokeh"`` view: the grid, the scatter of the current frame and the KL curve as bokeh figures
(:mod:`headsne_widget.figures`), under the widget's title and status line."""

from __future__ import annotations

from typing import Any

import numpy as np
from bokeh.layouts import column, row
from bokeh.models import Div, LayoutDOM

from ..affinity.sources import source
from ..figures import plots
from .widget_view import widget_title

__all__ = ["widget_layout"]


def _kl_history(widget: Any) -> tuple[np.ndarray, np.ndarray]:
    """(iterations, KLs) of the current run: ``kl_history`` against ``kl_iterations`` (or 1, 2, ... if absent)."""
    history = getattr(widget, "kl_history", None)
    kls = np.asarray([] if history is None else history, dtype=np.float64).ravel()
    iterations = getattr(widget, "kl_iterations", None)
    if iterations is None or len(iterations) != kls.size:
        iterations = np.arange(1, kls.size + 1)
    return np.asarray(iterations, dtype=np.float64), kls


def _status_line(widget: Any) -> str:
    parts = [f"{len(widget.extraction.tokens)} tokens"]
    iteration = getattr(widget, "iteration", None)
    if iteration is not None:
        parts.append(f"iteration {iteration}")
    kl = getattr(widget, "kl", None)
    if kl is not None and np.isfinite(kl):
        parts.append(f"KL(P || Q) = {kl:.4f}")
    if source(widget.mode).uses_perplexity:
        parts.append(f"perplexity {getattr(widget, 'perplexity', 20.0):g}")
    return " | ".join(parts)


def widget_layout(widget: Any) -> LayoutDOM:
    """The bokeh layout of a :class:`~headsne_widget.HeadSNE`'s current state (what :func:`save_html` writes)."""
    ex = widget.extraction
    if ex is None:
        raise ValueError("the widget holds no extraction yet: give it a text first")
    header = column(
        Div(text=widget_title(widget), render_as_text=True, styles={"font-size": "16px", "font-weight": "bold"}),
        Div(text=_status_line(widget), render_as_text=True),
    )
    grid = plots.max_attention(ex)
    if source(widget.mode).per_head:  # outline the selected head's row
        n = len(ex.tokens)
        grid.children[widget.layer].rect(
            x=(n - 1) / 2, y=widget.head, width=n, height=1, fill_alpha=0.0, line_color="red", line_width=2
        )

    Y = getattr(widget, "embedding", None)
    if Y is None:
        scatter = Div(text="No t-SNE frame yet: the run has not produced one.", render_as_text=True)
    else:
        Y = np.asarray(Y, dtype=np.float64)
        kept = list(widget.kept) if getattr(widget, "kept", None) else list(range(len(Y)))
        tokens = [ex.tokens[i] for i in kept]
        quantile_k = widget.quantile_k if getattr(widget, "quantile", False) else None
        scatter = plots.embedding(
            tokens,
            Y,
            quantile_k=quantile_k,
            color=np.asarray(kept, dtype=np.float64),
            title="t-SNE of the tokens (colour: position in the text)",
        )
    iterations, kls = _kl_history(widget)
    curve = plots.kl_curve(iterations, kls) if kls.size else Div(text="No KL values recorded yet.", render_as_text=True)
    return column(header, row(column(scatter, curve), grid))
