"""``save_html``'s widget view: the widget's own front end, inlined, opened offline from a file in chromium.

The linked views must work without a kernel: the grid and the scatter draw, hovering a scatter point shows
its token in the tooltip and highlights it in the text strip, and hostile text stays text.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

import pytest

from headsne_widget import HeadSNE, export

from . import jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(240)]

HOSTILE = 'a </script><script>alert("x")</script> <img src=x onerror=alert(1)> token & more words here'


@pytest.fixture(scope="module")
def exported(tiny_bert, tmp_path_factory) -> tuple[Any, dict]:
    w = HeadSNE("attention heads look at tokens and layers stack them. " + HOSTILE, tiny_bert, n_iter=120, speed=0)
    try:
        w.wait(60)
        path = w.save_html(tmp_path_factory.mktemp("export") / "widget.html")
        facts = {"tokens": list(w.tokens), "kept": list(w.kept), "text": w.text}
    finally:
        w.close()
    return path, facts


def open_offline(browser: Any, path: Any) -> tuple[Any, jupyter.PageLog]:
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    log = jupyter.PageLog()
    page.on("pageerror", lambda err: log.page_errors.append(str(err)))
    page.on("console", lambda msg: log.console_errors.append(msg.text) if msg.type == "error" else None)
    page.on("dialog", lambda dialog: (log.dialogs.append(dialog.message), dialog.dismiss()))

    def offline(route: Any) -> None:
        if route.request.url.startswith(("file:", "blob:", "data:")):
            route.continue_()
        else:
            log.blocked.append(route.request.url)
            route.abort()

    page.route("**/*", offline)
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-rendered='true']", timeout=30_000)
    return page, log


def test_the_exported_widget_draws_and_links_offline(browser, exported) -> None:
    path, facts = exported
    html = path.read_text(encoding="utf-8")
    assert "</script><script>alert" not in html and not re.search(r"<script[^>]+src=", html)
    page, log = open_offline(browser, path)
    try:
        root = page.locator("#headsne-root")
        for name in ("headsne-grid", "headsne-scatter", "headsne-text"):
            assert root.locator(jupyter.testid(name)).count() >= 1, f"{name} is missing"
        hit = jupyter.hover_scatter_point(root)
        j = int(re.search(r"#(\d+)", hit["text"]).group(1))
        assert j in facts["kept"] and hit["text"].startswith(facts["tokens"][j])
        span = root.locator(f"{jupyter.testid('headsne-text')} [data-index='{j}']")
        assert "hs-hover" in (span.get_attribute("class") or "")
        assert "alert" in root.locator(jupyter.testid("headsne-text")).inner_text()  # shown as text
        assert log.dialogs == [] and log.page_errors == [] and log.blocked == [], log
    finally:
        page.close()


@pytest.fixture(scope="module")
def exported_with_atlas(tiny_bert, tmp_path_factory, monkeypatch_module) -> Any:
    """Layer 1 head 2 of tiny BERT, with the head atlas of layer 1 (4 heads), saved (HEADSNE_ESM=path/widget.js:
    with that bundle inlined instead of the package's, for mutation tests)."""
    if os.environ.get("HEADSNE_ESM"):
        from headsne_widget.widget.model import HeadSNEModel

        monkeypatch_module.setattr(HeadSNEModel, "_esm", open(os.environ["HEADSNE_ESM"]).read())
    w = HeadSNE("attention heads look at tokens and layers stack them into a map of a text", tiny_bert, layer=1,
                head=2, n_iter=120, speed=0)  # fmt: skip
    try:
        w.wait(60)
        w.start_atlas()
        deadline = time.monotonic() + 120
        while w.atlas_state != "done" or w.widget.head_map is None:
            assert time.monotonic() < deadline, (w.atlas_state, w.widget.head_map)
            time.sleep(0.2)
        return w.save_html(tmp_path_factory.mktemp("export") / "atlas.html")
    finally:
        w.close()


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    patch = pytest.MonkeyPatch()
    yield patch
    patch.undo()


def _caption(root: Any) -> str:
    return root.locator(".hs-caption").text_content() or ""


def test_a_saved_page_shows_the_heads_it_holds_and_refuses_the_others(browser, exported_with_atlas) -> None:
    page, log = open_offline(browser, exported_with_atlas)
    try:
        root = page.locator("#headsne-root")
        status = root.locator(jupyter.testid("headsne-status"))
        badge = root.locator(jupyter.testid("headsne-static")).text_content() or ""
        assert "static export of layer 1 head 2" in badge, badge
        assert root.locator(jupyter.testid("headsne-play")).is_disabled()
        assert re.search(r"layer 1 · head 2", _caption(root))
        scatter = jupyter.canvas_of(root, "headsne-scatter")
        before = scatter.evaluate("c => c.toDataURL()")
        # a head of the atlas's layer: its map
        jupyter.click_grid_cell(root, 1, 0, token=1)
        status.filter(has_text="from the head atlas").wait_for(timeout=5000)
        assert re.search(r"layer 1 · head 0", _caption(root))
        assert jupyter.iteration_shown(root) == 300, "the atlas thumbnail's iterations"
        page.wait_for_timeout(500)
        assert scatter.evaluate("c => c.toDataURL()") != before, "the map switched"
        # a head of another layer: refused, and the page says why
        jupyter.click_grid_cell(root, 0, 3, token=1)
        status.filter(has_text="holds no map of layer 0 head 3").wait_for(timeout=5000)
        assert re.search(r"layer 1 · head 0", _caption(root)), "nothing changed"
        # back to the exported head: its own map
        jupyter.click_grid_cell(root, 1, 2, token=1)
        page.wait_for_function("() => document.querySelector('[data-testid=headsne-iteration]').textContent === '120'")
        assert log.page_errors == [] and log.blocked == [], log
    finally:
        page.close()


def test_a_saved_page_draws_the_head_map_and_its_related_heads(browser, exported_with_atlas) -> None:
    page, log = open_offline(browser, exported_with_atlas)
    try:
        root = page.locator("#headsne-root")
        canvas = root.locator(jupyter.testid("headsne-head-map")).first
        page.wait_for_function(
            "() => document.querySelector('[data-testid=headsne-head-map]').dataset.state === 'drawn'", timeout=10_000
        )
        L, H = (
            int(root.locator(jupyter.testid("headsne-grid")).first.get_attribute(f"data-{k}"))
            for k in ("layers", "heads")
        )
        assert canvas.get_attribute("data-heads") == str(L * H)
        assert canvas.get_attribute("data-selected") == str(1 * H + 2), "layer 1 head 2 ringed"
        assert root.locator(f"{jupyter.testid('headsne-head-kinds')} .hs-legend-entry").count() >= 1
        assert root.locator(f"{jupyter.testid('headsne-related')} button.hs-related").count() >= 1
        assert (root.locator(jupyter.testid("headsne-head-map-note")).first.text_content() or "") == ""
        assert log.page_errors == [] and log.blocked == [], log
    finally:
        page.close()


def test_the_bokeh_view_is_still_available(exported, tiny_bert, tmp_path) -> None:
    w = HeadSNE("attention heads look at tokens and layers stack them", tiny_bert, n_iter=40, speed=0)
    try:
        w.wait(60)
        path = w.save_html(tmp_path / "bokeh.html", view="bokeh")
    finally:
        w.close()
    assert "Bokeh" in path.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="view must be one of"):
        export.save_html(w, tmp_path / "x.html", view="png")
