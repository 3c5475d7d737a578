"""What wrote each token's state (issue 28, item 4) in a real JupyterLab with headless chromium, on the bundled
MiniLM: opening the decomposition panel asks the kernel for the selected layer's decomposition; its chart follows
the hovered token with the shares an independent ``decompose`` of a fresh extraction with components gives for
that token (read back from the page); the heads x tokens share map draws, and a click on a head row selects that
head in the kernel. Every wait is on a condition (the page's data-*, the kernel's values)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from . import jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(300)]

ESM = os.environ.get("HEADSNE_ESM")  # another front-end bundle (mutation testing)
TEXT = "texts.TSNE_ABSTRACT[:400]"
LAYER = 2


def _cell() -> str:
    """The widget's cell (with HEADSNE_ESM, on that bundle)."""
    esm = f"from headsne_widget.widget.model import HeadSNEModel\nHeadSNEModel._esm = open({ESM!r}).read()\n"
    return (esm if ESM else "") + jupyter.widget_cell(TEXT, n_iter=150, speed=0.0, layer=LAYER)


@pytest.fixture(scope="module")
def lab(browser: Any, jupyter_server: jupyter.JupyterServer) -> Iterator[jupyter.OpenedWidget]:
    """The widget on the start of the t-SNE abstract at layer 2, in the session's server."""
    opened = jupyter.open_widget(jupyter_server, browser, "decomposition.ipynb", [_cell()], "lab")
    try:
        jupyter.wait_state(opened.root, ("done",), timeout=120)
        yield opened
    finally:
        opened.close()


def _wait(what: str, probe: Callable[[], Any], ok: Callable[[Any], bool], page: Any, timeout: float = 60.0) -> Any:
    """Poll ``probe()`` until ``ok`` of it; the last value, or fail naming ``what``."""
    deadline = time.monotonic() + timeout
    value = probe()
    while not ok(value):
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not reached within {timeout:.0f} s, last {value!r}")
        page.wait_for_timeout(100)
        value = probe()
    return value


def _data(locator: Any) -> dict[str, str]:
    return locator.evaluate("el => Object.assign({}, el.dataset)")


def _open_panel(lab: jupyter.OpenedWidget) -> tuple[Any, Any]:
    jupyter.open_tab(lab.root, "token")  # what wrote it: the inspector's token tab
    panel = lab.root.locator(jupyter.testid("headsne-decomposition-panel")).first
    heads = lab.root.locator(jupyter.testid("headsne-decomposition-heads")).first
    note = lab.root.locator(jupyter.testid("headsne-decomposition-note")).first
    _wait(
        f"the share map of layer {LAYER} (note: {note.text_content()!r})",
        lambda: _data(heads),
        lambda d: d.get("state") == "drawn" and d.get("layer") == str(LAYER),
        lab.page,
        120,
    )
    return panel, heads


def _hover_token(lab: jupyter.OpenedWidget, chart: Any, t: int) -> dict[str, str]:
    """Hover token ``t`` in the text strip; the chart's data once it shows that token."""
    lab.root.locator(f"{jupyter.testid('headsne-text')} [data-index='{t}']").first.hover()
    return _wait(f"the chart of token {t}", lambda: _data(chart), lambda d: d.get("token") == str(t), lab.page)


def test_nothing_is_decomposed_before_the_panel_opens(lab: jupyter.OpenedWidget) -> None:
    assert lab.ui.query("w.decomposition_state") == "idle"
    _open_panel(lab)
    assert lab.ui.query("[w.decomposition_state, w.decomposition_layer]") == ["done", LAYER]


def test_the_chart_follows_the_hovered_token_with_decomposes_shares(lab: jupyter.OpenedWidget) -> None:
    _open_panel(lab)
    tokens = [5, 11]
    lab.ui.execute(  # the oracle: a fresh extraction with components, decomposed by the library itself
        "from headsne_widget import extract\n"
        "from headsne_widget.capture.decompose import decompose\n"
        f"_d = decompose(extract({TEXT}, g.get_model_path(), components=True), {LAYER})\n"
        "_k = _d.terms['term'].to_numpy()\n"
        "_oracle = {t: [float(_d.shares[_k == kind, t].sum()) for kind in ('input', 'head', 'mlp', 'correction')] "
        f"for t in {tokens!r}}}"
    )
    oracle = lab.ui.query("_oracle")
    chart = lab.root.locator(jupyter.testid("headsne-decomposition-chart")).first
    for t in tokens:
        shown = _hover_token(lab, chart, t)
        assert shown["state"] == "drawn" and shown["layer"] == str(LAYER)
        got = json.loads(shown["shares"])
        want = oracle[str(t)]
        assert got == pytest.approx(want, abs=2e-5), (t, got, want)
        assert sum(got) == pytest.approx(1.0, abs=1e-4)
    ink = jupyter.canvas_ink(lab.root, "headsne-decomposition-chart")
    assert ink["chromatic"] > 200, ink


def test_a_click_on_a_head_row_selects_that_head(lab: jupyter.OpenedWidget) -> None:
    _, heads = _open_panel(lab)
    ink = jupyter.canvas_ink(lab.root, "headsne-decomposition-heads")
    assert ink["chromatic"] > 500 and ink["colours"] > 20, ink  # a diverging map, not a blank canvas
    d = _data(heads)
    target = 7 if lab.ui.query("w.head") != 7 else 3
    heads.scroll_into_view_if_needed()  # in the inspector's token tab, which scrolls inside its column
    box = heads.bounding_box()
    assert box is not None
    x = box["x"] + float(d["labelWidth"]) + 30
    y = box["y"] + (target + 0.5) * float(d["rowHeight"])
    lab.page.mouse.click(x, y)
    _wait("the kernel's head", lambda: lab.ui.query("[w.layer, w.head]"), lambda v: v == [LAYER, target], lab.page)
    _wait("the row marked", lambda: _data(heads).get("selected"), lambda v: v == str(target), lab.page)
    assert not lab.log.widget_errors()


def test_colour_by_the_heads_share_colours_the_tokens(lab: jupyter.OpenedWidget) -> None:
    _open_panel(lab)
    lab.root.locator(jupyter.testid("headsne-color")).select_option("head_share")
    _wait("the kernel's colour mode", lambda: lab.ui.query("w.color_mode"), lambda v: v == "head_share", lab.page)
    legend = lab.root.locator(jupyter.testid("headsne-legend")).first
    _wait("the legend", lambda: legend.get_attribute("data-mode"), lambda v: v == "head_share", lab.page)
    assert "share" in (legend.text_content() or "") and f"head {lab.ui.query('w.head')}" in legend.text_content()
    values, row = lab.ui.query(
        "[w.color_values.tolist(), w.decomposition_heads[w.head].tolist()]"
        " if w.decomposition_heads is not None and w.color_values is not None else [None, None]"
    )
    assert values is not None and values == pytest.approx(row)
    low, high = min(range(len(values)), key=values.__getitem__), max(range(len(values)), key=values.__getitem__)
    colour = "(_, i) => document.querySelector(`.hs-root [data-index='${i}']`).style.getPropertyValue('--hs-tok-color')"
    strip = lab.root.locator(jupyter.testid("headsne-text")).first
    assert strip.evaluate(colour, low) != strip.evaluate(colour, high)  # the scatter and the text share the colouring
    lab.ui.execute("w.color_mode = 'position'")
    _wait("the legend back to position", lambda: legend.get_attribute("data-mode"), lambda v: v == "position", lab.page)
