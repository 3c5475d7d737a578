"""Which heads track which dependency relation (Clark et al. 2019, "What does BERT look at?", Table 1), on any model.

For one text, :func:`text_relations` scores every query head (all of a GQA model's, each on its own) against every
relation (a word and its syntactic head) in two directions, at the word level (:mod:`.alignment`'s rule):

- ``dependent->head``: the word the dependent attends to most is its head;
- ``head->dependent``: the word the head attends to most is the dependent (each relation scored once: a word
  with two ``amod`` dependents gets at most one of them right; Clark et al.'s code asks instead whether the word
  that attends most to the dependent is its head).

The candidates are the sentence's other words that have tokens (special tokens left out, ties to the first). In a
causal model a word sees only the words before it, so a relation is scored only in the direction its mask allows:
``dependent->head`` where the head comes first, ``head->dependent`` where the dependent does. The baseline of a
(relation, direction) is the best fixed offset on the same relations: the share whose head sits at the most common
distance from the dependent (Clark et al.'s offset predictor). :func:`relation_table` adds texts up: one row per
(relation, direction, layer, head); :func:`best_heads` is Table 1, the best head of each relation.

What a text gives (:class:`TextRelations`) is small, its relations and each head's hits and attention on them,
never an n x n array, so that a Dask task ships it back (:mod:`headsne_widget.studies.syntax`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..capture.extracted import Extraction
from ..capture.sources import check_budget
from .alignment import WordAlignment, align_extraction

__all__ = [
    "DIRECTIONS",
    "PUNCTUATION",
    "TABLE_COLUMNS",
    "TextRelations",
    "best_heads",
    "check_relations",
    "head_relation_scores",
    "relation_table",
    "text_relations",
]

DIRECTIONS = ("dependent->head", "head->dependent")
#: relations left out when none are asked for (spaCy's and UD's punctuation: it is attached, not a relation)
PUNCTUATION = frozenset({"punct"})
#: the columns of :func:`relation_table`
TABLE_COLUMNS = ("relation", "direction", "layer", "head", "accuracy", "count", "baseline", "baseline_offset")
#: relation names a parser may give: Universal Dependencies v2 (subtypes ``nmod:poss`` by their base) and the
#: ClearNLP labels of spaCy's English models; a name in neither is refused as unknown (a typo), one in either
#: but in no parse as absent
KNOWN_RELATIONS = frozenset(
    "acl advcl advmod amod appos aux case cc ccomp clf compound conj cop csubj dep det discourse dislocated expl "
    "fixed flat goeswith iobj list mark nmod nsubj nummod obj obl orphan parataxis punct reparandum root vocative "
    "xcomp ROOT acomp agent attr auxpass csubjpass dative dobj intj meta neg npadvmod nsubjpass oprd pcomp pobj poss "
    "preconj predet prep prt quantmod relcl".split()
)


@dataclass(eq=False)
class TextRelations:
    """One text's relations (a word with a head, both with tokens) and what every head makes of them.

    ``relations`` object ``(k,)`` the label; ``dependents``, ``heads`` int64 ``(k,)`` their words (rows of the
    parse); ``allowed`` bool ``(2, k)`` whether each direction of :data:`DIRECTIONS` is scored (all, but in a causal
    model); ``hits`` bool ``(2, L, H, k)``; ``attention`` float32 ``(k, 2, L, H)``: the word-level attention from
    the dependent to its head and from the head to its dependent, the pair's model-wide attention vector (Coenen
    et al. 2019); ``skipped``: relations left out because a word of theirs has no token.
    """

    relations: np.ndarray
    dependents: np.ndarray
    heads: np.ndarray
    allowed: np.ndarray
    hits: np.ndarray
    attention: np.ndarray
    skipped: int
    causal: bool

    @property
    def offsets(self) -> np.ndarray:
        """int64 ``(k,)``: where each head sits from its dependent, in words (-1: the word before)."""
        return self.heads - self.dependents

    @property
    def shape(self) -> tuple[int, int]:
        """(layers, heads per layer) of the model that gave it."""
        return int(self.hits.shape[1]), int(self.hits.shape[2])


def text_relations(ex: Extraction, words: pd.DataFrame, alignment: WordAlignment | None = None) -> TextRelations:
    """Every head of ``ex`` against every relation of ``words`` (a parse of ``ex.text``), by the module's rule."""
    al = align_extraction(ex, words) if alignment is None else alignment
    m, n_layers, n_heads = al.n_words, ex.n_layers, ex.n_heads
    check_budget((m, m), "the word-level attention of one head", "a shorter text")
    head, sentence = words["head"].to_numpy(np.int64), words["sentence"].to_numpy(np.int64)
    linked = np.flatnonzero(head >= 0)
    ok = al.aligned[linked] & al.aligned[head[linked]]
    dep, gov = linked[ok], head[linked[ok]]
    causal = _is_causal(ex)
    allowed = np.stack([gov < dep, dep < gov]) if causal else np.ones((2, dep.size), dtype=bool)
    candidates = (sentence[:, None] == sentence[None, :]) & al.aligned[:, None] & al.aligned[None, :]
    np.fill_diagonal(candidates, False)
    if causal:
        candidates &= np.tri(m, k=-1, dtype=bool)  # a word sees the words before it
    hits = np.zeros((2, n_layers, n_heads, dep.size), dtype=bool)
    attention = np.zeros((dep.size, 2, n_layers, n_heads), dtype=np.float32)
    for layer, h, w in _word_heads(ex, al):
        masked = np.where(candidates, w, -np.inf)
        if dep.size:
            hits[0, layer, h] = np.argmax(masked[dep], axis=1) == gov
            hits[1, layer, h] = np.argmax(masked[gov], axis=1) == dep
        attention[:, 0, layer, h], attention[:, 1, layer, h] = w[dep, gov], w[gov, dep]
    hits &= allowed[:, None, None, :]
    labels = words["dep"].to_numpy(object)[dep]
    return TextRelations(labels, dep, gov, allowed, hits, attention, int((~ok).sum()), causal)


