"""The widget in Notebook 7 (the /notebooks/ front end of the same server) with headless chromium: it
renders, streams, and a grid click reaches the kernel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(120)]

RUN = {"n_iter": 1000, "speed": 200.0}


@pytest.fixture(scope="module")
def notebook7(jupyter_server: jupyter.JupyterServer, browser: Any) -> Iterator[jupyter.OpenedWidget]:
    """The widget on the t-SNE abstract and the bundled MiniLM, run in Notebook 7."""
    cell = jupyter.widget_cell("texts.TSNE_ABSTRACT", **RUN)
    opened = jupyter.open_widget(jupyter_server, browser, "nb7_widget.ipynb", [cell], "notebook7")
    try:
        yield opened
    finally:
        opened.close()


def test_widget_renders_and_streams(notebook7: jupyter.OpenedWidget, artifacts: Path) -> None:
    assert "/notebooks/" in notebook7.page.url and "/lab" not in notebook7.page.url, notebook7.page.url
    jupyter.assert_streams_and_draws(notebook7, artifacts / "notebook7-widget.png")


def test_grid_click_round_trip(notebook7: jupyter.OpenedWidget) -> None:
    jupyter.assert_grid_click_round_trip(notebook7, layer=3, head=7)


def test_no_widget_errors(notebook7: jupyter.OpenedWidget) -> None:
    assert notebook7.log.widget_errors() == [], f"widget errors in the console: {notebook7.log.widget_errors()}"
    assert notebook7.log.blocked == [], f"the page tried to reach other hosts: {notebook7.log.blocked}"
