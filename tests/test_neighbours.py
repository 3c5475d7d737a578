"""Hidden mode's nearest neighbours (issue 31): the approximate search's recall against an independent exact
oracle (scikit-learn's NearestNeighbors), the exact switch, and the switch's checks."""

from __future__ import annotations

import contextlib
import os
import threading
import time

import numpy as np
import psutil
import pytest
from sklearn.neighbors import NearestNeighbors

from headsne_widget.affinity import neighbours as knn
from headsne_widget.affinity.descent import SearchWorkerError
from headsne_widget.affinity.knn import knn_gaussian_affinities


def _clusters(n: int, d: int, seed: int = 0) -> np.ndarray:
    """n points around 12 centres in d dimensions, of different spreads (no two distances equal)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0.0, 4.0, size=(12, d))
    labels = rng.integers(0, 12, size=n)
    return centres[labels] + rng.normal(size=(n, d)) * rng.uniform(0.3, 1.5, size=(n, 1))


def _oracle(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    distances, indices = NearestNeighbors(n_neighbors=k + 1, algorithm="brute").fit(X).kneighbors(X)
    return indices[:, 1:], distances[:, 1:] ** 2  # (each point's own index first: distinct points)


def test_approximate_neighbours_recall_against_an_exact_oracle():
    """pynndescent's neighbours (the first call compiles its numba code: most of this test's time) hold at least
    98% of the true k nearest, their squared distances are the points' own, nearest first, never the point."""
    X = _clusters(3000, 16)
    k = 30
    indices, distances = knn.approx_neighbours(X, k)
    expected, _ = _oracle(X, k)
    hits = sum(np.intersect1d(a, e).size for a, e in zip(indices, expected, strict=True))
    assert hits / expected.size >= 0.98
    assert indices.shape == (3000, k) and not (indices == np.arange(3000)[:, None]).any()
    assert all(np.unique(row).size == k for row in indices)
    np.testing.assert_allclose(distances, ((X[indices] - X[:, None, :]) ** 2).sum(axis=2), rtol=1e-9)
    assert (np.diff(distances, axis=1) >= 0).all()


def test_exact_switch_gives_the_exact_neighbours(monkeypatch):
    """``"exact"`` (and ``"auto"`` below APPROX_MIN_POINTS) is the exact search, never the approximate one: the
    oracle's neighbours and squared distances; the kNN P takes the same switch, and ``settings`` switches a call
    that names none."""
    monkeypatch.setattr(knn, "approx_neighbours", lambda *a, **k: pytest.fail("the approximate search ran"))
    X = _clusters(700, 8, seed=1)
    expected, squared = _oracle(X, 12)
    for method in ("exact", "auto"):
        indices, distances = knn.neighbours(X, 12, method)
        np.testing.assert_array_equal(indices, expected)
        np.testing.assert_allclose(distances, squared, rtol=1e-6, atol=1e-9)
    monkeypatch.setattr(knn, "APPROX_MIN_POINTS", 100)
    monkeypatch.setattr(knn.settings, "neighbours", "exact")
    P = knn_gaussian_affinities(X, 4.0)
    assert (P != knn_gaussian_affinities(X, 4.0, neighbours="exact")).nnz == 0


def test_the_exact_search_over_several_tiles_of_points():
    """Past one tile of points (the search meets each block's own tile first, then the others, wrapping round):
    the oracle's neighbours and squared distances, for all rows and for rows asked for alone, in any order.
    Points of a random walk, whose neighbours are near in position."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(20000, 6)).cumsum(axis=0) + rng.normal(size=(20000, 6))
    expected, squared = _oracle(X, 9)
    indices, distances = knn.exact_neighbours(X, 9)
    np.testing.assert_array_equal(indices, expected)
    np.testing.assert_allclose(distances, squared, rtol=1e-6, atol=1e-9)
    rows = np.array([19999, 8191, 8192, 0, 12345])
    indices, distances = knn.exact_neighbours(X, 9, rows=rows)
    np.testing.assert_array_equal(indices, expected[rows])


@pytest.mark.parametrize("offset", [0.0, 1e4])
def test_the_exact_search_from_half_the_products(offset):
    """Every point's neighbours from half the products (each pair of blocks of points computed once, feeding
    both blocks' neighbours), in float32 (points about their centre) and in float64 (points 1e4 from their centre,
    as far as 1e6 moves it: float32's rounding cannot rank them): an oracle that subtracts every pair in float64."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(5000, 8)) * 0.1 + offset
    X[-1] = 1e6 if offset else X[-1]
    D = np.concatenate([((X[lo : lo + 250, None, :] - X[None, :, :]) ** 2).sum(axis=2) for lo in range(0, len(X), 250)])
    np.fill_diagonal(D, np.inf)
    order = np.argsort(D, axis=1)
    for k in (1, 30):
        indices, distances = knn.exact_neighbours(X, k)
        np.testing.assert_array_equal(np.sort(indices, axis=1), np.sort(order[:, :k], axis=1))
        np.testing.assert_allclose(distances, np.take_along_axis(D, order[:, :k], axis=1), rtol=1e-12, atol=0)


