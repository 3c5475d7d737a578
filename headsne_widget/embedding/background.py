"""What background work takes from the embedding stage: a frame stream closed with its ``with`` block, and the
process-wide warm-up of the compiled kernels (so that a first click does not wait for numba)."""

from __future__ import annotations

import contextlib
import sys
import threading
import warnings
from collections.abc import Generator
from typing import Any, cast

import numpy as np

from .tsne import Frame, tsne_frames, warmup

__all__ = ["closing_frames", "start_warmup"]


def closing_frames(P: Any, **options: Any) -> contextlib.closing[Generator[Frame, None, None]]:
    """``tsne_frames(P, **options)`` closed at the end of a ``with`` block (its optimisation stops there)."""
    return contextlib.closing(cast(Generator[Frame, None, None], tsne_frames(P, **options)))


_warmup_lock = threading.Lock()
_warmup_thread: threading.Thread | None = None


def _warm() -> None:
    try:
        warmup()
        from ..affinity.sparse import SparseAffinities, permuted, symmetric_P_arrays  # a long text's P (numba)

        indptr, indices = np.array([0, 1, 1], np.int64), np.ones(1, np.int32)  # M = [[0, 1], [0, 0]]
        for dtype in (np.float32, np.float64):  # (a head's rows are float32, a kNN P's float64)
            for out in (np.float32, np.float64):
                symmetric_P_arrays(indptr, indices, np.ones(1, dtype), 2, np.dtype(out))
            permuted(SparseAffinities(indptr, indices, np.ones(1, dtype)), np.array([1, 0], np.int64))
        from ..capture.sparse import top_mass  # a long text's rows (float32): 10 s to compile at a fresh install

        top_mass(np.full((2, 2), 0.5, np.float32), 0.9, None)
        _warm_sparse_engine()
        from ..affinity.affinities import gaussian_affinities  # a source of points' P: distances, the search
        from ..capture.norm_kernels import weigh_rows  # value-weighted attention's rows

        gaussian_affinities(np.eye(4), 1.0, dtype=np.float32)
        weigh_rows(np.ones((2, 2), np.float32), np.ones(2, np.float32), 0, 2)
        _warm_exact_search()
    except Exception as err:  # only an optimisation: the run itself reports real failures
        if sys.is_finalizing() or "interpreter shutdown" in str(err):  # the process is ending: nothing will run
            return
        warnings.warn(f"t-SNE warm-up failed ({err}); the first run compiles instead", RuntimeWarning, stacklevel=2)


def _warm_exact_search() -> None:
    """The exact nearest-neighbour search's kernels (a long text's hidden mode): its float32 and float64 passes'
    top-k (one way and both ways), the candidates' distances, and its last resort, each for the arrays the search
    hands them."""
    from ..affinity.neighbour_kernels import nearest_by_differences, ordered_distances, smallest, smallest_both

    one, X = np.zeros(1, np.int64), np.eye(2)
    for dtype in (np.float32, np.float64):
        found, heap = np.zeros((1, 1), np.int64), np.full((1, 1), np.inf, dtype)
        smallest(np.zeros((1, 2), dtype), 1, 2, 0, one, found, heap)
        smallest_both(np.zeros((1, 1), dtype), 1, 1, 0, 1, found, heap, found.copy(), heap.copy())
    ordered_distances(X, one, np.ones((1, 1), np.int64), 0, 1, np.zeros((1, 1), np.int64), np.zeros((1, 1)))
    nearest_by_differences(X, one, 0, 1, np.zeros((1, 1), np.int64))


def _warm_sparse_engine() -> None:
    """A few iterations on a tiny sparse P, as a long text's run takes them (float32 P, exact KL at the end): the
    sparse engine's kernels, 3-4 s to compile at a fresh install, which a long text's first frame waited for."""
    import scipy.sparse as sp

    n = 12
    ring = np.zeros((n, n), np.float32)
    for i in range(n):
        ring[i, (i + 1) % n] = ring[(i + 1) % n, i] = 1.0
    with closing_frames(sp.csr_array(ring / ring.sum()), n_iter=3, every=1, check_input=False) as frames:
        for _ in frames:
            pass
    from . import interpolation_kernels as ik  # points outside the grid (none in the ring's runs)
    from .interpolation import Repulsion  # the split grid's near field (a wide embedding's, after exaggeration)

    line = np.linspace(0.0, 40.0, 16, dtype=np.float32)
    Repulsion(16, mode="split")(line, line[::-1].copy(), np.empty((2, 16), np.float32), np.empty(16))

    x, none = np.zeros(1, np.float32), np.zeros(0, np.int64)
    ik.nodes_from_points(x, x, none, 0.0, 0.0, 0.0, 0.0, 1.0, np.zeros((ik.TERMS, 1, 1), np.float32))
    charges, out = np.zeros((ik.CHARGES, 1, 1)), np.zeros((1, 2), np.float32)
    ik.outside_part(x, x, none, 0.0, 0.0, 0.0, 0.0, 1.0, charges, out, np.zeros(1), 0, 0)


def start_warmup() -> threading.Thread:
    """Compile (or load from numba's cache) the t-SNE kernels once per process, in the background, so that the
    first click does not wait for them (a process-wide thread, not a widget's job: it holds no widget state)."""
    global _warmup_thread
    with _warmup_lock:
        if _warmup_thread is None:
            _warmup_thread = threading.Thread(target=_warm, name="headsne-warmup", daemon=True)
            _warmup_thread.start()
        return _warmup_thread
