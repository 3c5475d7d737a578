"""What wrote each token's state, in the widget (issue 28, item 4): the decomposition panel's arrays on request
(control "decomposition"), equal to an independent ``decompose`` of a fresh extraction with components, following
the selected layer; ``w.decomposition``; nothing computed before it is asked for; the memory budget's refusal."""

from __future__ import annotations

import numpy as np
import pytest
from recording_comm import wait_until

from headsne_widget.budget import set_memory_budget
from headsne_widget.capture.components import _TRACES
from headsne_widget.capture.decompose import Decomposition, decompose
from headsne_widget.capture.extraction import extract
from headsne_widget.errors import MemoryBudgetError
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget.decomposition_view import TERM_KINDS

TEXT = TSNE_ABSTRACT[:500]


@pytest.fixture(scope="module")
def oracle(minilm):
    """A fresh extraction of TEXT with its components: the widget's numbers must equal decompose() of it."""
    ex = extract(TEXT, minilm, components=True)

    def shares(layer: int) -> tuple[np.ndarray, np.ndarray]:
        dec = decompose(ex, layer)
        kinds, shares = dec.terms["term"].to_numpy(), dec.shares
        by_kind = np.stack([shares[kinds == kind].sum(axis=0) for kind in TERM_KINDS])
        heads = [shares[int(k)] for k in dec.terms.index if kinds[k] == "head" and dec.terms.loc[k, "layer"] == layer]
        return by_kind, np.stack(heads)

    return shares


def _done(w, layer: int, timeout: float = 120.0) -> None:
    wait_until(
        lambda: w.decomposition_state == "error" or (w.decomposition_state, w.decomposition_layer) == ("done", layer),
        timeout,
        f"the decomposition of layer {layer}",
    )
    assert w.decomposition_state == "done", w.status


def test_the_panel_gets_the_shares_of_decompose_and_follows_the_layer(make, minilm_path, oracle):
    w, c = make(TEXT, minilm_path, autostart=False, layer=3)
    ex = w.extraction
    assert w.decomposition_state == "idle" and w.decomposition_terms is None
    assert _TRACES.get(ex) is None, "no forward pass with components before the panel asks"
    c.control("decomposition")
    _done(w, 3)
    terms, heads = oracle(3)
    assert w.decomposition_terms.dtype == np.float32 and w.decomposition_terms.shape == (4, ex.n_tokens)
    np.testing.assert_allclose(w.decomposition_terms, terms, atol=2e-5)
    np.testing.assert_allclose(w.decomposition_heads, heads, atol=2e-5)
    assert w.decomposition_heads.shape == (ex.n_heads, ex.n_tokens)
    np.testing.assert_allclose(w.decomposition_terms.sum(axis=0), 1.0, atol=1e-4)
    sent = [s["decomposition_terms"] for s in c.states() if s.get("decomposition_terms") is not None]
    assert sent, "the browser got the terms"
    assert sent[-1]["dtype"] == "float32" and list(sent[-1]["shape"]) == [4, ex.n_tokens]
    got = np.frombuffer(bytes(sent[-1]["buffer"]), dtype="<f4").reshape(4, ex.n_tokens)
    np.testing.assert_array_equal(got, w.decomposition_terms)  # compact bytes, not a JSON list of floats

    w.layer = 1  # a new layer: its decomposition follows, from the kept trace
    _done(w, 1)
    terms, heads = oracle(1)
    np.testing.assert_allclose(w.decomposition_terms, terms, atol=2e-5)
    np.testing.assert_allclose(w.decomposition_heads, heads, atol=2e-5)

    dec = w.decomposition  # the selected layer's, the same object a second time
    assert isinstance(dec, Decomposition) and dec.layer == 1
    assert w.decomposition is dec
    np.testing.assert_allclose(dec.shares.sum(axis=0), 1.0, atol=1e-6)


def test_the_browser_may_ask_but_not_answer(make, abstract_ex):
    w, c = make(abstract_ex, autostart=False)
    c.from_browser(decomposition_state="done", decomposition_layer=2)
    assert w.decomposition_state == "idle" and w.decomposition_layer is None
    assert "may not set" in w.status
    c.control("decomposition")  # an extraction without components, and no model to run: the panel says why
    wait_until(lambda: w.decomposition_state == "error", 30, "the refusal")
    assert "holds no components" in w.status


def test_beyond_the_memory_budget_it_is_refused_with_a_reason(make, minilm_path):
    w, c = make(TSNE_ABSTRACT[:300], minilm_path, autostart=False, layer=5)
    ex = w.extraction
    set_memory_budget(2**20)
    try:
        c.control("decomposition")
        wait_until(lambda: w.decomposition_state == "error", 30, "the refusal")
        assert "memory budget" in w.status and "MiB" in w.status
        assert w.decomposition_terms is None
        with pytest.raises(MemoryBudgetError, match="memory budget"):
            w.decomposition  # noqa: B018 - the property computes
        assert _TRACES.get(ex) is None, "refused before the forward pass"
    finally:
        set_memory_budget(None)


def test_colour_by_the_selected_heads_share(make, minilm_path, oracle):
    w, c = make(TEXT, minilm_path, autostart=False, layer=3, head=4)
    w.wait_ready()
    c.from_browser(color_mode="head_share")  # asks for the decomposition: the colours come with it
    wait_until(lambda: w.color_values is not None, 120, "the head's shares as colours")
    assert w.color_mode == "head_share" and w.color_categories == []
    _, heads = oracle(3)
    np.testing.assert_allclose(w.color_values, heads[4], atol=2e-5)
    w.head = 9  # another head of the layer: its row, at once (the decomposition is kept)
    np.testing.assert_allclose(w.color_values, heads[9], atol=2e-5)
    w.layer = 1
    wait_until(lambda: w.decomposition_layer == 1 and w.color_values is not None, 120, "layer 1's colours")
    np.testing.assert_allclose(w.color_values, oracle(1)[1][9], atol=2e-5)
