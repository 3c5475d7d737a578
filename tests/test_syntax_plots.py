"""The relations x heads figure (``plots.relation_heads_map``) drawn from relation_heads' table of planted heads:
every cell is the table's accuracy, the marked head of each row is the row's best by pandas, the planted head
(0, 0) is marked on every dependent->head row, each row's name carries its counted baseline, and it fits a
notebook's output area and saves to HTML."""

from __future__ import annotations

import pandas as pd
import pytest
from bokeh.embed import file_html
from bokeh.models import ColumnDataSource
from bokeh.resources import INLINE
from test_syntax_relations import planted, sentence

from headsne_widget import plots
from headsne_widget.studies.syntax import relation_heads
from headsne_widget.syntax.parses import parse


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    pairs = [sentence(k) for k in range(6)]
    texts = [t for t, _ in pairs]
    frames = parse(texts, "".join(c for _, c in pairs))
    return relation_heads([planted(t, f) for t, f in zip(texts, frames)], parses=frames, client="sync", progress=False)


def _data(layout, name: str) -> dict:
    (found,) = layout.select({"type": ColumnDataSource, "name": name})
    return found.data


def test_cells_are_the_table_and_each_rows_best_head_is_marked(table):
    layout = plots.relation_heads_map(table)
    cells = pd.DataFrame(_data(layout, "relation_heads"))
    assert len(cells) == len(table)
    pd.testing.assert_series_equal(cells["accuracy"], table["accuracy"].reset_index(drop=True), check_names=False)
    best = pd.DataFrame(_data(layout, "relation_heads_best"))
    oracle = table.loc[table.groupby(["relation", "direction"])["accuracy"].idxmax()]
    assert sorted(zip(best["relation"], best["direction"], best["layer"], best["head"])) == sorted(
        zip(oracle["relation"], oracle["direction"], oracle["layer"], oracle["head"])
    )
    planted_rows = best[best["direction"] == "dependent->head"]
    assert set(zip(planted_rows["layer"], planted_rows["head"])) == {(0, 0)}
    det = table[(table["relation"] == "det") & (table["direction"] == "dependent->head")].iloc[0]
    assert f"det dep→head (base {det['baseline']:.2f}, {int(det['count'])})" in set(cells["y"])


def test_the_figure_fits_the_output_area_and_saves(table):
    layout = plots.relation_heads_map(table)
    fig = layout.children[0]
    assert fig.width <= plots.OUTPUT_WIDTH
    assert "relation heads" in fig.title.text and "L0 H0" in fig.title.text
    assert "relation_heads" in file_html(layout, INLINE)


@pytest.mark.parametrize(
    ("bad", "match"),
    [(pd.DataFrame(), "empty"), (pd.DataFrame({"relation": ["det"], "layer": [0]}), "lacks the columns")],
)
def test_a_table_that_is_not_relation_heads_is_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        plots.relation_heads_map(bad)
