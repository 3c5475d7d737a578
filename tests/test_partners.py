"""Each token's partners (the hover lines) are its P source's (``PSource.partners``, maths in affinity/partners.py),
checked against independent oracles: a plain sort of the head's rows, columns and their max (heads, dense and
sparse), scikit-learn's brute-force nearest neighbours (sources of points); and in the widget for every mode on
MiniLM, after a click, after the first frame and for a new ``edge_k``."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from recording_comm import wait_until
from sklearn.neighbors import NearestNeighbors

from headsne_widget.affinity import neighbours as knn
from headsne_widget.affinity.knn import knn_gaussian_affinities
from headsne_widget.affinity.partners import AtHand, head_partners, neighbour_partners, sparse_head_partners
from headsne_widget.affinity.sources import SOURCES, source
from headsne_widget.affinity.sources.base import Limits
from headsne_widget.affinity.spec import checked_spec
from headsne_widget.capture.extraction import extract
from headsne_widget.embedding.background import start_warmup
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget import runs

K = 4


def sorted_partners(W: np.ndarray, kept: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row i of W: the k largest W[i, j] over kept j != i, equal weights the lower j first."""
    n = W.shape[0]
    indices, weights = np.full((n, k), -1, np.int32), np.zeros((n, k), np.float32)
    for i in range(n):
        candidates = kept[kept != i]
        order = np.lexsort((candidates, -W[i, candidates]))[:k]
        indices[i, : len(order)], weights[i, : len(order)] = candidates[order], W[i, candidates[order]]
    return indices, weights


