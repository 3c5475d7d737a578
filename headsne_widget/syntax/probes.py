"""Coenen et al.'s relation probe (2019, "Visualizing and measuring the geometry of BERT", section 3): does the
attention between two words say which dependency relation joins them?

Each related pair (a word and its syntactic head) is one example: its model-wide attention vector, every head's
word-level attention from the dependent to the head and from the head to the dependent (2 x layers x heads
values, :class:`~.relations.TextRelations`), labelled with the relation. A logistic regression (scikit-learn, on
standardised features) is cross-validated over folds that keep each text whole (``StratifiedGroupKFold``), so that
no text is both learnt from and tested on; the majority class is the floor to beat. The weights of a fit on every
pair say which heads carry the most of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .relations import DIRECTIONS, TextRelations, check_relations

__all__ = ["MIN_PAIRS", "RelationProbe", "fit_relation_probe"]

#: with no relations asked for, those with at least this many pairs are classified (8 a fold at 5 folds)
MIN_PAIRS = 40


@dataclass(eq=False)
class RelationProbe:
    """What :func:`fit_relation_probe` found.

    ``accuracy`` and ``spread``: the mean and standard deviation of the folds' accuracies (``fold_accuracy``);
    ``majority``: the share of the most frequent relation (always guessing it); ``counts``: pairs per relation;
    ``confusion``: out-of-fold counts, true relations in rows, predicted in columns; ``heads``: every head's weight
    in a fit on all pairs (the norm of its standardised coefficients over relations and both directions), largest
    first, with the direction that weighs more.
    """

    accuracy: float
    spread: float
    fold_accuracy: np.ndarray
    majority: float
    counts: pd.Series
    confusion: pd.DataFrame
    heads: pd.DataFrame

    @property
    def pairs(self) -> int:
        return int(self.counts.sum())

    def __repr__(self) -> str:
        return (
            f"RelationProbe(accuracy={self.accuracy:.3f} +- {self.spread:.3f} over {self.fold_accuracy.size} folds, "
            f"majority={self.majority:.3f}, {self.pairs} pairs of {self.counts.size} relations)"
        )


def fit_relation_probe(
    texts: Iterable[TextRelations],
    relations: str | Iterable[str] | None = None,
    *,
    folds: int = 5,
    seed: int = 0,
    min_pairs: int = MIN_PAIRS,
) -> RelationProbe:
    """The probe over ``texts`` (one :class:`TextRelations` a text). ``relations``: the classes, by default every
    relation but punctuation with at least ``min_pairs`` pairs; ``folds`` of whole texts; ``seed`` for the
    folds' shuffle."""
    from sklearn.model_selection import StratifiedGroupKFold

    items = list(texts)
    x, y, groups = _examples(items, relations, min_pairs, folds)
    out_of_fold = np.empty(y.size, dtype=object)
    accuracy = []
    splits = StratifiedGroupKFold(n_splits=folds, shuffle=True, random_state=seed).split(x, y, groups)
    for train, test in splits:
        model = _classifier().fit(x[train], y[train])
        out_of_fold[test] = model.predict(x[test])
        accuracy.append(float(np.mean(out_of_fold[test] == y[test])))
    counts = pd.Series(y).value_counts()
    classes = list(counts.index)
    confusion = pd.crosstab(pd.Categorical(y, classes), pd.Categorical(out_of_fold, classes), dropna=False)
    confusion.index.name, confusion.columns.name = "relation", "predicted"
    return RelationProbe(
        accuracy=float(np.mean(accuracy)),
        spread=float(np.std(accuracy)),
        fold_accuracy=np.asarray(accuracy),
        majority=float(counts.iloc[0] / y.size),
        counts=counts.rename("pairs").rename_axis("relation"),
        confusion=confusion,
        heads=_head_weights(_classifier().fit(x, y), items[0].shape),
    )


def _examples(
    items: list[TextRelations], relations: str | Iterable[str] | None, min_pairs: int, folds: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(features, labels, text of each pair) of the relations to classify, checked."""
    if not items:
        raise ValueError("no text to probe")
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise ValueError(f"folds must be an int of at least 2, got {folds!r}")
    labels = np.concatenate([t.relations for t in items]).astype(str)
    found = dict(zip(*np.unique(labels, return_counts=True)))
    found = {str(k): int(v) for k, v in found.items()}
    chosen = check_relations(relations, found)
    if relations is None:
        chosen = [r for r in chosen if found[r] >= min_pairs]
    if len(chosen) < 2:
        raise ValueError(
            f"the probe needs two relations or more to tell apart; with at least {min_pairs} pairs there are "
            f"{chosen or 'none'} (found: {found}): give more text, relations=[...] or a lower min_pairs"
        )
    few = {r: found[r] for r in chosen if found[r] < folds}
    if few:
        raise ValueError(f"each relation needs at least folds={folds} pairs; these have fewer: {few}")
    x = np.concatenate([t.attention.reshape(t.relations.size, -1) for t in items]).astype(np.float64)
    groups = np.concatenate([np.full(t.relations.size, i) for i, t in enumerate(items)])
    keep = np.isin(labels, chosen)
    if np.unique(groups[keep]).size < folds:
        raise ValueError(f"{folds} folds of whole texts need at least {folds} texts with relations to classify")
    return x[keep], labels[keep].astype(object), groups[keep]


def _classifier():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))


def _head_weights(model, shape: tuple[int, int]) -> pd.DataFrame:
    """Every head's weight in a fitted probe, largest first (:class:`RelationProbe`)."""
    coef = model[-1].coef_.reshape(-1, len(DIRECTIONS), *shape)
    by_direction = np.sqrt((coef**2).sum(axis=0))  # (2, L, H)
    weight = np.sqrt((by_direction**2).sum(axis=0))
    layer, head = np.divmod(np.arange(weight.size), shape[1])
    direction = np.asarray(DIRECTIONS)[by_direction.reshape(2, -1).argmax(axis=0)]
    frame = pd.DataFrame({"layer": layer, "head": head, "weight": weight.ravel(), "direction": direction})
    return frame.sort_values("weight", ascending=False, kind="stable").reset_index(drop=True)
