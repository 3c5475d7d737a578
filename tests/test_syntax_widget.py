"""Syntax in the widget (issue 54, item 5): ``color_by="pos"`` / ``"dep"`` colours each token by its word's label in
spaCy's parse, ``sort_heads="<relation>"`` ranks each layer's heads by how well they track that relation on this
text, and without a parser the widget keeps working and says what to install.

The oracles are independent of the widget's code: spaCy's own ``Doc`` (the token under each model token's first
character), a head planted by hand to attend from each word to its syntactic head, and the corpus function
``relation_heads`` on the same text and parse.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
import traitlets

pytest.importorskip("spacy")

from headsne_widget import HeadSNE, extract
from headsne_widget.capture.extracted import Extraction
from headsne_widget.errors import ParserUnavailableError
from headsne_widget.studies.syntax import relation_heads
from headsne_widget.syntax import parses
from headsne_widget.syntax.parses import SYNTAX_EXTRA, parse
from headsne_widget.widget import syntax_view

TEXT = "The old farmer sold his brown horse to a young teacher. She paid him in cash."
# more relations than the palette's ten colours: the rarest are grouped
LONG = (
    "When the committee finally met, the chairman, who had been waiting since noon, quickly read a letter that "
    "the mayor had written. Nobody laughed, but several members left early because they were tired and hungry!"
)


def codes_as_labels(w) -> list[str]:
    """What the browser is told: each token's category, from ``color_values`` and ``color_categories``."""
    values = np.asarray(w.color_values)
    assert values.dtype == np.float32 and values.shape == (len(w.tokens),)
    return [w.color_categories[int(v)] for v in values]


def spacy_labels(text: str, offsets, attribute: str) -> list[str]:
    """The oracle: spaCy's token under each model token's first non-space character, "(none)" for special tokens."""
    doc = parses.spacy_pipeline()(text)
    by_char = {}
    for token in doc:
        for c in range(token.idx, token.idx + len(token.text)):
            by_char[c] = getattr(token, attribute)
    labels = []
    for span in offsets:
        if span is None:
            labels.append("(none)")
            continue
        start = next(c for c in range(span[0], span[1]) if not text[c].isspace())
        labels.append(by_char[start])
    return labels


@pytest.fixture(scope="module")
def bert_ex(tiny_bert) -> Extraction:
    return extract(TEXT, tiny_bert)


@pytest.mark.parametrize(("mode", "attribute"), [("dep", "dep_"), ("pos", "pos_")])
def test_color_by_a_parse_gives_each_token_its_words_label(bert_ex, make, mode, attribute):
    w, _ = make(bert_ex, autostart=False)
    w.color_by = mode
    assert w.color_by == mode and w.color_mode == mode
    expected = spacy_labels(TEXT, bert_ex.offsets, attribute)
    assert codes_as_labels(w) == expected
    assert w.tokens[0] == "[CLS]" and expected[0] == "(none)"
    # the legend's order: the labels most frequent first (ties by name), "(none)" last
    counts = pd.Series([x for x in expected if x != "(none)"]).value_counts()
    ranked = sorted(counts.index, key=lambda label: (-counts[label], label))
    assert w.color_categories == [*ranked, "(none)"]


def test_color_by_dep_at_construction_and_from_the_browser(bert_ex, make):
    w, comm = make(bert_ex, n_iter=50, color_mode="dep")
    w.wait()
    assert codes_as_labels(w) == spacy_labels(TEXT, bert_ex.offsets, "dep_")
    comm.from_browser(color_mode="pos")
    assert codes_as_labels(w) == spacy_labels(TEXT, bert_ex.offsets, "pos_")


def test_more_labels_than_colours_group_the_rarest(tiny_bert):
    ex = extract(LONG, tiny_bert)
    values, categories = syntax_view.syntax_colours(ex, "dep")
    expected = spacy_labels(LONG, ex.offsets, "dep_")
    counts = pd.Series([x for x in expected if x != "(none)"]).value_counts()
    assert len(counts) > 10
    ranked = sorted(counts.index, key=lambda label: (-counts[label], label))
    assert categories == [*ranked[:8], "(other)", "(none)"]
    shown = [categories[int(v)] for v in values]
    assert shown == [x if x in ranked[:8] or x == "(none)" else "(other)" for x in expected]


