"""The widget's syntax: a text parsed on demand (spaCy, :func:`headsne_widget.syntax.parses.parse`), its tokens
coloured by their word's part of speech or relation, and each head scored on how well it tracks a relation here.

Each token takes the label of the word that holds most of its characters (the syntax stage's one rule,
:mod:`headsne_widget.syntax.alignment`); a token of no word (a special token, whitespace) is :data:`NO_WORD`. The
colours are categories in order of frequency in the text; at most :data:`MAX_SHOWN` of them (the categorical
palette's ten colours), the rarest labels together as :data:`OTHER` where there are more. A text's parse is kept
(the last :data:`PARSES_KEPT` texts), and its relations scored by every head once per extraction, so switching
colourings or the sort back and forth parses and scores nothing again.

A head's score for a relation on this text is :func:`~headsne_widget.syntax.relations.head_relation_scores`: the
share of the text's pairs of that relation where the head's most-attended word is the other word of the pair, the
better of its two directions (dependent->head, head->dependent), at the word level. It is computed on the owner
thread from the captured attention, every head once per text: MiniLM on the t-SNE abstract (271 tokens) parses in
0.16 s, colours in 0.01 s and scores its 72 heads in 0.25 s (torch on one thread, 2 shared cores at load 8).
"""

from __future__ import annotations

import functools
import weakref
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..capture.scores import SCORES
from ..errors import ParserUnavailableError
from ..syntax.alignment import WordAlignment, align_extraction
from ..syntax.parses import parse
from ..syntax.relations import (
    PUNCTUATION,
    TextRelations,
    check_relations,
    head_relation_scores,
    relation_table,
    text_relations,
)

if TYPE_CHECKING:
    from ..capture.extraction import Extraction

__all__ = [
    "MAX_SHOWN",
    "NO_WORD",
    "OTHER",
    "SYNTAX_COLOURS",
    "check_sort",
    "head_relations",
    "relation_scores",
    "relations_found",
    "syntax_colours",
    "syntax_tree",
    "text_parse",
    "token_labels",
]

#: the colour modes drawn from the parse, and the parse's column each shows
SYNTAX_COLOURS = {"pos": "pos", "dep": "dep"}
#: the label of a token that belongs to no word (special tokens, whitespace)
NO_WORD = "(none)"
#: the label of the rarest labels together, where a text has more than fit the palette
OTHER = "(other)"
#: most categories a syntax colouring shows (the browser's categorical palette has ten colours)
MAX_SHOWN = 10
#: the texts whose parses are kept
PARSES_KEPT = 8
#: the head map's rule: a head tracks the relation it gets most right in the text, at least this share of its pairs,
#: among the relations with at least ``MIN_PAIRS`` pairs there (one pair right by chance is no tracking)
TRACKS = 0.5
MIN_PAIRS = 3

_RELATIONS: weakref.WeakKeyDictionary[Extraction, TextRelations] = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=PARSES_KEPT)
def text_parse(text: str) -> pd.DataFrame:
    """The spaCy parse of ``text`` (the default pipeline; ``ParserUnavailableError`` naming the ``[syntax]`` extra
    where it is missing), kept for the last :data:`PARSES_KEPT` texts. Do not modify the frame."""
    return parse(text)[0]


def _aligned(ex: Extraction) -> tuple[pd.DataFrame, WordAlignment]:
    words = text_parse(ex.text)
    return words, align_extraction(ex, words)


def token_labels(ex: Extraction, column: str) -> list[str]:
    """One label a token: the ``column`` ("pos" or "dep") of its word, :data:`NO_WORD` for a token of none."""
    words, alignment = _aligned(ex)
    values = words[column].astype(str).tolist()
    return [values[w] if w >= 0 else NO_WORD for w in alignment.token_word.tolist()]


def syntax_colours(ex: Extraction, mode: str) -> tuple[np.ndarray, list[str]]:
    """float32 codes ``(n,)`` into the categories of colour mode ``mode`` ("pos" or "dep"): the labels most frequent
    first (ties by name), then :data:`OTHER` for the rarest where there are more than :data:`MAX_SHOWN`, then
    :data:`NO_WORD` where a token has no word."""
    labels = token_labels(ex, SYNTAX_COLOURS[mode])
    counts = pd.Series([label for label in labels if label != NO_WORD], dtype=object).value_counts()
    ranked = sorted(counts.index, key=lambda label: (-counts[label], label))
    room = MAX_SHOWN - (NO_WORD in labels)
    shown = ranked if len(ranked) <= room else ranked[: room - 1]
    categories = shown + ([OTHER] if len(shown) < len(ranked) else []) + ([NO_WORD] if NO_WORD in labels else [])
    code = {label: k for k, label in enumerate(categories)}
    other = code.get(OTHER, -1)
    return np.array([code.get(label, other) for label in labels], dtype=np.float32), categories


