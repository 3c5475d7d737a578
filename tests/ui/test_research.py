"""Issue 11 in a real JupyterLab with headless chromium: selection synced both ways (lasso, box, text
clicks, ``w.selected``), search, collision-free labels, colour by + legend, the 800 px layout, keys kept
in the widget, the grid's head labels / keyboard / hidden mode, attention direction, exports and the
head atlas. Every test reads what the browser shows and what the kernel received."""

from __future__ import annotations

import json
import os
import re
import struct
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(180)]

RUN = {"n_iter": 400, "speed": 0.0}
# HEADSNE_ESM=path/widget.js runs these tests against another front-end bundle (mutation testing)
# without touching the package's built one, which other test runs on this machine share.
ESM = os.environ.get("HEADSNE_ESM")


def _cell(text: str, **params: Any) -> str:
    cell = jupyter.widget_cell(text, **params)
    if not ESM:
        return cell
    return f"from headsne_widget.widget.model import HeadSNEModel\nHeadSNEModel._esm = open({ESM!r}).read()\n{cell}"


TEXT_479 = "' '.join([texts.TSNE_ABSTRACT] * 3)"


@pytest.fixture(scope="module")
def server(browser: Any) -> Iterator[jupyter.JupyterServer]:
    """A Jupyter server of this module's own: JupyterLab restores the tabs other modules left open in
    the shared server's workspace, and their outputs must not be mistaken for this widget."""
    server = jupyter.start_server()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def lab(server: jupyter.JupyterServer, browser: Any) -> Iterator[jupyter.OpenedWidget]:
    """The widget on the t-SNE abstract (271 tokens), run to the end, in JupyterLab."""
    cell = _cell("texts.TSNE_ABSTRACT", **RUN)
    opened = jupyter.open_widget(server, browser, "research.ipynb", [cell], "lab")
    try:
        jupyter.wait_state(opened.root, ("done",))
        yield opened
    finally:
        opened.close()


def _done(lab: jupyter.OpenedWidget) -> None:
    jupyter.wait_state(lab.root, ("done",), timeout=120)


def _scatter(lab: jupyter.OpenedWidget) -> Any:
    return jupyter.canvas_of(lab.root, "headsne-scatter")


def _data(locator: Any) -> dict[str, str]:
    return locator.evaluate("el => Object.assign({}, el.dataset)")


def _settled_boxes(lab: jupyter.OpenedWidget) -> tuple[list[list[float]], list[int]]:
    """The label boxes the scatter drew last, once two reads 400 ms apart agree (no animation left)."""
    scatter = _scatter(lab)
    previous = None
    for _ in range(40):
        data = _data(scatter)
        now = (data.get("labelBoxes", "[]"), data.get("labelTokens", "[]"))
        if now == previous:
            return json.loads(now[0]), json.loads(now[1])
        previous = now
        lab.page.wait_for_timeout(400)
    raise AssertionError("the scatter's labels never settled")


def _assert_no_overlap(boxes: list[list[float]], width: float, height: float) -> None:
    for i, (x, y, w, h) in enumerate(boxes):
        assert w > 0 and h > 0 and x >= 0 and y >= 0 and x + w <= width + 0.5 and y + h <= height + 0.5, (i, boxes[i])
        for j in range(i):
            a, b, c, d = boxes[j]
            overlap = min(x + w, a + c) - max(x, a) > 0.2 and min(y + h, b + d) - max(y, b) > 0.2
            assert not overlap, f"labels {i} {boxes[i]} and {j} {boxes[j]} overlap"


def _hover_tooltip(lab: jupyter.OpenedWidget, token: int) -> str:
    """Hover token ``token`` in the text strip; the tooltip's text (the same tooltip as the map's)."""
    span = lab.root.locator(f"{jupyter.testid('headsne-text')} [data-index='{token}']")
    span.scroll_into_view_if_needed()
    span.hover()
    tooltip = lab.root.locator(jupyter.testid("headsne-tooltip"))
    tooltip.wait_for(state="visible", timeout=5000)
    return tooltip.text_content() or ""