def planted(text: str, words: pd.DataFrame, head: int, rng) -> Extraction:
    """``text`` one token a word between [CLS] and [SEP], 2 layers x 4 heads at random (seeded), but head ``head``
    of layer 0, which attends from each word to its syntactic head (a root to [CLS])."""
    m = len(words)
    n = m + 2
    a = rng.random((2, 4, n, n)) + 0.1
    a[0, head] = 0.01
    for i, h in enumerate(words["head"].tolist()):
        a[0, head, i + 1, h + 1 if h >= 0 else 0] = 5.0
    a = (a / a.sum(-1, keepdims=True)).astype(np.float32)
    offsets = [None, *zip(words["start"].tolist(), words["end"].tolist()), None]
    special = np.array([o is None for o in offsets])
    return Extraction(text, ["x"] * n, np.full(n, 100), offsets, special, max_attention=a.max(axis=-1),
                      model_name="planted", attentions=a, hidden_states=rng.random((3, n, 4)))  # fmt: skip


@pytest.fixture(scope="module")
def planted_ex() -> Extraction:
    words = parse(TEXT)[0]
    return planted(TEXT, words, head=2, rng=np.random.default_rng(3))


@pytest.mark.parametrize("relation", ["det", "nsubj", "amod", "poss"])
def test_sort_heads_by_a_relation_ranks_the_planted_head_first(planted_ex, make, relation):
    w, _ = make(planted_ex, autostart=False)
    assert w.head_order[0].tolist() == [0, 1, 2, 3]
    w.sort_heads = relation
    order = np.asarray(w.head_order)
    assert order[0, 0] == 2  # the head planted on the syntactic heads
    # every layer ordered as the corpus function scores the same text: the better direction, largest first
    table = relation_heads([planted_ex], parses=[parse(TEXT)[0]], relations=relation)
    best = table.groupby(["layer", "head"])["accuracy"].max().unstack().to_numpy()
    assert best[0, 2] == 1.0
    for layer in range(2):
        expected = sorted(range(4), key=lambda h: (-best[layer, h], h))
        assert order[layer].tolist() == expected
    w.sort_heads = ""
    assert np.asarray(w.head_order).tolist() == [[0, 1, 2, 3]] * 2


def test_a_relation_not_in_the_text_is_refused_with_those_found(planted_ex, make):
    w, comm = make(planted_ex, autostart=False)
    w.sort_heads = "previous"  # the scores still sort
    words = parse(TEXT)[0]
    counts = words.loc[words["head"] >= 0, "dep"].value_counts()  # every word with a head (the roots have none)
    listed = ", ".join(f"{r} ({c})" for r, c in sorted(counts.items(), key=lambda rc: (-rc[1], rc[0])))
    for name, says in (("dobjj", "unknown relation 'dobjj'"), ("iobj", "no 'iobj' relation in these texts")):
        with pytest.raises(traitlets.TraitError, match=says) as caught:
            w.sort_heads = name
        assert str(caught.value).endswith(f"the relations found are: {listed}")
        assert w.sort_heads == "previous"
    comm.from_browser(sort_heads="dobjj")  # the browser's: refused, shown, nothing else changes
    assert w.sort_heads == "previous" and "unknown relation 'dobjj'" in w.status


def test_a_relation_asked_before_the_text_is_captured_is_checked_when_it_is(tiny_bert, make):
    w, _ = make(TEXT, tiny_bert, sort_heads="iobj", autostart=False)
    w.wait_ready()
    assert w.sort_heads == "" and "no 'iobj' relation" in w.status
    assert np.asarray(w.head_order).tolist() == [[0, 1, 2, 3]] * 2


@pytest.fixture
def no_spacy(monkeypatch):
    """As if spaCy were not installed: nothing parsed and kept before counts."""
    syntax_view.text_parse.cache_clear()
    parses._load_spacy.cache_clear()
    monkeypatch.setitem(sys.modules, "spacy", None)
    yield
    syntax_view.text_parse.cache_clear()
    parses._load_spacy.cache_clear()


