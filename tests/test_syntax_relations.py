"""Which heads track which relation (headsne_widget.relation_heads, syntax.relations) on hand-written CoNLL-U and
attention planted by hand: a head that attends from each word to its syntactic head scores 1.0 on every relation,
a previous-word head scores what counting the offsets gives, the baseline is that count; then a tiny real model
through the capture, causal masking, and the bad inputs of issue 54 item 7."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from headsne_widget.capture.extracted import Extraction
from headsne_widget.studies.syntax import relation_heads
from headsne_widget.syntax.parses import parse
from headsne_widget.syntax.relations import best_heads, head_relation_scores, text_relations

NOUNS = ["cat", "dog", "bird", "child", "farmer", "teacher", "horse", "pilot"]
VERBS = ["saw", "fed", "liked", "heard", "chased", "found", "met", "knew"]


def sentence(k: int) -> tuple[str, str]:
    """Text k ("The cat saw a dog near the barn.") and its CoNLL-U: det, nsubj, root, det, dobj, prep, det, pobj,
    punct; every third text has an adjective before its object (amod), so the offsets differ between texts."""
    subject, verb, obj = NOUNS[k % 8], VERBS[(k * 3) % 8], NOUNS[(k + 3) % 8]
    words = [("The", "DET", 2, "det"), (subject, "NOUN", 3, "nsubj"), (verb, "VERB", 0, "ROOT"), ("a", "DET", 5, "det")]
    if k % 3 == 0:
        words = [*words[:3], ("a", "DET", 6, "det"), ("big", "ADJ", 6, "amod")]
    words.append((obj, "NOUN", 3, "dobj"))
    at = len(words)
    words += [("near", "ADP", at, "prep"), ("the", "DET", at + 3, "det"), ("barn", "NOUN", at + 1, "pobj"),
              (".", "PUNCT", 3, "punct")]  # fmt: skip
    text = " ".join(w for w, *_ in words[:-1]) + "."
    lines = [f"{i}\t{w}\t_\t{p}\t_\t_\t{h}\t{d}\t_\t_" for i, (w, p, h, d) in enumerate(words, 1)]
    return text, "\n".join(lines) + "\n\n"


def planted(text: str, words: pd.DataFrame, causal: bool = False, rng=None) -> Extraction:
    """An extraction of ``text`` with one token a word between [CLS] and [SEP], 2 layers x 3 heads: (0, 0) attends
    from each word to its syntactic head (a root to [CLS]), (0, 1) to the word before (the first word to [CLS]),
    the rest at random (seeded). ``causal``: no [SEP], and (0, 0) keeps only heads before their dependent."""
    rng = rng or np.random.default_rng(0)
    m = len(words)
    n = m + (1 if causal else 2)
    a = rng.random((2, 3, n, n)) + 0.1
    head = words["head"].to_numpy()
    a[0, 0] = a[0, 1] = 0.01
    for w in range(m):
        a[0, 0, w + 1, head[w] + 1 if head[w] >= 0 else 0] = 5.0
        a[0, 1, w + 1, w] = 5.0
    if causal:
        a = np.tril(a)
    a = (a / a.sum(-1, keepdims=True)).astype(np.float32)
    offsets = [None, *zip(words["start"].tolist(), words["end"].tolist())] + ([] if causal else [None])
    special = np.array([o is None for o in offsets])
    return Extraction(text, ["x"] * n, np.full(n, 100), offsets, special, max_attention=a.max(axis=-1),
                      model_name="planted", attentions=a, hidden_states=rng.random((3, n, 4)))  # fmt: skip


@pytest.fixture(scope="module")
def corpus() -> tuple[list[str], list[pd.DataFrame], list[Extraction]]:
    pairs = [sentence(k) for k in range(12)]
    texts = [t for t, _ in pairs]
    frames = parse(texts, "".join(c for _, c in pairs))
    return texts, frames, [planted(t, f) for t, f in zip(texts, frames)]


def counted_baseline(frames: list[pd.DataFrame], relation: str) -> tuple[float, int]:
    """The oracle: the share of ``relation``'s pairs at its most common offset (head row - dependent row)."""
    offsets = pd.concat([(f["head"] - f.index.to_series())[f["dep"] == relation] for f in frames])
    counts = offsets.value_counts()
    return counts.iloc[0] / counts.sum(), int(counts.index[0])


