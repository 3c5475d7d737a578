"""The study figures of :mod:`.plots`: KL box plots per layer (thesis Fig. 12), the robustness conditions' box
plots and standard deviations (Fig. 15, 16), the KL curve of a run, and the term shares of each layer's states
(Mickus et al. 2022, Fig. 3a) with the rank correlation of two models' shares."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from bokeh.layouts import column, row
from bokeh.models import (
    ColumnDataSource,
    FactorRange,
    HoverTool,
    LayoutDOM,
    Whisker,
)
from bokeh.plotting import figure

from .plot_style import LABEL_CHAR_PX, METHOD_COLORS, OUTPUT_WIDTH, TOOLS, as_records

__all__ = ["TERM_COLORS", "box_stats", "compare_models", "kl_by_layer", "kl_curve", "robustness", "term_shares"]

#: the colour of each kind of term of a decomposition (input, heads, feed-forwards, corrections)
TERM_COLORS = {"input": "#999999", "head": "#d95f02", "mlp": "#7570b3", "correction": "#e7298a"}


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
    longest = max(len(f[-1] if isinstance(f, tuple) else str(f)) for f in factors) * LABEL_CHAR_PX
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
    p = figure(x_range=FactorRange(*factors), title=title, width=width, height=420, tools=TOOLS, y_axis_label=y_label)
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


def _records(rows: Any, name: str, keys: set[str], hint: str) -> list[dict]:
    """``rows`` as a list of dicts, refused when empty or without ``keys``."""
    records = as_records(rows)
    if not records:
        raise ValueError(f"{name} is empty: there is nothing to plot")
    missing = keys - set(records[0])
    if missing:
        raise ValueError(f"{name} lack{'s' if name == 'result' else ''} the keys {sorted(missing)}{hint}")
    return records


def kl_by_layer(rows: Any) -> LayoutDOM:
    """Box plots of the KL of attention-head and standard t-SNE per layer (thesis Fig. 12).

    ``rows`` is what :func:`headsne_widget.analyses.kl_by_layer` returns (DataFrame or list of dicts with
    keys ``layer``, ``method``, ``kl``). The attention box of a layer pools all its heads and runs.
    """
    records = _records(rows, "rows", {"layer", "method", "kl"}, "")
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
        tools=TOOLS,
        y_axis_label="std of KL",
    )
    r = q.vbar("x", 0.7, "std", source=bars, fill_color="color", line_color="black", fill_alpha=0.7)
    q.add_tools(HoverTool(renderers=[r], tooltips=[("condition", "@x"), ("std", "@std{0.0000}")]))
    q.y_range.start = 0
    q.xgrid.grid_line_color = None
    q.xaxis.major_label_orientation = _factor_label_orientation(list(groups), q.width)
    return row(box, q)


def kl_curve(iterations: Any, kls: Any, *, title: str = "KL(P || Q) during the run") -> LayoutDOM:
    """Line plot of the KL divergence against the iteration (the widget's KL curve)."""
    it = np.asarray(iterations, dtype=np.float64).ravel()
    kl = np.asarray(kls, dtype=np.float64).ravel()
    if it.shape != kl.shape:
        raise ValueError(f"iterations ({it.size}) and kls ({kl.size}) must have the same length")
    keep = np.isfinite(kl)
    source = ColumnDataSource({"iteration": it[keep], "kl": kl[keep]}, name="kl_curve")
    p = figure(title=title, width=700, height=260, tools=TOOLS, x_axis_label="iteration", y_axis_label="KL")
    line = p.line("iteration", "kl", source=source, line_width=2)
    p.add_tools(
        HoverTool(renderers=[line], tooltips=[("iteration", "@iteration"), ("KL", "@kl{0.0000}")], mode="vline")
    )
    return column(p)


def _term_table(table: Any) -> Any:
    """The per-layer mean shares (index layer, one column per term): ``term_share_summary``'s table as given, or
    computed from ``term_shares``'s rows (heads summed already)."""
    import pandas as pd

    if not isinstance(table, pd.DataFrame) or table.empty:
        raise ValueError("pass term_share_summary(rows) or the rows of term_shares (a non-empty DataFrame)")
    if "share" in table.columns:
        if "from_layer" in table.columns:
            raise ValueError("these rows are by head: pass term_share_summary(rows), which sums the heads first")
        table = table.pivot_table(index="layer", columns="term", values="share", aggfunc="mean")
    terms = [t for t in TERM_COLORS if t in table.columns]
    if not terms:
        raise ValueError(f"the table has none of the terms {list(TERM_COLORS)} as a column")
    return table[terms].sort_index()


def term_shares(table: Any, *, title: str = "share of each term in the token states, per layer") -> LayoutDOM:
    """Stacked bars of the mean share of each term per layer (Mickus et al. 2022, Fig. 3a), from
    ``term_share_summary(rows)`` or ``term_shares``'s rows. Negative means (a correction can pull a state back)
    stack below 0, positive ones above, so that each bar's height above 0 less its depth below is 1."""
    table = _term_table(table)
    layers = [str(int(layer)) for layer in table.index]
    data: dict[str, Any] = {"layer": layers}
    up, down = np.zeros(len(layers)), np.zeros(len(layers))
    for term in table.columns:
        v = table[term].to_numpy(dtype=np.float64)
        base = np.where(v >= 0, up, down)
        data.update({term: v, f"{term}_bottom": base, f"{term}_top": base + v})
        up, down = np.where(v >= 0, up + v, up), np.where(v < 0, down + v, down)
    source = ColumnDataSource(data, name="term_shares")
    p = figure(x_range=FactorRange(*layers), title=title, width=min(OUTPUT_WIDTH, 160 + 70 * len(layers)),
               height=380, tools=TOOLS, x_axis_label="layer (0-based)", y_axis_label="mean share")  # fmt: skip
    for term in table.columns:
        bars = p.vbar("layer", 0.8, f"{term}_top", f"{term}_bottom", source=source, fill_color=TERM_COLORS[term],
                      line_color="white", legend_label=term, name=f"term_{term}")  # fmt: skip
        p.add_tools(HoverTool(renderers=[bars], tooltips=[("layer", "@layer"), (term, f"@{{{term}}}{{0.000}}")]))
    p.legend.location, p.legend.orientation = "top_center", "horizontal"
    p.xgrid.grid_line_color = None
    return column(p)


def compare_models(result: Any, *, title: str = "Spearman rho between two models' term shares") -> LayoutDOM:
    """One line per term of ``compare_models``'s rho against the layer (rows ``layer``, ``term``, ``rho``)."""
    records = _records(result, "result", {"layer", "term", "rho"}, ": pass what compare_models returns")
    p = figure(title=title, width=620, height=320, tools=TOOLS, x_axis_label="layer (0-based)",
               y_axis_label="Spearman rho", y_range=(-1.05, 1.05))  # fmt: skip
    for term in [t for t in TERM_COLORS if any(r["term"] == t for r in records)]:
        mine = sorted((r for r in records if r["term"] == term), key=lambda r: int(r["layer"]))
        n = [int(r.get("n", 0)) for r in mine]
        source = ColumnDataSource({"layer": [int(r["layer"]) for r in mine], "rho": [float(r["rho"]) for r in mine],
                                   "n": n}, name=f"model_rho_{term}")  # fmt: skip
        line = p.line("layer", "rho", source=source, color=TERM_COLORS[term], line_width=2, legend_label=term)
        p.scatter("layer", "rho", source=source, color=TERM_COLORS[term], size=6, legend_label=term)
        p.add_tools(
            HoverTool(renderers=[line], tooltips=[(term, "@rho{0.000}"), ("layer", "@layer"), ("tokens", "@n")])
        )
    p.legend.location = "bottom_left"
    p.xaxis.ticker.desired_num_ticks = 12
    return column(p)
