"""The standalone HTML export: the widget's state as one offline page, tokens as escaped text."""

from __future__ import annotations

import os
import re
import shutil
from types import SimpleNamespace

import numpy as np
import pytest
from bokeh.models import ColumnDataSource

from headsne_widget import export

EVIL = "<img src=x onerror=alert(1)>"
CHROMIUM = "/usr/bin/chromium"


def sources(layout):
    return {s.name: s for s in layout.select({"type": ColumnDataSource}) if s.name}


@pytest.fixture
def state():
    """A widget's current state with a hostile token and a hostile model name (what export reads)."""
    rng = np.random.default_rng(0)
    tokens = ["[CLS]", "we", "present", EVIL, "t", "-", "sne", "[SEP]"]
    n, L, H = len(tokens), 2, 3
    ex = SimpleNamespace(
        tokens=tokens,
        max_attention=rng.random((L, H, n)).astype(np.float32),
        model_name=EVIL,
        n_layers=L,
        n_heads=H,
    )
    kept = list(range(1, n - 1))
    return SimpleNamespace(
        extraction=ex,
        model_name=EVIL,
        layer=1,
        head=2,
        mode="attention",
        kept=kept,
        embedding=rng.normal(size=(len(kept), 2)).astype(np.float32),
        kl=0.4321,
        iteration=300,
        kl_history=np.array([1.5, 0.9, 0.4321]),
        kl_iterations=np.array([50, 100, 300]),
        quantile=False,
        quantile_k=100,
        perplexity=20.0,
    )


def test_layout_holds_the_current_state(state):
    layout = export.widget_layout(state)
    found = sources(layout)
    np.testing.assert_allclose(found["max_attention_1"].data["image"][0], state.extraction.max_attention[1])
    scatter = found["embedding"].data
    np.testing.assert_allclose(np.c_[scatter["x"], scatter["y"]], state.embedding, rtol=1e-6)
    assert list(scatter["token"]) == [state.extraction.tokens[i] for i in state.kept]
    curve = found["kl_curve"].data
    assert list(curve["iteration"]) == [50, 100, 300]
    np.testing.assert_allclose(curve["kl"], [1.5, 0.9, 0.4321])


def test_quantile_axes_follow_the_widget(state):
    state.quantile, state.quantile_k = True, 3
    scatter = sources(export.widget_layout(state))["embedding"].data
    assert min(scatter["x"]) == pytest.approx(0.0) and max(scatter["x"]) == pytest.approx(1.0)
    np.testing.assert_allclose(np.c_[scatter["x_orig"], scatter["y_orig"]], state.embedding, rtol=1e-6)


def test_title_names_model_layer_head_and_mode(state):
    title = export.widget_title(state)
    assert EVIL in title and "layer 1" in title and "head 2" in title and "attention" in title
    state.mode = "hidden"
    assert "hidden" in export.widget_title(state)


def test_html_is_standalone_and_escapes_tokens(state, tmp_path):
    path = export.save_html(state, tmp_path / "state.html", view="bokeh")
    html = path.read_text(encoding="utf-8")
    assert EVIL not in html  # neither the token nor the model name appears raw
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    assert "<title>&lt;img src=x onerror=alert(1)&gt; - layer 1, head 2, attention mode" in html
    assert not re.search(r"<script[^>]+src=", html)  # every script is inline
    assert not re.search(r"<link[^>]+href=[\"']https?:", html)
    assert "Bokeh" in html and "layer 1, head 2" in html


def test_headsne_save_html_writes_its_current_state(tiny_bert, tmp_path):
    from headsne_widget import HeadSNE

    text = "attention heads look at tokens and layers stack them into a map of the text"
    w = HeadSNE(text, tiny_bert, layer=1, head=3, n_iter=80, speed=0)
    try:
        w.wait(timeout=60)
        path = w.save_html(tmp_path / "widget.html", view="bokeh")
        html = path.read_text(encoding="utf-8")
        layout = export.widget_layout(w)
        found = sources(layout)
        scatter = found["embedding"].data
        np.testing.assert_allclose(np.c_[scatter["x_orig"], scatter["y_orig"]], w.embedding, rtol=1e-6)
        assert list(scatter["token"]) == [w.extraction.tokens[i] for i in w.kept]
        curve = found["kl_curve"].data
        np.testing.assert_allclose(curve["kl"], w.kl_history)
        assert curve["iteration"][-1] == 80 and curve["kl"][-1] == pytest.approx(w.kl)
        for layer in range(w.extraction.n_layers):
            grid = found[f"max_attention_{layer}"].data["image"][0]
            np.testing.assert_allclose(grid, w.extraction.max_attention[layer])
    finally:
        w.close()
    assert f"<title>{w.model_name} - layer 1, head 3, attention mode" in html


def test_before_the_first_frame(state, tmp_path):
    state.embedding, state.kl_history, state.kl = None, [], None
    path = export.save_html(state, tmp_path / "empty.html", view="bokeh")
    assert "No t-SNE frame yet" in path.read_text(encoding="utf-8")


def test_missing_folder_is_a_clear_error(state, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        export.save_html(state, tmp_path / "nowhere" / "x.html")


@pytest.mark.ui  # starts Chromium: -m "not ui" leaves it out
@pytest.mark.skipif(not os.path.exists(CHROMIUM) and not shutil.which("chromium"), reason="needs Debian's chromium")
def test_html_opens_offline_in_a_browser(state, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    path = export.save_html(state, tmp_path / "offline.html", view="bokeh")
    errors, requests = [], []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium"),
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        try:
            page = browser.new_page()
            page.on("pageerror", lambda err: errors.append(str(err)))
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
            page.on("dialog", lambda dialog: (errors.append("dialog: " + dialog.message), dialog.dismiss()))

            def offline(route):
                if route.request.url.startswith("file:"):
                    route.continue_()
                else:
                    requests.append(route.request.url)
                    route.abort()

            page.route("**/*", offline)
            page.goto(path.as_uri())
            page.wait_for_function("() => window.Bokeh && Bokeh.documents.length === 1", timeout=30_000)
            heading = page.get_by_text(export.widget_title(state), exact=True)
            heading.wait_for(timeout=30_000)  # the title is drawn, as text
            assert page.locator("canvas").count() >= 3  # grid layers, scatter, KL curve
            assert page.locator("img").count() == 0  # the hostile token was not turned into markup
            page.wait_for_timeout(500)
        finally:
            browser.close()
    assert errors == []
    assert requests == []
