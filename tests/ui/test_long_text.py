"""The widget on a long text in JupyterLab with headless chromium: the grid row the pointer rests on reaches
the kernel, which builds that head's P before the click, and the click runs on it (headsne_widget/widget/prefetch.py,
js/store/prefetch.js). A tiny random Llama with 16384 positions (tests/conftest.py), 2048 tokens."""

from __future__ import annotations

from typing import Any

import pytest

from . import jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(240)]

N_TOKENS = 2048  # headsne_widget.widget.prefetch.PREFETCH_MIN_N: the shortest text the page reports rows for
TEXT = f"(lambda w: ' '.join(w[i % len(w)] for i in range({N_TOKENS + 200})))(texts.TSNE_ABSTRACT.split())"


def _until(opened: jupyter.OpenedWidget, expression: str, expected: Any, timeout_ms: float = 30_000) -> Any:
    """Poll ``expression`` in the kernel until it equals ``expected``; the last value."""
    value = None
    for _ in range(int(timeout_ms / 250)):
        value = opened.ui.query(expression)
        if value == expected:
            return value
        opened.page.wait_for_timeout(250)
    raise AssertionError(f"kernel {expression} = {value!r}, expected {expected!r}")


def test_the_row_the_pointer_rests_on_is_built_before_the_click(browser: Any, long_llama_dir: str) -> None:
    # every P the widget builds, by (mode, layer, head): the click must not build the hovered head's again
    count = (
        "from headsne_widget.widget import selections\n"
        "built = []\n"
        "_real = selections.build_p\n"
        "selections.build_p = lambda ex, spec, **kw: built.append([spec.source.name, spec.layer, spec.head]) or "
        "_real(ex, spec, **kw)\n"
    )
    cell = (
        "import warnings\nwarnings.simplefilter('ignore')\n"
        + count
        + jupyter.widget_cell(TEXT, model=long_llama_dir, max_tokens=N_TOKENS, n_iter=30, speed=0.0)
    )
    server = jupyter.start_server()  # its own workspace: no restored tab of another module's notebook
    try:
        opened = jupyter.open_widget(server, browser, "long_text.ipynb", [cell], "lab", timeout=300)
    except BaseException:
        server.stop()
        raise
    try:
        root = opened.root
        jupyter.wait_state(root, ("done",), timeout=120)
        assert opened.ui.query("len(w.tokens)") == N_TOKENS
        grid = jupyter.canvas_of(root, "headsne-grid")
        for attempt in range(20):  # the pointer rests on row (1, 2), read anew each time: the page may still move
            grid.hover(position=jupyter.grid_cell_position(root, 1, 2, token=5 + attempt))
            opened.page.wait_for_timeout(500)
            if opened.ui.query("w.hovered_head") == [1, 2]:
                break
        else:
            raise AssertionError(f"the kernel never got the row: {opened.ui.query('[w.hovered_head, w.status]')}")
        _until(opened, "['attention', 1, 2] in built", True)  # the rested-on row's P, built before the click
        run0 = int(jupyter.dataset(root)["runId"])
        jupyter.click_grid_cell(root, 1, 2, token=5)
        jupyter.wait_dataset(root, lambda d: int(d.get("runId", "0")) > run0, 60, "the clicked head's run")
        _until(opened, "[w.layer, w.head]", [1, 2])
        jupyter.wait_state(root, ("done",), timeout=120)
        assert opened.ui.query("built.count(['attention', 1, 2])") == 1, "the click built its P again"
        assert opened.log.widget_errors() == [], opened.log.widget_errors()
    finally:
        opened.close()
        server.stop()