def test_equal_distances_come_lower_index_first():
    """Points of an integer grid, whose squared distances are exact integers with many equal: each row's
    neighbours in the order of an oracle that sorts every pair's exact distance, then the index (k where no group
    of equal distances is cut: the 6 faces, the 12 edges, the 8 corners of a cube about a point), from half the
    products (every point) and for rows asked for alone."""
    X = np.stack(np.meshgrid(*[np.arange(16.0)] * 3, indexing="ij"), axis=-1).reshape(-1, 3)[::-1].copy()
    D = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2)
    np.fill_diagonal(D, np.inf)
    order = np.lexsort((np.broadcast_to(np.arange(len(X)), D.shape), D), axis=1)
    rows = np.flatnonzero(((X > 0) & (X < 15)).all(axis=1))  # (all 26 about them on the grid)
    for k in (6, 18, 26):
        indices, distances = knn.exact_neighbours(X, k)
        np.testing.assert_array_equal(indices[rows], order[rows, :k])
        np.testing.assert_array_equal(distances[rows], np.take_along_axis(D, order[:, :k], axis=1)[rows])
        alone, _ = knn.exact_neighbours(X, k, rows=rows[:50])
        np.testing.assert_array_equal(alone, order[rows[:50], :k])


def _points_rounding_cannot_rank(kind: str) -> np.ndarray:
    """Points whose neighbours float32 products (and for "far", float64 ones) cannot rank: all of them far from
    their centre against the distances between them, or in 2048 dimensions, where distances bunch up."""
    rng = np.random.default_rng(3)
    if kind == "far":  # 1e4 away, 1e-3 apart, and one point 1e6 away that moves the centre; rows enough for the
        # search to try float32 on some first (it settles none of them)
        return np.vstack([1e4 + rng.normal(size=(1199, 8)) * 1e-3, np.full((1, 8), 1e6)])
    if kind == "close pairs":  # pairs 1e-9 apart: their distances are below float32's rounding of the norms
        return np.repeat(rng.normal(size=(100, 8)), 2, axis=0) + rng.normal(size=(200, 8)) * 1e-9
    return rng.normal(size=(700, 2048))


@pytest.mark.parametrize("kind", ["far", "close pairs", "2048 dimensions"])
def test_the_exact_search_where_rounding_cannot_rank_the_points(kind):
    """The exact search's neighbours are the true ones even where its fast float32 products cannot tell them (it
    checks each row against the products' rounding and searches again where they could have erred): the
    neighbours and squared distances of an oracle that subtracts every pair in float64, for every k, and for
    rows asked for alone."""
    X = _points_rounding_cannot_rank(kind)
    D = np.concatenate([((X[lo : lo + 20, None, :] - X[None, :, :]) ** 2).sum(axis=2) for lo in range(0, len(X), 20)])
    np.fill_diagonal(D, np.inf)
    order = np.argsort(D, axis=1)
    for k in (1, 7, 40, len(X) - 1):
        indices, distances = knn.exact_neighbours(X, k)
        np.testing.assert_array_equal(np.sort(indices, axis=1), np.sort(order[:, :k], axis=1))
        np.testing.assert_allclose(distances, np.take_along_axis(D, order[:, :k], axis=1), rtol=1e-12, atol=0)
    rows = np.array([len(X) - 1, 0, 5])
    indices, distances = knn.exact_neighbours(X, 7, rows=rows)
    np.testing.assert_array_equal(np.sort(indices, axis=1), np.sort(order[rows, :7], axis=1))
    with pytest.raises(ValueError, match=f"k must be in \\[0, {len(X) - 1}\\]"):
        knn.exact_neighbours(X, len(X))


def test_auto_switches_to_the_approximate_search_from_its_threshold(monkeypatch):
    """``"auto"`` (the default) and ``"approx"`` call the approximate search from APPROX_MIN_POINTS points on."""
    calls = []

    def fake(X, k, *, seed=0):
        calls.append(len(X))
        return knn.exact_neighbours(X, k)

    monkeypatch.setattr(knn, "approx_neighbours", fake)
    monkeypatch.setattr(knn, "APPROX_MIN_POINTS", 200)
    X = _clusters(300, 4, seed=2)
    knn_gaussian_affinities(X, 5.0)
    knn.neighbours(X[:150], 5, "auto")  # below: exact
    knn.neighbours(X[:150], 5, "approx")
    knn.neighbours(X[:150], 5, "pynndescent")
    assert calls == [300, 150, 150]


