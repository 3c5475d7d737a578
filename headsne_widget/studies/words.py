"""Multi-token word embeddings (thesis Def. 4.1, Fig. 5/6): each word's [CLS] hidden state at a layer, and their
standard t-SNE map; :data:`OCCUPATIONS` is the thesis's word list. Importable from :mod:`.analyses` as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._checks import int_at_least, is_int
from .common import extract_text, load, study_seed

__all__ = ["OCCUPATIONS", "WordEmbeddings", "word_embeddings"]

# Single-word occupations, as in the thesis's Fig. 6 ("only words without spaces were considered"); it names
# musician, dancer, singer, choreographer, composer, woodworker, farmworker, rancher, millwright, locksmith
# and brickmason, which are all here.
OCCUPATIONS: tuple[str, ...] = (
    "accountant",
    "actor",
    "actuary",
    "architect",
    "archivist",
    "astronomer",
    "athlete",
    "auditor",
    "baker",
    "barber",
    "bartender",
    "biologist",
    "blacksmith",
    "bookkeeper",
    "brickmason",
    "butcher",
    "carpenter",
    "cashier",
    "chef",
    "chemist",
    "choreographer",
    "cleaner",
    "coach",
    "composer",
    "cook",
    "counselor",
    "courier",
    "dancer",
    "dentist",
    "designer",
    "detective",
    "dietitian",
    "diplomat",
    "doctor",
    "driver",
    "economist",
    "editor",
    "electrician",
    "engineer",
    "farmer",
    "farmworker",
    "firefighter",
    "fisherman",
    "florist",
    "gardener",
    "geologist",
    "glazier",
    "guard",
    "hairdresser",
    "historian",
    "janitor",
    "jeweler",
    "journalist",
    "judge",
    "lawyer",
    "librarian",
    "lifeguard",
    "locksmith",
    "machinist",
    "mathematician",
    "mechanic",
    "midwife",
    "millwright",
    "miner",
    "musician",
    "nurse",
    "optician",
    "painter",
    "paralegal",
    "pharmacist",
    "photographer",
    "physicist",
    "physician",
    "pilot",
    "plumber",
    "poet",
    "police",
    "politician",
    "potter",
    "programmer",
    "psychologist",
    "rancher",
    "receptionist",
    "reporter",
    "roofer",
    "sailor",
    "scientist",
    "sculptor",
    "secretary",
    "singer",
    "soldier",
    "statistician",
    "surgeon",
    "tailor",
    "teacher",
    "translator",
    "veterinarian",
    "waiter",
    "welder",
    "woodworker",
    "writer",
    "zoologist",
)


@dataclass
class WordEmbeddings:
    """Multi-token embeddings of words (thesis Def. 4.1) and their standard t-SNE map."""

    words: list[str]
    X: np.ndarray  # (n, d) [CLS] hidden state of each word at ``layer``
    embedding: np.ndarray  # (n, 2) t-SNE of X
    kl: float
    layer: int
    perplexity: float
    model_name: str


def _check_words(words: Sequence[str] | None) -> list[str]:
    if words is None:
        return list(OCCUPATIONS)
    if isinstance(words, str):
        raise TypeError("words must be a list of strings, not one string")
    words = list(words)
    if not words:
        raise ValueError("words is empty: pass at least two words or phrases (or None for analyses.OCCUPATIONS)")
    bad = [w for w in words if not isinstance(w, str)]
    if bad:
        raise TypeError(f"words must all be strings, got {bad[0]!r}")
    blank = [w for w in words if not w.strip()]
    if blank:
        raise ValueError(f"words contains an empty string: {blank[0]!r}")
    if len(words) < 2:
        raise ValueError(f"words needs at least two entries to embed, got {len(words)}")
    return words


def word_embeddings(
    words: Sequence[str] | None = None,
    model: Any = None,
    *,
    layer: int = -1,
    seed: int = 0,
    n_iter: int = 1000,
    perplexity: float | None = None,
) -> WordEmbeddings:
    """Standard t-SNE of the multi-token embedding of each word: its [CLS] hidden state (thesis Def. 4.1).

    ``layer`` indexes the hidden states (0 = embedding layer, -1 = the last layer's output). ``words=None``
    uses :data:`OCCUPATIONS` (thesis Fig. 6). ``perplexity=None`` uses 20 (thesis A.2), lowered to
    ``(n - 1) / 3`` for short word lists so that it stays below the number of neighbours.
    """
    from ..embedding.tsne import tsne

    words = _check_words(words)
    n_iter = int_at_least(n_iter, "n_iter", 1)
    loaded = load(model)
    first = extract_text(words[0], loaded)
    n_states = first.n_layers + 1
    if not is_int(layer):
        raise TypeError(f"layer must be an int, got {type(layer).__name__}")
    if not -n_states <= layer < n_states:
        raise ValueError(f"layer={layer} is out of range: the model has {n_states} hidden states (0..{n_states - 1})")
    layer = int(layer) % n_states
    exs = [first] + [extract_text(w, loaded) for w in words[1:]]
    X = np.stack([np.asarray(e.hidden_states[layer][0], dtype=np.float64) for e in exs])
    n = len(words)
    if perplexity is None:
        perplexity = min(20.0, max(1.0, (n - 1) / 3))
    from ..affinity.affinities import gaussian_affinities

    P = gaussian_affinities(X, perplexity=perplexity)
    res = tsne(P, n_iter=n_iter, seed=study_seed(seed))
    return WordEmbeddings(
        words=words,
        X=X,
        embedding=np.asarray(res.embedding),
        kl=float(res.kl),
        layer=layer,
        perplexity=float(perplexity),
        model_name=str(first.model_name),
    )
