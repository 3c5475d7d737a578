"""Issue 28 in a real JupyterLab with headless chromium: the value-weighted attention and head-output modes run from
the mode control on a widget made from a text and a model, as a user makes it (no ``components=True``: the widget
takes the model's components on demand), with their captions, and the kernel's P is the source's own."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import pytest

from . import jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(240)]

TEXT = "'The cat sat on the mat while the dog slept by the door, and the bird sang.'"


@pytest.fixture(scope="module")
def lab(jupyter_server: jupyter.JupyterServer, browser: Any) -> Iterator[jupyter.OpenedWidget]:
    cell = jupyter.widget_cell(TEXT, layer=2, head=3, n_iter=300, speed=0.0)
    opened = jupyter.open_widget(jupyter_server, browser, "new_modes.ipynb", [cell], "lab")
    try:
        jupyter.wait_state(opened.root, ("done",), timeout=120)
        yield opened
    finally:
        opened.close()


@pytest.mark.parametrize(
    ("mode", "title"), [("norm", "value-weighted attention t-SNE"), ("head-output", "head-output t-SNE")]
)
def test_a_new_mode_runs_from_the_mode_control(lab: jupyter.OpenedWidget, mode: str, title: str) -> None:
    run_id = jupyter.dataset(lab.root)["runId"]
    jupyter.open_settings(lab.root)
    lab.root.locator(jupyter.testid("headsne-mode")).select_option(mode)
    jupyter.wait_dataset(
        lab.root, lambda d: d.get("runId") != run_id and d.get("state") in ("done", "error"), 120, f"a {mode} run"
    )
    jupyter.wait_state(lab.root, ("done",), timeout=120)  # an error state fails here, with the status line
    caption = lab.root.locator(".hs-caption").first.text_content() or ""
    assert caption.startswith(f"{title} · layer 2"), caption
    # the kernel ran this mode, and its map's KL is that of the source's own P (an independent computation)
    lab.ui.execute(
        "import numpy as np\n"
        "from headsne_widget import selection_affinities, kl_divergence\n"
        "sel = selection_affinities(w.wait_ready(), w.mode, w.layer, w.head)"
    )
    got_mode, kl, exact = lab.ui.query("[w.mode, float(w.kl), float(kl_divergence(sel.P, np.asarray(w.embedding)))]")
    assert got_mode == mode
    assert math.isfinite(kl) and kl == pytest.approx(exact, rel=1e-3, abs=1e-4), (kl, exact)
    assert lab.log.widget_errors() == [], lab.log.widget_errors()
