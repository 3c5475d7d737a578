"""A saved page shows one layer (issue 52, item 5): after the map moves to another layer, ``save_html``'s page leaves
out the head atlas of the layer shown before (its state, the heads it could show) and says so in its label; an atlas
of the map's layer stays in, its heads held. Read from the page's own JSON, as the page's script reads it."""

from __future__ import annotations

import json
import re

import pytest
from recording_comm import wait_until

from headsne_widget.capture.extraction import extract
from headsne_widget.texts import TSNE_ABSTRACT


def _payload(path) -> dict:
    found = re.search(r'<script type="application/json" id="headsne-state">(.*?)</script>', path.read_text(), re.S)
    assert found is not None, "the page holds no state"
    return json.loads(found.group(1))


def _layers(payload: dict) -> set[int]:
    """Every layer a view of the page shows or can show."""
    state, offline = payload["state"], payload["offline"]
    views = {state["layer"], *(layer for layer, _ in offline["heads"])}
    views |= {state[k] for k in ("atlas_layer", "decomposition_layer") if state[k] is not None}
    return views


@pytest.fixture(scope="module")
def ex(tiny_bert):
    return extract(TSNE_ABSTRACT[:300], tiny_bert)


def test_a_saved_page_after_a_layer_change_has_one_layer(ex, make, tmp_path):
    w, c = make(ex, layer=1, head=2, n_iter=60, speed=0.0)
    w.wait(60)
    c.control("atlas")
    wait_until(lambda: w.atlas_state == "done", timeout=120, what="the atlas of layer 1")
    same = _payload(w.save_html(tmp_path / "same.html"))
    assert _layers(same) == {1} and same["state"]["atlas"] is not None, "the map's own layer's atlas stays in"
    assert len(same["offline"]["heads"]) == ex.n_heads and "left out" not in same["offline"]["label"]

    w.layer = 0  # the map moves; the atlas still shows layer 1
    w.wait(60)
    assert w.atlas_layer == 1 and w.atlas is not None, "the widget keeps it (its caption says which layer it shows)"
    moved = _payload(w.save_html(tmp_path / "moved.html"))
    state = moved["state"]
    assert _layers(moved) == {0}, moved["offline"]
    assert state["atlas"] is None and state["atlas_kl"] is None and state["atlas_heads"] == []
    assert state["atlas_state"] == "idle" and moved["offline"]["heads"] == [[0, 2]]
    assert moved["offline"]["label"] == (
        "static export of layer 0 head 2; the head atlas of layer 1 left out: not the map's layer"
    )
    assert w.atlas_layer == 1 and w.atlas is not None, "saving changes nothing in the widget"
