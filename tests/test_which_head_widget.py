"""Which head, in the widget: the scores, kinds, grid above uniform, head map, sorting and related heads, as
Python and the browser receive them (recorded comm messages)."""

from __future__ import annotations

import numpy as np
import pytest
import traitlets
from recording_comm import wait_until

from headsne_widget import head_scores
from headsne_widget.affinity.heads import FEATURE_BLOCKS, head_features, head_similarity, related_heads
from headsne_widget.capture.extraction import Extraction, extract
from headsne_widget.capture.scores import SCORES, statistics
from headsne_widget.embedding.background import start_warmup
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget.head_map import head_map
from headsne_widget.widget.owner import RELATED_K
from headsne_widget.widget.serialization import array_from_wire

SHORT_TEXT = TSNE_ABSTRACT[:260]


@pytest.fixture(scope="module", autouse=True)
def warm_kernels():
    start_warmup().join()


@pytest.fixture(scope="module")
def ex(tiny_bert) -> Extraction:
    return extract(SHORT_TEXT, tiny_bert)


@pytest.fixture(scope="module")
def causal_ex(tiny_gpt2) -> Extraction:
    return extract(SHORT_TEXT, tiny_gpt2)


def test_scores_kinds_and_both_grids_reach_the_browser_once(make, ex):
    w, c = make(ex, autostart=False)
    state = c.states()[0]
    table = head_scores(ex)
    assert state["score_names"] == list(SCORES)
    values = array_from_wire(state["scores"])
    assert values.shape == (ex.n_layers, ex.n_heads, len(SCORES))
    np.testing.assert_allclose(values.reshape(-1, len(SCORES)), table[list(SCORES)].to_numpy(), rtol=1e-6)
    assert state["head_kinds"] == table["kind"].tolist()
    np.testing.assert_array_equal(array_from_wire(state["max_attention_above_uniform"]), statistics(ex).above_uniform)
    assert w.head_scores.equals(table)  # Python gets the table
    assert w.grid_norm == "raw"  # bidirectional: the thesis's grid
    assert sum("scores" in s for s in c.states()) == 1


def test_causal_models_draw_the_grid_above_uniform_unless_told(make, causal_ex):
    w, c = make(causal_ex, autostart=False)
    assert w.grid_norm == "above_uniform"
    assert any(s.get("grid_norm") == "above_uniform" for s in c.states())
    assert np.all(causal_ex.max_attention[:, :, 0] == 1.0)  # the raw grid's column 0: the causal mask
    assert np.all(w.max_attention_above_uniform[:, :, 0] < 1.0)
    told, _ = make(causal_ex, autostart=False, grid_norm="raw")
    assert told.grid_norm == "raw"


def test_head_map_arrives_from_its_job_and_is_deterministic(make, abstract_ex):
    w, c = make(abstract_ex, autostart=False)
    wait_until(lambda: w.head_map is not None, 60, "the head map")
    positions = w.head_map
    assert positions.shape == (abstract_ex.n_layers * abstract_ex.n_heads, 2)
    assert np.abs(positions).max() == pytest.approx(1.0) and np.all(np.isfinite(positions))
    layout = head_map(abstract_ex)
    assert layout.method == "t-SNE"
    np.testing.assert_array_equal(layout.positions, positions)
    np.testing.assert_array_equal(array_from_wire([s for s in c.states() if s.get("head_map")][-1]["head_map"]),
                                  positions)  # fmt: skip


def test_small_models_get_a_pca_head_map(ex):
    layout = head_map(ex)
    assert layout.method == "PCA" and layout.positions.shape == (8, 2)
    np.testing.assert_array_equal(head_map(ex).positions, layout.positions)


def test_related_heads_follow_the_selection(make, abstract_ex):
    w, c = make(abstract_ex, autostart=False, layer=2, head=5)
    features = head_features(abstract_ex)
    expected = related_heads(features, 2 * 12 + 5, RELATED_K, 12)
    assert w.related == expected and len(expected) == RELATED_K
    similarities = [r["similarity"] for r in expected]
    assert similarities == sorted(similarities, reverse=True)
    assert (2, 5) not in {(r["layer"], r["head"]) for r in expected}
    # the documented measure: the mean of the three blocks' cosines, from O(n) vectors per head
    best = expected[0]
    cosines = []
    for block in range(len(FEATURE_BLOCKS)):
        a, b = np.split(features[2 * 12 + 5], np.cumsum(block_sizes(abstract_ex)))[block], np.split(
            features[best["layer"] * 12 + best["head"]], np.cumsum(block_sizes(abstract_ex)))[block]  # fmt: skip
        cosines.append(float(a @ b))
    assert best["similarity"] == pytest.approx(np.mean(cosines))
    assert head_similarity(features)[2 * 12 + 5, best["layer"] * 12 + best["head"]] == pytest.approx(np.mean(cosines))
    w.layer, w.head = 4, 0
    assert w.related == related_heads(features, 4 * 12, RELATED_K, 12)
    assert any(s.get("related") == w.related for s in c.states())
    w.mode = "hidden"
    assert w.related == []


def block_sizes(ex: Extraction) -> list[int]:
    return [len(SCORES), ex.n_tokens]


def test_sort_heads_orders_each_layer_and_refuses_unknown_scores(make, abstract_ex):
    w, c = make(abstract_ex, autostart=False)
    np.testing.assert_array_equal(w.head_order, np.tile(np.arange(12), (6, 1)))
    w.sort_heads = "sink"
    table = head_scores(abstract_ex)
    for layer in range(6):
        sink = table[table.layer == layer]["sink"].to_numpy()
        assert list(sink[w.head_order[layer]]) == sorted(sink, reverse=True)
    assert array_from_wire([s for s in c.states() if "head_order" in s][-1]["head_order"]).dtype == np.int32
    with pytest.raises(traitlets.TraitError, match="sort_heads"):
        w.sort_heads = "sinks"
    assert w.sort_heads == "sink"
    c.from_browser(sort_heads="no such score")
    assert w.sort_heads == "sink" and "invalid value from the browser (sort_heads)" in w.status
    with pytest.raises(TypeError, match="unknown parameter"):
        make(abstract_ex, sort_by="sink")
