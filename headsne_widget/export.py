"""One standalone HTML file of a widget's current state: the max-attention grid, the scatter of the current
frame and the KL curve, drawn with bokeh and with every script inlined, so the file opens offline."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from bokeh.io import save
from bokeh.layouts import column, row
from bokeh.models import Div, LayoutDOM
from bokeh.resources import INLINE

from . import plots

__all__ = ["save_html", "widget_layout", "widget_title"]


def widget_title(widget: Any) -> str:
    """"<model> - layer L, head H, <mode> mode": what the page and its <title> are called."""
    model = getattr(widget, "model_name", "") or getattr(widget.extraction, "model_name", "model")
    what = "attention-head t-SNE" if widget.mode == "attention" else "hidden-state t-SNE"
    return f"{model} - layer {widget.layer}, head {widget.head}, {widget.mode} mode ({what})"


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
    if widget.mode == "hidden":
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
    if widget.mode == "attention":  # outline the selected head's row
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
            tokens, Y, quantile_k=quantile_k, color=np.asarray(kept, dtype=np.float64),
            title="t-SNE of the tokens (colour: position in the text)",
        )
    iterations, kls = _kl_history(widget)
    curve = plots.kl_curve(iterations, kls) if kls.size else Div(text="No KL values recorded yet.", render_as_text=True)
    return column(header, row(column(scatter, curve), grid))


def save_html(widget: Any, path: str | os.PathLike) -> Path:
    """Write the widget's current state to ``path`` as one standalone HTML file with bokeh's resources inlined.

    The page needs no network: bokeh's JavaScript is embedded (``bokeh.resources.INLINE``) and the data
    travels as escaped JSON. Returns the path written.
    """
    path = Path(path)
    if not path.parent.is_dir():
        raise FileNotFoundError(f"the folder {str(path.parent)!r} does not exist")
    save(widget_layout(widget), filename=path, resources=INLINE, title=widget_title(widget))
    return path
