"""Why a head attends, in the widget (issue 29, item 3): an edge's attribution on request and the selected head's
composition links, as Python computes them and the browser receives them (recorded comm messages), on the real
MiniLM; the errors a panel shows instead (no model, a token out of range, over the memory budget)."""

from __future__ import annotations

import numpy as np
import pytest
from recording_comm import wait_until

from headsne_widget.budget import set_memory_budget
from headsne_widget.capture.attribution import score_attribution
from headsne_widget.capture.composition import head_composition
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget.attribution_view import ATTRIBUTION_TOP, COMPOSITION_TOP, component_label

TEXT = TSNE_ABSTRACT[:600]


def _answer(w, trait: str, timeout: float = 120.0) -> dict:
    wait_until(lambda: (getattr(w, trait) or {}).get("state") not in (None, "running"), timeout, f"the {trait} reply")
    return getattr(w, trait)


def _top_pairs(frame) -> list[tuple[str, str, float]]:
    """The oracle: score_attribution's pairs by size, largest first, labelled as the panel labels them."""
    rows = frame.reindex(frame["score"].abs().sort_values(ascending=False, kind="stable").index)
    top = rows.head(ATTRIBUTION_TOP).itertuples(index=False)
    q, k = ("query_term", "query_layer", "query_head"), ("key_term", "key_layer", "key_head")
    return [(component_label(*(getattr(r, c) for c in q)), component_label(*(getattr(r, c) for c in k)), r.score)
            for r in top]  # fmt: skip


def test_an_edge_request_lists_its_largest_pairs_exactly(make, minilm, minilm_path):
    w, c = make(TEXT, minilm_path, autostart=False)
    ex = w.extraction
    layer, head, i = 2, 5, 7
    j = int(np.argmax(ex.attention(layer, head)[i]))
    c.from_browser(attribution_request=[layer, head, i, j])
    reply = _answer(w, "attribution")
    assert reply["state"] == "done", reply
    assert (reply["layer"], reply["head"], reply["i"], reply["j"]) == (layer, head, i, j)
    oracle = score_attribution(ex, layer, head, i, j, model=minilm)
    assert reply["score"] == pytest.approx(oracle.attrs["score"], rel=1e-6)
    assert reply["n_pairs"] == len(oracle)
    got = [(p["query"], p["key"], p["score"]) for p in reply["pairs"]]
    want = _top_pairs(oracle)
    assert [g[:2] for g in got] == [o[:2] for o in want]
    np.testing.assert_allclose([g[2] for g in got], [o[2] for o in want], rtol=1e-9)
    for p in reply["pairs"]:
        assert p["share"] == pytest.approx(p["score"] / oracle.attrs["score"])
    assert any((s.get("attribution") or {}).get("state") == "done" for s in c.states()), "the browser got the reply"
    # a second edge needs no forward pass: the trace is kept with the extraction
    c.from_browser(attribution_request=[0, 1, j, i])
    wait_until(lambda: (w.attribution or {}).get("i") == j and w.attribution["state"] == "done", 60, "edge 2")
    assert w.attribution["seconds"] < reply["seconds"] + 1.0


def test_the_browser_may_ask_but_not_answer(make, abstract_ex):
    w, c = make(abstract_ex, autostart=False)
    c.from_browser(attribution={"state": "done", "pairs": [{"query": "<b>x</b>", "key": "y", "score": 1.0}]})
    assert w.attribution is None
    assert "may not set attribution" in w.status


def test_what_cannot_be_attributed_says_why(make, abstract_ex, minilm_path):
    w, c = make(abstract_ex, autostart=False)  # an extraction without components, and no model to run
    c.from_browser(attribution_request=[1, 0, 3, 4])
    reply = _answer(w, "attribution")
    assert reply["state"] == "error" and "holds no components" in reply["error"]
    c.control("composition")
    assert "holds no components" in _answer(w, "composition")["error"]

    w2, c2 = make(TSNE_ABSTRACT[:300], minilm_path, autostart=False)  # a text of its own: no trace kept yet
    n = w2.extraction.n_tokens
    set_memory_budget(1024)
    try:
        c2.from_browser(attribution_request=[1, 0, 3, 4])
        reply = _answer(w2, "attribution")
    finally:
        set_memory_budget(None)
    assert reply["state"] == "error" and "memory budget" in reply["error"], reply
    c2.from_browser(attribution_request=[1, 0, 3, n + 5])
    reply = _answer(w2, "attribution")
    assert reply["state"] == "error" and "token j" in reply["error"] and str(n) in reply["error"], reply


def test_composition_links_follow_the_selection_and_are_computed_once(make, minilm, minilm_path):
    w, c = make(TEXT, minilm_path, autostart=False, layer=3, head=4)
    ex = w.extraction
    c.control("composition")
    reply = _answer(w, "composition")
    assert reply["state"] == "done", reply
    oracle = head_composition(ex, data=False, model=minilm)

    def expected(layer: int, head: int) -> list[tuple[str, int, int]]:
        rows = oracle[(oracle.dst_layer == layer) & (oracle.dst_head == head)]
        out = []
        for kind in ("q", "k", "v"):
            best = rows.sort_values(kind, ascending=False, kind="stable").head(COMPOSITION_TOP)
            out += [(kind, int(r.src_layer), int(r.src_head)) for r in best.itertuples(index=False)]
        return out

    assert [(x["kind"], x["layer"], x["head"]) for x in reply["links"]] == expected(3, 4)
    assert all(x["layer"] < 3 for x in reply["links"])
    w.layer, w.head = 5, 1  # the table is kept: the links follow at once
    assert (w.composition["layer"], w.composition["head"]) == (5, 1)
    assert [(x["kind"], x["layer"], x["head"]) for x in w.composition["links"]] == expected(5, 1)
    w.layer = 0
    assert w.composition["links"] == []  # no earlier head
