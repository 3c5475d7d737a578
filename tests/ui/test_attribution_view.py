"""Why a head attends (issue 29, item 3) in a real JupyterLab with headless chromium, on the bundled MiniLM: a click
on a point of the map pins its token, a click on one of its partners lists the largest (query-side, key-side)
component pairs of that edge's score, the very pairs Python's ``score_attribution`` gives (the oracle, computed in
the kernel); the composition links of the selected head are the ``head_composition`` ones and a click on one
selects that head in the kernel. Every wait is on a condition (the page's dataset, the kernel's values)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest

from . import jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(300)]

LAYER, HEAD = 2, 5
CELL = jupyter.widget_cell("texts.TSNE_ABSTRACT[:400]", n_iter=150, speed=0.0, layer=LAYER, head=HEAD)


@pytest.fixture(scope="module")
def lab(browser: Any) -> Iterator[jupyter.OpenedWidget]:
    """The widget on the start of the t-SNE abstract in JupyterLab (HEADSNE_ESM: another bundle, for mutations)."""
    with jupyter.lab_widget(browser, "attribution_view.ipynb", CELL) as opened:
        yield opened


def _wait_attr(locator: Any, predicate: Any, timeout: float, what: str) -> dict[str, str]:
    """Poll an element's dataset until ``predicate(dataset)``; the dataset."""
    deadline = time.monotonic() + timeout
    data: dict[str, str] = {}
    while time.monotonic() < deadline:
        data = locator.evaluate("e => ({...e.dataset})")
        if predicate(data):
            return data
        locator.page.wait_for_timeout(100)
    raise AssertionError(f"{what} never came: {data}")


ORACLE = (
    "(lambda f: [[component_label(r.query_term, r.query_layer, r.query_head), "
    "component_label(r.key_term, r.key_layer, r.key_head), float(r.score)] for r in "
    "f.reindex(f['score'].abs().sort_values(ascending=False, kind='stable').index).head({top})"
    ".itertuples(index=False)])(score_attribution(w.extraction, {layer}, {head}, {i}, {j}, model=g.get_model_path()))"
)


def test_a_partner_click_lists_the_exact_pairs_of_that_edge(lab: jupyter.OpenedWidget) -> None:
    lab.ui.execute(
        "from headsne_widget.capture.attribution import score_attribution\n"
        "from headsne_widget.capture.composition import head_composition\n"
        "from headsne_widget.widget.attribution_view import component_label, composition_links"
    )
    found = jupyter.hover_scatter_point(lab.root)
    i = int(re.search(r"#(\d+)", found["text"]).group(1))
    canvas = jupyter.canvas_of(lab.root, "headsne-scatter")
    canvas.click(position={"x": found["x"], "y": found["y"]})
    partners = lab.root.locator(f"{jupyter.testid('headsne-attribution-partners')} button.hs-why-partner")
    partners.first.wait_for(state="visible", timeout=10_000)
    keys = partners.evaluate_all("bs => bs.map(b => [Number(b.dataset.i), Number(b.dataset.j)])")
    sent = lab.ui.query(f"[int(k) for k in w.widget.attends_to['indices'][{i}]]")  # row i's top keys, sent
    assert [a for a, _ in keys] == [i] * len(keys), "the partners of the token clicked"
    assert {b for _, b in keys} <= set(sent) and len(keys) >= 3, "its partners: the keys it attends to most"
    j = keys[0][1]
    partners.first.click()
    jupyter.kernel_until(lab, "w.attribution_request", [LAYER, HEAD, i, j])
    result = lab.root.locator(jupyter.testid("headsne-attribution-result")).first
    data = _wait_attr(result, lambda d: d.get("state") in ("done", "error") and d.get("j") == str(j), 120, "the pairs")
    assert data["state"] == "done", lab.root.locator(jupyter.testid("headsne-attribution-note")).first.text_content()
    assert (data["layer"], data["head"], data["i"]) == (str(LAYER), str(HEAD), str(i))
    rows = lab.root.locator(f"{jupyter.testid('headsne-attribution-pairs')} li")
    shown = rows.evaluate_all("ls => ls.map(l => [l.dataset.query, l.dataset.key, Number(l.dataset.score)])")
    oracle = lab.ui.query(ORACLE.format(top=len(shown), layer=LAYER, head=HEAD, i=i, j=j))
    assert len(shown) >= 4
    assert [s[:2] for s in shown] == [o[:2] for o in oracle]
    assert [s[2] for s in shown] == pytest.approx([o[2] for o in oracle], rel=1e-9)
    first = rows.first.text_content()
    assert first.startswith(f"key side: {oracle[0][1]} · query side: {oracle[0][0]} · ") and "% of the score" in first
    assert lab.log.widget_errors() == [], lab.log.widget_errors()


def test_a_composition_link_click_selects_that_head(lab: jupyter.OpenedWidget) -> None:
    jupyter.open_tab(lab.root, "heads")  # the composition links sit under the related heads
    layer, head = lab.ui.query("[w.layer, w.head]")
    lab.root.locator(jupyter.testid("headsne-composition-ask")).first.click()
    box = lab.root.locator(jupyter.testid("headsne-composition")).first
    _wait_attr(box, lambda d: d.get("state") in ("done", "error"), 120, "the composition links")
    links = box.locator("button.hs-composition")
    shown = links.evaluate_all("bs => bs.map(b => [b.dataset.kind, Number(b.dataset.layer), Number(b.dataset.head)])")
    oracle = lab.ui.query(
        "[[x['kind'], x['layer'], x['head']] for x in composition_links(head_composition(w.extraction, data=False, "
        f"model=g.get_model_path()), {layer}, {head})]"
    )
    assert shown == oracle and len(shown) == 9
    target = next(s for s in shown if s[0] == "k")
    links.nth(shown.index(target)).click()
    jupyter.kernel_until(lab, "[w.layer, w.head]", target[1:])
    _wait_attr(box, lambda d: d.get("state") == "done", 10, "the links of the head selected")
    assert box.locator(".hs-legend-title").first.text_content().startswith(f"L{target[1]} H{target[2]} ")
    jupyter.wait_state(lab.root, ("done",), timeout=120)
    assert lab.log.widget_errors() == [], lab.log.widget_errors()
