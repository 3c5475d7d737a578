"""The study figures of :mod:`.plots`: KL box plots per layer (thesis Fig. 12), the robustness conditions' box
plots and standard deviations (Fig. 15, 16), and the KL curve of a run."""

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

__all__ = ["box_stats", "kl_by_layer", "kl_curve", "robustness"]


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


def kl_by_layer(rows: Any) -> LayoutDOM:
    """Box plots of the KL of attention-head and standard t-SNE per layer (thesis Fig. 12).

    ``rows`` is what :func:`headsne_widget.analyses.kl_by_layer` returns (DataFrame or list of dicts with
    keys ``layer``, ``method``, ``kl``). The attention box of a layer pools all its heads and runs.
    """
    records = as_records(rows)
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
