"""Bokeh figures of the thesis: max-attention grids (Fig. 13), token maps (Fig. 8-10), KL box plots (Fig. 12,
15) and standard deviations (Fig. 16).

Every function returns a bokeh layout that shows inline in a notebook (after ``bokeh.io.output_notebook()``)
and saves with ``bokeh.io.save``. Tokens reach the page only as data: tick labels and text glyphs are drawn
on the canvas and tooltips use plain ``@field`` formatting, which bokeh escapes, so a token is never HTML.
Each data source carries a ``name`` (``"max_attention_<layer>"``, ``"embedding"``, ``"boxes"``, ...) so that
it can be found with ``layout.select(name=...)``.

Sizes fit a notebook's output area: no figure, and no row of figures, is wider than ``OUTPUT_WIDTH`` px
(JupyterLab's output area is 848 px wide in a 1280 px wide window with the file browser open), and
the token labels of a token map are kept inside its plot frame by widening the axis ranges.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from bokeh.layouts import column, row
from bokeh.models import (
    BasicTicker,
    ColorBar,
    ColumnDataSource,
    FactorRange,
    FixedTicker,
    HoverTool,
    LayoutDOM,
    LinearColorMapper,
    Range1d,
    Whisker,
)
from bokeh.palettes import Category10_10, Category20_20, Viridis256
from bokeh.plotting import figure
from bokeh.transform import factor_cmap, linear_cmap

__all__ = [
    "box_stats", "corpus_heads", "embedding", "head_map", "kl_by_layer", "kl_curve", "max_attention", "robustness",
]  # fmt: skip

METHOD_COLORS = {"attention": "#d95f02", "hidden": "#1b9e77"}
_TOOLS = "pan,wheel_zoom,box_zoom,reset,save"
_MAX_TICK_LABELS = 80  # token labels per axis before thinning to every k-th (thesis Fig. 13: every third)
OUTPUT_WIDTH = 840  # px: the widest figure, or row of figures, that a notebook output area shows uncut
_TICK_LABEL_PX = 12  # px along the axis per rotated token label (11 px font plus a gap)


# ------------------------------------------------------------------------------------- max attention


def _token_ticks(tokens: Sequence[str], max_labels: int = _MAX_TICK_LABELS) -> tuple[list[int], dict[int, str]]:
    """Tick positions and labels for a token axis, thinned to every k-th token when there are many."""
    step = max(1, math.ceil(len(tokens) / max_labels))
    ticks = list(range(0, len(tokens), step))
    return ticks, {j: str(tokens[j]) for j in ticks}


def max_attention(ex: Any, *, layers: Sequence[int] | None = None) -> LayoutDOM:
    """One heads x tokens heat map per layer of the layer-wise maximum attention (thesis Def. 4.2, Fig. 13).

    Cell (head k, token j) of layer l is ``ex.max_attention[l, k, j]``, the most attention any query pays
    to token j in head k. All layers share one colour scale, so layers compare at a glance; hovering a cell
    shows its token, head and value.
    """
    M = np.asarray(ex.max_attention, dtype=np.float64)
    if M.ndim != 3:
        raise ValueError(f"ex.max_attention must have shape (layers, heads, tokens), got {M.shape}")
    L, H, n = M.shape
    tokens = [str(t) for t in ex.tokens]
    if len(tokens) != n:
        raise ValueError(f"ex has {len(tokens)} tokens but max_attention covers {n}")
    if layers is None:
        layers = range(L)
    layers = list(layers)
    if not layers:
        raise ValueError("layers is empty: pass None for all layers or at least one layer index")
    for layer in layers:
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)) or not 0 <= layer < L:
            raise ValueError(f"layers: {layer!r} is not a layer index of this model (0..{L - 1})")

    mapper = LinearColorMapper(palette=Viridis256, low=0.0, high=max(float(M.max()), 1e-12))
    width = int(min(OUTPUT_WIDTH, max(500, 9 * n + 160)))
    # about 160 px go to the head axis, the colour bar and the toolbar; one label per 12 px of the rest
    xticks, xlabels = _token_ticks(tokens, min(_MAX_TICK_LABELS, max(1, (width - 160) // _TICK_LABEL_PX)))
    heads = np.repeat(np.arange(H), n)
    positions = np.tile(np.arange(n), H)
    label_room = 12 + 6 * min(20, max(len(t) for t in xlabels.values()))  # rotated token labels
    figures = []
    for layer in layers:
        p = figure(
            title=f"layer {layer}",
            height=60 + 18 * H + label_room,
            width=width,
            x_range=(-0.5, n - 0.5),
            y_range=(H - 0.5, -0.5),
            tools=_TOOLS,
            toolbar_location="right",
            x_axis_label=None,
            y_axis_label="head",
        )
        image = ColumnDataSource({"image": [M[layer]]}, name=f"max_attention_{layer}")
        p.image(image="image", x=-0.5, y=-0.5, dw=n, dh=H, color_mapper=mapper, source=image)
        cells = ColumnDataSource(
            {
                "x": positions,
                "y": heads,
                "index": positions,
                "head": heads,
                "token": [tokens[j] for j in positions],
                "value": M[layer].ravel(),
            },
            name=f"max_attention_cells_{layer}",
        )
        hit = p.rect("x", "y", width=1, height=1, source=cells, fill_alpha=0.0, line_alpha=0.0)
        p.add_tools(
            HoverTool(
                renderers=[hit],
                tooltips=[
                    ("token", "@token"),
                    ("position", "@index"),
                    ("head", "@head"),
                    ("max attention", "@value{0.000}"),
                ],
            )
        )
        p.xaxis.ticker = FixedTicker(ticks=xticks)
        p.xaxis.major_label_overrides = xlabels
        p.xaxis.major_label_orientation = math.pi / 2
        p.yaxis.ticker = FixedTicker(ticks=list(range(H)))
        p.grid.visible = False
        p.add_layout(ColorBar(color_mapper=mapper, width=10, ticker=BasicTicker(desired_num_ticks=4)), "right")
        figures.append(p)
    return column(*figures)


# ----------------------------------------------------------------------------------------- embedding


def _format_tick(v: float) -> str:
    return f"{v:.3g}"


_LABEL_CHAR_PX = 7.0  # generous mean advance of an 8pt sans-serif character (Liberation Sans: at most 7)
_LABEL_HEIGHT_PX = 12.0  # an 8pt line
_LABEL_OFFSET_PX = (4, -4)  # token labels sit right of and above their point


def _frame_size(width: int, height: int, axis_labels: bool, colour_bar: bool) -> tuple[float, float]:
    """A lower bound of a token map's plot frame (px): the figure less its y axis (ticks and, with
    ``axis_labels``, a label), toolbar and colour bar across, less its title and x axis down."""
    return (
        width - (85 if axis_labels else 60) - 35 - (70 if colour_bar else 0),
        height - 30 - (65 if axis_labels else 45),
    )


def _padded_range(
    values: np.ndarray, before_px: np.ndarray | float, after_px: np.ndarray | float, frame_px: float
) -> Range1d:
    """A range over which every value keeps ``before_px`` / ``after_px`` of room (each value may need its
    own: the length of its label) in a frame of ``frame_px`` pixels."""
    before = np.broadcast_to(np.asarray(before_px, dtype=np.float64), values.shape)
    after = np.broadcast_to(np.asarray(after_px, dtype=np.float64), values.shape)
    before, after = np.minimum(before, 0.45 * frame_px) / frame_px, np.minimum(after, 0.45 * frame_px) / frame_px
    lo_v, hi_v = float(values.min()), float(values.max())
    span = hi_v - lo_v if hi_v > lo_v else max(abs(hi_v), 1.0)
    # D data units across the frame leave every value before * D below and after * D above it when
    # span + (max before + max after) * D <= D
    need = float(before.max() + after.max())
    D = span / (1.0 - need) if need < 1.0 else 2.0 * span
    lo = min(float(np.min(values - before * D)), lo_v)
    hi = max(float(np.max(values + after * D)), hi_v)
    return Range1d(lo, max(hi, lo + D))


def _color_spec(color: Any, n: int, source: dict) -> tuple[Any, Any]:
    """(fill colour spec, colour bar or legend field) for ``color``: None, n numbers or n category labels."""
    if color is None:
        return "#1f77b4", None
    values = list(color)
    if len(values) != n:
        raise ValueError(f"color must have one entry per token ({n}), got {len(values)}")
    arr = np.asarray(values)
    if arr.dtype.kind in "biuf":
        arr = arr.astype(np.float64)
        if not np.all(np.isfinite(arr)):
            raise ValueError("color holds NaN or infinite values")
        source["color"] = arr
        hi = float(arr.max()) if arr.max() > arr.min() else float(arr.min()) + 1.0
        spec = linear_cmap("color", Viridis256, float(arr.min()), hi)
        return spec, ColorBar(color_mapper=spec.transform, width=10)
    source["color"] = [str(v) for v in values]
    factors = sorted(set(source["color"]))
    palette = Category10_10 if len(factors) <= 10 else Category20_20
    if len(factors) > len(palette):
        raise ValueError(f"color has {len(factors)} categories; at most {len(palette)} can be told apart")
    return factor_cmap("color", list(palette[: max(len(factors), 1)]), factors), "color"


def embedding(
    tokens: Sequence[str],
    Y: Any,
    *,
    quantile_k: int | None = None,
    color: Any = None,
    title: str | None = None,
    width: int = 700,
    height: int = 600,
) -> LayoutDOM:
    """Scatter of a token map with each token written next to its point (thesis Fig. 8-10).

    ``quantile_k`` draws quantile-equidistant axes (thesis A.3): points are placed by the rescaling with k
    quantiles, and the equidistant ticks are labelled with the original coordinates they stand for.
    ``color`` is None, one number per token (colour scale) or one label per token (categories, legend).
    Hover shows the token, its position in the text and its original coordinates. ``width`` and ``height``
    are the figure's size in px (two side by side fit the output area at ``width=OUTPUT_WIDTH // 2``); the
    axis ranges leave room for every token's label inside the plot frame.
    """
    tokens = [str(t) for t in tokens]
    Y = np.asarray(Y, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[1] != 2:
        raise ValueError(f"Y must have shape (n, 2), got {Y.shape}")
    if Y.shape[0] != len(tokens):
        raise ValueError(f"Y has {Y.shape[0]} points but there are {len(tokens)} tokens")
    if not np.all(np.isfinite(Y)):
        raise ValueError("Y holds NaN or infinite coordinates")
    data: dict[str, Any] = {
        "x_orig": Y[:, 0],
        "y_orig": Y[:, 1],
        "token": tokens,
        "index": np.arange(len(tokens)),
    }
    p = figure(title=title, width=int(width), height=int(height), tools=_TOOLS, toolbar_location="right")
    if quantile_k is not None:
        from ..embedding.rescaling import quantile_rescale

        rescaled, maps = quantile_rescale(Y, k=quantile_k)
        rescaled = np.asarray(rescaled, dtype=np.float64)
        data["x"], data["y"] = rescaled[:, 0], rescaled[:, 1]
        ticks = np.linspace(0.0, 1.0, 11 if width >= 600 else 6)  # a narrow plot gets fewer tick labels
        for axis, axis_map in zip((p.xaxis, p.yaxis), maps):
            axis.ticker = FixedTicker(ticks=list(ticks))
            axis.major_label_overrides = {float(t): _format_tick(v) for t, v in zip(ticks, axis_map.inverse(ticks))}
        p.xaxis.axis_label = f"x (quantile-equidistant, k={quantile_k})"
        p.yaxis.axis_label = f"y (quantile-equidistant, k={quantile_k})"
    else:
        data["x"], data["y"] = Y[:, 0], Y[:, 1]
    fill, extra = _color_spec(color, len(tokens), data)
    source = ColumnDataSource(data, name="embedding")
    kwargs = {"legend_field": extra} if isinstance(extra, str) else {}
    points = p.scatter("x", "y", source=source, size=7, fill_color=fill, line_color=None, fill_alpha=0.8, **kwargs)
    p.text(
        "x",
        "y",
        text="token",
        source=source,
        text_font_size="8pt",
        x_offset=_LABEL_OFFSET_PX[0],
        y_offset=_LABEL_OFFSET_PX[1],
        text_alpha=0.75,
        text_baseline="bottom",
    )
    if isinstance(extra, ColorBar):
        p.add_layout(extra, "right")
    frame_w, frame_h = _frame_size(width, height, quantile_k is not None, isinstance(extra, ColorBar))
    label_w = np.array([len(t) for t in tokens], dtype=np.float64) * _LABEL_CHAR_PX
    dx, dy = _LABEL_OFFSET_PX
    p.x_range = _padded_range(np.asarray(data["x"], dtype=np.float64), 6.0, dx + label_w + 4.0, frame_w)
    p.y_range = _padded_range(np.asarray(data["y"], dtype=np.float64), 6.0, -dy + _LABEL_HEIGHT_PX + 4.0, frame_h)
    if kwargs:
        p.legend.click_policy = "hide"
        p.legend.location = "top_left"
    p.add_tools(
        HoverTool(
            renderers=[points],
            tooltips=[("token", "@token"), ("position", "@index"), ("(x, y)", "(@x_orig{0.000}, @y_orig{0.000})")],
        )
    )
    return column(p)


# -------------------------------------------------------------------------------------- box plots


def box_stats(values: Any) -> dict[str, Any]:
    """Quartiles, Tukey whiskers (last values within 1.5 IQR of the box) and outliers of ``values``."""
    v = np.sort(np.asarray(values, dtype=np.float64).ravel())
    if v.size == 0:
        raise ValueError("no values to summarise")
    q1, q2, q3 = np.quantile(v, [0.25, 0.5, 0.75])
    iqr = q3 - q1
    inside = v[(v >= q1 - 1.5 * iqr) & (v <= q3 + 1.5 * iqr)]
    return {
        "q1": float(q1),
        "q2": float(q2),
        "q3": float(q3),
        "lower": float(inside.min()),
        "upper": float(inside.max()),
        "n": int(v.size),
        "outliers": v[(v < inside.min()) | (v > inside.max())],
    }


def _factor_label_orientation(factors: Sequence[Any], width: int) -> float:
    """0 (flat) when every factor label fits its slot of a ``width`` px figure, else 45 degrees."""
    slot = (width - 95) / max(len(factors), 1)  # 95 px: the y axis and the toolbar
    longest = max(len(f[-1] if isinstance(f, tuple) else str(f)) for f in factors) * _LABEL_CHAR_PX
    return 0.0 if longest <= slot - 8 else math.pi / 4


def _box_figure(
    groups: Mapping[Any, np.ndarray], colors: Mapping[Any, str], *, title: str, y_label: str, width: int
) -> figure:
    """A box plot with one box per key of ``groups`` (keys are factors: strings or (layer, method) tuples)."""
    factors = list(groups)
    stats = [box_stats(groups[f]) for f in factors]
    boxes = ColumnDataSource(
        {
            "x": factors,
            "color": [colors[f] for f in factors],
            **{k: [s[k] for s in stats] for k in ("q1", "q2", "q3", "lower", "upper", "n")},
        },
        name="boxes",
    )
    outliers = ColumnDataSource(
        {
            "x": [f for f, s in zip(factors, stats) for _ in s["outliers"]],
            "kl": [float(o) for s in stats for o in s["outliers"]],
        },
        name="outliers",
    )
    p = figure(x_range=FactorRange(*factors), title=title, width=width, height=420, tools=_TOOLS, y_axis_label=y_label)
    upper = p.vbar("x", 0.7, "q2", "q3", source=boxes, fill_color="color", line_color="black", fill_alpha=0.7)
    lower = p.vbar("x", 0.7, "q1", "q2", source=boxes, fill_color="color", line_color="black", fill_alpha=0.7)
    whisker = Whisker(base="x", upper="upper", lower="lower", source=boxes, line_color="black")
    whisker.upper_head.size = whisker.lower_head.size = 12
    p.add_layout(whisker)
    # invisible whisker ends, so that the y range (which follows glyphs, not annotations) holds the whiskers
    p.scatter("x", "upper", source=boxes, size=0, alpha=0.0, name="whisker_upper")
    p.scatter("x", "lower", source=boxes, size=0, alpha=0.0, name="whisker_lower")
    p.scatter("x", "kl", source=outliers, size=5, color="black", alpha=0.5)
    p.add_tools(
        HoverTool(
            renderers=[upper, lower],
            tooltips=[("median", "@q2{0.000}"), ("quartiles", "@q1{0.000} - @q3{0.000}"), ("runs", "@n")],
        )
    )
    p.xgrid.grid_line_color = None
    p.xaxis.major_label_orientation = _factor_label_orientation(factors, width)
    return p


def _records(rows: Any) -> list[dict]:
    if hasattr(rows, "to_dict"):
        return rows.to_dict("records")
    return [dict(r) for r in rows]


def kl_by_layer(rows: Any) -> LayoutDOM:
    """Box plots of the KL of attention-head and standard t-SNE per layer (thesis Fig. 12).

    ``rows`` is what :func:`headsne_widget.analyses.kl_by_layer` returns (DataFrame or list of dicts with
    keys ``layer``, ``method``, ``kl``). The attention box of a layer pools all its heads and runs.
    """
    records = _records(rows)
    if not records:
        raise ValueError("rows is empty: there is nothing to plot")
    missing = {"layer", "method", "kl"} - set(records[0])
    if missing:
        raise ValueError(f"rows lack the keys {sorted(missing)}")
    groups: dict[tuple[str, str], list[float]] = {}
    for r in sorted(records, key=lambda r: (int(r["layer"]), str(r["method"]) != "attention")):
        groups.setdefault((str(int(r["layer"])), str(r["method"])), []).append(float(r["kl"]))
    colors = {f: METHOD_COLORS.get(f[1], "#7570b3") for f in groups}
    p = _box_figure(
        {f: np.asarray(v) for f, v in groups.items()},
        colors,
        title="KL divergence per layer (layers 0-indexed)",
        y_label="KL(P || Q)",
        width=int(min(OUTPUT_WIDTH, max(500, 70 * len(groups)))),
    )
    return column(p)


def robustness(result: Any) -> LayoutDOM:
    """Box plots of the four conditions' KLs (thesis Fig. 15) beside a bar plot of their standard deviations
    (Fig. 16), for a :class:`headsne_widget.analyses.RobustnessResult`."""
    groups = {c: np.asarray(v, dtype=np.float64) for c, v in result.kls.items() if len(v)}
    if not groups:
        raise ValueError("the robustness result holds no KLs")
    colors = {c: METHOD_COLORS.get(c.split()[0], "#7570b3") for c in groups}
    where = f"layer {result.layer}, head {result.head}, {result.fraction:.0%} of tokens replaced"
    # the two figures side by side fill OUTPUT_WIDTH
    box = _box_figure(groups, colors, title=f"KL: {where}", y_label="KL(P || Q)", width=OUTPUT_WIDTH - 340)
    std = result.std
    bars = ColumnDataSource(
        {"x": list(groups), "std": [std[c] for c in groups], "color": [colors[c] for c in groups]}, name="std"
    )
    q = figure(
        x_range=FactorRange(*groups),
        title="standard deviation of the KL",
        width=340,
        height=420,
        tools=_TOOLS,
        y_axis_label="std of KL",
    )
    r = q.vbar("x", 0.7, "std", source=bars, fill_color="color", line_color="black", fill_alpha=0.7)
    q.add_tools(HoverTool(renderers=[r], tooltips=[("condition", "@x"), ("std", "@std{0.0000}")]))
    q.y_range.start = 0
    q.xgrid.grid_line_color = None
    q.xaxis.major_label_orientation = _factor_label_orientation(list(groups), q.width)
    return row(box, q)


# ---------------------------------------------------------------------------------------- KL curve


def kl_curve(iterations: Any, kls: Any, *, title: str = "KL(P || Q) during the run") -> LayoutDOM:
    """Line plot of the KL divergence against the iteration (the widget's KL curve)."""
    it = np.asarray(iterations, dtype=np.float64).ravel()
    kl = np.asarray(kls, dtype=np.float64).ravel()
    if it.shape != kl.shape:
        raise ValueError(f"iterations ({it.size}) and kls ({kl.size}) must have the same length")
    keep = np.isfinite(kl)
    source = ColumnDataSource({"iteration": it[keep], "kl": kl[keep]}, name="kl_curve")
    p = figure(title=title, width=700, height=260, tools=_TOOLS, x_axis_label="iteration", y_axis_label="KL")
    line = p.line("iteration", "kl", source=source, line_width=2)
    p.add_tools(
        HoverTool(renderers=[line], tooltips=[("iteration", "@iteration"), ("KL", "@kl{0.0000}")], mode="vline")
    )
    return column(p)


# ------------------------------------------------------------------------------------ corpus heads


def corpus_heads(summary: Any, *, title: str | None = None) -> LayoutDOM:
    """Layers x heads heat map of the median KL of attention-head t-SNE across a corpus.

    ``summary`` is what :func:`headsne_widget.studies.head_summary` returns (columns ``layer``, ``head``,
    ``median``, ``q1``, ``q3``, ``iqr``, ``rank``, ``texts``). Each cell is one head (layer 0 on top, as in
    :func:`max_attention`), coloured by its median KL on the same Viridis scale as the max-attention grids
    (dark = low KL = the head's P is embedded well); hover shows the median, the IQR and the rank (1 =
    lowest median). The best head is outlined and named in the title. At most ``OUTPUT_WIDTH`` px wide, to fit a
    notebook's output area.
    """
    records = _records(summary)
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
        tools=_TOOLS,
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


# ------------------------------------------------------------------------------------------------- head map


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
        from .head_map import head_map as layout_heads

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
        tools=_TOOLS,
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
