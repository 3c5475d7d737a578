"""A word across many texts (issue 30; Coenen et al. 2019, "Visualizing and measuring the geometry of BERT"):
one vector per occurrence of a word, at every layer, to see where along the layers its senses separate.

:func:`word_contexts` finds every whole-word occurrence of ``word`` in ``texts`` (any case, punctuation around it
allowed, "banks" is not "bank"), runs the model once per text that holds it and keeps each layer's hidden states
at the occurrences only: ``(m, L + 1, d)`` float32, never a text's attention. A word split into word pieces is one
occurrence whose vector is the **mean of its pieces** (the tokens whose character spans overlap the word's), at
each layer, as Coenen et al. do. Layer 0 is the input embeddings, layer k the output of block k (the
``hidden_states`` convention); negative layers count from the end (-1: the last).

The texts run like :func:`~.corpus.corpus_study`'s (:mod:`.workers`): ``client="sync"`` in this process,
``"threads"`` / ``"processes"`` on a local Dask cluster, or a ``distributed.Client``; ``client=None`` uses the
session's Dask client when there is one, else runs in this process (a forward pass of a sentence takes
milliseconds: a local cluster's 2 s start and the threads' contention for the same cores cost more than they
give; ``benchmarks/word_contexts.py`` measures both). The model runs directly with ``output_hidden_states=True``
rather than through :func:`~headsne_widget.extract`, whose attention capture is not needed here (measured in the
benchmark too). The rows are in the order found: texts in order, then position in the text.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .._checks import check_texts
from ..capture.occurrences import (
    OCCURRENCE_COLUMNS,
    TERMS,
    check_term,
    check_word,
    check_word_length,
    encode,
    find_word,
    in_order,
    occurrence_states,
    run_here,
    sentence_around,
    token_span,
)  # fmt: skip
from .context_states import check_labels
from .workers import LOCAL_CLIENTS, check_client, progress_bar, run_tasks, session

__all__ = [
    "OCCURRENCE_COLUMNS", "POOLING", "TERMS", "WordContexts", "find_word", "sentence_around", "token_span",
    "word_contexts",
]  # fmt: skip

#: how a word's pieces become one vector (each layer): the mean of the tokens overlapping the word
POOLING = "mean"
#: t-SNE needs at least this many points (perplexity >= 1 and neighbours to spread them)
MIN_TSNE_POINTS = 4


# ------------------------------------------------------------------------------------------- the result


@dataclass(eq=False)
class WordContexts:
    """The occurrences of ``word`` and their vectors: ``states`` float32 (m, layers, d), ``occurrences`` one row
    per occurrence (:data:`OCCURRENCE_COLUMNS`: ``text`` index, ``start``/``end`` character span in it,
    ``token_start``/``token_end`` token span, ``sentence`` around it starting at ``sentence_start``, and
    ``full_text`` the text itself), ``layer`` the default layer of :attr:`X`, ``term`` what the vectors are;
    ``max_attention`` float32 (L, H, m), asked for with ``attention=True``: each head's largest attention to the
    occurrence from any query of its text (the maximum over its pieces), else None."""

    word: str
    states: np.ndarray
    occurrences: pd.DataFrame
    layer: int
    term: str
    model_name: str
    model: Any = field(default=None, repr=False)
    max_attention: np.ndarray | None = field(default=None, repr=False)

    @property
    def layers(self) -> int:
        """How many layers each occurrence has a vector at (L + 1: the input embeddings, then every block)."""
        return int(self.states.shape[1])

    @property
    def X(self) -> np.ndarray:
        """float32 (m, d): every occurrence's vector at :attr:`layer`."""
        return self.at(self.layer)

    def at(self, layer: int) -> np.ndarray:
        """float32 (m, d) at ``layer`` (0: input embeddings, k: block k's output, -1: the last)."""
        return self.states[:, layer_index(layer, self.layers)]

    def centroid_accuracy(self, labels: Iterable[Any], layer: int | None = None) -> float | pd.Series:
        """Leave-one-out nearest sense centroid by cosine (Coenen et al.'s classifier): each occurrence is given
        the sense whose centroid (its own sense's without it) is most similar; the share given its own label.
        ``layer=None``: a Series over every layer."""
        codes, _ = check_labels(labels, len(self.occurrences), self.word)
        if layer is not None:
            return _loo_accuracy(self.at(layer), codes)
        values = [_loo_accuracy(self.states[:, k], codes) for k in range(self.layers)]
        return pd.Series(values, index=pd.RangeIndex(self.layers, name="layer"), name="accuracy")

    def concatenation_ratio(self, labels: Iterable[Any], *, seed: int = 0, progress: bool = False) -> pd.DataFrame:
        """Coenen et al.'s concatenated-sentence experiment (:func:`concatenation_ratio`)."""
        from .context_states import concatenation_ratio

        return concatenation_ratio(self, labels, seed=seed, progress=progress)

    def tsne(self, layer: int | None = None, *, perplexity: float | None = None, seed: int = 0, **options: Any) -> Any:
        """Standard t-SNE of the occurrences at ``layer`` (default :attr:`layer`): a TSNEResult. Perplexity
        defaults to min(30, (m - 1) / 3); at least :data:`MIN_TSNE_POINTS` occurrences are needed."""
        from ..affinity.affinities import gaussian_affinities
        from ..embedding.tsne import tsne

        m = len(self.occurrences)
        if m < MIN_TSNE_POINTS:
            raise ValueError(
                f"t-SNE needs at least {MIN_TSNE_POINTS} points: {self.word!r} has {m} occurrence"
                f"{'' if m == 1 else 's'}; give more texts that contain it"
            )
        X = self.at(self.layer if layer is None else layer)
        P = gaussian_affinities(X, min(30.0, (m - 1) / 3) if perplexity is None else perplexity)
        return tsne(P, seed=seed, **options)

    def __repr__(self) -> str:
        m, layers, d = self.states.shape
        return (
            f"WordContexts(word={self.word!r}, occurrences={m}, layers={layers}, d={d}, layer={self.layer}, "
            f"term={self.term!r}, model_name={self.model_name!r})"
        )


