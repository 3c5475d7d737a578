"""The k nearest neighbours of hidden states, exact or approximate (issue 31): the kNN Gaussian P's search.

``neighbours=`` chooses the search, named as openTSNE's ``neighbors=``:

- ``"exact"``: :func:`exact_neighbours`, blocks of rows against all rows (float32 matrix products, then float64
  distances of the candidates, each row checked against the products' rounding): O(n^2 d) time, the true
  neighbours;
- ``"approx"`` (or ``"pynndescent"``): :func:`approx_neighbours`, nearest-neighbour descent (pynndescent, what
  openTSNE uses by default above a few thousand points), O(n log n)-ish; the squared distances of the
  neighbours it finds are computed again here in float64, so an approximate P differs from the exact one only
  where a true neighbour was missed;
- ``"auto"`` (the default): approximate from :data:`APPROX_MIN_POINTS` points on, exact below.

The search a call without ``neighbours=`` takes (the widget's hidden mode) is :data:`settings`'s ``neighbours``:
``headsne_widget.affinity.neighbours.settings.neighbours = "exact"`` switches every later kNN P to the exact
search.

pynndescent compiles its numba code on its first search in a process (35-60 s on 2 cores; numba cannot cache
its descent), so the search runs in a worker process of its own (:mod:`.descent`), which :func:`prepare`
compiles ahead when a text is long enough for the approximate search: the widget calls it on opening one.
Below :data:`APPROX_MIN_POINTS` the exact search is as fast or faster, and needs no compile.

Measured (``benchmarks/knn_recall.py``, 2 cores): see docs/long-texts.md for the recall against the exact
neighbours and the times that set :data:`APPROX_MIN_POINTS`.
"""

from __future__ import annotations

import threading
from itertools import chain
from types import SimpleNamespace
from typing import Any

import numpy as np

from .._parallel import in_shares, one_blas_thread, shares, threads
from ..budget import within_budget
from .neighbour_kernels import nearest_by_differences, ordered_distances, smallest, smallest_both

__all__ = [
    "APPROX_MIN_POINTS",
    "EXACT_MARGIN",
    "NEIGHBOURS",
    "approx_neighbours",
    "check_neighbours",
    "exact_bytes",
    "exact_neighbours",
    "neighbours",
    "prepare",
    "settings",
    "spread_about",
]

#: the exact search's candidates a row beyond k, taken by float32 distances and ordered by float64 ones
EXACT_MARGIN = 8
#: rows and columns of one product (a buffer a thread: 8 MB in float32): rows enough that each tile of columns is
#: read from memory once for them, columns few enough that the tile's distances are still in cache when ranked
_EXACT_BLOCK, _EXACT_TILE = 256, 8192
_HALF_BLOCK = 512  # points a block of the search's halved products (a 1 MB float32 tile)
_CHUNK = 4096  # points the product's sides are made from at a time
_PROBE = 256  # rows the exact search tries in float32 first, to learn whether a float32 pass pays
#: the searches ``neighbours=`` takes
NEIGHBOURS = ("auto", "exact", "approx", "pynndescent")
#: points from which ``"auto"`` searches approximately (2 cores, the kNN P of a tiny Mistral's 64-dimensional states,
#: k = 90: at 131072 points 29.1 s exact against 48-50 s approximate, after a 59 s compile in the worker; see
#: docs/long-texts.md and benchmarks/knn_recall.py. The exact search grows as n^2 and spreads over every core, the
#: approximate one needs its compile in each new kernel first: they cross near 262144 points on 2 cores, later on
#: more)
APPROX_MIN_POINTS = 262144
#: the search of a call that names none (``neighbours="auto"``): set ``settings.neighbours = "exact"`` to switch
settings = SimpleNamespace(neighbours="auto")


def check_neighbours(neighbours: Any) -> str:
    """``neighbours`` checked: one of :data:`NEIGHBOURS`, else a ValueError listing them."""
    if not isinstance(neighbours, str) or neighbours not in NEIGHBOURS:
        raise ValueError(f"neighbours must be one of {', '.join(map(repr, NEIGHBOURS))}; got {neighbours!r}")
    return neighbours


def _approximate(n: int, k: int, method: str | None) -> bool:
    """Whether ``method`` (None: ``settings.neighbours``) searches n points' k neighbours approximately."""
    method = check_neighbours(settings.neighbours if method is None else method)
    return method != "exact" and (method != "auto" or n >= APPROX_MIN_POINTS) and k < n - 1


