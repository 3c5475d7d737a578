"""The grid row the pointer rests on, in JupyterLab with headless chromium: it reaches the kernel, which builds
that row's P before the click, and the click runs on it (headsne_widget/widget/prefetch.py, js/store/prefetch.js).
Attention on a tiny random Llama with 16384 positions (tests/conftest.py) at 2048 tokens, the shortest text whose
head matrices' P is built ahead; hidden states on MiniLM at 512 tokens, where a source of points' P is."""

from __future__ import annotations

from typing import Any

import pytest

from . import jupyter

pytestmark = [pytest.mark.ui, pytest.mark.timeout(240)]

#: (mode, tokens, whose model, the P the rested-on row (1, 2) builds)
CASES = {
    "attention at 2048 tokens": ("attention", 2048, "long_llama_dir", ["attention", 1, 2]),
    "hidden states at 512 tokens": ("hidden", 512, None, ["hidden", 1, 0]),
}


def _text(n_tokens: int) -> str:
    return f"(lambda w: ' '.join(w[i % len(w)] for i in range({n_tokens + 200})))(texts.TSNE_ABSTRACT.split())"


def _until(opened: jupyter.OpenedWidget, expression: str, expected: Any, timeout_ms: float = 30_000) -> Any:
    """Poll ``expression`` in the kernel until it equals ``expected``; the last value."""
    value = None
    for _ in range(int(timeout_ms / 250)):
        value = opened.ui.query(expression)
        if value == expected:
            return value
        opened.page.wait_for_timeout(250)
    raise AssertionError(f"kernel {expression} = {value!r}, expected {expected!r}")


@pytest.mark.parametrize("case", list(CASES))
def test_the_row_the_pointer_rests_on_is_built_before_the_click(browser: Any, request: Any, case: str) -> None:
    mode, n_tokens, model_fixture, expected = CASES[case]
    model = None if model_fixture is None else request.getfixturevalue(model_fixture)
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
        + jupyter.widget_cell(_text(n_tokens), model=model, max_tokens=n_tokens, mode=mode, n_iter=30, speed=0.0)
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
        assert opened.ui.query("len(w.tokens)") == n_tokens
        grid = jupyter.canvas_of(root, "headsne-grid")
        for attempt in range(20):  # the pointer rests on row (1, 2), read anew each time: the page may still move
            grid.hover(position=jupyter.grid_cell_position(root, 1, 2, token=5 + attempt))
            opened.page.wait_for_timeout(500)
            if opened.ui.query("w.hovered_head") == [1, 2]:
                break
        else:
            raise AssertionError(f"the kernel never got the row: {opened.ui.query('[w.hovered_head, w.status]')}")
        _until(opened, f"{expected} in built", True)  # the rested-on row's P, built before the click
        run0 = int(jupyter.dataset(root)["runId"])
        jupyter.click_grid_cell(root, 1, 2, token=5)
        jupyter.wait_dataset(root, lambda d: int(d.get("runId", "0")) > run0, 60, "the clicked head's run")
        _until(opened, "w.layer", 1)
        if mode != "hidden":  # (hidden mode depends on the layer only)
            _until(opened, "w.head", 2)
        jupyter.wait_state(root, ("done",), timeout=120)
        assert opened.ui.query(f"built.count({expected})") == 1, "the click built its P again"
        assert opened.log.widget_errors() == [], opened.log.widget_errors()
    finally:
        opened.close()
        server.stop()
