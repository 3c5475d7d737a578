"""Query-key mode: the t-SNE of a head's queries and keys together, P = [[0, A], [A^T, 0]] / sum, in the
affinities, the selection, the widget (what Python and the browser receive), the export, and its bad input."""

from __future__ import annotations

import numpy as np
import pytest
from recording_comm import wait_until

from headsne_widget.affinity.affinities import query_key_affinities
from headsne_widget.affinity.selection import selection_affinities
from headsne_widget.capture.extraction import Extraction, extract
from headsne_widget.embedding.background import start_warmup
from headsne_widget.embedding.tsne import kl_divergence
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget.serialization import array_from_wire

SHORT_TEXT = TSNE_ABSTRACT[:260]


@pytest.fixture(scope="module", autouse=True)
def warm_kernels():
    start_warmup().join()


@pytest.fixture(scope="module")
def ex(tiny_bert) -> Extraction:
    return extract(SHORT_TEXT, tiny_bert)


def test_bipartite_P_holds_A_between_queries_and_keys():
    rng = np.random.default_rng(0)
    A = rng.random((7, 7))
    A /= A.sum(axis=1, keepdims=True)
    P = query_key_affinities(A)
    assert P.shape == (14, 14) and P.dtype == np.float64
    np.testing.assert_array_equal(P, P.T)
    assert np.all(np.diag(P) == 0) and P.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.all(P[:7, :7] == 0) and np.all(P[7:, 7:] == 0)
    np.testing.assert_allclose(P[:7, 7:], A / (2 * A.sum()), rtol=1e-12)  # query i attracts the keys it attends to
    P32, kept = query_key_affinities(A, exclude=np.array([True] + [False] * 6), dtype=np.float32)
    assert P32.dtype == np.float32 and P32.shape == (12, 12) and kept.tolist() == list(range(1, 7))
    sub = A[1:, 1:]
    np.testing.assert_allclose(P32[:6, 6:], sub / (2 * sub.sum()), rtol=1e-6)


def test_hidden_states_have_no_query_and_key_sides(ex):
    X = ex.layer_output(0)  # (n, d): hidden states
    with pytest.raises(ValueError, match="hidden states have no query and key sides"):
        query_key_affinities(X)


def test_selection_lists_each_token_twice(ex):
    sel = selection_affinities(ex, "query-key", 1, 2, exclude_special=True)
    kept = np.flatnonzero(~ex.special)
    assert sel.kept.tolist() == kept.tolist() * 2
    assert sel.label == "queries and keys of layer 1 head 2"
    A = ex.attention(1, 2)[np.ix_(kept, kept)].astype(np.float64)
    np.testing.assert_allclose(sel.P[: len(kept), len(kept) :], A / (2 * A.sum()), rtol=1e-6)


def test_widget_embeds_2n_points_with_the_exact_kl(make, ex):
    w, c = make(ex, mode="query-key", layer=1, head=2, n_iter=150, speed=0.0)
    kl = w.wait(20)
    n = ex.n_tokens
    assert w.embedding.shape == (2 * n, 2)
    assert w.query_rows == n and w.kept == list(range(n)) * 2
    frames = c.frames()
    assert frames and all(s["frame"]["shape"] == [2 * n, 2] for s in frames)
    assert any(s.get("query_rows") == n for s in c.states()), "the browser must learn which rows are queries"
    P = query_key_affinities(ex.attention(1, 2))
    assert kl == pytest.approx(kl_divergence(P, w.embedding), rel=1e-4)
    assert kl == pytest.approx(kl_divergence(P, array_from_wire(frames[-1]["frame"])), rel=1e-4)
    assert "queries and keys of layer 1 head 2" in w.status
    assert w.edges is not None and np.asarray(w.edges["indices"]).shape[0] == n  # partners stay per token
    w.mode = "attention"
    w.wait(20)
    assert w.query_rows == 0 and w.embedding.shape == (n, 2) and w.kept == list(range(n))


def test_query_key_mode_without_special_tokens(make, ex):
    w, _ = make(ex, mode="query-key", exclude_special=True, n_iter=60, speed=0.0)
    w.wait(20)
    m = int((~ex.special).sum())
    assert w.embedding.shape == (2 * m, 2) and w.query_rows == m


def test_export_keeps_working_in_query_key_mode(make, ex, tmp_path):
    w, _ = make(ex, mode="query-key", n_iter=60, speed=0.0)
    w.wait(20)
    for view in ("widget", "bokeh"):
        path = w.save_html(tmp_path / f"qk-{view}.html", view=view)
        assert path.stat().st_size > 1000


def test_query_key_mode_from_the_browser(make, ex):
    w, c = make(ex, n_iter=60, speed=0.0)
    w.wait(20)
    c.from_browser(mode="query-key")
    wait_until(lambda: w.state == "done" and w.query_rows == ex.n_tokens, 20, "the query-key run")
    assert w.embedding.shape == (2 * ex.n_tokens, 2)