def layer_index(layer: Any, count: int) -> int:
    """``layer`` as an index in [0, count): negative ones count from the end; a clear error otherwise."""
    if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
        raise TypeError(f"layer must be an int, got {type(layer).__name__} {layer!r}")
    if not -count <= layer < count:
        raise IndexError(f"layer {layer} is out of range: there are {count} layers (0 = input embeddings to "
                         f"{count - 1}, or -1 to -{count})")  # fmt: skip
    return int(layer) % count


def _loo_accuracy(X: np.ndarray, codes: np.ndarray) -> float:
    """Share of rows whose most cosine-similar centroid (own sense's without the row) is their own sense's; NaN
    where every vector is zero (a decomposed term at layer 0: nothing written yet)."""
    if not np.any(X):
        return float("nan")
    X = X.astype(np.float64)
    senses = int(codes.max()) + 1
    counts = np.bincount(codes, minlength=senses).astype(np.float64)
    sums = np.zeros((senses, X.shape[1]))
    np.add.at(sums, codes, X)
    dots = X @ sums.T  # (m, C): x . S_c
    sq = np.einsum("cd,cd->c", sums, sums)
    own = np.arange(len(X)), codes
    x_sq = np.einsum("md,md->m", X, X)
    dot = dots / counts  # x . centroid, and |centroid|^2, the own sense's without x
    norm_sq = np.broadcast_to(sq / counts**2, dots.shape).copy()
    rest = counts[codes] - 1
    dot[own] = (dots[own] - x_sq) / rest
    norm_sq[own] = (sq[codes] - 2 * dots[own] + x_sq) / rest**2
    denominator = np.sqrt(np.maximum(norm_sq, 0.0) * x_sq[:, None])
    cosine = np.divide(dot, denominator, out=np.zeros_like(dot), where=denominator > 0)
    return float(np.mean(np.argmax(cosine, axis=1) == codes))


# ----------------------------------------------------------------------------------------- finding


# ----------------------------------------------------------------------------------------- running


def word_contexts(
    word: str,
    texts: Iterable[str],
    model: Any = None,
    *,
    layer: int = -1,
    term: str = "hidden",
    client: Any = None,
    progress: bool = True,
    attention: bool = False,
) -> WordContexts:
    """Every occurrence of ``word`` in ``texts`` and its vector at every layer (module doc).

    ``model``: a name, path, loaded model or None (:func:`~headsne_widget.load_model`'s default), loaded once.
    ``layer``: the layer of ``.X`` (0: input embeddings, -1: the last). ``term``: "hidden" (the layer's hidden
    states) or, from :func:`~headsne_widget.capture.decompose.decompose`, "input", "attention" (every head of the
    layers so far) or "mlp": what that kind of component wrote into the hidden state (these run in this process,
    one text at a time, whatever ``client``: the decomposition hooks the model). ``client``: where the texts
    run (module doc). ``progress``: a tqdm bar over the texts that hold the word. ``attention``: keep each head's
    largest attention to the word in its text too (``.max_attention``; one more capture pass a text).

    Raises ValueError for an empty ``texts``, a word found nowhere, an unknown term; TypeError for a non-str word
    or text; TextTooLongError for a word, or a text holding it, longer than the model's positions.
    """
    from ..capture.extraction import load_model

    word, items, term = check_word(word), check_texts(texts), check_term(term)
    _check_client(client)
    loaded = load_model(model)
    check_word_length(word, loaded)
    jobs, rows = encode(word, items, loaded)
    with _session(client) as active, progress_bar(len(jobs), 0, bool(progress)) as bar:
        if active is None or term != "hidden":  # decompose hooks the model: never two texts at once on it
            results = run_here(jobs, loaded, term, bar, attention=attention)
        else:
            results = run_tasks(occurrence_states, jobs, {"term": term, "attention": attention},
                                model if model is not None else loaded,
                                client=active, retries=0, bar=bar, on_text=None)  # fmt: skip
    rows, results = in_order(rows, results)
    states = np.stack([r["states"] for r in results]) if results else np.zeros((0, 0, 0), np.float32)
    grid = np.stack([r["attention"] for r in results], axis=2) if attention and results else None
    frame = pd.DataFrame(rows, columns=["k", *OCCURRENCE_COLUMNS]).drop(columns="k")
    layer = layer_index(layer, states.shape[1]) if len(states) else int(layer)
    return WordContexts(word, states, frame, layer, term, loaded.name, model=loaded, max_attention=grid)


def _check_client(client: Any) -> None:
    if isinstance(client, str) and client not in LOCAL_CLIENTS:
        raise ValueError(f"client must be one of {', '.join(map(repr, LOCAL_CLIENTS))}, got {client!r}")
    if client is not None and not isinstance(client, str):
        check_client(client)


@contextlib.contextmanager
def _session(client: Any) -> Iterator[Any]:
    """The session's Dask client when ``client`` is None and there is one, else in this process (module doc)."""
    if client is None:
        try:
            from distributed import default_client

            client = default_client()
        except (ImportError, ValueError):
            client = "sync"
    with session(client) as active:
        yield active