def _assert_box_selection(lab: jupyter.OpenedWidget) -> list[int]:
    """The kernel's selection is exactly the points inside an axis-aligned box of the shown frame.

    The scatter maps data to screen with one scale per axis (no rotation), so the tokens inside a screen
    rectangle are the tokens inside a data rectangle: the selection's bounding box in the frame the
    browser shows (``w.frame``, rows = ``w.kept``) holds no unselected point, and the selection is neither
    empty nor everything.
    """
    state = lab.ui.query("{'selected': w.selected, 'frame': w.frame.tolist(), 'kept': w.kept}")
    selected, frame, kept = set(state["selected"]), state["frame"], state["kept"]
    assert 3 <= len(selected) < len(kept), f"the box should catch some points, not all: {len(selected)} of {len(kept)}"
    rows = [r for r, t in enumerate(kept) if t in selected]
    assert len(rows) == len(selected), "selected tokens without a point"
    xs, ys = [frame[r][0] for r in rows], [frame[r][1] for r in rows]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    inside = {kept[r] for r, (x, y) in enumerate(frame) if x0 <= x <= x1 and y0 <= y <= y1}
    assert inside == selected, f"points inside the selection's box but not selected: {sorted(inside - selected)}"
    assert lab.root.get_attribute("data-selected-count") == str(len(selected))
    return sorted(selected)


# ---------------------------------------------------------------------------------------------------
# 1. labels


def test_labels_never_overlap_and_follow_the_density(lab: jupyter.OpenedWidget) -> None:
    _done(lab)
    scatter = _scatter(lab)
    size = scatter.evaluate("c => [c.clientWidth, c.clientHeight]")
    boxes, keys = _settled_boxes(lab)
    n = lab.ui.query("len(w.kept)")
    assert n >= 250 and len(boxes) >= 25, f"{len(boxes)} labels for {n} points"
    _assert_no_overlap(boxes, *size)
    lab.ui.execute("w.label_density = 1.0")
    full, _ = _settled_boxes(lab)
    _assert_no_overlap(full, *size)
    assert len(full) > len(boxes), f"density 1 should draw more labels than 0.5: {len(full)} vs {len(boxes)}"
    # zoomed in, points spread apart and more of them get labels
    box = scatter.bounding_box()
    lab.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    for _ in range(4):
        lab.page.mouse.wheel(0, -300)
        lab.page.wait_for_timeout(60)
    zoomed, _ = _settled_boxes(lab)
    _assert_no_overlap(zoomed, *size)
    scatter.dblclick(position={"x": box["width"] / 2, "y": box["height"] / 2})
    lab.ui.execute("w.label_density = 0.0")
    none, _ = _settled_boxes(lab)
    assert none == [], f"density 0 draws no labels, got {len(none)}"
    lab.ui.execute("w.label_density = 0.5")
    assert len(keys) == len(boxes)


def test_labels_never_overlap_at_479_tokens(browser: Any) -> None:
    server = jupyter.start_server()  # its own workspace: no restored tab of the module's notebook
    cell = _cell(TEXT_479, max_tokens=479, **RUN)
    try:
        opened = jupyter.open_widget(server, browser, "research_479.ipynb", [cell], "lab")
    except BaseException:
        server.stop()
        raise
    try:
        jupyter.wait_state(opened.root, ("done",), timeout=120)
        assert opened.ui.query("len(w.tokens)") == 479
        scatter = _scatter(opened)
        boxes, _ = _settled_boxes(opened)
        assert len(boxes) >= 25, f"only {len(boxes)} labels at 479 tokens"
        _assert_no_overlap(boxes, *scatter.evaluate("c => [c.clientWidth, c.clientHeight]"))
        assert opened.log.widget_errors() == [], opened.log.widget_errors()
    finally:
        opened.close()
        server.stop()


# ---------------------------------------------------------------------------------------------------
# 4. selection


