"""The map at 16384 points in JupyterLab with headless chromium (issue 21): WebGL2 draws the points where the
frame puts them, pixel for pixel where the canvas does, the backend choice is on the canvas, a hover and a
lasso answer, and the text strip holds a few hundred spans. The widget is built on a constructed extraction
and its frames are pushed from the kernel (tests/ui/constructed.py): no model, no run.

Chromium here runs WebGL2 in software (SwiftShader), where the canvas's script raster is the faster one: the
map then chooses the canvas by itself (data-webgl="software"), and the test forces WebGL2 through
data-backend-force to check its drawing."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest

from . import constructed, jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(300)]

N = 16384


def _until(opened: jupyter.OpenedWidget, expression: str, check: Any, timeout_s: float = 30.0) -> Any:
    """Poll ``expression`` in the kernel until ``check(value)``; the last value."""
    value = None
    for _ in range(int(timeout_s / 0.25)):
        value = opened.ui.query(expression)
        if check(value):
            return value
        opened.page.wait_for_timeout(250)
    raise AssertionError(f"kernel {expression} = {str(value)[:300]}")


def _paint(opened: jupyter.OpenedWidget, force: str | None) -> dict[str, str]:
    """Force the backend (None: the map's own choice), push the same frame again and wait for its paint."""
    scatter = jupyter.canvas_of(opened.root, "headsne-scatter")
    scatter.evaluate(
        "(c, force) => { if (force) c.dataset.backendForce = force; else delete c.dataset.backendForce; }", force
    )
    drawn = int(jupyter.dataset(opened.root)["framesDrawn"])
    opened.ui.execute("push(0, 'done')\npush(1, 'done')")  # two frames: a new one is drawn whatever was shown
    jupyter.wait_dataset(opened.root, lambda d: int(d["framesDrawn"]) > drawn, 30, "the pushed frame drawn")
    opened.page.wait_for_timeout(300)  # the domains ease to the data in a few frames
    return scatter.evaluate("c => Object.assign({}, c.dataset)")


def _clusters(opened: jupyter.OpenedWidget) -> list[dict[str, Any]]:
    scatter = jupyter.canvas_of(opened.root, "headsne-scatter")
    return scatter.evaluate(constructed.CLUSTER_PIXELS_JS, constructed.CLUSTER_RGB)


@pytest.fixture(scope="module")
def opened(jupyter_server: jupyter.JupyterServer, browser: Any) -> Any:
    cells = [constructed.widget_code(N), constructed.PUSH_CODE + "push(1)"]
    opened = jupyter.open_widget(jupyter_server, browser, "scatter_webgl.ipynb", cells, "lab", timeout=180)
    try:
        jupyter.wait_dataset(opened.root, lambda d: int(d.get("framesDrawn", "0")) >= 1, 60, "the first frame drawn")
        yield opened
    finally:
        opened.close()


def test_webgl_draws_the_points_where_the_canvas_does(opened: jupyter.OpenedWidget) -> None:
    auto = _paint(opened, None)
    assert auto.get("webgl") in ("hardware", "software"), f"no WebGL2 in this chromium: {auto}"
    assert auto["backend"] == ("webgl" if auto["webgl"] == "hardware" else "canvas"), auto
    canvas = _clusters(opened) if auto["backend"] == "canvas" else None
    forced = _paint(opened, "webgl")
    assert forced["backend"] == "webgl", forced
    webgl = _clusters(opened)
    if canvas is None:
        assert _paint(opened, "canvas")["backend"] == "canvas"
        canvas = _clusters(opened)
    for k, (gl, cv) in enumerate(zip(webgl, canvas)):
        # 4096 points of 7.2 px over a blob of about 60 x 60 px: thousands of pixels of the cluster's colour
        assert gl["count"] > 1500, f"cluster {k}: WebGL drew {gl['count']} pixels of its colour"
        assert abs(gl["count"] - cv["count"]) < 0.05 * cv["count"], f"cluster {k}: WebGL {gl}, canvas {cv}"
        assert math.hypot(gl["x"] - cv["x"], gl["y"] - cv["y"]) < 1.5, f"cluster {k}: WebGL {gl}, canvas {cv}"
    # where the frame puts them: 0 top left, 1 top right, 2 bottom left, 3 bottom right, a square
    c0, c1, c2, c3 = webgl
    assert c0["x"] < c1["x"] and c2["x"] < c3["x"] and c0["y"] < c2["y"] and c1["y"] < c3["y"], webgl
    width, height = c1["x"] - c0["x"], c2["y"] - c0["y"]
    assert width > 100 and abs(width - height) < 3, f"the same units on both axes: {width:.1f} x {height:.1f} px"


def test_a_hover_and_a_lasso_answer_at_16384_points(opened: jupyter.OpenedWidget) -> None:
    _paint(opened, "webgl")
    clusters = _clusters(opened)
    scatter = jupyter.canvas_of(opened.root, "headsne-scatter")
    scatter.scroll_into_view_if_needed()
    # the real mouse on cluster 1's middle: its tooltip, the kernel's hovered token, the text strip's span
    # (the kernel records its hovers: a query's click in a cell moves the mouse away, and hovered goes null)
    opened.ui.execute("hovers = []\nw.observe(lambda change: hovers.append(change.new), names='hovered')")
    scatter.hover(position={"x": clusters[1]["x"], "y": clusters[1]["y"]})
    tooltip = opened.root.locator(jupyter.testid("headsne-tooltip"))
    tooltip.wait_for(state="visible", timeout=5000)
    assert (tooltip.text_content() or "").startswith("c1w"), tooltip.text_content()
    shown = int(re.search(r"#(\d+)", tooltip.text_content() or "").group(1))
    span = opened.root.locator(f"{jupyter.testid('headsne-text')} [data-index='{shown}']")
    assert span.count() == 1 and "hs-hover" in (span.get_attribute("class") or ""), "the span is not marked"
    hovers = _until(opened, "[h for h in hovers if h is not None]", lambda v: len(v) > 0)
    assert hovers[0] == shown and shown % 4 == 1, (hovers, shown)
    spans = opened.root.locator(f"{jupyter.testid('headsne-text')} .hs-tok").count()
    assert 0 < spans < 2000, f"the text strip holds {spans} spans of {N} tokens"
    # a lasso (shift + drag) around cluster 2 selects its 4096 tokens in the kernel (the kernel's cells ran
    # below the widget: the map is brought back into view first)
    scatter.scroll_into_view_if_needed()
    box = scatter.bounding_box()
    x, y, r = clusters[2]["x"], clusters[2]["y"], 0.3 * (clusters[1]["x"] - clusters[0]["x"])
    page = opened.page
    page.keyboard.down("Shift")
    page.mouse.move(box["x"] + x - r, box["y"] + y - r)
    page.mouse.down()
    for px, py in [(x + r, y - r), (x + r, y + r), (x - r, y + r), (x - r, y - r + 2)]:
        page.mouse.move(box["x"] + px, box["y"] + py, steps=4)
    page.mouse.up()
    page.keyboard.up("Shift")
    selected = _until(opened, "[len(w.selected), sorted({t % 4 for t in w.selected})]", lambda v: v[0] > 0)
    assert selected == [N // 4, [2]], selected
    assert opened.root.get_attribute("data-selected-count") == str(N // 4)
    # the search (over the text) marks its matches in the map's text strip: /\\bc1w1000\\d\\b/ is tokens 10001,
    # 10005, 10009
    search = opened.root.locator(jupyter.testid("headsne-search"))
    search.fill("/\\bc1w1000\\d\\b/")
    jupyter.wait_dataset(opened.root, lambda d: d.get("matchCount") == "3", 10, "three matches")
    match = opened.root.locator(f"{jupyter.testid('headsne-text')} [data-index='10001']")
    assert "hs-match" in (match.get_attribute("class") or ""), "the first match is not marked in the strip"
    assert opened.log.widget_errors() == [], opened.log.widget_errors()
