"""The syntax figure of :mod:`.plots`: Clark et al.'s Table 1 as a map, relations x heads, each relation's best
head marked, its fixed-offset baseline beside its name."""

from __future__ import annotations

from typing import Any

import numpy as np
from bokeh.layouts import column
from bokeh.models import BasicTicker, ColorBar, ColumnDataSource, FactorRange, HoverTool, LayoutDOM, LinearColorMapper
from bokeh.palettes import Viridis256
from bokeh.plotting import figure

from .plot_style import OUTPUT_WIDTH, TOOLS

__all__ = ["relation_heads_map"]

#: how a direction reads in a row's name: the arrow points from the attending word to the word it should attend to
_ARROWS = {"dependent->head": "dep→head", "head->dependent": "head→dep"}
_COLUMNS = ("relation", "direction", "layer", "head", "accuracy", "count", "baseline")


def relation_heads_map(table: Any, *, title: str | None = None) -> LayoutDOM:
    """Relations x heads: each cell one (relation, direction) row of :func:`headsne_widget.relation_heads`'s table
    and one head (``layer.head``, layer by layer), coloured by the head's accuracy on it on a fixed 0-1 Viridis
    scale (figures of two models compare); each row's best head outlined; the row's name carries its baseline (the
    share of pairs at the relation's most common offset) and count, so a head is worth a look where its cell is
    brighter than that. Hover gives the numbers. Sources named ``"relation_heads"`` and ``"relation_heads_best"``.
    """
    import pandas as pd

    frame = pd.DataFrame(table)
    if frame.empty:
        raise ValueError("the table is empty: there is nothing to plot")
    missing = set(_COLUMNS) - set(frame.columns)
    if missing:
        raise ValueError(f"the table lacks the columns {sorted(missing)}: pass what relation_heads returns")
    frame = frame.assign(
        x=[f"{int(a)}.{int(b)}" for a, b in zip(frame["layer"], frame["head"])],
        y=[_row_name(r) for r in frame.itertuples()],
    )
    heads = list(dict.fromkeys(frame.sort_values(["layer", "head"], kind="stable")["x"]))
    rows = list(dict.fromkeys(frame["y"]))  # the table's order: relations most frequent first
    source = ColumnDataSource({k: frame[k].tolist() for k in (*_COLUMNS, "x", "y")}, name="relation_heads")
    best = frame.loc[frame.groupby("y", sort=False)["accuracy"].idxmax()]
    top = ColumnDataSource({k: best[k].tolist() for k in (*_COLUMNS, "x", "y")}, name="relation_heads_best")
    cell = int(min(28, max(6, (OUTPUT_WIDTH - 240) // len(heads))))
    p = figure(
        title=title or _title(best),
        width=min(OUTPUT_WIDTH, 240 + cell * len(heads)),
        height=min(900, 90 + max(cell, 14) * len(rows)),
        x_range=FactorRange(*heads),
        y_range=FactorRange(*reversed(rows)),
        tools=TOOLS,
        toolbar_location="right",
        x_axis_label="layer.head",
    )
    mapper = LinearColorMapper(palette=Viridis256, low=0.0, high=1.0)
    cells = p.rect("x", "y", width=1, height=1, source=source, fill_color={"field": "accuracy", "transform": mapper},
                   line_color=None)  # fmt: skip
    p.rect("x", "y", width=0.9, height=0.9, source=top, fill_alpha=0.0, line_color="#d95f02", line_width=2)
    tips = [("relation", "@relation (@direction)"), ("layer, head", "@layer, @head"), ("accuracy", "@accuracy{0.000}"),
            ("baseline", "@baseline{0.000}"), ("pairs", "@count")]  # fmt: skip
    p.add_tools(HoverTool(renderers=[cells], tooltips=tips))
    p.grid.visible = False
    p.xaxis.major_label_orientation = np.pi / 2
    p.xaxis.major_label_text_font_size = "7pt" if cell < 12 else "8pt"
    p.yaxis.major_label_text_font_size = "8pt"
    p.title.text_font_size = "10pt"
    bar = ColorBar(color_mapper=mapper, width=10, ticker=BasicTicker(desired_num_ticks=5), title="accuracy")
    p.add_layout(bar, "right")
    return column(p)


def _row_name(row: Any) -> str:
    """A row's axis label: the relation, its direction, its baseline and pairs counted."""
    return f"{row.relation} {_ARROWS.get(row.direction, row.direction)} (base {row.baseline:.2f}, {int(row.count)})"


def _title(best: Any) -> str:
    """Which head tracks the most relations best, and how many beat their baseline."""
    beat = int((best["accuracy"] > best["baseline"]).sum())
    layer, head = best.groupby(["layer", "head"]).size().idxmax()
    return (f"relation heads: the best head beats the fixed-offset baseline on {beat} of {len(best)} rows; "
            f"L{int(layer)} H{int(head)} is best on the most")  # fmt: skip