def test_a_head_planted_on_the_syntactic_heads_scores_one_on_every_relation(corpus):
    texts, frames, extractions = corpus
    table = relation_heads(extractions, parses=frames)
    dep_to_head = table[table["direction"] == "dependent->head"]
    planted_rows = dep_to_head[(dep_to_head["layer"] == 0) & (dep_to_head["head"] == 0)]
    assert set(planted_rows["relation"]) == {"det", "nsubj", "dobj", "prep", "pobj", "amod"}  # punct left out
    assert (planted_rows["accuracy"] == 1.0).all()
    best = best_heads(table)
    assert (best["accuracy"] == 1.0).all() and set(zip(best["layer"], best["head"])) == {(0, 0)}
    random_heads = dep_to_head[(dep_to_head["layer"] > 0) | (dep_to_head["head"] == 2)]
    assert (random_heads["accuracy"] < 1.0).all()  # (0, 1), the word before, gets prep (always at -1) right too


def test_the_baseline_and_a_previous_word_head_are_what_counting_gives(corpus):
    texts, frames, extractions = corpus
    table = relation_heads(extractions, parses=frames)
    for relation, rows in table.groupby("relation"):
        share, offset = counted_baseline(frames, relation)
        assert rows["baseline"].unique().tolist() == [pytest.approx(share)], relation
        assert rows["baseline_offset"].unique().tolist() == [offset]
        count = int(sum((f["dep"] == relation).sum() for f in frames))
        assert rows["count"].unique().tolist() == [count]
        # head (0, 1) attends to the word before: right where the head is the word before the dependent; the first
        # word attends to [CLS], not a candidate, so its candidates tie and the first of them (row 1) is chosen
        previous = rows[(rows["layer"] == 0) & (rows["head"] == 1) & (rows["direction"] == "dependent->head")]
        right = sum((((f["head"] - f.index.to_series()) == -1) | ((f.index == 0) & (f["head"] == 1)))[
            f["dep"] == relation].sum() for f in frames)  # fmt: skip
        assert previous["accuracy"].item() == pytest.approx(right / count), relation


def test_one_text_scores_and_the_relation_sort_of_a_grid(corpus):
    texts, frames, extractions = corpus
    scores = head_relation_scores(text_relations(extractions[0], frames[0]), "det")
    assert scores.shape == (2, 3) and scores[0, 0] == 1.0
    with pytest.raises(ValueError, match=r"unknown relation 'dett'.*found are: det \(3\)"):
        head_relation_scores(text_relations(extractions[0], frames[0]), "dett")


def test_a_causal_model_scores_only_the_direction_its_mask_allows(corpus):
    texts, frames, _ = corpus
    causal = [planted(t, f, causal=True) for t, f in zip(texts, frames)]
    table = relation_heads(causal, parses=frames)
    # det's head comes after its dependent: only head->dependent can be scored; dobj's head comes before
    assert set(table.loc[table["relation"] == "det", "direction"]) == {"head->dependent"}
    assert set(table.loc[table["relation"] == "dobj", "direction"]) == {"dependent->head"}
    dobj = table[(table["relation"] == "dobj") & (table["layer"] == 0) & (table["head"] == 0)]
    assert dobj["accuracy"].item() == 1.0


def test_bad_input_gets_a_clear_error(corpus):
    texts, frames, extractions = corpus
    with pytest.raises(ValueError, match=r"no 'iobj' relation in these texts; the relations found are: det \(36\)"):
        relation_heads(extractions, parses=frames, relations="iobj")
    with pytest.raises(ValueError, match=r"unknown relation 'subject' \(no parser gives it\)"):
        relation_heads(extractions, parses=frames, relations=["det", "subject"])
    one = parse("Hello", "1\tHello\t_\tINTJ\t_\t_\t0\tROOT\t_\t_\n\n")
    with pytest.raises(ValueError, match=r"no relation to score \(a one-word text has none\)"):
        relation_heads([planted("Hello", one[0])], parses=one)
    with pytest.raises(ValueError, match="does not match the text"):
        relation_heads(extractions[:1], parses=frames[1:2])
    with pytest.raises(ValueError, match="2 frames for 1 texts"):
        relation_heads(extractions[:1], parses=frames[:2])
    with pytest.raises(ValueError, match="pass no model"):
        relation_heads(extractions[:1], "some/model", parses=frames[:1])


def test_a_tiny_model_through_the_capture_and_dask(tiny_bert, corpus):
    """The capture path: a tiny random BERT, MiniLM's word pieces, in-process and on a local Dask cluster of
    threads: the same table (every head's word-level argmax is deterministic)."""
    texts, frames, _ = corpus
    sync = relation_heads(texts[:4], tiny_bert, parses=frames[:4], client="sync", progress=False)
    assert len(sync) == 2 * 4 * 2 * len(set(sync["relation"]))  # 2 layers x 4 heads x both directions
    assert sync["accuracy"].between(0, 1).all()
    pytest.importorskip("distributed")
    threads = relation_heads(texts[:4], tiny_bert, parses=frames[:4], client="threads", progress=False)
    pd.testing.assert_frame_equal(sync, threads)
