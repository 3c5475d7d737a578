"""What background work takes from the embedding stage: a frame stream closed with its ``with`` block, and the
process-wide warm-up of the compiled kernels (so that a first click does not wait for numba)."""

from __future__ import annotations

import contextlib
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
    except Exception as err:  # only an optimisation: the run itself reports real failures
        warnings.warn(f"t-SNE warm-up failed ({err}); the first run compiles instead", RuntimeWarning, stacklevel=2)


def start_warmup() -> threading.Thread:
    """Compile (or load from numba's cache) the t-SNE kernels once per process, in the background, so that the
    first click does not wait for them (a process-wide thread, not a widget's job: it holds no widget state)."""
    global _warmup_thread
    with _warmup_lock:
        if _warmup_thread is None:
            _warmup_thread = threading.Thread(target=_warm, name="headsne-warmup", daemon=True)
            _warmup_thread.start()
        return _warmup_thread
