"""Syntax in the widget (issue 54, item 5) in a real JupyterLab with headless chromium, on the bundled MiniLM: the
colour menu's "dependency relation" colours the text by spaCy's relations with a legend that names them, and
``w.sort_heads = "det"`` reorders the grid's rows as the kernel ranks the heads, the sort menu naming the relation.
Every test reads what the browser shows and what the kernel holds."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from . import jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(300)]

TEXT = "The old farmer sold his brown horse to a young teacher. She paid him in cash."
CELL = jupyter.widget_cell(repr(TEXT), n_iter=150, speed=0.0)


@pytest.fixture(scope="module")
def lab(browser: Any) -> Iterator[jupyter.OpenedWidget]:
    with jupyter.lab_widget(browser, "syntax_view.ipynb", CELL) as opened:
        yield opened


def _until(lab: jupyter.OpenedWidget, what: str, probe: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := probe()):
        assert time.monotonic() < deadline, f"never: {what}"
        lab.page.wait_for_timeout(150)
    return value


def test_colour_by_dependency_relation_shows_a_legend_of_the_relations(lab: jupyter.OpenedWidget) -> None:
    menu = lab.root.locator(jupyter.testid("headsne-color")).first
    assert "dep" in menu.evaluate("s => [...s.options].map(o => o.value)")
    menu.select_option("dep")
    jupyter.kernel_until(lab, "w.color_by", "dep")
    legend = lab.root.locator(jupyter.testid("headsne-legend")).first
    _until(lab, "the legend of relations", lambda: legend.get_attribute("data-mode") == "dep")
    assert legend.get_attribute("data-kind") == "categorical"
    assert legend.locator(".hs-legend-title").text_content() == "dependency relation (spaCy)"
    entries = legend.locator(".hs-legend-entry").evaluate_all("es => es.map(e => e.textContent)")
    categories = lab.ui.query("list(w.color_categories)")
    assert entries == categories[:10] and "det" in entries and entries[-1] == "(none)"
    # the text strip: tokens of one relation share a colour, tokens of two relations differ (spaCy's own labels)
    lab.ui.execute("from headsne_widget.widget.syntax_view import token_labels")
    labels = lab.ui.query("token_labels(w.extraction, 'dep')")
    colour = "(_, i) => document.querySelector(`.hs-root [data-index='${i}']`).style.getPropertyValue('--hs-tok-color')"
    strip = lab.root.locator(jupyter.testid("headsne-text")).first
    colours = [strip.evaluate(colour, i) for i in range(len(labels))]
    by_label: dict[str, set[str]] = {}
    for label, shown in zip(labels, colours):
        by_label.setdefault(label, set()).add(shown)
    assert all(len(shades) == 1 for shades in by_label.values()), by_label
    assert len({next(iter(s)) for s in by_label.values()}) == len(by_label)
    # the head map's legend: the relations the heads track best (the kernel's head_relations), with their counts
    relations = lab.ui.query("list(w.head_relations)")
    assert len(relations) == 72 and "(none)" in relations
    heads = lab.root.locator(f"{jupyter.testid('headsne-head-kinds')} .hs-legend-entry")
    _until(lab, "the head map's legend of relations", lambda: "(none)" in heads.evaluate_all(
        "es => es.map(e => e.dataset.kind)"))  # fmt: skip
    shown = heads.evaluate_all("es => es.map(e => [e.dataset.kind, Number(e.title.split(' ')[0])])")
    assert sorted(shown) == sorted([r, relations.count(r)] for r in set(relations))
    assert lab.log.widget_errors() == [], lab.log.widget_errors()


def test_sorting_by_a_relation_reorders_the_grid(lab: jupyter.OpenedWidget) -> None:
    L, H = lab.ui.query("[w.widget.n_layers, w.widget.n_heads]")
    grid = jupyter.canvas_of(lab.root, "headsne-grid")
    assert json.loads(grid.get_attribute("data-order")) == [list(range(H)) for _ in range(L)]
    lab.ui.execute("w.sort_heads = 'det'")
    order = lab.ui.query("w.head_order.tolist()")
    _until(lab, "the grid's rows follow head_order", lambda: json.loads(grid.get_attribute("data-order")) == order)
    # the kernel's order is each head's det accuracy on this text, best first (the corpus function on one text)
    lab.ui.execute(
        "from headsne_widget import parse, relation_heads\n"
        "table = relation_heads([w.extraction], parses=parse(w.text), relations='det', progress=False)"
    )
    best = lab.ui.query("table.groupby(['layer', 'head'])['accuracy'].max().unstack().values.tolist()")
    assert all(order[k] == sorted(range(H), key=lambda h: (-best[k][h], h)) for k in range(L))
    sort = lab.root.locator(jupyter.testid("headsne-sort-heads")).first
    _until(lab, "the sort menu names the relation", lambda: sort.evaluate("s => s.value") == "det")
    assert sort.evaluate("s => s.selectedOptions[0].textContent") == "relation det"
    sort.select_option("")
    jupyter.kernel_until(lab, "w.sort_heads", "")
    _until(lab, "the model's order back", lambda: json.loads(grid.get_attribute("data-order"))[0] == list(range(H)))
    assert lab.log.widget_errors() == [], lab.log.widget_errors()


def test_hovering_a_token_draws_its_head_and_dependents(lab: jupyter.OpenedWidget) -> None:
    lab.ui.execute("w.color_by = 'dep'")
    jupyter.kernel_until(lab, "w.syntax_tree is not None", True)
    tokens, (first, head) = lab.ui.query("[list(w.tokens), w.syntax_tree.tolist()]")
    farmer = tokens.index("farmer")  # "The old farmer sold ...": det and amod hang on it, it on "sold"
    expected = {"head": tokens.index("sold"), "dependents": [tokens.index("the"), tokens.index("old")]}
    # the kernel's tree, read as the browser reads it: the first tokens of the words whose head is farmer's word
    assert head[farmer] == expected["head"]
    assert [j for j in range(len(tokens)) if first[j] == j != farmer and head[j] == farmer] == expected["dependents"]
    strip = lab.root.locator(jupyter.testid("headsne-text")).first
    strip.locator(f"[data-index='{farmer}']").hover()
    scatter = jupyter.canvas_of(lab.root, "headsne-scatter")
    _until(lab, "the arcs of the hovered token", lambda: json.loads(scatter.get_attribute("data-syntax-arcs") or "{}")
           == expected)  # fmt: skip
    marked = "(s, c) => [...s.querySelectorAll('.' + c)].map(e => Number(e.dataset.index))"
    assert strip.evaluate(marked, "hs-syntax-head") == [expected["head"]]
    assert strip.evaluate(marked, "hs-syntax-dep") == expected["dependents"]
    lab.ui.execute("w.color_by = 'position'")  # no parse, no arcs
    _until(lab, "the arcs gone", lambda: json.loads(scatter.get_attribute("data-syntax-arcs") or "{}")["head"] == -1)
    assert strip.evaluate(marked, "hs-syntax-head") == []
    assert lab.log.widget_errors() == [], lab.log.widget_errors()
