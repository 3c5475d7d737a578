"""A word across many texts in the widget (issue 30, item 2): ``HeadSNE.contexts`` on the bundled MiniLM and
``texts.SENSES``. Oracles are independent of the package's capture: transformers' own forward pass with
``output_hidden_states`` / ``output_attentions`` (eager) on each sentence, the word's pieces found from the
tokenizer's offsets, and scikit-learn-free numpy (the Gaussians are checked elsewhere)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from recording_comm import run_threads, wait_until

from headsne_widget import HeadSNE
from headsne_widget.errors import TextTooLongError
from headsne_widget.texts import SENSES

SENTENCES = [s for s, _ in SENSES["bank"]]
LABELS = [sense for _, sense in SENSES["bank"]]


@pytest.fixture
def contexts(comms):
    """``contexts(word, texts, **kwargs)``: a widget, closed after the test with every run thread ended."""
    made: list[HeadSNE] = []

    def build(*args, **kwargs) -> HeadSNE:
        w = HeadSNE.contexts(*args, **kwargs)
        made.append(w)
        return w

    yield build
    for w in made:
        w.close()
    wait_until(lambda: run_threads() == [], 5, "every run thread to end after close")


@pytest.fixture(scope="module")
def oracle(minilm):
    """Per sentence: (hidden states (L + 1, n, d), attentions (L, H, n, n), the word's token span), from
    transformers directly (eager attention, float32)."""
    tokenizer, model = minilm.tokenizer, minilm.model
    out = []
    for sentence in SENTENCES:
        enc = tokenizer(sentence, return_offsets_mapping=True, return_tensors="pt")
        start = sentence.lower().index("bank")
        pieces = [i for i, (a, b) in enumerate(enc["offset_mapping"][0].tolist()) if a < start + 4 and b > start]
        with torch.inference_mode():
            res = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], output_hidden_states=True,
                        output_attentions=True)  # fmt: skip
        hidden = torch.stack(res.hidden_states)[:, 0].numpy()
        attentions = torch.stack(res.attentions)[:, 0].numpy()
        out.append((hidden, attentions, (pieces[0], pieces[-1] + 1)))
    return out


def test_one_point_per_occurrence_with_the_models_own_states_and_attention(contexts, minilm_path, oracle):
    w = contexts("bank", SENTENCES, minilm_path, autostart=False)
    ex = w.wait_ready(120)
    m = len(SENTENCES)
    assert (w.word, w.mode, w.layer, len(w.tokens)) == ("bank", "hidden", 5, m)  # the last layer by default
    lines = w.text.split("\n")
    assert lines == SENTENCES  # one sentence a line, in the order found
    assert [w.text[a:b] for a, b in w.offsets] == w.tokens == ["bank"] * m
    for layer in range(6):  # the layer's output hidden states, the word's pieces averaged (float32, 1e-5)
        expected = np.stack([h[layer + 1, a:b].mean(axis=0) for h, _, (a, b) in oracle])
        np.testing.assert_allclose(ex.layer_output(layer), expected, atol=1e-5, rtol=0)
    # the grid: each head's largest attention to the word from any query of its sentence, max over its pieces
    expected = np.stack([A[:, :, :, a:b].max(axis=(2, 3)) for _, A, (a, b) in oracle], axis=-1)
    assert w.max_attention.shape == (6, 12, m)
    np.testing.assert_allclose(w.max_attention, expected, atol=1e-5, rtol=0)
    occ = w.occurrences
    assert occ["text"].tolist() == list(range(m)) and occ["sentence"].tolist() == SENTENCES


def test_the_map_runs_live_follows_the_layer_and_selects_occurrences(contexts, minilm_path):
    w = contexts("bank", SENTENCES, minilm_path, labels=LABELS, n_iter=300, seed=3)
    w.wait_ready(120)
    assert w.color_mode == "user" and w.color_categories == ["finance", "river"]
    assert [w.color_categories[int(v)] for v in w.color_values] == LABELS
    kl = w.wait(120)
    assert kl is not None and 0 <= kl < 1 and w.embedding.shape == (len(SENTENCES), 2)
    last = w.embedding
    # the last layer separates the senses: each point's nearest neighbour in the map is of its own sense
    Y = w.embedding
    D = ((Y[:, None] - Y[None]) ** 2).sum(-1) + np.diag(np.full(len(Y), np.inf))
    same = np.mean([LABELS[i] == LABELS[j] for i, j in enumerate(D.argmin(1))])
    assert same >= 0.9, same
    w.layer = 0
    assert w.wait(120) is not None and w.status.startswith("done") and "layer 0" in w.status
    assert not np.allclose(w.embedding, last)
    w.selected = [1, 4, 7]
    assert w.occurrences.iloc[w.selected]["sentence"].tolist() == [SENTENCES[1], SENTENCES[4], SENTENCES[7]]


def test_modes_without_attention_between_points_are_refused_with_a_reason(contexts, minilm_path):
    w = contexts("bank", SENTENCES, minilm_path, autostart=False)
    w.wait_ready(120)
    w.mode = "attention"
    with pytest.raises(ValueError, match="20 occurrences of 'bank' across texts: there is no attention between"):
        w.wait(60)
    assert w.state == "error" and "no attention between them" in w.status


def test_bad_input_gets_a_clear_error(contexts, minilm_path):
    with pytest.raises(ValueError, match="'zebra' occurs in none of the 20 texts"):
        contexts("zebra", SENTENCES, minilm_path).wait_ready(120)
    with pytest.raises(ValueError, match="labels has 3 entries but 'bank' has 20 occurrences"):
        contexts("bank", SENTENCES, minilm_path, labels=LABELS[:3]).wait_ready(120)
    with pytest.raises(ValueError, match="'bank' occurs once in the texts; a map needs at least 4 occurrences"):
        contexts("bank", [*SENTENCES[:1], "No such word."], minilm_path).wait_ready(120)
    with pytest.raises(TypeError, match="labels must be one label per occurrence"):
        contexts("bank", SENTENCES, minilm_path, labels="finance")
    with pytest.raises(ValueError, match="the corpus is empty"):
        contexts("bank", [], minilm_path)
    with pytest.raises(ValueError, match="word is empty"):
        contexts("  ", SENTENCES, minilm_path)
    with pytest.raises(ValueError, match="term must be one of"):
        contexts("bank", SENTENCES, minilm_path, term="values")
    with pytest.raises(TextTooLongError, match=r"is 600 tokens for .* no text can hold it"):
        contexts(" ".join(["bank"] * 600), SENTENCES, minilm_path).wait_ready(120)
    one_text = HeadSNE(SENTENCES[0], minilm_path, autostart=False)
    try:
        with pytest.raises(AttributeError, match=r"occurrences come with HeadSNE\.contexts"):
            one_text.occurrences  # noqa: B018
    finally:
        one_text.close()
