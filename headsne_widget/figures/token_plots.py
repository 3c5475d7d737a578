"""The token figures of :mod:`.plots`: max-attention grids (thesis Fig. 13) and token maps (Fig. 8-10), with
their token labels kept inside the plot frame."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from bokeh.layouts import column
from bokeh.models import (
    BasicTicker,
    ColorBar,
    ColumnDataSource,
    FixedTicker,
    HoverTool,
    LayoutDOM,
    LinearColorMapper,
    Range1d,
)
from bokeh.palettes import Category10_10, Category20_20, Viridis256
from bokeh.plotting import figure
from bokeh.transform import factor_cmap, linear_cmap

from .._checks import is_int
from .plot_style import LABEL_CHAR_PX, OUTPUT_WIDTH, TOOLS

if TYPE_CHECKING:
    from ..capture.extraction import Extraction

__all__ = ["embedding", "max_attention"]

_MAX_TICK_LABELS = 80  # token labels per axis before thinning to every k-th (thesis Fig. 13: every third)
_TICK_LABEL_PX = 12  # px along the axis per rotated token label (11 px font plus a gap)


def _token_ticks(tokens: Sequence[str], max_labels: int = _MAX_TICK_LABELS) -> tuple[list[int], dict[int, str]]:
    """Tick positions and labels for a token axis, thinned to every k-th token when there are many."""
    step = max(1, math.ceil(len(tokens) / max_labels))
    ticks = list(range(0, len(tokens), step))
    return ticks, {j: str(tokens[j]) for j in ticks}


def max_attention(ex: Extraction, *, layers: Sequence[int] | None = None) -> LayoutDOM:
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
        if not is_int(layer) or not 0 <= layer < L:
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
            tools=TOOLS,
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


def _format_tick(v: float) -> str:
    return f"{v:.3g}"


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
    p = figure(title=title, width=int(width), height=int(height), tools=TOOLS, toolbar_location="right")
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
    label_w = np.array([len(t) for t in tokens], dtype=np.float64) * LABEL_CHAR_PX
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
