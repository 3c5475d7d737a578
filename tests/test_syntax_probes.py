"""The relation probe (Coenen et al. 2019) and the structural tree probe (Hewitt and Manning 2019) on planted data:
attention that tells det from nsubj in one head only, and word states laid out exactly as the tree in one layer."""

from __future__ import annotations

import numpy as np
import pytest
from test_syntax_relations import planted, sentence

from headsne_widget.capture.extracted import Extraction
from headsne_widget.studies.syntax import relation_probe, tree_probe
from headsne_widget.syntax.parses import parse


@pytest.fixture(scope="module")
def texts_and_frames():
    pairs = [sentence(k) for k in range(30)]
    texts = [t for t, _ in pairs]
    return texts, parse(texts, "".join(c for _, c in pairs))


def with_layer(ex: Extraction, attentions=None, states=None) -> Extraction:
    return Extraction(ex.text, ex.tokens, ex.token_ids, ex.offsets, ex.special, max_attention=ex.max_attention,
                      model_name="planted", attentions=ex.attentions if attentions is None else attentions,
                      hidden_states=ex.hidden_states if states is None else states)  # fmt: skip


def test_the_probe_separates_two_relations_planted_in_one_head(texts_and_frames):
    texts, frames = texts_and_frames
    rng = np.random.default_rng(1)
    extractions = []
    for text, words in zip(texts, frames):
        ex = planted(text, words, rng=rng)
        a = ex.attentions.copy()
        for w, (head, dep) in enumerate(zip(words["head"], words["dep"])):
            if dep in ("det", "nsubj"):  # head (1, 2): the dependent gives its head 0.6 for det, 0.3 for nsubj
                a[1, 2, w + 1] *= 0.4 / (a[1, 2, w + 1].sum() - a[1, 2, w + 1, head + 1])
                a[1, 2, w + 1, head + 1] = 0.6 if dep == "det" else 0.3
        extractions.append(with_layer(ex, attentions=a))
    probe = relation_probe(extractions, parses=frames, relations=["det", "nsubj"])
    assert probe.accuracy == 1.0 and probe.spread == 0.0
    assert probe.majority == pytest.approx(90 / 120)  # 3 det a text, 1 nsubj
    assert probe.counts.to_dict() == {"det": 90, "nsubj": 30}
    assert np.diag(probe.confusion.to_numpy()).tolist() == [90, 30]
    top = probe.heads.iloc[0]
    assert (top["layer"], top["head"], top["direction"]) == (1, 2, "dependent->head")


def path_states(words, n_tokens: int, width: int, rng) -> np.ndarray:
    """States whose squared distances are the tree distances: a word's state marks every word on its path to
    the root (one coordinate a word), in layer 1; layers 0 and 2 at random."""
    states = rng.normal(size=(3, n_tokens, width))
    states[1] = 0.0
    head = words["head"].to_numpy()
    for w in range(len(words)):
        j = w
        while j >= 0:
            states[1, w + 1, j] = 1.0
            j = head[j]
    return states


def test_the_tree_probe_finds_a_tree_laid_out_in_one_layer(texts_and_frames):
    texts, frames = texts_and_frames
    rng = np.random.default_rng(2)
    extractions = []
    for text, words in zip(texts, frames):
        ex = planted(text, words, rng=rng)
        extractions.append(with_layer(ex, states=path_states(words, ex.n_tokens, 16, rng)))
    table = tree_probe(extractions, parses=frames, rank=16, steps=300)
    assert table["layer"].tolist() == [0, 1, 2]
    assert table["test_sentences"].tolist() == [6] * 3 and table["train_sentences"].tolist() == [24] * 3
    laid_out, noise = table.iloc[1], table.iloc[0]
    assert laid_out["raw_spearman"] == pytest.approx(1.0)  # the states' own distances are the tree's
    assert laid_out["uuas"] == 1.0 and laid_out["spearman"] > 0.95
    assert laid_out["uuas"] > laid_out["chain_uuas"] and noise["uuas"] < 0.7 and abs(noise["raw_spearman"]) < 0.3


def test_probes_refuse_what_they_cannot_do(texts_and_frames):
    texts, frames = texts_and_frames
    extractions = [planted(t, f) for t, f in zip(texts[:6], frames[:6])]
    with pytest.raises(ValueError, match="two relations or more"):
        relation_probe(extractions, parses=frames[:6], relations=["det"])
    with pytest.raises(ValueError, match="folds must be an int of at least 2"):
        relation_probe(extractions, parses=frames[:6], relations=["det", "nsubj"], folds=1)
    with pytest.raises(ValueError, match=r"at least folds=10 pairs; these have fewer: \{.nsubj.: 6\}"):
        relation_probe(extractions, parses=frames[:6], relations=["det", "nsubj"], folds=10)
    with pytest.raises(ValueError, match="two sentences or more"):
        tree_probe(extractions[:1], parses=frames[:1])
