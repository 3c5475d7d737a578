"""Which head? (issue 20) in a real JupyterLab with headless chromium, on the bundled MiniLM (6 layers x 12
heads): the head map draws every head, a click on one of its points and on a related head selects that head
in the kernel, and sorting the heads by a score reorders the grid's rows, whose clicks still mean the head
each row shows. Every test reads what the browser shows and what the kernel received."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest

from . import jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(240)]

# HEADSNE_ESM=path/widget.js runs these tests against another front-end bundle (mutation testing)
ESM = os.environ.get("HEADSNE_ESM")


def _cell() -> str:
    cell = jupyter.widget_cell("texts.TSNE_ABSTRACT[:400]", n_iter=150, speed=0.0)
    if not ESM:
        return cell
    return f"from headsne_widget.widget.model import HeadSNEModel\nHeadSNEModel._esm = open({ESM!r}).read()\n{cell}"


@pytest.fixture(scope="module")
def lab(browser: Any) -> Iterator[jupyter.OpenedWidget]:
    """The widget on the start of the t-SNE abstract in JupyterLab, in a server of this module's own."""
    server = jupyter.start_server()
    try:
        opened = jupyter.open_widget(server, browser, "which_head.ipynb", [_cell()], "lab")
    except BaseException:
        server.stop()
        raise
    try:
        jupyter.wait_state(opened.root, ("done",), timeout=120)
        yield opened
    finally:
        opened.close()
        server.stop()


def _head_map(lab: jupyter.OpenedWidget) -> Any:
    jupyter.open_tab(lab.root, "heads")  # the inspector's heads tab (shown at first)
    canvas = lab.root.locator(jupyter.testid("headsne-head-map")).first
    deadline = time.monotonic() + 90
    while canvas.get_attribute("data-state") != "drawn":
        if time.monotonic() > deadline:
            note = lab.root.locator(jupyter.testid("headsne-head-map-note")).first.text_content()
            raise AssertionError(f"the head map was never drawn: {note!r}")
        lab.page.wait_for_timeout(250)
    return canvas


def _clear_point(positions: list[list[float]], not_index: int) -> int:
    """The head whose point is farthest from every other (a click there can only mean it), not ``not_index``."""

    def gap(i: int) -> float:
        x, y = positions[i]
        return min(math.hypot(x - a, y - b) for j, (a, b) in enumerate(positions) if j != i)

    return max((i for i in range(len(positions)) if i != not_index), key=gap)