def syntax_tree(ex: Extraction) -> np.ndarray:
    """int32 ``(2, n)``: for each token the first token of its word (row 0) and the first token of its word's
    syntactic head (row 1), -1 for none (a token of no word; a root, or a head with no token), what the browser
    draws as arcs from a hovered token to its head and its dependents."""
    words, alignment = _aligned(ex)
    word = alignment.token_word
    if alignment.n_words == 0:
        return np.full((2, word.size), -1, dtype=np.int32)
    first = np.full(alignment.n_words, word.size, dtype=np.int64)
    owned = np.flatnonzero(word >= 0)
    np.minimum.at(first, word[owned], owned)  # each word's first token
    first[first == word.size] = -1
    head = words["head"].to_numpy(np.int64)
    mine = np.where(word >= 0, first[np.maximum(word, 0)], -1)
    their = np.where(word >= 0, head[np.maximum(word, 0)], -1)
    heads = np.where(their >= 0, first[np.maximum(their, 0)], -1)
    return np.stack([mine, heads]).astype(np.int32)


def _relations(ex: Extraction) -> TextRelations:
    found = _RELATIONS.get(ex)
    if found is None:
        words, alignment = _aligned(ex)
        found = _RELATIONS[ex] = text_relations(ex, words, alignment)
    return found


def head_relations(ex: Extraction) -> list[str]:
    """Per head, row-major (index layer * H + head, as ``head_kinds``): the relation it tracks best in this text (the
    better direction; ties to the more frequent relation), or :data:`NO_WORD` where none reaches :data:`TRACKS`
    among the relations with :data:`MIN_PAIRS` pairs or more (punctuation left out)."""
    n_layers, n_heads = ex.n_layers, ex.n_heads
    out = [NO_WORD] * (n_layers * n_heads)
    counts = {r: c for r, c in relations_found(ex).items() if c >= MIN_PAIRS and r not in PUNCTUATION}
    if not counts:
        return out
    table = relation_table([_relations(ex)], sorted(counts, key=lambda r: (-counts[r], r)))
    best = table.loc[table.groupby(["layer", "head"])["accuracy"].idxmax()]
    for row in best.itertuples():
        if row.accuracy >= TRACKS:
            out[int(row.layer) * n_heads + int(row.head)] = str(row.relation)
    return out


def relations_found(ex: Extraction) -> dict[str, int]:
    """The relations of the text a head can be scored on (both words with tokens), label -> count."""
    labels, counts = np.unique(_relations(ex).relations.astype(str), return_counts=True)
    return dict(zip(labels.tolist(), counts.tolist()))


def relation_scores(ex: Extraction, relation: str) -> np.ndarray:
    """float64 ``(L, H)``: each head's accuracy on ``relation`` in this text (the module doc), NaN where it cannot
    be scored; a relation not in the text raises a ValueError listing those found."""
    return head_relation_scores(_relations(ex), relation)


def check_sort(value: str, ex: Extraction | None) -> str:
    """``sort_heads`` checked: "" (model order), a score of :data:`~headsne_widget.capture.scores.SCORES`, or a
    relation found in the text (once the text is captured: before, any name waits for it). A name that is neither
    raises a ValueError listing the scores and the relations found; no parser, ``ParserUnavailableError``."""
    if not isinstance(value, str):
        raise TypeError(f"sort_heads must be a score or a relation name (str), got {type(value).__name__}")
    if value in ("", *SCORES) or ex is None:
        return value
    scores = f"sort_heads={value!r} is not a score ({', '.join(SCORES)})"
    if not ex.has_attention:
        raise ValueError(f"{scores}; a relation needs each head's attention in the text, which this widget has not")
    try:
        check_relations(value, relations_found(ex))
    except ValueError as err:
        raise ValueError(f"{scores} nor a relation: {err}") from None
    except ParserUnavailableError as err:
        raise ParserUnavailableError(f"{scores}; a relation needs the text parsed: {err}") from err
    return value
