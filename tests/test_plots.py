"""The bokeh figures hold the data they claim to draw, and reject bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from bokeh.embed import file_html
from bokeh.models import ColumnDataSource, FactorRange, LayoutDOM
from bokeh.resources import INLINE

from headsne_widget import analyses, extract, plots, quantile_rescale
from headsne_widget.figures import plot_style, study_plots, token_plots

TEXT = "the quick brown fox jumps over the lazy dog because the dog was asleep"


def source(layout: LayoutDOM, name: str) -> ColumnDataSource:
    found = list(layout.select({"type": ColumnDataSource, "name": name}))
    assert len(found) == 1, f"expected one source named {name!r}, found {len(found)}"
    return found[0]


@pytest.fixture(scope="module")
def ex(tiny_bert):
    return extract(TEXT, tiny_bert)


def test_max_attention_images_equal_the_grid(ex):
    layout = plots.max_attention(ex)
    assert isinstance(layout, LayoutDOM)
    for layer in range(ex.n_layers):
        image = source(layout, f"max_attention_{layer}").data["image"][0]
        np.testing.assert_allclose(image, ex.max_attention[layer], rtol=1e-6)
        cells = source(layout, f"max_attention_cells_{layer}").data
        H, n = ex.n_heads, ex.n_tokens
        assert list(cells["token"]) == list(ex.tokens) * H
        np.testing.assert_allclose(np.asarray(cells["value"]).reshape(H, n), ex.max_attention[layer], rtol=1e-6)


def test_max_attention_selected_layers(ex):
    layout = plots.max_attention(ex, layers=[1])
    assert len(layout.children) == 1
    np.testing.assert_allclose(source(layout, "max_attention_1").data["image"][0], ex.max_attention[1], rtol=1e-6)
    assert not list(layout.select({"name": "max_attention_0"}))


@pytest.mark.parametrize("layers", [[5], [-1], [], ["0"]])
def test_max_attention_rejects_unknown_layers(ex, layers):
    with pytest.raises(ValueError, match="layers"):
        plots.max_attention(ex, layers=layers)


def test_embedding_source_holds_points_and_tokens():
    rng = np.random.default_rng(0)
    tokens = ["[CLS]", "a", "b", "c", "[SEP]"]
    Y = rng.normal(size=(5, 2))
    data = source(plots.embedding(tokens, Y), "embedding").data
    np.testing.assert_allclose(np.c_[data["x"], data["y"]], Y)
    assert list(data["token"]) == tokens
    assert list(data["index"]) == [0, 1, 2, 3, 4]


def test_embedding_quantile_axes_show_original_values():
    rng = np.random.default_rng(1)
    Y = np.r_[rng.normal(size=(40, 2)), rng.normal(20.0, 0.1, size=(10, 2))]
    tokens = [f"t{i}" for i in range(len(Y))]
    layout = plots.embedding(tokens, Y, quantile_k=10)
    data = source(layout, "embedding").data
    rescaled, _ = quantile_rescale(Y, k=10)
    np.testing.assert_allclose(np.c_[data["x"], data["y"]], rescaled)
    np.testing.assert_allclose(np.c_[data["x_orig"], data["y_orig"]], Y)  # hover shows original coordinates
    fig = layout.children[0]
    for axis, column in zip((fig.xaxis[0], fig.yaxis[0]), Y.T):
        labels = axis.major_label_overrides
        assert sorted(labels) == pytest.approx(list(np.linspace(0, 1, 11)))
        values = [float(labels[t]) for t in sorted(labels)]
        assert values == sorted(values)  # the inverse map is monotone
        assert values[0] == pytest.approx(column.min(), rel=1e-2, abs=1e-2)
        assert values[-1] == pytest.approx(column.max(), rel=1e-2, abs=1e-2)


def test_embedding_colours():
    Y = np.arange(8.0).reshape(4, 2)
    numeric = source(plots.embedding(list("abcd"), Y, color=[0.0, 1.0, 2.0, 3.0]), "embedding").data
    np.testing.assert_allclose(numeric["color"], [0, 1, 2, 3])
    labels = source(plots.embedding(list("abcd"), Y, color=["x", "y", "x", "y"]), "embedding").data
    assert list(labels["color"]) == ["x", "y", "x", "y"]


@pytest.mark.parametrize(
    "tokens, Y, kwargs, match",
    [
        (["a", "b"], np.zeros((3, 2)), {}, "3 points"),
        (["a", "b"], np.zeros((2, 3)), {}, "shape"),
        (["a", "b"], np.array([[0.0, np.nan], [1.0, 1.0]]), {}, "NaN"),
        (["a", "b"], np.zeros((2, 2)), {"color": [1.0]}, "color"),
    ],
)
def test_embedding_rejects_bad_input(tokens, Y, kwargs, match):
    with pytest.raises(ValueError, match=match):
        plots.embedding(tokens, Y, **kwargs)


def test_box_stats():
    s = plots.box_stats([1, 2, 3, 4, 5, 6, 7, 8, 100])
    assert (s["q1"], s["q2"], s["q3"]) == (3.0, 5.0, 7.0)
    assert (s["lower"], s["upper"], s["n"]) == (1.0, 8.0, 9)
    assert list(s["outliers"]) == [100.0]
    with pytest.raises(ValueError):
        plots.box_stats([])


def test_kl_by_layer_boxes_summarise_each_layer_and_method():
    rng = np.random.default_rng(2)
    rows = [
        dict(layer=layer, method=method, head=(h if method == "attention" else None), run=r, kl=float(rng.random()))
        for layer in range(3)
        for method, heads in (("attention", range(4)), ("hidden", [None]))
        for h in heads
        for r in range(5)
    ]
    layout = plots.kl_by_layer(rows)
    boxes = source(layout, "boxes").data
    assert list(boxes["x"]) == [(str(layer), m) for layer in range(3) for m in ("attention", "hidden")]
    for (layer, method), q2, n in zip(boxes["x"], boxes["q2"], boxes["n"]):
        kls = [r["kl"] for r in rows if str(r["layer"]) == layer and r["method"] == method]
        assert q2 == pytest.approx(np.median(kls))
        assert n == len(kls)
    fig = layout.children[0]
    assert isinstance(fig.x_range, FactorRange)
    pd = pytest.importorskip("pandas")
    same = source(plots.kl_by_layer(pd.DataFrame(rows)), "boxes").data
    assert list(same["q2"]) == list(boxes["q2"])
    with pytest.raises(ValueError, match="empty"):
        plots.kl_by_layer([])


def robustness_result(layer: int, head: int, kls: dict) -> analyses.RobustnessResult:
    """A RobustnessResult holding only the KLs per condition (what plots.robustness draws)."""
    return analyses.RobustnessResult(
        layer=layer,
        head=head,
        fraction=0.05,
        model_name="m",
        tokens=[],
        token_ids=np.empty(0, np.int64),
        positions=np.empty((0, 1), np.int64),
        disturbed_ids=np.empty((0, 0), np.int64),
        kls=kls,
    )


def test_robustness_boxes_and_standard_deviations():
    rng = np.random.default_rng(3)
    kls = {c: rng.random(20) + i for i, c in enumerate(analyses.CONDITIONS)}
    result = robustness_result(1, 2, kls)
    layout = plots.robustness(result)
    boxes = source(layout, "boxes").data
    assert list(boxes["x"]) == list(analyses.CONDITIONS)
    np.testing.assert_allclose(boxes["q2"], [np.median(kls[c]) for c in analyses.CONDITIONS])
    bars = source(layout, "std").data
    np.testing.assert_allclose(bars["std"], [np.std(kls[c], ddof=1) for c in analyses.CONDITIONS])


def test_every_plot_saves_to_html(ex):
    rows = [
        dict(layer=0, method="attention", head=0, run=0, kl=1.0),
        dict(layer=0, method="hidden", head=None, run=0, kl=0.5),
    ]
    for layout in (
        plots.max_attention(ex),
        plots.embedding(ex.tokens, np.zeros((ex.n_tokens, 2))),
        plots.kl_by_layer(rows),
    ):
        html = file_html(layout, INLINE, "t")
        assert "Bokeh" in html and '<script src="http' not in html


# ------------------------------------------------------------------------ sizes in the output area


def widths(layout: LayoutDOM) -> list[int]:
    """Widths (px) of the figures across ``layout``: a row adds up its children, a column takes the widest."""
    from bokeh.layouts import Column, Row
    from bokeh.plotting import figure as Figure

    if isinstance(layout, Row):
        return [sum(max(widths(c)) for c in layout.children)]
    if isinstance(layout, Column):
        return [w for c in layout.children for w in widths(c)]
    assert isinstance(layout, Figure), type(layout)
    return [int(layout.width)]


def long_extraction(n_layers: int = 12, n_heads: int = 12, n_tokens: int = 512):
    """Stands in for an Extraction: max_attention() reads only ``max_attention`` and ``tokens``."""
    from types import SimpleNamespace

    rng = np.random.default_rng(4)
    tokens = ["[CLS]", *(f"representation{i}" for i in range(n_tokens - 2)), "[SEP]"]
    return SimpleNamespace(max_attention=rng.random((n_layers, n_heads, n_tokens)), tokens=tokens)


def test_every_figure_and_row_fits_the_output_area():
    assert plots.OUTPUT_WIDTH == 840  # plots' docstring: JupyterLab's output area at 1280 px with the file browser
    rng = np.random.default_rng(5)
    tokens = list(analyses.OCCUPATIONS)
    Y = rng.normal(size=(len(tokens), 2))
    half = plots.OUTPUT_WIDTH // 2
    rows = [
        dict(layer=layer, method=m, head=0, run=0, kl=float(rng.random()))
        for layer in range(12)
        for m in ("attention", "hidden")
    ]  # bert-base: 12 layers
    result = robustness_result(3, 10, {c: rng.random(5) for c in analyses.CONDITIONS})
    from bokeh.layouts import row

    layouts = {
        "max_attention, 512 tokens": plots.max_attention(long_extraction(), layers=[0, 11]),
        "max_attention, 8 tokens": plots.max_attention(long_extraction(2, 4, 8)),
        "embedding": plots.embedding(tokens, Y, title="occupations"),
        "embedding, colour bar": plots.embedding(tokens, Y, color=rng.random(len(tokens))),
        "two embeddings in a row (demo)": row(
            plots.embedding(tokens, Y, quantile_k=10, width=half, height=430),
            plots.embedding(tokens, Y, quantile_k=10, width=half, height=430),
        ),
        "kl_by_layer, 12 layers": plots.kl_by_layer(rows),
        "robustness": plots.robustness(result),
        "kl_curve": plots.kl_curve(np.arange(10), rng.random(10)),
    }
    for what, layout in layouts.items():
        assert max(widths(layout)) <= plots.OUTPUT_WIDTH, f"{what}: {widths(layout)} px"
    # a long text's heat map thins its token labels to what its width can show without overlap
    fig = layouts["max_attention, 512 tokens"].children[0]
    assert len(fig.xaxis[0].major_label_overrides) * 12 <= fig.width - 160


@pytest.mark.parametrize("quantile_k", [None, 10])
def test_token_labels_stay_inside_the_plot(quantile_k):
    """Each label (drawn 4 px right of and 4 px above its point) ends inside the plot frame, for the
    widest points too; the occupations plot used to cut its labels at the right edge."""
    rng = np.random.default_rng(6)
    tokens = list(analyses.OCCUPATIONS)
    Y = rng.normal(size=(len(tokens), 2))
    Y[np.argmax([len(t) for t in tokens]), 0] = Y[:, 0].max() + 1.0  # the longest label on the rightmost point
    for width, height in ((700, 600), (plots.OUTPUT_WIDTH // 2, 430)):
        layout = plots.embedding(tokens, Y, quantile_k=quantile_k, width=width, height=height)
        fig = layout.children[0]
        frame_w, frame_h = token_plots._frame_size(width, height, quantile_k is not None, False)
        data = source(layout, "embedding").data
        x, y = np.asarray(data["x"]), np.asarray(data["y"])
        xr, yr = fig.x_range, fig.y_range
        px = (x - xr.start) / (xr.end - xr.start) * frame_w  # screen px from the frame's left edge
        py = (y - yr.start) / (yr.end - yr.start) * frame_h  # px from the frame's bottom edge
        label_px = np.array([len(t) for t in tokens]) * plot_style.LABEL_CHAR_PX
        assert np.all(px >= 3.5) and np.all(py >= 3.5), "a point touches the left or bottom edge"
        right = np.max(px + 4 + label_px)
        assert right <= frame_w, f"labels cut at the right edge: {right} > {frame_w}"
        assert np.all(py + 4 + token_plots._LABEL_HEIGHT_PX <= frame_h), "labels cut at the top edge"
        # and the room is not wasted: the rightmost label ends within 25% of the frame's right edge
        assert np.max(px + 4 + label_px) >= 0.75 * frame_w


def test_label_width_estimate_holds_for_the_browser_font():
    """bokeh draws labels in "helvetica", which Debian's chromium renders as Liberation Sans: the width
    the padding assumes (7 px a character at 8pt) covers every occupation and every word of the abstract."""
    from PIL import ImageFont

    from headsne_widget.texts import TSNE_ABSTRACT

    fonts = [f for f in ("/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",) if Path(f).is_file()]
    if not fonts:
        pytest.skip("Liberation Sans (Debian's fonts-liberation, chromium's helvetica) is not installed")
    words = [*analyses.OCCUPATIONS, *TSNE_ABSTRACT.split()]
    for path in fonts:
        font = ImageFont.truetype(path, size=8 * 4 / 3)  # 8pt in CSS px
        too_wide = [w for w in words if font.getlength(w) > len(w) * plot_style.LABEL_CHAR_PX + 4]
        assert not too_wide, f"{Path(path).name}: labels wider than the estimate: {too_wide[:10]}"


def test_box_plot_range_holds_the_whiskers():
    """bokeh sizes the y range from glyphs only, and whiskers are annotations: a whisker reaching past
    every box and outlier was cut at the plot's edge. Invisible glyphs at the whisker ends keep it in."""
    from bokeh.models import GlyphRenderer

    kls = {"attention": np.array([1.44, 1.45, 1.46, 1.47, 1.69]), "hidden": np.array([0.46, 0.47, 0.47, 0.48, 0.5])}
    fig = study_plots._box_figure(
        kls, {"attention": "#d95f02", "hidden": "#1b9e77"}, title="t", y_label="KL", width=400
    )
    stats = {k: plots.box_stats(v) for k, v in kls.items()}
    ys = set()
    for r in fig.select({"type": GlyphRenderer}):
        field = getattr(r.glyph, "y", None) or getattr(r.glyph, "top", None)
        ys.add(field if isinstance(field, str) else getattr(field, "field", None))
    assert {"upper", "lower"} <= ys, f"no glyph at the whisker ends: y fields {ys}"
    data = source(fig, "boxes").data
    assert list(data["upper"]) == [stats[k]["upper"] for k in kls]
    assert list(data["lower"]) == [stats[k]["lower"] for k in kls]