@pytest.mark.parametrize("bad", ["annoy", "Exact", "", None, 1])
def test_a_bad_switch_is_refused_before_any_search(monkeypatch, bad):
    monkeypatch.setattr(knn, "exact_neighbours", lambda *a, **k: pytest.fail("searched"))
    monkeypatch.setattr(knn, "approx_neighbours", lambda *a, **k: pytest.fail("searched"))
    X = _clusters(50, 3)
    if bad is not None:
        with pytest.raises(ValueError, match="neighbours must be one of 'auto', 'exact', 'approx', 'pynndescent'"):
            knn_gaussian_affinities(X, 5.0, neighbours=bad)
    monkeypatch.setattr(knn.settings, "neighbours", bad)
    with pytest.raises(ValueError, match="neighbours must be one of"):
        knn_gaussian_affinities(X, 5.0)


def _search_workers() -> list[psutil.Process]:
    """This process's approximate-search worker processes (started by affinity/descent.py)."""
    return [
        p
        for p in psutil.Process().children()
        if p.status() != psutil.STATUS_ZOMBIE and any("headsne_widget.affinity.descent" in a for a in p.cmdline())
    ]


def _kill_search_workers() -> None:
    """SIGKILL to each worker, then wait until it is dead (its parent, not this test, reaps it: WNOWAIT)."""
    for process in _search_workers():
        process.kill()
        with contextlib.suppress(ChildProcessError):  # its parent reaped it already: dead
            os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)


def test_the_search_runs_in_a_worker_whose_death_never_takes_the_kernel():
    """pynndescent runs (and compiles) in a worker process, not in the kernel. A worker killed between searches
    (as the system kills a process out of memory) is replaced by a new one; a worker killed during a search makes
    that search raise a clear error; the next search works, and gives the same neighbours (it is seeded)."""
    X = _clusters(3000, 16, seed=4)
    first = knn.approx_neighbours(X, 20)
    (worker,) = _search_workers()
    _kill_search_workers()  # between searches
    killed: list[int] = []

    def kill_the_search() -> None:
        killed.extend(p.pid for p in _search_workers())
        _kill_search_workers()

    threading.Timer(1.0, kill_the_search).start()  # a new worker compiles for 30 s or more before it replies
    with pytest.raises(SearchWorkerError, match=r"worker process ended \(exit code -9: killed, out of memory\?\)"):
        knn.approx_neighbours(X, 20)
    assert killed and worker.pid not in killed, "the dead worker was replaced before the search was sent"
    again = knn.approx_neighbours(X, 20)
    np.testing.assert_array_equal(again[0], first[0])
    np.testing.assert_array_equal(again[1], first[1])


def test_prepare_starts_the_worker_only_for_an_approximate_search(monkeypatch):
    """The widget prepares the search of every text it opens: a worker (compiling pynndescent ahead) starts for a
    text of APPROX_MIN_POINTS tokens on, none below or with the exact search switched on."""
    _kill_search_workers()
    knn.prepare(knn.APPROX_MIN_POINTS - 1)
    knn.prepare(knn.APPROX_MIN_POINTS, "exact")
    monkeypatch.setattr(knn.settings, "neighbours", "exact")
    knn.prepare(10 * knn.APPROX_MIN_POINTS)
    time.sleep(0.5)
    assert _search_workers() == []
    monkeypatch.setattr(knn.settings, "neighbours", "auto")
    knn.prepare(knn.APPROX_MIN_POINTS)
    deadline = time.monotonic() + 30
    while not _search_workers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_search_workers()) == 1
    _kill_search_workers()  # its compile would hold a core through the tests after this one


def test_the_widget_prepares_the_search_when_it_opens_a_long_text(monkeypatch, make, abstract_ex):
    """A widget opening a text of APPROX_MIN_POINTS tokens or more starts the worker (its first hidden click then
    finds pynndescent compiled); one on a shorter text does not."""
    _kill_search_workers()
    monkeypatch.setattr(knn, "APPROX_MIN_POINTS", abstract_ex.n_tokens + 1)
    make(abstract_ex, autostart=False)
    time.sleep(0.5)
    assert _search_workers() == []
    monkeypatch.setattr(knn, "APPROX_MIN_POINTS", abstract_ex.n_tokens)
    make(abstract_ex, autostart=False)
    deadline = time.monotonic() + 30
    while not _search_workers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(_search_workers()) == 1
    _kill_search_workers()