def test_lasso_and_box_select_the_points_inside(lab: jupyter.OpenedWidget) -> None:
    _done(lab)
    w, h = _scatter(lab).evaluate("c => [c.clientWidth, c.clientHeight]")
    x0, x1, y0, y1 = 0.3 * w, 0.7 * w, 0.3 * h, 0.7 * h
    # a lasso drawn with shift + drag along a rectangle
    jupyter.drag_on_map(lab, [(x0, y0), (x1, y0), (x1, y1), (x0, y1), (x0, y0 + 2)], shift=True)
    lassoed = _assert_box_selection(lab)
    # box mode: a plain drag
    lab.root.locator(jupyter.testid("headsne-box")).click()
    jupyter.drag_on_map(lab, [(0.1 * w, 0.1 * h), (0.5 * w, 0.55 * h)], shift=False)
    boxed = _assert_box_selection(lab)
    lab.root.locator(jupyter.testid("headsne-box")).click()
    assert boxed != lassoed
    # the selection survives a head switch
    run0 = int(jupyter.dataset(lab.root)["runId"])
    jupyter.click_grid_cell(lab.root, 1, 4, token=1)
    jupyter.wait_dataset(lab.root, lambda d: int(d["runId"]) > run0 and d["state"] == "done", 60, "the new head's run")
    jupyter.kernel_until(lab, "[w.layer, w.head]", [1, 4])
    assert lab.ui.query("w.selected") == boxed
    assert lab.root.get_attribute("data-selected-count") == str(len(boxed))


def test_text_clicks_and_python_selection(lab: jupyter.OpenedWidget) -> None:
    strip = lab.root.locator(jupyter.testid("headsne-text"))
    strip.locator("[data-index='5']").click()
    strip.locator("[data-index='9']").click(modifiers=["Shift"])
    jupyter.kernel_until(lab, "w.selected", [5, 6, 7, 8, 9])
    # from Python: every view highlights the tokens
    lab.ui.execute("w.selected = [3, 12, 40]")
    jupyter.wait_dataset(lab.root, lambda d: d.get("selectedCount") == "3", 10, "3 selected tokens")
    marked = strip.locator(".hs-selected").evaluate_all("els => els.map(e => +e.dataset.index)")
    assert marked == [3, 12, 40]
    grid = jupyter.canvas_of(lab.root, "headsne-grid")
    assert _data(grid).get("markedSelected") == "3"
    _, labelled = _settled_boxes(lab)
    assert set(labelled[:3]) == {3, 12, 40}, f"selected tokens get their labels first: {labelled[:5]}"
    lab.root.locator(jupyter.testid("headsne-selection")).click()
    jupyter.kernel_until(lab, "w.selected", [])


def test_hovered_and_selected_reach_python_observers(lab: jupyter.OpenedWidget) -> None:
    # every change the kernel receives, recorded by observers (a UI query moves the mouse away)
    lab.ui.execute(
        "seen = []\n"
        "w.observe(lambda ch: seen.append(('hovered', ch['new'])), 'hovered')\n"
        "w.observe(lambda ch: seen.append(('selected', ch['new'])), 'selected')"
    )
    strip = lab.root.locator(jupyter.testid("headsne-text"))
    strip.scroll_into_view_if_needed()
    strip.locator("[data-index='7']").hover()
    lab.page.wait_for_timeout(300)
    strip.locator("[data-index='7']").click()
    lab.page.mouse.move(2, 2)
    lab.page.wait_for_timeout(300)
    seen = [tuple(x) for x in lab.ui.query("seen")]
    assert ("hovered", 7) in seen, seen
    assert ("selected", [7]) in seen, seen
    assert seen.index(("hovered", 7)) < seen.index(("selected", [7])), seen
    assert lab.ui.query("w.hovered") is None, "leaving the widget clears `hovered`"
    lab.ui.execute("w.selected = []")


# ---------------------------------------------------------------------------------------------------
# 5. search


def test_search_highlights_and_enter_selects(lab: jupyter.OpenedWidget) -> None:
    tokens = lab.ui.query("w.tokens")
    expected = [i for i, t in enumerate(tokens) if re.fullmatch(r"the", t)]  # uncased: "The" is "the" too
    assert len(expected) >= 3
    box = lab.root.locator(jupyter.testid("headsne-search"))
    box.fill("/\\bthe\\b/i")  # the text's words "the" and "The", each one token
    jupyter.wait_dataset(lab.root, lambda d: d.get("matchCount") == str(len(expected)), 10, "search matches")
    strip = lab.root.locator(jupyter.testid("headsne-text"))
    assert strip.locator(".hs-match").evaluate_all("els => els.map(e => +e.dataset.index)") == expected
    assert _data(jupyter.canvas_of(lab.root, "headsne-grid")).get("markedMatches") == str(len(expected))
    box.press("Enter")
    jupyter.kernel_until(lab, "w.selected", expected)
    box.fill("/(/")
    assert "invalid" in (lab.root.locator(jupyter.testid("headsne-search-count")).text_content() or "")
    box.fill("")
    lab.ui.execute("w.selected = []")