def _word_heads(ex: Extraction, al: WordAlignment) -> Iterator[tuple[int, int, np.ndarray]]:
    """(layer, head, its word-level attention) for every query head, one at a time."""
    for layer in range(ex.n_layers):
        for h in range(ex.n_heads):
            yield layer, h, al.to_words(ex.attention(layer, h))


def _is_causal(ex: Extraction) -> bool:
    """Whether no head attends to a later token: from the capture's scores, else from the heads themselves."""
    if ex.head_stats is not None:
        return ex.head_stats.causal
    return not any(np.triu(ex.attention(layer, h), 1).any() for layer in range(ex.n_layers) for h in range(ex.n_heads))


def check_relations(asked: str | Iterable[str] | None, found: dict[str, int]) -> list[str]:
    """The relations to score: ``asked`` checked against those ``found`` (label -> count), or with None every one
    found but punctuation, most frequent first. A name that no parser gives is unknown, one that these parses lack
    is absent: both raise a ValueError that lists the relations found."""
    listed = ", ".join(f"{r} ({c})" for r, c in sorted(found.items(), key=lambda rc: (-rc[1], rc[0]))) or "none"
    if asked is None:
        chosen = [r for r in sorted(found, key=lambda r: (-found[r], r)) if r not in PUNCTUATION]
        if not chosen:
            raise ValueError(f"the parses hold no relation to score (a one-word text has none); found: {listed}")
        return chosen
    names = [asked] if isinstance(asked, str) else list(asked)
    if not names or not all(isinstance(r, str) for r in names):
        raise TypeError(f"relations must be None, a relation name or a list of them, got {asked!r}")
    for r in names:
        if r not in found:
            kind = "no" if r in KNOWN_RELATIONS or r.split(":")[0] in KNOWN_RELATIONS else "unknown relation"
            where = "relation in these texts" if kind == "no" else "(no parser gives it)"
            raise ValueError(f"{kind} {r!r} {where}; the relations found are: {listed}")
    return list(dict.fromkeys(names))


def _found(texts: list[TextRelations]) -> dict[str, int]:
    labels, counts = np.unique(np.concatenate([t.relations for t in texts]).astype(str), return_counts=True)
    return dict(zip(labels.tolist(), counts.tolist()))


def relation_table(texts: Iterable[TextRelations], relations: str | Iterable[str] | None = None) -> pd.DataFrame:
    """One row of :data:`TABLE_COLUMNS` per (relation, direction, layer, head) over ``texts``: ``accuracy`` the
    share of the ``count`` relations scored in that direction that the head gets right, ``baseline`` the share
    at the most common offset ``baseline_offset``. Relations most frequent first; a direction with no relation
    scored (causal models) has no rows."""
    items = list(texts)
    if not items:
        raise ValueError("no text to add up")
    shapes = {t.shape for t in items}
    if len(shapes) > 1:
        raise ValueError(f"the texts come from models of different shapes {sorted(shapes)}")
    n_layers, n_heads = shapes.pop()
    chosen = check_relations(relations, _found(items))
    labels = np.concatenate([t.relations for t in items]).astype(str)
    offsets = np.concatenate([t.offsets for t in items])
    allowed = np.concatenate([t.allowed for t in items], axis=1)
    hits = np.concatenate([t.hits for t in items], axis=3)
    layer, head = np.divmod(np.arange(n_layers * n_heads), n_heads)
    frames = []
    for relation in chosen:
        for d, direction in enumerate(DIRECTIONS):
            scored = (labels == relation) & allowed[d]
            count = int(scored.sum())
            if not count:
                continue
            values, times = np.unique(offsets[scored], return_counts=True)
            accuracy = hits[d][:, :, scored].mean(axis=-1, dtype=np.float64).ravel()
            frames.append(pd.DataFrame({
                "relation": relation, "direction": direction, "layer": layer, "head": head, "accuracy": accuracy,
                "count": count, "baseline": times.max() / count, "baseline_offset": int(values[np.argmax(times)]),
            }))  # fmt: skip
    if not frames:
        raise ValueError(f"no relation of {chosen} can be scored in a direction this model's attention allows")
    return pd.concat(frames, ignore_index=True)[list(TABLE_COLUMNS)]


def best_heads(table: pd.DataFrame) -> pd.DataFrame:
    """Clark et al.'s Table 1 from :func:`relation_table`: each relation's best (direction, layer, head) with its
    accuracy, count and baseline, relations in the table's order."""
    order = list(dict.fromkeys(table["relation"]))
    best = table.loc[table.groupby("relation", sort=False)["accuracy"].idxmax()]
    return best.set_index("relation").loc[order].reset_index()[list(TABLE_COLUMNS)]


def head_relation_scores(text: TextRelations, relation: str) -> np.ndarray:
    """float64 ``(L, H)``: how well each head tracks ``relation`` on one text, the better of its directions (NaN
    where neither is scored); what a grid of heads sorts by. Unknown or absent relations raise, listing those
    found."""
    table = relation_table([text], [relation])
    best = table.groupby(["layer", "head"])["accuracy"].max()
    out = np.full(text.shape, np.nan)
    out[best.index.get_level_values(0), best.index.get_level_values(1)] = best.to_numpy()
    return out
