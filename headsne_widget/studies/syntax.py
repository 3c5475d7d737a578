"""What syntax a model's heads and states track, over a corpus: :func:`relation_heads` (Clark et al. 2019, Table 1),
:func:`relation_probe` (Coenen et al. 2019) and :func:`tree_probe` (Hewitt and Manning 2019), run on Dask as
:func:`~.corpus.corpus_study` is (:mod:`.workers`).

The client parses the texts (or takes the ``parses`` given: :func:`headsne_widget.parse`'s frames, a CoNLL-U,
anything :func:`~headsne_widget.syntax.parses.parse` takes as ``parser``) and submits one task per text carrying
the text and its parse; the task loads the model through the per-process cache, captures the text and sends back
what :mod:`headsne_widget.syntax` measures on it (its relations, each head's hits and the pair's attention vector;
for the tree probe the kept words' states), never an n x n array. ``client="sync"`` runs in this process without
Dask. ``texts`` may also be :class:`~headsne_widget.Extraction` objects (captured already, or made from attention
arrays of one's own): they are measured in this process, with no model.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .._checks import int_at_least
from .workers import run_tasks, session

if TYPE_CHECKING:
    import pandas as pd

    from ..capture.extracted import Extraction
    from ..syntax.probes import RelationProbe

__all__ = ["relation_heads", "relation_probe", "tree_probe"]


def relation_heads(
    texts: Iterable[Any],
    model: Any = None,
    *,
    parses: Any = None,
    relations: str | Iterable[str] | None = None,
    client: Any = None,
    max_tokens: int | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """One row per (relation, direction, layer, head): ``accuracy`` (the share of the relation's pairs where the
    head's most attended word is the other word), ``count``, ``baseline`` (the best fixed offset's share) and
    ``baseline_offset``; :func:`headsne_widget.syntax.relations.best_heads` gives each relation's best head.

    ``parses``: None (spaCy parses the texts), a list of parse frames (one a text), or what ``parse``'s ``parser``
    takes (a CoNLL-U string or file, a callable). ``relations``: the relations to score, by default every one found
    but punctuation. ``client``: as :func:`~.corpus.corpus_study`'s (None: the session's Dask client or a local one
    of threads; ``"sync"``: in this process). Raises ValueError for an unknown or absent relation (listing those
    found) and for texts with no relation at all (a one-word text).
    """
    from ..syntax.relations import relation_table

    measured = _measure(texts, model, parses, client, max_tokens, progress, states=False)
    return relation_table([m["relations"] for m in measured], relations)


def relation_probe(
    texts: Iterable[Any],
    model: Any = None,
    *,
    parses: Any = None,
    relations: str | Iterable[str] | None = None,
    folds: int = 5,
    seed: int = 0,
    client: Any = None,
    max_tokens: int | None = None,
    progress: bool = True,
) -> RelationProbe:
    """Coenen et al.'s classifier of a related pair's relation from its model-wide attention vector, cross-validated
    over ``folds`` of whole texts (:class:`~headsne_widget.syntax.probes.RelationProbe`: accuracy, spread, the
    majority baseline, a confusion table, the heads that weigh most). Arguments as :func:`relation_heads`."""
    from ..syntax.probes import fit_relation_probe

    measured = _measure(texts, model, parses, client, max_tokens, progress, states=False)
    return fit_relation_probe([m["relations"] for m in measured], relations, folds=folds, seed=seed)


def tree_probe(
    texts: Iterable[Any],
    model: Any = None,
    *,
    parses: Any = None,
    rank: int = 64,
    test_share: float = 0.2,
    steps: int = 400,
    seed: int = 0,
    client: Any = None,
    max_tokens: int | None = None,
    progress: bool = True,
) -> pd.DataFrame:
    """Per layer (0: the embeddings), the raw Spearman of squared state distance against tree distance and a trained
    rank-``rank`` distance probe's test Spearman and UUAS beside the chain baseline
    (:func:`~headsne_widget.syntax.trees.fit_tree_probe`), split by sentence (``test_share`` held out)."""
    from ..syntax.trees import fit_tree_probe

    rank, steps = int_at_least(rank, "rank", 1), int_at_least(steps, "steps", 1)
    measured = _measure(texts, model, parses, client, max_tokens, progress, states=True)
    sentences = [s for m in measured for s in m["sentences"]]
    return fit_tree_probe(sentences, rank=rank, test_share=test_share, steps=steps, seed=seed)


# ------------------------------------------------------------------------------------------------ the tasks


def measure_text(index: int, job: tuple[str, Any], model: Any, *, max_tokens: int | None, states: bool) -> list[dict]:
    """One text's task (in a worker or in-process): capture ``job``'s text, measure it against its parse."""
    from ..capture.extraction import extract, load_model

    text, words = job
    return [_measured(index, extract(text, load_model(model), max_tokens=max_tokens, progress=False), words, states)]


def _measured(index: int, ex: Extraction, words: pd.DataFrame, states: bool) -> dict[str, Any]:
    from ..syntax.alignment import align_extraction
    from ..syntax.relations import text_relations
    from ..syntax.trees import sentences_of

    al = align_extraction(ex, words)
    out: dict[str, Any] = {"text": index, "relations": text_relations(ex, words, al)}
    if states:
        out["sentences"] = sentences_of(words, al, ex.hidden_states, index)
    return out


def _measure(
    texts: Iterable[Any], model: Any, parses: Any, client: Any, max_tokens: Any, progress: bool, *, states: bool
) -> list[dict]:
    """What :func:`measure_text` gives for every text, in corpus order."""
    from ..capture.extracted import Extraction
    from .corpus import _check_max_tokens
    from .workers import progress_bar

    items: list[Any] = list(texts) if not isinstance(texts, str) else [texts]
    if not items:
        raise ValueError("texts is empty: give at least one text")
    captured = [isinstance(t, Extraction) for t in items]
    if any(captured) and not all(captured):
        raise TypeError("texts must be all strings or all Extraction objects, not a mix")
    raw = [t.text for t in items] if all(captured) else items
    frames = _parses(raw, parses)
    if all(captured):
        if model is not None:
            raise ValueError("the texts are Extraction objects (captured already): pass no model")
        return [_measured(i, ex, words, states) for i, (ex, words) in enumerate(zip(items, frames))]
    jobs = dict(enumerate(zip(raw, frames)))
    settings = {"max_tokens": _check_max_tokens(max_tokens), "states": states}
    with session(client) as active, progress_bar(len(jobs), 0, bool(progress)) as bar:
        measured = run_tasks(measure_text, jobs, settings, model, client=active, retries=0, bar=bar, on_text=None)
    return sorted(measured, key=lambda m: m["text"])


def _parses(texts: list[Any], parses: Any) -> list[pd.DataFrame]:
    """A checked parse frame of each text: from spaCy (None), the frames given, or ``parse``'s ``parser``."""
    from ..syntax.parses import check_parse, parse

    if parses is None:
        return parse(texts)
    if isinstance(parses, (list, tuple)) and all(hasattr(p, "columns") for p in parses):
        if len(parses) != len(texts):
            raise ValueError(f"parses has {len(parses)} frames for {len(texts)} texts: give one a text")
        return [check_parse(p, t, f"parses[{i}]", p.attrs.get("parser", "given")) for i, (p, t) in
                enumerate(zip(parses, texts))]  # fmt: skip
    return parse(texts, parses)
