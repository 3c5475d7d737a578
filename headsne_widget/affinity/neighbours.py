"""The k nearest neighbours of hidden states, exact or approximate (issue 31): the kNN Gaussian P's search.

``neighbours=`` chooses the search, named as openTSNE's ``neighbors=``:

- ``"exact"``: :func:`exact_neighbours`, blocks of rows against all rows (one matrix product and ``torch.topk``
  each): O(n^2 d) time, the true neighbours;
- ``"approx"`` (or ``"pynndescent"``): :func:`approx_neighbours`, nearest-neighbour descent (pynndescent, what
  openTSNE uses by default above a few thousand points), O(n log n)-ish; the squared distances of the
  neighbours it finds are computed again here in float64, so an approximate P differs from the exact one only
  where a true neighbour was missed;
- ``"auto"`` (the default): approximate from :data:`APPROX_MIN_POINTS` points on, exact below.

The search a call without ``neighbours=`` takes (the widget's hidden mode) is :data:`settings`'s ``neighbours``:
``headsne_widget.affinity.neighbours.settings.neighbours = "exact"`` switches every later kNN P to the exact
search.

pynndescent compiles its numba code on its first search in a process (35-45 s on 2 cores; numba cannot cache
its descent), so the search runs in a worker process of its own (:mod:`.descent`), which :func:`prepare`
compiles ahead when a text is long enough for the approximate search: the widget calls it on opening one.

Measured (``benchmarks/knn_recall.py``, 2 cores): see docs/long-texts.md for the recall against the exact
neighbours and the times that set :data:`APPROX_MIN_POINTS`.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from .._parallel import in_shares
from .neighbour_kernels import squared_distances

__all__ = [
    "APPROX_MIN_POINTS",
    "NEIGHBOURS",
    "approx_neighbours",
    "check_neighbours",
    "exact_neighbours",
    "neighbours",
    "prepare",
    "settings",
]

#: the searches ``neighbours=`` takes
NEIGHBOURS = ("auto", "exact", "approx", "pynndescent")
#: points from which ``"auto"`` searches approximately (benchmarks/knn_recall.py on 2 cores: at 16384 points the
#: two took the same time, 2.8 and 3.0 s; at 65536 the exact search 4.3x the approximate; below, the exact search
#: needs no compilation)
APPROX_MIN_POINTS = 32768
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


def exact_neighbours(
    X: np.ndarray, k: int, block: int = 1024, rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The exact k nearest neighbours of every row of X (itself excluded), or of the ``rows`` given: (indices
    (n, k) int64, squared euclidean distances (n, k) float64), nearest first. Blocks of rows against all rows by
    one matrix product each and ``torch.topk`` (O(n^2 d) time, O(block n) memory; in torch rather than numpy's
    argpartition: 2.1x faster at 16384 points of 64 dimensions, 2.3 against 5.0 s, the same neighbours)."""
    import torch

    Xc = np.asarray(X, dtype=np.float64)
    T = torch.from_numpy(Xc - Xc.mean(axis=0))  # the expansion |x|^2 + |y|^2 - 2 x.y cancels less about the centre
    norms = (T * T).sum(dim=1)
    queries = torch.arange(Xc.shape[0]) if rows is None else torch.from_numpy(np.asarray(rows, np.int64))
    indices = np.empty((len(queries), k), np.int64)
    distances = np.empty((len(queries), k))
    for lo in range(0, len(queries), block):
        at = queries[lo : lo + block]
        D = torch.addmm(norms[at, None] + norms[None, :], T[at], T.T, alpha=-2.0).clamp_(min=0.0)
        D[torch.arange(len(at)), at] = torch.inf  # not its own neighbour
        d, nearest = torch.topk(D, k, dim=1, largest=False, sorted=True)
        indices[lo : lo + len(at)], distances[lo : lo + len(at)] = nearest.numpy(), d.numpy()
    return indices, distances


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
    distances = np.empty(found.shape)
    in_shares(n, lambda lo, hi: squared_distances(Xc, found, lo, hi, distances))
    order = np.argsort(distances, axis=1, kind="stable")
    found, distances = np.take_along_axis(found, order, axis=1), np.take_along_axis(distances, order, axis=1)
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
