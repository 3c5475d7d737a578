"""The head atlas: a small t-SNE of every head of a layer, to compare all heads at a glance, and the
best-of-restarts check that tells whether the run on screen is a good one.

:func:`head_atlas` is the pure computation (array out); :class:`BackgroundJob` runs such work in a
cancellable daemon thread, one job at a time, so the widget's main run is never blocked by it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..affinity.selection import selection_affinities
from ..embedding.tsne import tsne, tsne_frames

__all__ = [
    "ATLAS_N_ITER",
    "BEST_OF",
    "Atlas",
    "BackgroundJob",
    "SideJobs",
    "head_atlas",
    "head_atlas_steps",
]

#: iterations of each atlas thumbnail: enough for the structure, a fraction of a full run
ATLAS_N_ITER = 300
#: restarts of the best-of check; 10 restarts at n = 271 cost 1.5 s (thesis abstract, MiniLM)
BEST_OF = 10
#: above this many tokens one restart takes seconds: no best-of check
BEST_CHECK_MAX_TOKENS = 2048


@dataclass(frozen=True, eq=False)
class Atlas:
    """Per head of one layer: an embedding (H, m, 2) over the tokens ``kept`` and its exact KL (H,)."""

    layer: int
    embeddings: np.ndarray
    kls: np.ndarray
    kept: np.ndarray


def head_atlas_steps(
    ex: Any, layer: int, *, n_iter: int = ATLAS_N_ITER, seed: int = 0, exclude_special: bool = False
) -> Iterator[tuple[int, np.ndarray, float, np.ndarray]]:
    """Yield (head, embedding, KL, kept) for each head of ``layer`` in turn: the atlas, one head at a time."""
    for head in range(ex.n_heads):
        sel = selection_affinities(ex, "attention", layer, head, exclude_special=exclude_special)
        res = tsne(sel.P, n_iter=n_iter, seed=seed)
        yield head, np.asarray(res.embedding, dtype=np.float32), float(res.kl), sel.kept


def head_atlas(
    ex: Any, layer: int, *, n_iter: int = ATLAS_N_ITER, seed: int = 0, exclude_special: bool = False
) -> Atlas:
    """A small attention-head t-SNE of every head of ``layer`` (same seed and settings for each)."""
    steps = list(head_atlas_steps(ex, layer, n_iter=n_iter, seed=seed, exclude_special=exclude_special))
    return Atlas(layer, np.stack([s[1] for s in steps]), np.array([s[2] for s in steps]), steps[0][3])


def _final_kls(P: np.ndarray, seeds: list[int], options: dict[str, Any]) -> Iterator[float | None]:
    """Each seed's final exact KL, with a None every 50 iterations so a cancel never waits for a whole run."""
    for seed in seeds:
        last = None
        for last in tsne_frames(P, seed=seed, every=50, **options):  # noqa: B007 (the last frame is kept)
            yield None
        if last is None:
            yield None
            continue
        assert last.kl is not None  # the last frame always has its KL
        yield float(last.kl)


class BackgroundJob:
    """One cancellable background computation at a time (a new one cancels the previous)."""

    def __init__(self) -> None:
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, steps: Iterator[Any], on_step: Callable[[Any], None], on_end: Callable[[str], None]) -> None:
        """Consume ``steps`` in a thread, calling ``on_step`` for each and ``on_end("done" | "error")``."""
        self.cancel(wait=False)  # its thread stops at its next step; it may be waiting for its owner's lock
        cancel = self._cancel = threading.Event()

        def work() -> None:
            try:
                for step in steps:
                    if cancel.is_set():
                        return
                    on_step(step)
            except Exception:  # the main run reports real failures; a side job only stops
                if not cancel.is_set():
                    on_end("error")
                return
            if not cancel.is_set():
                on_end("done")

        self._thread = threading.Thread(target=work, name="headsne-job", daemon=True)
        self._thread.start()

    def cancel(self, wait: bool = True) -> None:
        """Stop the job at its next step; with ``wait``, join its thread."""
        self._cancel.set()
        thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


class SideJobs:
    """A widget's two side jobs: the head atlas and the best-of-restarts check after each run.

    ``publish(**traits)`` sets the widget's traits; ``current_run()`` gives its run id, so a check that
    finishes after the selection changed is dropped.
    """

    def __init__(self, publish: Callable[..., None], current_run: Callable[[], int]) -> None:
        self._publish, self._current_run = publish, current_run
        self._atlas, self._best = BackgroundJob(), BackgroundJob()

    def atlas(self, ex: Any, layer: int, *, n_iter: int, seed: int, exclude_special: bool) -> None:
        steps = head_atlas_steps(ex, layer, n_iter=n_iter, seed=seed, exclude_special=exclude_special)
        m = ex.n_tokens - (int(np.sum(ex.special)) if exclude_special else 0)
        embeddings, kls = np.zeros((ex.n_heads, m, 2), np.float32), np.zeros(ex.n_heads, np.float32)

        def on_step(step: tuple) -> None:
            head, Y, kl, _ = step
            embeddings[head], kls[head] = Y, kl
            self._publish(atlas=embeddings, atlas_kl=kls, atlas_progress=head + 1)

        self._publish(atlas=None, atlas_kl=None, atlas_progress=0, atlas_state="running")
        self._atlas.start(steps, on_step, lambda state: self._publish(atlas_state=state))

    def stop_atlas(self) -> None:
        self._atlas.cancel()
        self._publish(atlas_state="idle")

    def best(self, P: np.ndarray, options: dict[str, Any], kl: float, run_id: int) -> None:
        """``best_kl`` = the lowest KL of the run and ``BEST_OF`` restarts with other seeds, one at a time."""
        if len(P) > BEST_CHECK_MAX_TOKENS:
            return
        keys = ("n_iter", "learning_rate", "early_exaggeration", "exaggeration_iters")
        opts = {k: options[k] for k in keys}
        seeds = [options["seed"] + 1 + r for r in range(BEST_OF)]
        best = [kl]

        def on_step(other: float | None) -> None:  # None: a restart in progress (a point to cancel at)
            if other is not None:
                best.append(other)
                if self._current_run() == run_id:
                    self._publish(best_kl=min(best))

        self._best.start(_final_kls(P, seeds, opts), on_step, lambda state: None)

    def cancel_best(self) -> None:
        self._best.cancel(wait=False)
        self._publish(best_kl=None)

    def close(self) -> None:
        self._atlas.cancel()
        self._best.cancel()