def prepare(n: int, method: str | None = None) -> None:
    """Compile the approximate search ahead (in its worker, :mod:`.descent`) where a search of n points by
    ``method`` would take it; nothing otherwise. Returns at once."""
    if _approximate(n, 1, method):
        from .descent import warm_up

        warm_up()


def neighbours(X: np.ndarray, k: int, method: str | None = None, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The k nearest neighbours of every row of X (itself excluded) by ``method`` (module doc; None:
    ``settings.neighbours``): (indices (n, k) int64, squared euclidean distances (n, k) float64), nearest first."""
    if _approximate(X.shape[0], k, method):
        return approx_neighbours(X, k, seed=seed)
    return exact_neighbours(X, k)


def exact_neighbours(X: np.ndarray, k: int, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The exact k nearest neighbours of every row of X (itself excluded), or of the ``rows`` given: (indices
    (len(rows), k) int64, squared euclidean distances (len(rows), k) float64, summed from X's differences),
    nearest first, the lower index first among equal distances.

    O(n^2 d) time, in passes that each settle the rows they can. A pass in float32, then one in float64, takes
    each row's k + :data:`EXACT_MARGIN` nearest candidates by products (:func:`_candidates`) and orders them by
    their distances; a row is settled where the pass's rounding cannot have left out a point nearer than its k-th
    (:func:`_certain`). A row neither settles is searched from all its differences
    (:func:`.neighbour_kernels.nearest_by_differences`). At 65536 points of 64 dimensions on 2 cores: 10 s
    against 54 s for one float64 pass by torch (benchmarks/knn_recall.py), the same neighbours; at 131072, 29 s.

    Each pass's memory (:func:`exact_bytes`) is checked against the budget before it is allocated
    (``errors.MemoryBudgetError``, naming the approximate search), with the float64 copy of an X given in
    another dtype counted as held, and checked before it is made."""
    X = np.asarray(X)
    if not 0 <= k < X.shape[0]:
        raise ValueError(f"k must be in [0, {X.shape[0] - 1}] for {X.shape[0]} points, got {k}")
    queries = np.arange(X.shape[0]) if rows is None else np.asarray(rows, dtype=np.int64)
    copy = 0 if X.dtype == np.float64 else X.size * 8
    if k == 0:
        return np.empty((len(queries), 0), np.int64), np.empty((len(queries), 0))
    _check_budget(X, len(queries), k, np.float32, held=copy)
    X = np.asarray(X, dtype=np.float64)
    found = np.empty((len(queries), k), np.int64)
    distances = np.empty((len(queries), k))
    left = np.arange(len(queries))  # rows not settled yet
    for dtype in (np.float32, np.float64):
        _check_budget(X, len(left), k, dtype, held=copy + (len(queries) - len(left)) * k * 16)
        columns = _Columns(X, dtype)
        if dtype is np.float32 and not _pays(X, queries, k, columns):
            del columns  # before the float64 pass's
            continue
        settled, near, near_distances = _settle(X, queries[left], k, columns)
        del columns  # before the next pass's
        found[left[settled]], distances[left[settled]] = near, near_distances
        left = left[~settled]
        if not left.size:
            return found, distances
    points, rest = queries[left], np.empty((len(left), k), np.int64)
    in_shares(len(left), lambda lo, hi: nearest_by_differences(X, points, lo, hi, rest))
    found[left], distances[left] = _ordered(X, points, rest)
    return found, distances


def exact_bytes(n: int, d: int, queries: int, k: int, dtype: Any = np.float32) -> int:
    """Bytes one pass of :func:`exact_neighbours` in ``dtype`` may allocate for ``queries`` rows among n points of
    d dimensions (X itself not counted), all taken as held at once: the product's sides, a chunk of centred rows
    twice, the threads' product buffers, the candidates' heaps (columns and values), their ordered copy with float64
    distances, the rows settled and the results. tests/test_budget.py measures the peak against it."""
    size, s = np.dtype(dtype).itemsize, min(n - 1, k + EXACT_MARGIN)
    sides = (n + queries) * (d + 2) * size + 8 * n + 16 * _CHUNK * d
    tile = _HALF_BLOCK**2 if _halves(n, queries) else _EXACT_BLOCK * _EXACT_TILE
    return sides + threads() * tile * size + queries * s * (8 + size + 16) + queries * k * 32


def _check_budget(X: np.ndarray, queries: int, k: int, dtype: Any, held: int) -> None:
    """``errors.MemoryBudgetError`` before a pass in ``dtype`` for ``queries`` rows would outgrow the budget, with
    ``held`` bytes of the rows settled before it still held."""
    n, d = X.shape
    within_budget(
        exact_bytes(n, d, queries, k, dtype) + held,
        f"the exact {k}-nearest-neighbour search of {n:,} points of {d} dimensions would",
        "neighbours='approx' (headsne_widget.affinity.neighbours.settings.neighbours = 'approx'), fewer tokens "
        "(max_tokens=)",
    )


def _pays(X: np.ndarray, queries: np.ndarray, k: int, columns: _Columns) -> bool:
    """Whether a float32 pass pays: unless float32 settles under half of a probe of :data:`_PROBE` rows spread
    over the queries (then float64 alone: a float32 pass costs about half a float64 one, so it pays only where it
    settles more than half the rows). On a 2048-dimensional random walk it settled 41 % of the rows: both passes
    took 1.3-1.4x cbce62d's float64 search, float64 alone 0.96x. On real states float32 settles every row."""
    if len(queries) < 4 * _PROBE:
        return True
    probe = np.ascontiguousarray(queries[:: len(queries) // _PROBE][:_PROBE])  # as the kernels were compiled for
    return bool(_settle(X, probe, k, columns)[0].mean() >= 0.5)


def _settle(X: np.ndarray, queries: np.ndarray, k: int, columns: _Columns) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One pass of :func:`exact_neighbours` over the query points against ``columns`` (the pass's dtype): which
    rows it settles (mask), and their neighbours and distances."""
    n = X.shape[0]
    candidates, top = _candidates(columns.rows(X, queries), queries, min(n - 1, k + EXACT_MARGIN), columns)
    candidates, near = _ordered(X, queries, candidates)
    settled = np.asarray((candidates >= 0).all(axis=1))
    if candidates.shape[1] < n - 1:  # where every other point is a candidate, none was left out
        eps = float(np.finfo(columns.side.dtype).eps)
        settled &= _certain(columns.squared_norms[queries] / columns.unit**2, near[:, k - 1], top, X.shape[1], eps)
    return settled, candidates[settled, :k], near[settled, :k]


def _ordered(X: np.ndarray, queries: np.ndarray, found: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``found`` (a row of neighbour indices a query point) ordered by their squared distances from X's
    differences, nearest first and the lower index first among equals, and those distances
    (:func:`.neighbour_kernels.ordered_distances`, on the package's threads)."""
    ordered, distances = np.empty_like(found), np.empty(found.shape)
    in_shares(len(queries), lambda lo, hi: ordered_distances(X, queries, found, lo, hi, ordered, distances))
    return ordered, distances


def _candidates(
    rows_with_norms: np.ndarray, queries: np.ndarray, s: int, columns: _Columns
) -> tuple[np.ndarray, np.ndarray]:
    """For each query point (its row of the product, ``rows_with_norms``, in the columns' dtype): the s other
    points nearest by the product's squared distances (indices (q, s), any order) and the largest of those
    distances (q,), in X's units. Every point: from half the products (:func:`_halved`) where that pays
    (:func:`_symmetric`). Otherwise blocks of :data:`_EXACT_BLOCK` rows against tiles of :data:`_EXACT_TILE`
    columns, each one BLAS product (``[x, |x|^2, 1] . [-2y, 1, |y|^2]``), in shares on the package's threads,
    one BLAS thread each. A block meets its own tile first: where points near in position are near in space (a
    random walk; a text's states share their neighbours' context), its heaps start low and few later entries
    pass them (``benchmarks/knn_recall.py --walk 64``, 65536 points: 8.4 s against 16.0 s in index order; the
    tiny Mistral's states 7.2 s either way)."""
    side, dtype = columns.side, columns.side.dtype
    n = side.shape[1]
    if _symmetric(queries, n):
        return _halved(rows_with_norms, s, columns)
    found = np.full((len(queries), s), -1, np.int64)
    heaps: np.ndarray = np.full((len(queries), s), np.inf, dtype)

    def part(lo: int, hi: int) -> None:
        D: np.ndarray = np.empty((_EXACT_BLOCK, _EXACT_TILE), dtype)
        for r in range(lo, hi, _EXACT_BLOCK):
            at = slice(r, min(hi, r + _EXACT_BLOCK))
            block, m = rows_with_norms[at], min(hi, r + _EXACT_BLOCK) - r
            own = int(queries[r]) // _EXACT_TILE * _EXACT_TILE
            for first in chain(range(own, n, _EXACT_TILE), range(0, own, _EXACT_TILE)):
                width = min(_EXACT_TILE, n - first)
                np.matmul(block, side[:, first : first + width], out=D[:m, :width])
                smallest(D, m, width, first, queries[at], found[at], heaps[at])

    with one_blas_thread():
        in_shares(len(queries), part, count=max(1, min(64, len(queries) // _EXACT_BLOCK)), multiple=_EXACT_BLOCK)
    return found, heaps[:, 0].astype(np.float64) / columns.unit**2


def _halves(n: int, queries: int) -> bool:
    """Whether a search of ``queries`` rows among n points may take :func:`_halved`: every point, in blocks enough
    that each round gives every thread two pairs."""
    return queries == n and -(-n // _HALF_BLOCK) // 2 >= 2 * threads()


def _symmetric(queries: np.ndarray, n: int) -> bool:
    """Whether :func:`_halved` searches these queries: all n points in order, where it may (:func:`_halves`)."""
    return _halves(n, len(queries)) and bool((queries == np.arange(n)).all())


def _halved(rows_with_norms: np.ndarray, s: int, columns: _Columns) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_candidates` of every point, from half the products: blocks of :data:`_HALF_BLOCK` points, each pair
    of blocks one product whose tile feeds the heaps of both (:func:`.neighbour_kernels.smallest_both`). In rounds
    in which each block is in one pair (a round-robin tournament's, each block's own pair first): no heap is fed by
    two threads at once, and each in the same order whatever the threads."""
    side, dtype, b = columns.side, columns.side.dtype, _HALF_BLOCK
    n = side.shape[1]
    found = np.full((n, s), -1, np.int64)
    heaps: np.ndarray = np.full((n, s), np.inf, dtype)
    own, buffers = np.arange(n), dict[int, np.ndarray]()  # a tile a thread

    def pair(one: int, other: int) -> None:
        D = buffers.get(threading.get_ident())
        if D is None:
            D = buffers[threading.get_ident()] = np.empty((b, b), dtype)
        i, j = slice(one * b, min(n, one * b + b)), slice(other * b, min(n, other * b + b))
        m, w = i.stop - i.start, j.stop - j.start
        np.matmul(rows_with_norms[i], side[:, j], out=D[:m, :w])
        if one == other:
            smallest(D, m, w, j.start, own[i], found[i], heaps[i])
        else:
            smallest_both(D, m, w, i.start, j.start, found[i], heaps[i], found[j], heaps[j])

    with one_blas_thread():
        for pairs in _rounds(-(-n // b)):
            shares(len(pairs), lambda t: pair(*pairs[t]))  # noqa: B023 - each round waits for its pairs
    return found, heaps[:, 0].astype(np.float64) / columns.unit**2


def _rounds(blocks: int) -> list[list[tuple[int, int]]]:
    """Every pair of blocks (I <= J) once, in rounds in which no block is in two pairs: each block with itself,
    then the circle method's rounds of a round-robin tournament."""
    rounds = [[(i, i) for i in range(blocks)]]
    ids: list[int | None] = [*range(blocks), *([None] if blocks % 2 else [])]
    for _ in range(len(ids) - 1):
        pairs = zip(ids[: len(ids) // 2], reversed(ids[len(ids) // 2 :]))
        rounds.append([(min(a, b), max(a, b)) for a, b in pairs if a is not None and b is not None])
        ids = [ids[0], ids[-1], *ids[1:-1]]
    return rounds


class _Columns:
    """The product's column side in ``dtype``: ``[-2y, 1, |y|^2]`` (d + 2, n) of the points centred and scaled by a
    power of two (``unit``, exact: the largest coordinate within [0.5, 1), so that no square overflows or
    underflows), and their squared norms (float64, in those units). Made a chunk of points at a time: no centred
    float64 copy of X (at 65536 points of 4096 dimensions, 2 GiB). :meth:`rows` makes the row side."""

    def __init__(self, X: np.ndarray, dtype: Any, chunk: int = _CHUNK) -> None:
        n, d = X.shape
        self.mean, self.chunk = X.mean(axis=0), chunk
        spread = spread_about(X, self.mean, chunk)
        self.unit = 2.0 ** -float(np.frexp(spread)[1]) if spread > 0 else 1.0
        self.side: np.ndarray = np.empty((d + 2, n), dtype)
        self.squared_norms = np.empty(n)
        for r in range(0, n, chunk):
            Y = (X[r : r + chunk] - self.mean) * self.unit
            at = slice(r, r + len(Y))
            self.squared_norms[at] = np.einsum("ij,ij->i", Y, Y)
            Y *= -2.0
            self.side[:d, at], self.side[d, at], self.side[d + 1, at] = Y.T, 1.0, self.squared_norms[at]

    def rows(self, X: np.ndarray, points: np.ndarray) -> np.ndarray:
        """The row side ``[x, |x|^2, 1]`` (len(points), d + 2) of X's rows ``points``, as the columns are made."""
        d = X.shape[1]
        out: np.ndarray = np.empty((len(points), d + 2), self.side.dtype)
        for r in range(0, len(points), self.chunk):
            at = slice(r, min(len(points), r + self.chunk))
            out[at, :d] = (X[points[at]] - self.mean) * self.unit
            out[at, d], out[at, d + 1] = self.squared_norms[points[at]], 1.0
        return out


def spread_about(X: np.ndarray, mean: np.ndarray, chunk: int = _CHUNK) -> float:
    """The largest coordinate of X about ``mean``, in absolute value, found a chunk of rows at a time (no n x d
    temporary: at 65536 points of 4096 dimensions each is 2 GiB in float64)."""
    return max((float(np.abs(X[r : r + chunk] - mean).max()) for r in range(0, len(X), chunk)), default=0.0)


def _certain(squared_norms: np.ndarray, kth: np.ndarray, top: np.ndarray, d: int, eps: float) -> np.ndarray:
    """Whether each row's k-th distance ``kth`` is below every point a pass left out, which were all at computed
    distance ``top`` or more (centred points of d dimensions, their squared norms given; ``eps``: the pass's
    machine epsilon).

    A squared distance of x and y computed by the pass is within ``kappa (|x| + |y|)^2`` of the true one, kappa =
    (d + 8) eps (the product's d + 2 terms, of sizes adding up to at most ``(|x| + |y|)^2``, rounded on the way in
    and summed: twice the textbook bound). A point y left out but nearer than the k-th has ``|y| <= |x| +
    sqrt(kth)``, so its true distance is at least ``top - kappa (2 |x| + sqrt(kth))^2``: the row is certain where
    that is above ``kth``."""
    kappa = (d + 8) * eps
    reach = 2.0 * np.sqrt(squared_norms) + np.sqrt(kth)
    return np.asarray(top - kappa * reach * reach > kth)


def approx_neighbours(X: np.ndarray, k: int, *, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """About the k nearest neighbours of every row of X (itself excluded), by nearest-neighbour descent
    (pynndescent with k + 1 neighbours, openTSNE's trees and iterations for n points, in its worker process:
    :mod:`.descent`), as :func:`exact_neighbours` returns them: the squared distances computed again in float64,
    nearest first. Where the search did not return a point itself among its k + 1, its farthest is dropped
    instead; a row it found fewer than k neighbours for is searched exactly."""
    from .descent import search

    Xc = np.asarray(X, dtype=np.float64)
    Xc = Xc - Xc.mean(axis=0)
    n = Xc.shape[0]
    graph = search(Xc, k + 1, seed)
    found = _without_self(graph, k)
    found, distances = _ordered(Xc, np.arange(n), found)
    short = np.flatnonzero((found < 0).any(axis=1))
    if short.size:
        found[short], distances[short] = exact_neighbours(X, k, rows=short)
    return found, distances


def _without_self(found: np.ndarray, k: int) -> np.ndarray:
    """(n, k) of the (n, k + 1) candidates: each row's own index removed, or its last where it is absent."""
    n = found.shape[0]
    own = found == np.arange(n)[:, None]
    drop = np.where(own.any(axis=1), own.argmax(axis=1), k)
    keep = np.ones_like(found, dtype=bool)
    keep[np.arange(n), drop] = False
    return found[keep].reshape(n, k)
