"""The sense labels of :func:`.contexts.word_contexts`'s occurrences and Coenen et al.'s concatenated-sentence ratio,
which runs more texts (the tasks per text are ``capture.occurrences``'s).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from ..capture.occurrences import occurrence_states, token_span

__all__ = ["check_labels", "concatenation_ratio"]


def check_labels(labels: Iterable[Any], m: int, word: str) -> tuple[np.ndarray, np.ndarray]:
    """(codes (m,), senses): one label per occurrence, at least 2 senses, each on at least 2 occurrences."""
    if isinstance(labels, (str, bytes)):
        raise TypeError("labels must be one label per occurrence (a list or array), not one string")
    values = np.asarray(list(labels), dtype=object)
    if values.shape != (m,):
        raise ValueError(f"labels has {values.size} entries but {word!r} has {m} occurrences: give one label each")
    senses, codes = np.unique(values.astype(str), return_inverse=True)
    counts = np.bincount(codes, minlength=len(senses))
    if len(senses) < 2 or counts.min() < 2:
        raise ValueError(
            f"a leave-one-out centroid needs at least 2 senses with at least 2 occurrences each; the labels give "
            f"{dict(zip(senses.tolist(), counts.tolist()))}"
        )
    return codes, senses


# ---------------------------------------------------------------------------------------- in-process


# ------------------------------------------------------------------------------ concatenated sentences


def concatenation_ratio(ctx: Any, labels: Any, *, seed: int = 0, progress: bool = False) -> pd.DataFrame:
    """Coenen et al.'s concatenated-sentence experiment, per layer.

    For each occurrence i (sense a), its sentence A is run alone and as "A B", B the sentence of an occurrence
    of another sense drawn at random (``seed``); the word's vector in A is compared with two centroids of the
    word's vectors in ``ctx``: its own sense's (without i) and B's sense's. The ratio
    ``cos(v, other centroid) / cos(v, own centroid)`` is averaged over the occurrences: ``alone`` for v from A
    alone, ``concatenated`` for v from "A B". Context pulls the word towards B's sense where ``concatenated``
    exceeds ``alone`` (the slides' Figure 5 plots the same comparison, as similarity to A's sense vs B's).
    """
    codes, _ = check_labels(labels, len(ctx.occurrences), ctx.word)
    rng = np.random.default_rng(seed)
    partners = np.array([rng.choice(np.flatnonzero(codes != c)) for c in codes])
    alone = _sentence_states(ctx, [None] * len(codes), progress)
    joined = _sentence_states(ctx, list(partners), progress)
    rows = []
    for layer in range(ctx.layers):
        own, other = _centroids(ctx.states[:, layer].astype(np.float64), codes, partners)
        rows.append((layer, _ratio(alone[:, layer], own, other), _ratio(joined[:, layer], own, other)))
    return pd.DataFrame(rows, columns=["layer", "alone", "concatenated"])


def _sentence_states(ctx: Any, partners: list[Any], progress: bool) -> np.ndarray:
    """(m, L + 1, d): each occurrence's vector in its sentence alone (partner None) or followed by the partner's."""
    from ..capture.extraction import load_model
    from .workers import progress_bar

    loaded = load_model(ctx.model)
    occ = ctx.occurrences
    out = []
    with progress_bar(len(occ), 0, progress) as bar:
        for i, j in enumerate(partners):
            text = occ["sentence"].iat[i] + ("" if j is None else " " + occ["sentence"].iat[j])
            start = int(occ["start"].iat[i] - occ["sentence_start"].iat[i])
            enc = loaded.tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True)
            offsets = [None if s else tuple(o) for o, s in zip(enc["offset_mapping"], enc["special_tokens_mask"])]
            span = token_span(offsets, start, start + int(occ["end"].iat[i] - occ["start"].iat[i]))
            if span is None:  # the word was found in these tokens once: only a changed tokenizer gets here
                raise RuntimeError(f"occurrence {i} of {ctx.word!r} is no longer found in its sentence")
            job = (np.asarray(enc["input_ids"], dtype=np.int64), [span])
            out.append(occurrence_states(i, job, loaded, term=ctx.term)[0]["states"])
            bar.update()
    return np.stack(out).astype(np.float64)


def _centroids(X: np.ndarray, codes: np.ndarray, partners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(m, d) each row's own sense centroid without it, and its partner's sense centroid."""
    senses = int(codes.max()) + 1
    counts = np.bincount(codes, minlength=senses).astype(np.float64)
    sums = np.zeros((senses, X.shape[1]))
    np.add.at(sums, codes, X)
    own = (sums[codes] - X) / (counts[codes] - 1)[:, None]
    other = sums[codes[partners]] / counts[codes[partners]][:, None]
    return own, other


def _ratio(V: np.ndarray, own: np.ndarray, other: np.ndarray) -> float:
    """Mean over rows of cos(v, other) / cos(v, own)."""

    def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.einsum("md,md->m", a, b) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))

    return float(np.mean(cosine(V, other) / cosine(V, own)))
