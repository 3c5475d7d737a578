"""The widget in a real JupyterLab with headless chromium: it draws, streams, answers clicks and hovers,
shows hostile token text as text, and logs no errors. The notebook's cells run through the UI, and the
kernel's state is read back through cells run in the UI too."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(120)]

# Short enough for tests (about 5 s of playback per run), long enough to watch the frames stream in.
RUN = {"n_iter": 1000, "speed": 200.0}
XSS_TEXT = "hello <img src=x onerror=alert(1)> world"
ACTIVE_ELEMENTS = "img, script, iframe, object, embed, svg, video, audio"  # none belongs in the widget


@pytest.fixture(scope="module")
def lab(jupyter_server: jupyter.JupyterServer, browser: Any) -> Iterator[jupyter.OpenedWidget]:
    """The widget on the t-SNE abstract and the bundled MiniLM, run in JupyterLab."""
    cell = jupyter.widget_cell("texts.TSNE_ABSTRACT", **RUN)
    opened = jupyter.open_widget(jupyter_server, browser, "lab_widget.ipynb", [cell], "lab")
    try:
        yield opened
    finally:
        opened.close()


def test_grid_and_scatter_draw_while_the_run_streams(lab: jupyter.OpenedWidget, artifacts: Path) -> None:
    jupyter.assert_streams_and_draws(lab, artifacts / "jupyterlab-widget.png")
    header = lab.root.text_content() or ""
    assert "6 layers × 12 heads" in header, f"the header should give the model's shape: {header[:200]!r}"


def test_hovering_a_point_shows_its_token(lab: jupyter.OpenedWidget) -> None:
    jupyter.wait_state(lab.root, ("done", "idle"))
    kernel = lab.ui.query("{'tokens': w.tokens, 'kept': w.kept}")
    hit = jupyter.hover_scatter_point(lab.root)
    found = re.search(r"#(\d+)", hit["text"])
    assert found, f"the tooltip gives no token index: {hit['text']!r}"
    j = int(found.group(1))
    assert j in kernel["kept"], f"tooltip token #{j} is not a point of the scatter"
    assert hit["text"].startswith(kernel["tokens"][j]), (
        f"tooltip {hit['text'][:80]!r} should start with token #{j} {kernel['tokens'][j]!r}"
    )
    # the same token is highlighted in the text strip
    highlighted = lab.root.locator(f"{jupyter.testid('headsne-text')} [data-index='{j}']")
    assert highlighted.count() == 1 and "hs-hover" in (highlighted.get_attribute("class") or ""), (
        f"token #{j} is not highlighted in the text strip"
    )
    lab.page.mouse.move(2, 2)
    lab.root.locator(jupyter.testid("headsne-tooltip")).wait_for(state="hidden", timeout=5000)


def test_clicking_a_grid_cell_selects_the_head_in_the_kernel(lab: jupyter.OpenedWidget) -> None:
    first = jupyter.assert_grid_click_round_trip(lab, layer=2, head=5)
    assert first["before"]["run_id"] < first["after"]["run_id"]
    # a second click while that run streams switches again
    jupyter.assert_grid_click_round_trip(lab, layer=0, head=11)
    jupyter.wait_state(lab.root, ("done",))
    assert lab.ui.query("[w.layer, w.head, w.state]") == [0, 11, "done"]
    latency = float(jupyter.dataset(lab.root).get("selectLatencyMs", "nan"))
    assert 0 < latency < 30_000, f"data-select-latency-ms should time the click to the first frame, got {latency}"


def test_no_widget_errors_and_no_outside_traffic(lab: jupyter.OpenedWidget) -> None:
    assert lab.log.widget_errors() == [], f"widget errors in the console: {lab.log.widget_errors()}"
    assert lab.log.dialogs == [], f"unexpected dialogs: {lab.log.dialogs}"
    assert lab.log.blocked == [], f"the page tried to reach other hosts: {lab.log.blocked}"


def test_hostile_token_text_is_shown_as_text(jupyter_server: jupyter.JupyterServer, browser: Any) -> None:
    cell = jupyter.widget_cell(repr(XSS_TEXT), n_iter=300, speed=0.0)
    opened = jupyter.open_widget(jupyter_server, browser, "lab_xss.ipynb", [cell], "lab")
    try:
        root, page = opened.root, opened.page
        jupyter.wait_state(root, ("done",))
        tokens = opened.ui.query("w.tokens")
        assert "<" in tokens and ">" in tokens, f"the tokenizer should split the tag into pieces: {tokens}"
        strip = root.locator(jupyter.testid("headsne-text")).first
        assert "<img src=x onerror=alert(1)>" in (strip.text_content() or ""), strip.text_content()
        assert root.locator(ACTIVE_ELEMENTS).count() == 0, "token text became HTML elements inside the widget"
        assert page.locator("img[src='x']").count() == 0, "an <img src=x> element was created in the page"
        # hover the word piece after "<" in the text strip, then a scatter point: the tooltip shows text only
        tooltip = root.locator(jupyter.testid("headsne-tooltip")).first
        strip.locator(f"[data-index='{tokens.index('<') + 1}']").first.hover()
        tooltip.wait_for(state="visible", timeout=5000)
        page.wait_for_timeout(300)  # an onerror handler would have fired by now
        assert opened.log.dialogs == [], f"a dialog fired: {opened.log.dialogs}"
        assert root.locator(ACTIVE_ELEMENTS).count() == 0, "hovering the text strip created HTML from token text"
        assert "<img" in (tooltip.text_content() or ""), (
            f"the tooltip should show the tag's characters: {tooltip.text_content()!r}"
        )
        hit = jupyter.hover_scatter_point(root)
        page.wait_for_timeout(300)
        assert root.locator(ACTIVE_ELEMENTS).count() == 0, (
            f"hovering a point ({hit['text']!r}) created HTML from token text"
        )
        assert page.locator("img[src='x']").count() == 0, "an <img src=x> element was created in the page"
        assert opened.log.dialogs == [], f"a dialog fired: {opened.log.dialogs}"
        assert opened.log.widget_errors() == [], opened.log.widget_errors()
    finally:
        opened.close()