# ---------------------------------------------------------------------------------------------------
# 6. colour by + legend


def test_legend_matches_the_colouring(lab: jupyter.OpenedWidget) -> None:
    legend = lab.root.locator(jupyter.testid("headsne-legend"))
    assert legend.get_attribute("data-kind") == "sequential" and "position" in (legend.text_content() or "")
    lab.root.locator(jupyter.testid("headsne-color")).select_option("kind")
    jupyter.kernel_until(lab, "w.color_mode", "kind")
    legend.locator(".hs-legend-entry").first.wait_for()
    entries = legend.locator(".hs-legend-entry").evaluate_all("els => els.map(e => [e.textContent, e.dataset.colour])")
    assert [e[0] for e in entries] == ["special", "word start", "word piece"]
    colour = dict(entries)
    tokens = lab.ui.query("w.tokens")
    strip = lab.root.locator(jupyter.testid("headsne-text"))
    underline = "(i) => document.querySelector(`.hs-root [data-index='${i}']`).style.getPropertyValue('--hs-tok-color')"
    assert strip.evaluate(f"(_, i) => ({underline})(i)", 0) == colour["special"]
    piece = next(i for i, t in enumerate(tokens) if t.startswith("##"))
    assert strip.evaluate(f"(_, i) => ({underline})(i)", piece) == colour["word piece"]
    # sentences: one legend entry per sentence (up to 10)
    lab.ui.execute("w.color_mode = 'sentence'")
    legend.locator("text=sentence 2").wait_for()
    # user values from Python
    lab.ui.execute("w.color_by = ['odd' if i % 2 else 'even' for i in range(len(w.tokens))]")
    legend.locator("text=even").wait_for(timeout=10000)
    lab.ui.execute("w.color_mode = 'position'")
    legend.locator("text=position in the text").wait_for()


# ---------------------------------------------------------------------------------------------------
# 9. layout and keys


def test_side_by_side_at_800_px_and_keys_stay_in_the_widget(lab: jupyter.OpenedWidget) -> None:
    root = lab.root
    root.evaluate("el => { el.parentElement.style.width = '800px'; }")
    try:
        lab.page.wait_for_timeout(300)
        assert abs(root.bounding_box()["width"] - 800) <= 2
        grid = root.locator(".hs-grid-panel").bounding_box()
        scatter = root.locator(".hs-scatter-panel").bounding_box()
        assert grid["x"] + grid["width"] <= scatter["x"] + 1, (grid, scatter)
        assert abs(grid["y"] - scatter["y"]) < 2, (grid, scatter)
    finally:
        root.evaluate("el => { el.parentElement.style.width = ''; }")
    # Enter applies a field at once, and the keys do not move JupyterLab's active cell
    active = (
        "() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')]"
        ".findIndex(c => c.classList.contains('jp-mod-active'))"
    )
    jupyter.open_settings(root)
    field = root.locator("input[aria-label=iterations]")
    field.click()  # activates the widget's cell, as any click in it does
    cell_before = lab.page.evaluate(active)
    field.fill("350")
    field.press("Enter")
    jupyter.kernel_until(lab, "w.n_iter", 350)
    timeline = root.locator(jupyter.testid("headsne-timeline"))
    timeline.focus()
    for key in ("ArrowLeft", "ArrowUp", "ArrowDown", "a", "b"):
        lab.page.keyboard.press(key)
    assert lab.page.evaluate(active) == cell_before
    assert lab.page.locator(".jp-Notebook .jp-Cell").count() == lab.ui.cells.count()
    # the counter and the speed menu stay where they are while the run streams
    speed = root.locator("select[aria-label=speed]")
    positions = set()
    lab.ui.execute("w.speed = 400.0; w.run()")
    for _ in range(15):
        box = speed.bounding_box()
        positions.add((round(box["x"]), round(box["y"])))
        lab.page.wait_for_timeout(80)
    assert len(positions) == 1, f"the speed menu moved while the run streamed: {positions}"
    lab.ui.execute("w.speed = 0.0")
    _done(lab)


# ---------------------------------------------------------------------------------------------------
# 2. grid


