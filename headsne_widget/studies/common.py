"""What every study shares: the seeds that make each row reproducible, the batched t-SNE runs that give
the KLs, the warning of an interrupted study, and the model, captures and P a study works on."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from ..affinity.selection import selection_affinities

if TYPE_CHECKING:
    from ..capture.extraction import Extraction

__all__ = [
    "extract_ids",
    "extract_text",
    "interrupted",
    "load",
    "selection_P",
    "study_seed",
    "tsne_kl_chunks",
    "tsne_kls",
]

#: Largest R * n * n handed to one batched t-SNE call (about 160 MB of float64 per working array).
MAX_BATCH_ELEMENTS = 20_000_000


def study_seed(*keys: int) -> int:
    """A 32-bit seed determined by ``keys``: independent streams for every (study seed, layer, head, ...).

    ``kl_by_layer`` runs head h of layer l as ``tsne(P, restarts=runs, seed=study_seed(study_seed(seed, l, h),
    0))`` and layer l's hidden states with ``study_seed(seed, l, H)`` in place of the inner seed, so any row can
    be recomputed with a direct ``tsne`` call (batches of restarts start at ``study_seed(task_seed, start)``).
    """
    return int(np.random.SeedSequence([int(k) for k in keys]).generate_state(1)[0])


def interrupted(what: str, done: int, total: int) -> None:
    """Warn that a study was interrupted (Ctrl-C) and returns what finished."""
    warnings.warn(f"interrupted: returning the {what} finished so far ({done}/{total})", RuntimeWarning, stacklevel=3)


def tsne_kl_chunks(P: np.ndarray, restarts: int, n_iter: int, seed: int) -> Iterator[np.ndarray]:
    """Final exact KLs of ``restarts`` batched t-SNE runs on ``P``, chunk by chunk (for progress)."""
    from ..embedding.tsne import tsne

    n = P.shape[0]
    chunk = max(1, MAX_BATCH_ELEMENTS // (n * n))
    for start in range(0, restarts, chunk):
        r = min(chunk, restarts - start)
        res = tsne(P, n_iter=n_iter, restarts=r, seed=study_seed(seed, start))
        yield np.asarray(res.kls, dtype=np.float64).reshape(r)


def tsne_kls(P: np.ndarray, restarts: int, n_iter: int, seed: int) -> np.ndarray:
    """Final exact KL of each of ``restarts`` batched t-SNE runs on ``P``, shape (restarts,)."""
    return np.concatenate(list(tsne_kl_chunks(P, restarts, n_iter, seed)))


def load(model: Any) -> Any:
    """The model, through the cached :func:`~headsne_widget.capture.extraction.load_model` (capture is imported on
    first use)."""
    from ..capture.extraction import load_model

    return load_model(model)


def extract_text(text: str, loaded: Any) -> Any:
    """The :class:`~headsne_widget.Extraction` of ``text``."""
    from ..capture.extraction import extract

    return extract(text, loaded)


def extract_ids(token_ids: np.ndarray, loaded: Any) -> Any:
    """The :class:`~headsne_widget.Extraction` of token ids (a disturbed text)."""
    from ..capture.extraction import extract_token_ids

    return extract_token_ids(token_ids, loaded)


def selection_P(
    ex: Extraction, method: str, layer: int, head: int, perplexity: float
) -> tuple[np.ndarray, float | None]:
    """P of a head ("attention") or of the layer's output hidden states ("hidden"), and the perplexity used."""
    sel = selection_affinities(ex, method, layer, head, perplexity=perplexity)
    if sel.note:
        warnings.warn(sel.note, UserWarning, stacklevel=3)
    return sel.P, sel.perplexity
