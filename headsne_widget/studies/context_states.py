"""What :func:`.contexts.word_contexts` computes per text (one task: the vectors of a word's occurrences at every
layer, pooled over its pieces) and Coenen et al.'s concatenated-sentence ratio, which runs more texts.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np
import pandas as pd
import torch

__all__ = ["TERMS", "check_labels", "check_term", "concatenation_ratio", "occurrence_states", "run_here", "token_span"]

#: what an occurrence's vector can be: the hidden state, or what one kind of component wrote into it
#: (:func:`~headsne_widget.capture.decompose.decompose`: the input embedding, every head, every feed-forward)
TERMS = ("hidden", "input", "attention", "mlp")
_DECOMPOSED = {"input": "input", "attention": "head", "mlp": "mlp"}


def check_term(term: Any) -> str:
    if not isinstance(term, str) or term not in TERMS:
        raise ValueError(f"term must be one of {', '.join(map(repr, TERMS))}, got {term!r}")
    return term


def occurrence_states(index: int, job: tuple[np.ndarray, list[tuple[int, int]]], model: Any, *,
                      term: str) -> list[dict[str, Any]]:  # fmt: skip
    """One text's task: ``job`` is (token ids, token spans of the occurrences); one row per occurrence,
    ``{"text": index, "k": its rank in the text, "states": float32 (L + 1, d)}``, each the mean of its pieces."""
    from ..capture.extraction import load_model

    ids, spans = job
    loaded = load_model(model)
    if term == "hidden":
        pooled = _pool(_hidden_states(np.asarray(ids), loaded), spans)
    else:
        pooled = _decomposed(np.asarray(ids), loaded, _DECOMPOSED[term], spans)
    return [{"text": index, "k": k, "states": states} for k, states in enumerate(pooled)]


def _hidden_states(ids: np.ndarray, loaded: Any) -> torch.Tensor:
    """float32 (L + 1, n, d): one forward pass with ``output_hidden_states``, no attention kept."""
    from ..capture.loading import input_device

    model = loaded.model
    input_ids = torch.as_tensor(ids, device=input_device(model))[None, :]
    with torch.inference_mode():
        output = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), output_hidden_states=True,
                       return_dict=True)  # fmt: skip
    hidden = getattr(output, "hidden_states", None)
    if not hidden or any(h.ndim != 3 for h in hidden):
        raise ValueError(f"{loaded.name} ({type(model).__name__}) returns no (1, tokens, hidden) hidden states")
    return torch.stack([h[0] for h in hidden]).to("cpu", torch.float32)


def _pool(states: torch.Tensor, spans: list[tuple[int, int]]) -> list[np.ndarray]:
    """Each span's mean over its tokens, at every layer: float32 (L + 1, d) each."""
    return [states[:, a:b].mean(dim=1).numpy() for a, b in spans]


def _decomposed(ids: np.ndarray, loaded: Any, kind: str, spans: list[tuple[int, int]]) -> list[np.ndarray]:
    """Each span's pooled sum of the ``kind`` components at every layer (layer 0: the embeddings for "input",
    zero for the others, which have written nothing yet)."""
    from ..capture.decompose import decompose
    from ..capture.extraction import extract_token_ids

    ex = extract_token_ids(ids, loaded)
    first = ex.hidden_states[0] if kind == "input" else np.zeros_like(ex.hidden_states[0])
    layers = [first.astype(np.float64)]
    for layer in range(ex.n_layers):
        parts = decompose(ex, layer, model=loaded)
        layers.append(parts.vectors[(parts.terms["term"] == kind).to_numpy()].sum(axis=0))
    stacked = np.stack(layers)  # (L + 1, n, d)
    return [stacked[:, a:b].mean(axis=1).astype(np.float32) for a, b in spans]


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


def token_span(offsets: list[tuple[int, int] | None], start: int, end: int) -> tuple[int, int] | None:
    """[first, last + 1) of the tokens whose character spans overlap [start, end); None if none does."""
    hits = [i for i, span in enumerate(offsets) if span is not None and span[0] < end and span[1] > start]
    return (hits[0], hits[-1] + 1) if hits else None


# ---------------------------------------------------------------------------------------- in-process


def run_here(jobs: dict[int, Any], model: Any, term: str, bar: Any) -> list[dict[str, Any]]:
    """Every job's rows, computed in this process on one thread per core, each forward pass in one torch thread
    (torch's thread count restored afterwards); on Ctrl-C a warning and the rows of the texts finished.

    Measured on 2 busy cores (load 7), 200 texts of 20-80 tokens: 7.0 s with one torch thread against 100 s
    with two (each pass's threads wait for each other on an oversubscribed machine; ``benchmarks/word_contexts.py``).
    """
    threads = torch.get_num_threads()
    rows: list[dict[str, Any]] = []
    try:
        workers = _cores() if term == "hidden" else 1  # decompose hooks the shared model: one text at a time
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for result in _pooled(pool, jobs, model, term, workers):
                rows += result
                bar.update()
    except KeyboardInterrupt:
        done = len({r["text"] for r in rows})
        warnings.warn(f"interrupted: returning the occurrences of the {done} texts finished so far (of "
                      f"{len(jobs)})", RuntimeWarning, stacklevel=3)  # fmt: skip
    finally:  # a worker's setting of 1 is what torch gives later threads too: undone
        torch.set_num_threads(threads)
    return rows


def _pooled(
    pool: ThreadPoolExecutor, jobs: dict[int, Any], model: Any, term: str, workers: int
) -> Iterator[list[dict]]:
    """Each job's rows in text order, two per worker in flight; what is left is cancelled when the caller stops."""

    def one(index: int, job: Any) -> list[dict[str, Any]]:
        torch.set_num_threads(1)
        return occurrence_states(index, job, model, term=term)

    waiting = iter(jobs.items())
    running: list[Future] = [pool.submit(one, *item) for _, item in zip(range(2 * workers), waiting)]
    try:
        while running:
            result = running.pop(0).result()
            following = next(waiting, None)
            if following is not None:
                running.append(pool.submit(one, *following))
            yield result
    finally:
        for future in running:
            future.cancel()


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


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