def test_grid_head_labels_keyboard_and_hidden_mode(lab: jupyter.OpenedWidget) -> None:
    _done(lab)
    grid = jupyter.canvas_of(lab.root, "headsne-grid")
    jupyter.click_grid_cell(lab.root, 2, 7)  # scrolls the grid to the cell
    jupyter.kernel_until(lab, "[w.layer, w.head]", [2, 7])
    _done(lab)
    # the head label "H5", left of the cells; its position read after the click (the run may relayout)
    pos = jupyter.grid_cell_position(lab.root, 2, 5)
    grid.click(position={"x": 12, "y": pos["y"]})
    jupyter.kernel_until(lab, "[w.layer, w.head]", [2, 5])
    _done(lab)
    grid.focus()
    lab.page.keyboard.press("ArrowDown")
    lab.page.keyboard.press("ArrowRight")
    lab.page.keyboard.press("Enter")
    jupyter.kernel_until(lab, "[w.layer, w.head]", [3, 6])
    _done(lab)
    # hidden-state mode: the grid selects layers, the head stays
    lab.ui.execute("w.mode = 'hidden'")
    try:
        _done(lab)
        jupyter.click_grid_cell(lab.root, 4, 1, token=3)
        jupyter.kernel_until(lab, "[w.mode, w.layer, w.head]", ["hidden", 4, 6])
        _done(lab)
        text = _hover_tooltip(lab, 20)
        assert "nearest in layer 4" in text and "attends to" not in text, text
    finally:
        lab.page.mouse.move(2, 2)
        lab.ui.execute("w.mode = 'attention'")
        _done(lab)


# ---------------------------------------------------------------------------------------------------
# 3. direction of attention


def test_tooltip_gives_both_directions_with_weights(lab: jupyter.OpenedWidget) -> None:
    _done(lab)
    text = _hover_tooltip(lab, 20)
    assert re.search(r"attends to: .+ \d\.\d\d", text) and re.search(r"attended by: .+ \d\.\d\d", text), text
    lab.page.mouse.move(2, 2)
    lab.root.locator(jupyter.testid("headsne-edges")).select_option("to")
    jupyter.kernel_until(lab, "w.edge_direction", "to")
    lab.ui.execute("w.edge_direction = 'both'")


# ---------------------------------------------------------------------------------------------------
# 10. export


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def test_exports_png_svg_and_webm(lab: jupyter.OpenedWidget, tmp_path: Path) -> None:
    from PIL import Image

    _done(lab)
    root, page = lab.root, lab.page
    scatter = _scatter(lab).bounding_box()
    with page.expect_download() as info:
        root.locator(jupyter.testid("headsne-export-png")).click()
    png = Path(info.value.path()).read_bytes()
    width, height = _png_size(png)
    assert width >= 2 * scatter["width"] and height >= 2 * scatter["height"], (width, height, scatter)
    (tmp_path / "x.png").write_bytes(png)
    image = Image.open(tmp_path / "x.png").convert("RGBA")
    assert image.size == (width, height)
    assert image.getpixel((1, 1))[3] == 255 and image.getpixel((width - 2, height - 2))[3] == 255, "opaque"
    with page.expect_download() as info:
        root.locator(jupyter.testid("headsne-export-svg")).click()
    svg = ET.parse(info.value.path()).getroot()
    circles = svg.findall(".//{http://www.w3.org/2000/svg}circle")
    labels = svg.findall(".//{http://www.w3.org/2000/svg}text")
    assert len(circles) >= 0.9 * lab.ui.query("len(w.kept)") and len(labels) >= 10, (len(circles), len(labels))
    # a video of a streaming run
    lab.ui.execute("w.speed = 300.0; w.run()")
    record = root.locator(jupyter.testid("headsne-record"))
    record.click()
    page.wait_for_timeout(1500)
    with page.expect_download() as info:
        record.click()
    video = Path(info.value.path()).read_bytes()
    assert video[:4] == b"\x1a\x45\xdf\xa3" and len(video) > 2000, f"not a WebM video: {len(video)} bytes"
    lab.ui.execute("w.speed = 0.0")
    _done(lab)


# ---------------------------------------------------------------------------------------------------
# 11. replay