def brute_neighbours(X: np.ndarray, kept: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's brute-force search of each token's k nearest kept tokens (itself left out), and the weights
    ``1 / (1 + d^2 / median d^2)`` of their float32 squared distances."""
    X = np.asarray(X, dtype=np.float64)
    search = NearestNeighbors(n_neighbors=k + 1, algorithm="brute").fit(X[kept])
    distances, found = search.kneighbors(X)
    indices, d2 = np.zeros((len(X), k), np.int64), np.zeros((len(X), k))
    for i in range(len(X)):
        mine = kept[found[i]] != i
        indices[i], d2[i] = kept[found[i]][mine][:k], distances[i][mine][:k] ** 2
    d2 = d2.astype(np.float32).astype(np.float64)
    return indices, (1.0 / (1.0 + d2 / np.median(d2))).astype(np.float32)


@pytest.mark.parametrize("ties", [False, True])
def test_a_sparse_heads_partners_rank_its_kept_entries_as_a_sort_does(ties):
    """The kept rows' kernel against a plain sort of each row, column and their max over the kept entries: kept
    partners only, never the token itself, equal weights the lower index first, short rows padded (-1, 0)."""
    rng = np.random.default_rng(5)
    n = 300
    W = (rng.integers(1, 4, (n, n)) / 4 if ties else rng.random((n, n))).astype(np.float32)
    W[rng.random((n, n)) > 0.03] = 0.0  # about 9 entries a row: some rows hold fewer than K
    kept = np.flatnonzero(rng.random(n) > 0.2)
    got = sparse_head_partners(sp.csr_array(W), K, kept)
    for ranking, M in zip(got, (W, W.T, np.maximum(W, W.T))):
        indices, weights = sorted_partners(M, kept, K)
        short = weights == 0  # past a row's entries: padding
        indices[short] = -1
        np.testing.assert_array_equal(ranking.indices, indices)
        np.testing.assert_array_equal(ranking.weights, weights)


def test_nearest_partners_are_scikit_learns_excluded_tokens_among_the_kept_ones():
    """The exact search's partners against scikit-learn's brute force, tokens left out of the map included (their
    partners among the kept ones); the same from a kNN P's own search (``searched``)."""
    X = np.random.default_rng(3).normal(size=(300, 8))
    X[151] = X[150] + 1e-3  # two excluded tokens nearest to each other: neither is the other's partner
    kept = np.delete(np.arange(300), [0, 150, 151])
    indices, weights = brute_neighbours(X, kept, 5)
    found = neighbour_partners(X, 5, kept)
    np.testing.assert_array_equal(found.indices, indices)
    np.testing.assert_allclose(found.weights, weights, rtol=1e-6)
    P = knn_gaussian_affinities(X[kept], 10.0, neighbours="exact")
    from_p = neighbour_partners(X, 5, kept, searched=P.neighbours)
    np.testing.assert_array_equal(from_p.indices, indices)
    np.testing.assert_allclose(from_p.weights, weights, rtol=1e-6)


def test_nearest_partners_order_distances_in_float64_equal_ones_as_the_search_gives_them():
    """Where two distances round to the same float32 the nearer in float64 comes first (the blocked search of
    before took either: it ranked float32 distances by argpartition); points at exactly equal distances come in
    the search's order, each at its distance."""
    X = np.array([[0.0], [1.0 + 1e-10], [1.0], [5.0], [6.0]])
    assert np.float32(X[1, 0] ** 2) == np.float32(1.0)
    assert neighbour_partners(X, 1).indices[0, 0] == 2
    grid = np.random.default_rng(0).integers(0, 3, (200, 2)).astype(np.float64)  # 9 places: ties everywhere
    found = neighbour_partners(grid, 6)
    d2 = ((grid[:, None, :] - grid[None, :, :]) ** 2).sum(axis=2)
    np.fill_diagonal(d2, np.inf)
    np.testing.assert_array_equal(np.take_along_axis(d2, found.indices, axis=1), np.sort(d2, axis=1)[:, :6])


def test_every_source_declares_its_points_and_partners():
    """What the page reads instead of a mode's name (js/model/protocol.generated.js SOURCES): a token's points
    by role (as many as P's points a token) and the kind of its hover lines (the method it ranks them by)."""
    for src in SOURCES.values():
        assert len(src.point_roles) in (0, src.points_per_token) and src.points_per_token >= 1
        assert src.partner_kind in ("rows", "neighbours")
    assert source("query-key").point_roles == ("query", "key")


@pytest.fixture(scope="module")
def minilm_ex(minilm):
    start_warmup().join()  # the runs below wait for no compile
    return extract(TSNE_ABSTRACT, minilm, components=True)


def oracle(ex, mode: str, layer: int, head: int, k: int) -> dict[str, tuple[np.ndarray, np.ndarray] | None]:
    """The hover traits of a selection, from the source's own matrix or space by a plain sort or scikit-learn."""
    src, spec = source(mode), checked_spec(ex, mode, layer, head, exclude_special=True)
    if src.partner_kind == "neighbours":
        edges = brute_neighbours(src.space(ex, layer, head), spec.kept, k)
        return {"edges": edges, "attends_to": None, "attended_by": None}
    M = np.asarray(src.matrix(ex, layer, head), dtype=np.float32)
    to, by, edges = (sorted_partners(W, spec.kept, k) for W in (M, M.T, np.maximum(M, M.T)))
    return {"edges": edges, "attends_to": to, "attended_by": by}


def assert_traits(w, expected) -> None:
    for name, value in expected.items():
        trait = getattr(w, name)
        if value is None:
            assert trait is None, name
            continue
        np.testing.assert_array_equal(trait["indices"], value[0], err_msg=name)
        np.testing.assert_allclose(trait["weights"], value[1], rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("mode", list(SOURCES))
def test_the_widgets_hover_lines_are_each_modes_oracle(make, minilm_ex, mode, monkeypatch):
    """In every mode on MiniLM (special tokens excluded): the partners with the run's start (a head's matrix at
    hand) or after its first frame (a source of points; a head's matrix computed again into a lease), and again
    for a new edge_k, are the oracle's."""
    ex, layer, head = minilm_ex, 3, 7
    w, _ = make(ex, mode=mode, layer=layer, head=head, edge_k=K, exclude_special=True, n_iter=30, speed=0.0)
    w.wait(120)
    wait_until(lambda: w.edges is not None, 60, "the partners")
    assert_traits(w, oracle(ex, mode, layer, head, K))
    w.edge_k = K + 3
    wait_until(lambda: w.edges is not None and w.edges["indices"].shape[1] == K + 3, 60, "the partners for K + 3")
    assert_traits(w, oracle(ex, mode, layer, head, K + 3))
    monkeypatch.setattr(runs, "PARTNERS_AT_ONCE_MAX", 8)  # a head's partners after the first frame too
    w.layer = 2
    w.wait(120)
    wait_until(lambda: w.edges is not None, 60, "the partners of layer 2")
    assert_traits(w, oracle(ex, mode, 2, head, K + 3))


def test_a_sparse_runs_partners_without_its_rows_select_them_again(minilm_ex):
    """What a sparse P leaves decides the partners, not the text's length: a short text's head whose run was
    sparse (its rows given back) ranks its rows selected again, which keep fewer keys than the dense head has."""
    ex = minilm_ex
    spec = checked_spec(ex, "attention", 3, 7, mass=0.5)
    src = spec.source
    sparse = src.partners(ex, spec, K, at_hand=AtHand(sparse=True))
    rows = src.rows(ex, 3, 7, 0.5, None, Limits())
    expected = sparse_head_partners(rows, K, spec.kept)
    for got, want in zip(sparse, expected):
        np.testing.assert_array_equal(got.indices, want.indices)
    dense = src.partners(ex, spec, K)
    assert (sparse.attends_to.indices == -1).any() and not (dense.attends_to.indices == -1).any()
    np.testing.assert_array_equal(dense.attends_to.indices, head_partners(ex.attention(3, 7), K).attends_to.indices)


def test_hover_partners_of_a_long_texts_source_of_points_take_the_knn_search(monkeypatch):
    """A kNN P's search method (``neighbours.settings``) serves its partners when its own search is not at hand
    (a new edge_k): the same neighbours as the exact search here."""
    X = np.random.default_rng(3).normal(size=(300, 8))
    kept = np.delete(np.arange(300), [0, 150])
    calls: list[int] = []
    exact = knn.exact_neighbours
    monkeypatch.setattr(knn, "exact_neighbours", lambda X, k, *a: calls.append(len(X)) or exact(X, k, *a))
    monkeypatch.setattr(knn.settings, "neighbours", "exact")
    found = neighbour_partners(X, 5, kept, method=None)
    assert calls[0] == len(kept)
    indices, _ = brute_neighbours(X, kept, 5)
    np.testing.assert_array_equal(found.indices, indices)
