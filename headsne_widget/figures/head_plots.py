"""The head figures of :mod:`.plots`: the layers x heads map of a corpus study's median KL, and every head of a
model placed by how alike the heads are, coloured by its kind."""

from __future__ import annotations

from typing import Any

import numpy as np
from bokeh.layouts import column
from bokeh.models import (
    BasicTicker,
    ColorBar,
    ColumnDataSource,
    FactorRange,
    HoverTool,
    LayoutDOM,
    LinearColorMapper,
)
from bokeh.palettes import Category10_10, Viridis256
from bokeh.plotting import figure
from bokeh.transform import factor_cmap

from .plot_style import OUTPUT_WIDTH, TOOLS, as_records

__all__ = ["corpus_heads", "head_map"]


def corpus_heads(summary: Any, *, title: str | None = None) -> LayoutDOM:
    """Layers x heads heat map of the median KL of attention-head t-SNE across a corpus.

    ``summary`` is what :func:`headsne_widget.studies.head_summary` returns (columns ``layer``, ``head``,
    ``median``, ``q1``, ``q3``, ``iqr``, ``rank``, ``texts``). Each cell is one head (layer 0 on top, as in
    :func:`max_attention`), coloured by its median KL on the same Viridis scale as the max-attention grids
    (dark = low KL = the head's P is embedded well); hover shows the median, the IQR and the rank (1 =
    lowest median). The best head is outlined and named in the title. At most ``OUTPUT_WIDTH`` px wide, to fit a
    notebook's output area.
    """
    records = as_records(summary)
    if not records:
        raise ValueError("summary is empty: there is nothing to plot")
    missing = {"layer", "head", "median", "q1", "q3", "iqr", "rank", "texts"} - set(records[0])
    if missing:
        raise ValueError(f"summary lacks the columns {sorted(missing)}: pass what studies.head_summary returns")
    layers = sorted({int(r["layer"]) for r in records})
    heads = sorted({int(r["head"]) for r in records})
    data = {k: [r[k] for r in records] for k in ("median", "q1", "q3", "iqr", "rank", "texts")}
    data["layer"], data["head"] = [int(r["layer"]) for r in records], [int(r["head"]) for r in records]
    data["x"], data["y"] = [str(h) for h in data["head"]], [str(layer) for layer in data["layer"]]
    source = ColumnDataSource(data, name="corpus_heads")
    medians = np.asarray(data["median"], dtype=np.float64)
    low, high = float(medians.min()), float(medians.max())
    mapper = LinearColorMapper(palette=Viridis256, low=low, high=high if high > low else low + 1e-12)
    best = records[int(np.argmin(data["rank"]))]
    if title is None:
        title = (
            f"median KL of attention-head t-SNE over {int(max(data['texts']))} texts; best: layer "
            f"{int(best['layer'])} head {int(best['head'])} ({float(best['median']):.3f})"
        )
    cell = int(min(56, max(24, 660 // len(heads))))
    p = figure(
        title=title,
        width=min(OUTPUT_WIDTH, 110 + cell * len(heads)),
        height=min(640, 110 + cell * len(layers)),
        x_range=FactorRange(*[str(h) for h in heads]),
        y_range=FactorRange(*[str(layer) for layer in reversed(layers)]),
        tools=TOOLS,
        toolbar_location="right",
        x_axis_label="head",
        y_axis_label="layer",
    )
    cells = p.rect(
        "x",
        "y",
        width=1,
        height=1,
        source=source,
        fill_color={"field": "median", "transform": mapper},
        line_color="white",
    )
    top = ColumnDataSource({"x": [str(int(best["head"]))], "y": [str(int(best["layer"]))]}, name="corpus_heads_best")
    p.rect("x", "y", width=0.92, height=0.92, source=top, fill_alpha=0.0, line_color="#d95f02", line_width=3)
    p.add_tools(
        HoverTool(
            renderers=[cells],
            tooltips=[
                ("layer, head", "@layer, @head"),
                ("median KL", "@median{0.000}"),
                ("IQR", "@iqr{0.000} (@q1{0.000} to @q3{0.000})"),
                ("rank", f"@rank of {len(records)}"),
                ("texts", "@texts"),
            ],
        )
    )
    p.grid.visible = False
    p.title.text_font_size = "10pt"
    p.add_layout(ColorBar(color_mapper=mapper, width=10, ticker=BasicTicker(desired_num_ticks=5), title="KL"), "right")
    return column(p)


def head_map(scores: Any, *, title: str | None = None) -> LayoutDOM:
    """Every head of a model as one mark, placed by how alike the heads are, coloured by its kind.

    ``scores`` is an :class:`~headsne_widget.Extraction` (placed by :func:`headsne_widget.widget.head_map.head_map`:
    a t-SNE of the heads' scores, grid rows and received attention), or a table with ``layer``, ``head``, ``kind``
    and either ``x`` and ``y`` (positions of your own) or the score columns of :func:`headsne_widget.head_scores`
    (then placed by the first two principal components of the scores, deterministic). Hover shows the head, its
    kind and its scores. The data source is named ``"head_map"``.
    """
    import pandas as pd

    from ..capture.scores import KINDS, SCORES, head_scores

    method = "your positions"
    if isinstance(scores, pd.DataFrame):
        table = scores.reset_index(drop=True)
    elif hasattr(scores, "max_attention") and hasattr(scores, "attention"):
        from ..widget.head_map import head_map as layout_heads

        layout = layout_heads(scores)
        table = head_scores(scores)
        table["x"], table["y"] = layout.positions[:, 0], layout.positions[:, 1]
        method = f"{layout.method} of the heads' scores, grid rows and received attention"
    else:
        raise TypeError(f"head_map takes an Extraction or a table of head scores, got {type(scores).__name__}")
    missing = {"layer", "head", "kind"} - set(table.columns)
    if missing:
        raise ValueError(f"the table lacks the columns {sorted(missing)}: pass what head_scores returns")
    names = [name for name in SCORES if name in table.columns]
    if not {"x", "y"} <= set(table.columns):
        if not names:
            raise ValueError("the table has neither x and y nor any score to place the heads by")
        values = np.nan_to_num(table[names].to_numpy(dtype=np.float64))
        centred = values - values.mean(axis=0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        xy = np.zeros((len(table), 2))
        xy[:, : min(2, vt.shape[0])] = centred @ vt[:2].T
        table = table.assign(x=xy[:, 0], y=xy[:, 1])
        method = "the first two principal components of the scores"
    data: dict[str, Any] = {k: table[k].tolist() for k in ("x", "y", "layer", "head", "kind")}
    data["label"] = [f"{int(a)}.{int(b)}" for a, b in zip(data["layer"], data["head"])]
    for name in names:
        data[name] = table[name].astype(float).fillna(-1.0).tolist()
    source = ColumnDataSource(data, name="head_map")
    kinds = [k for k in KINDS if k in set(data["kind"])] + sorted(set(data["kind"]) - set(KINDS))
    palette = [Category10_10[KINDS.index(k) % 10] if k in KINDS else "#999999" for k in kinds]
    p = figure(
        title=title or f"{len(table)} heads placed by {method}, coloured by kind",
        width=min(OUTPUT_WIDTH, 640),
        height=520,
        tools=TOOLS,
        toolbar_location="right",
    )
    marks = p.scatter(
        "x", "y", source=source, size=9, line_color="white", legend_field="kind",
        fill_color=factor_cmap("kind", palette=palette, factors=kinds),
    )  # fmt: skip
    tooltips = [("layer.head", "@label"), ("kind", "@kind")] + [(name, f"@{name}{{0.000}}") for name in names]
    p.add_tools(HoverTool(renderers=[marks], tooltips=tooltips))
    p.legend.location = "top_left"
    p.legend.label_text_font_size = "9pt"
    p.axis.visible = False
    p.grid.visible = False
    p.title.text_font_size = "10pt"
    return column(p)