# Samples, at every animation frame of the page from the replay's start to its end, what the user sees:
# frames drawn, the timeline's position, the iteration counter and where the controls next to it are.
_REPLAY_WATCH_JS = """
(root) => {
  const timeline = root.querySelector('[data-testid=headsne-timeline]');
  const button = root.querySelector('[data-testid=headsne-replay]');
  const speed = root.querySelector('[data-testid=headsne-iteration]');  // the counter, left of the replay button
  const w = {samples: [], done: false, started: false};
  window.__headsneReplay = w;
  const sample = () => {
    const on = root.dataset.replaying === 'true';
    if (on) w.started = true;
    if (w.started) {
      const b = button.getBoundingClientRect(), s = speed.getBoundingClientRect();
      w.samples.push([+root.dataset.framesDrawn, +timeline.value, on,
                      root.querySelector('[data-testid=headsne-iteration]').textContent,
                      Math.round(b.left), Math.round(b.width), Math.round(s.left)]);
    }
    if (w.started && !on) { w.done = true; return; }
    requestAnimationFrame(sample);
  };
  requestAnimationFrame(sample);
}
"""


def test_replay_shows_every_recorded_frame_in_the_browser(lab: jupyter.OpenedWidget) -> None:
    """A short run, then replay: each recorded frame is drawn once, in order, with no message to Python, the
    timeline follows, and the view ends on the run's last frame (where it was) following live frames."""
    _done(lab)
    root = lab.root
    run0 = int(jupyter.dataset(root)["runId"])
    lab.ui.execute("w.speed = 150.0; w.n_iter = 150")  # n_iter restarts the run: 30-40 frames recorded
    jupyter.wait_dataset(root, lambda d: int(d["runId"]) > run0 and d["state"] == "done", 60, "the short run")
    lab.ui.execute("w.speed = 0.0\n_changes = []\nw.observe(lambda c: _changes.append(c['name']))")
    button = root.locator(jupyter.testid("headsne-replay"))
    timeline = root.locator(jupyter.testid("headsne-timeline"))
    count = int(timeline.evaluate("t => +t.max")) + 1
    assert count >= 20, f"the short run recorded only {count} frames"
    assert button.is_enabled() and button.get_attribute("title"), "replay needs a title and 2+ frames"
    assert button.evaluate("b => b.scrollWidth <= b.clientWidth"), "the replay label should fit its fixed width"
    assert root.get_attribute("data-replaying") == "false"
    boxes, iteration = _settled_boxes(lab), jupyter.iteration_shown(root)
    drawn0 = int(jupyter.dataset(root)["framesDrawn"])

    root.evaluate(_REPLAY_WATCH_JS)
    button.click()
    lab.page.wait_for_function("() => window.__headsneReplay.done", timeout=30_000, polling=100)
    samples = lab.page.evaluate("() => window.__headsneReplay.samples")
    drawn = [s[0] for s in samples]
    positions = [s[1] for s in samples]
    assert samples[0][2] and not samples[-1][2], "data-replaying goes true, then false"
    # one recorded frame per animation frame, each drawn once: the counter rises by the number of frames
    assert count - 2 <= drawn[-1] - drawn0 <= count, f"{drawn[-1] - drawn0} frames drawn for {count} recorded"
    assert drawn == sorted(drawn) and len(set(drawn)) >= 0.8 * count, "a frame per animation frame"
    assert positions == sorted(positions) and positions[-1] == count - 1, f"timeline: {positions}"
    assert len(set(positions)) >= 5, f"the timeline should follow the replay: {sorted(set(positions))}"
    iterations = [int(s[3]) for s in samples]
    assert iterations == sorted(iterations) and iterations[0] < iteration, iterations
    assert len({(s[4], s[5], s[6]) for s in samples}) == 1, "the controls moved during the replay"
    # the end: the last frame on screen, as before the replay, and the widget follows live frames again
    assert jupyter.iteration_shown(root) == iteration
    assert _settled_boxes(lab) == boxes, "the replay should end on the run's last frame"
    assert root.get_attribute("data-replaying") == "false" and button.get_attribute("aria-pressed") == "false"
    assert lab.ui.query("_changes") == [], "a replay sends nothing to Python"
    # clicking again stops a replay where it is; a new run ends one too
    button.click()
    jupyter.wait_dataset(root, lambda d: d.get("replaying") == "true", 5, "a second replay")
    button.click()
    jupyter.wait_dataset(root, lambda d: d.get("replaying") == "false", 5, "the replay stopped by a click")
    assert int(timeline.evaluate("t => +t.value")) < count - 1, "a stopped replay stays where it was"
    button.click()
    jupyter.wait_dataset(root, lambda d: d.get("replaying") == "true", 5, "a third replay")
    lab.ui.execute("w.run()")
    jupyter.wait_dataset(root, lambda d: d.get("replaying") == "false", 10, "the replay stopped by a new run")
    _done(lab)
    assert jupyter.iteration_shown(root) == 150 and int(timeline.evaluate("t => +t.value")) >= 0