def test_without_a_parser_the_widget_keeps_working_and_names_the_extra(tiny_bert, make, no_spacy):
    ex = extract("A text that nobody parsed before this test.", tiny_bert)
    w, comm = make(ex, n_iter=50, color_mode="kind")
    assert w.wait() is not None
    with pytest.raises(ParserUnavailableError, match=SYNTAX_EXTRA.replace("[", r"\[").replace("]", r"\]")):
        w.color_by = "dep"
    assert w.color_mode == "kind"
    comm.from_browser(color_mode="pos")  # the browser's choice: back to the colouring before, the reason shown
    assert w.color_mode == "kind" and SYNTAX_EXTRA in w.status
    with pytest.raises(traitlets.TraitError, match="spaCy"):
        w.sort_heads = "det"
    assert w.sort_heads == ""
    w.layer = 1  # and it still runs
    assert w.wait() is not None and w.state == "done"


def spacy_tree(text: str, offsets) -> list[list[int]]:
    """The oracle of ``syntax_tree``: per model token, the first model token of its spaCy word and of that word's
    head (-1 for special tokens and roots), from spaCy's own Doc."""
    doc = parses.spacy_pipeline()(text)
    word_of = {}
    for token in doc:
        for c in range(token.idx, token.idx + len(token.text)):
            word_of[c] = token.i
    words = [
        None if span is None else word_of[next(c for c in range(*span) if not text[c].isspace())] for span in offsets
    ]
    first = {}
    for t, w in enumerate(words):
        if w is not None:
            first.setdefault(w, t)
    heads = [None if w is None or doc[w].head.i == w else doc[w].head.i for w in words]
    return [[-1 if w is None else first[w] for w in words], [-1 if h is None else first[h] for h in heads]]


def test_a_syntax_colouring_sends_each_tokens_word_and_head_for_the_arcs(tiny_bert, make):
    text = "The committee's tokenization of hyperparameters was unbelievably slow. Nobody laughed."
    ex = extract(text, tiny_bert)  # words in several pieces (token ##ization, hyper ##para ##meter ##s), two roots
    assert sum(t.startswith("##") for t in ex.tokens) >= 5
    w, _ = make(ex, autostart=False)
    assert w.syntax_tree is None
    w.color_by = "dep"
    tree = np.asarray(w.syntax_tree)
    assert tree.dtype == np.int32 and tree.shape == (2, ex.n_tokens)
    assert tree.tolist() == spacy_tree(text, ex.offsets)
    assert (tree[1] == -1).sum() == 2 + 2  # [CLS], [SEP] and the two sentences' roots
    w.color_by = "kind"
    assert w.syntax_tree is None


def test_the_head_map_colours_each_head_by_the_relation_it_tracks_best(planted_ex, make):
    w, _ = make(planted_ex, autostart=False)
    assert w.head_relations == []
    w.color_by = "dep"
    # the oracle: the corpus function on the same text and parse, relations of 3 pairs or more, best accuracy
    # (the first in the table's order on a tie), "(none)" below 0.5
    table = relation_heads([planted_ex], parses=[parse(TEXT)[0]])
    table = table[(table["count"] >= 3) & (table["relation"] != "punct")]
    expected = []
    for _, rows in table.groupby(["layer", "head"]):  # sorted: row-major, as head_kinds
        best = rows.loc[rows["accuracy"].idxmax()]
        expected.append(best["relation"] if best["accuracy"] >= 0.5 else "(none)")
    assert w.head_relations == expected
    assert w.head_relations[2] == "amod"  # the planted head (layer 0 head 2) gets all three right
    w.color_by = "position"
    assert w.head_relations == []


def test_a_words_occurrences_are_coloured_by_their_part_of_speech_in_each_text(tiny_bert, comms):
    texts = ["I sat by the river bank.", "The bank raised its rates.", "They bank on good weather.", "A bank closed."]
    w = HeadSNE.contexts("bank", texts, tiny_bert, autostart=False)
    try:
        w.wait_ready()
        w.color_by = "pos"
        nlp = parses.spacy_pipeline()
        expected = [next(t.pos_ for t in nlp(text) if t.text == "bank") for text in texts]  # each in its own text
        assert expected == ["NOUN", "NOUN", "VERB", "NOUN"]
        assert codes_as_labels(w) == expected
        assert w.head_relations == []  # no head's attention over the occurrences: no head map of relations
        with pytest.raises(traitlets.TraitError, match="needs each head's attention"):
            w.sort_heads = "det"
    finally:
        w.close()