def test_the_head_map_draws_every_head_and_a_click_selects_one(lab: jupyter.OpenedWidget) -> None:
    L, H = lab.ui.query("[w.widget.n_layers, w.widget.n_heads]")
    canvas = _head_map(lab)
    assert canvas.get_attribute("data-heads") == str(L * H)
    positions = json.loads(canvas.get_attribute("data-positions"))
    assert len(positions) == L * H
    assert len({(round(x), round(y)) for x, y in positions}) > L * H // 2, "the heads are not spread over the map"
    kinds = lab.root.locator(f"{jupyter.testid('headsne-head-kinds')} .hs-legend-entry")
    assert sorted(kinds.evaluate_all("es => es.map(e => e.dataset.kind)")) == sorted(
        set(lab.ui.query("list(w.widget.head_kinds)"))
    )
    layer, head = lab.ui.query("[w.layer, w.head]")
    i = _clear_point(positions, layer * H + head)
    canvas.scroll_into_view_if_needed()
    canvas.hover(position={"x": positions[i][0], "y": positions[i][1]})
    tip = lab.root.locator(jupyter.testid("headsne-head-tip")).first
    tip.wait_for(state="visible", timeout=5000)
    assert tip.text_content().startswith(f"L{i // H} H{i % H} · ")
    canvas.click(position={"x": positions[i][0], "y": positions[i][1]})
    jupyter.kernel_until(lab, "[w.layer, w.head]", [i // H, i % H])
    deadline = time.monotonic() + 10
    while canvas.get_attribute("data-selected") != str(i):
        assert time.monotonic() < deadline, "the head map never ringed the selected head"
        lab.page.wait_for_timeout(100)
    jupyter.wait_state(lab.root, ("done",), timeout=120)
    assert lab.log.widget_errors() == [], lab.log.widget_errors()


def test_a_related_head_click_selects_it(lab: jupyter.OpenedWidget) -> None:
    _head_map(lab)
    buttons = lab.root.locator(f"{jupyter.testid('headsne-related')} button.hs-related")
    buttons.first.wait_for(state="visible", timeout=30_000)
    related = lab.ui.query("[[r['layer'], r['head']] for r in w.related]")
    shown = buttons.evaluate_all("bs => bs.map(b => [Number(b.dataset.layer), Number(b.dataset.head)])")
    assert shown == related
    target = shown[-1]
    buttons.last.click()
    jupyter.kernel_until(lab, "[w.layer, w.head]", target)
    jupyter.wait_state(lab.root, ("done",), timeout=120)


def test_sorting_reorders_the_grid_rows_and_a_row_click_means_its_head(lab: jupyter.OpenedWidget) -> None:
    L, H = lab.ui.query("[w.widget.n_layers, w.widget.n_heads]")
    grid = jupyter.canvas_of(lab.root, "headsne-grid")
    identity = [list(range(H)) for _ in range(L)]
    assert json.loads(grid.get_attribute("data-order")) == identity
    sort = lab.root.locator(jupyter.testid("headsne-sort-heads")).first
    assert "sink" in sort.evaluate("s => [...s.options].map(o => o.value)")
    sort.select_option("sink")
    jupyter.kernel_until(lab, "w.sort_heads", "sink")
    order = lab.ui.query("w.head_order.tolist()")
    assert order != identity
    deadline = time.monotonic() + 10
    while json.loads(grid.get_attribute("data-order")) != order:
        assert time.monotonic() < deadline, (
            f"the grid's rows never followed head_order: {grid.get_attribute('data-order')}"
        )
        lab.page.wait_for_timeout(100)
    # the largest sink score of layer 2 is the first row; a click on it selects that head
    sinks = lab.ui.query(
        "w.head_scores.query('layer == 2').sort_values('sink', ascending=False, kind='stable')['head'].tolist()"
    )
    assert order[2][0] == sinks[0]
    if lab.ui.query("[w.layer, w.head]") == [2, order[2][0]]:
        jupyter.click_grid_cell(lab.root, 2, 1, token=3)
        jupyter.kernel_until(lab, "[w.layer, w.head]", [2, order[2][1]])
    jupyter.click_grid_cell(lab.root, 2, 0, token=3)
    jupyter.kernel_until(lab, "[w.layer, w.head]", [2, order[2][0]])
    note = lab.root.locator(jupyter.testid("headsne-grid-note")).first.text_content()
    assert "max attention" in note
    lab.root.locator(jupyter.testid("headsne-grid-norm")).first.select_option("above_uniform")
    jupyter.kernel_until(lab, "w.grid_norm", "above_uniform")
    deadline = time.monotonic() + 10
    while grid.get_attribute("data-norm") != "above_uniform":
        assert time.monotonic() < deadline, "the grid above uniform was never drawn"
        lab.page.wait_for_timeout(100)
    assert "above uniform" in lab.root.locator(jupyter.testid("headsne-grid-note")).first.text_content()
    jupyter.wait_state(lab.root, ("done",), timeout=120)
    assert lab.log.widget_errors() == [], lab.log.widget_errors()


_CANDIDATES_JS = """
(c, [tip, step]) => {
  // probe with synthetic mousemoves (the scatter's hit test reads only clientX/Y): places where a point answers
  const r = c.getBoundingClientRect();
  const found = [];
  for (let y = r.top + 12; y < r.bottom - 24; y += step) {
    for (let x = r.left + 50; x < r.right - 12; x += step) {
      c.dispatchEvent(new MouseEvent('mousemove', {clientX: x, clientY: y, bubbles: true}));
      if (!tip.hidden && found.every(([a, b]) => Math.hypot(a - x + r.left, b - y + r.top) > 12)) {
        found.push([x - r.left, y - r.top]);
      }
    }
  }
  c.dispatchEvent(new MouseEvent('mouseleave', {clientX: r.left, clientY: r.top}));
  return found;
}
"""


def test_query_key_mode_draws_queries_and_keys_and_a_query_hover_shows_its_token(lab: jupyter.OpenedWidget) -> None:
    lab.ui.execute("w.mode = 'query-key'")
    jupyter.kernel_until(lab, "w.mode", "query-key")
    jupyter.wait_dataset(lab.root, lambda d: d.get("state") == "done" and d.get("runId") != "", 120, "a query-key run")
    ready = "w.widget.query_rows > 0 and w.embedding is not None and w.state == 'done'"
    jupyter.kernel_until(lab, ready, True, timeout=120)
    m, shape, kept = lab.ui.query("[w.widget.query_rows, list(w.embedding.shape), list(w.kept)]")
    assert shape == [2 * m, 2] and len(kept) == 2 * m and kept[:m] == kept[m:]
    scatter = jupyter.canvas_of(lab.root, "headsne-scatter")
    deadline = time.monotonic() + 30
    while scatter.get_attribute("data-points") != str(2 * m):
        assert time.monotonic() < deadline, f"the map drew {scatter.get_attribute('data-points')} points, not {2 * m}"
        lab.page.wait_for_timeout(200)
    assert scatter.get_attribute("data-rings") == str(m), "the keys, drawn as rings"
    key = lab.root.locator(jupyter.testid("headsne-qk-key")).first
    assert key.is_visible()
    styles = key.locator(".hs-legend-entry").evaluate_all("es => es.map(e => e.dataset.style)")
    assert styles == ["query", "key"]
    # hover a query point (a row below query_rows): the tooltip names its token and its edges are drawn
    tooltip = lab.root.locator(jupyter.testid("headsne-tooltip")).first
    scatter.scroll_into_view_if_needed()
    candidates = scatter.evaluate(_CANDIDATES_JS, [tooltip.element_handle(), 4.0])
    assert candidates, "no point answered a hover"
    tokens = lab.ui.query("list(w.tokens)")
    for x, y in candidates:
        scatter.hover(position={"x": x, "y": y})
        lab.page.wait_for_timeout(150)
        row = int(scatter.get_attribute("data-hover-row") or -1)
        if 0 <= row < m:
            break
    else:
        raise AssertionError(f"none of {len(candidates)} hovered points was a query")
    tooltip.wait_for(state="visible", timeout=5000)
    text = tooltip.text_content() or ""
    assert text.startswith(tokens[kept[row]]) and f"#{kept[row]}" in text, (text, kept[row])
    assert int(scatter.get_attribute("data-hover-edges") or 0) > 0, "the hovered query's edges"
    assert lab.log.widget_errors() == [], lab.log.widget_errors()
    lab.ui.execute("w.mode = 'attention'")