# ---------------------------------------------------------------------------------------------------
# 7. atlas


def test_atlas_thumbnails_and_click(lab: jupyter.OpenedWidget) -> None:
    _done(lab)
    if not lab.ui.query("hasattr(w, 'start_atlas')"):
        pytest.skip("the kernel's HeadSNE does not compute the head atlas yet (no start_atlas for control 'atlas')")
    jupyter.open_tab(lab.root, "atlas")  # the inspector's atlas tab
    atlas = lab.root.locator(jupyter.testid("headsne-atlas"))
    atlas.locator(jupyter.testid("headsne-atlas-run")).click()
    heads = lab.ui.query("w.n_heads")
    deadline = time.monotonic() + 150
    # every thumbnail, and the job done (the thumbnails show as each head ends: all there before the last is drawn)
    while atlas.get_attribute("data-thumbnails") != str(heads) or atlas.get_attribute("data-state") != "done":
        assert time.monotonic() < deadline, (
            f"no {heads} atlas thumbnails: {_data(atlas)}, {lab.ui.query('w.atlas_state')}"
        )
        lab.page.wait_for_timeout(250)
    assert atlas.get_attribute("data-state") == "done"
    kl = lab.ui.query("w.atlas_kl.tolist()")
    atlas.locator(jupyter.testid("headsne-atlas-sort")).select_option("kl")
    order = atlas.locator(".hs-thumb").evaluate_all("els => els.map(e => +e.dataset.head)")
    assert order == sorted(range(heads), key=lambda h: kl[h])
    layer = lab.ui.query("w.layer")
    target = next(h for h in order if h != lab.ui.query("w.head"))
    atlas.locator(f".hs-thumb[data-head='{target}']").click()
    jupyter.kernel_until(lab, "[w.layer, w.head]", [layer, target])
    _done(lab)


def test_no_widget_errors(lab: jupyter.OpenedWidget) -> None:
    assert lab.log.widget_errors() == [], lab.log.widget_errors()
    assert lab.log.blocked == [], lab.log.blocked


# ---------------------------------------------------------------------------------------------------
# the theme: light and dark screenshots (for the README) and the canvases follow a theme switch


def _panel_luminance(lab: jupyter.OpenedWidget) -> float:
    """Relative luminance of the scatter's top-left pixel (its panel colour), read from the canvas."""
    return _scatter(lab).evaluate(
        "c => { const [r, g, b] = c.getContext('2d').getImageData(1, 1, 1, 1).data;"
        " return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255; }"
    )


def test_light_and_dark_themes(lab: jupyter.OpenedWidget, artifacts: Path) -> None:
    _done(lab)
    page, root = lab.page, lab.root
    lab.ui.execute("w.selected = [5, 6, 7, 8]")
    root.scroll_into_view_if_needed()
    assert _panel_luminance(lab) > 0.7, "the light theme draws a light panel"
    root.screenshot(path=str(artifacts / "widget-light.png"))
    page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
    page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
    page.locator(".lm-Menu-itemLabel").get_by_text("JupyterLab Dark", exact=True).click()
    try:
        deadline = time.monotonic() + 20
        while _panel_luminance(lab) > 0.3:
            assert time.monotonic() < deadline, "the canvases did not follow the switch to the dark theme"
            page.wait_for_timeout(200)
        page.wait_for_timeout(600)  # the widget reads the theme again once JupyterLab's stylesheet is in
        root.scroll_into_view_if_needed()
        root.screenshot(path=str(artifacts / "widget-dark.png"))
        legend = root.locator(jupyter.testid("headsne-legend"))
        assert legend.get_attribute("data-kind") == "sequential"
    finally:
        page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
        page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
        page.locator(".lm-Menu-itemLabel").get_by_text("JupyterLab Light", exact=True).click()
        lab.ui.execute("w.selected = []")
