"""word_contexts (issue 30): a word's occurrences across texts and their vectors at every layer, on the bundled
MiniLM; oracles are extract()'s hidden states and offsets, a loop-by-loop nearest centroid and decompose()."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from headsne_widget import extract, word_contexts
from headsne_widget.errors import TextTooLongError
from headsne_widget.studies.contexts import find_word
from headsne_widget.texts import SENSES

TEXTS = [
    "Bank holidays are long. The bank, by the river, opened its BANK vault.",
    "No word here but banks and embankment, bankers too.",
    "We rowed to the bank",
    "Bats use echolocation; echolocation (not sight) finds the moths.",
]


def _pieces(ex, start: int, end: int) -> tuple[int, int]:
    """Oracle token span: the tokens whose character spans lie inside the word's (extract's offsets)."""
    inside = [i for i, o in enumerate(ex.offsets) if o is not None and o[0] >= start and o[1] <= end]
    assert inside == list(range(inside[0], inside[-1] + 1))
    return inside[0], inside[-1] + 1


def test_occurrences_whole_words_any_case_in_order(minilm):
    ctx = word_contexts("bank", TEXTS, minilm, progress=False)
    occ = ctx.occurrences
    assert occ["text"].tolist() == [0, 0, 0, 2]  # not "banks", "embankment", "bankers"; texts then position
    assert [TEXTS[t][a:b] for t, a, b in zip(occ["text"], occ["start"], occ["end"])] == ["Bank", "bank", "BANK", "bank"]
    starts = [0, TEXTS[0].index("The bank,") + 4, TEXTS[0].index("BANK vault"), len(TEXTS[2]) - 4]
    assert occ["start"].tolist() == starts  # at the start, after "The " before ",", before " vault", at the end
    assert occ["sentence"].tolist()[:2] == ["Bank holidays are long.", "The bank, by the river, opened its BANK vault."]
    assert occ["sentence"].iat[3] == TEXTS[2] and occ["full_text"].iat[3] == TEXTS[2]
    assert ctx.X.shape == (4, 384) and ctx.X.dtype == np.float32 and ctx.states.shape == (4, 7, 384)
    assert find_word("bank", "bank's river-bank (bank) bank_x") == [(0, 4), (13, 17), (19, 23)]


UNSPACED = {  # a word three times in text written without spaces, each one inside a run of its script's letters
    "银行": "我去银行取钱，银行关门了。河岸不是银行。",
    "ธนาคาร": "ฉันไปธนาคารเพื่อถอนเงิน ธนาคารปิดแล้ว ริมน้ำไม่ใช่ธนาคาร",
}


@pytest.mark.parametrize("word", sorted(UNSPACED))
def test_a_word_in_text_without_spaces_is_found_every_time_with_a_warning(minilm, word):
    """Chinese and Thai put no space between words: every occurrence is found (the oracle: str.find), each
    vector the mean of extract()'s states over the tokens holding it, and one warning says that an occurrence
    may be part of a longer word (and, Thai here, that MiniLM's tokenizer keeps runs it does not know as one
    [UNK] token)."""
    text = UNSPACED[word]
    starts, at = [], text.find(word)
    while at >= 0:
        starts.append(at)
        at = text.find(word, at + 1)
    assert len(starts) == 3
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ctx = word_contexts(word, [text, "no such word here"], minilm, progress=False)
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    assert len(messages) == 1 and "3 sit in text written without spaces" in messages[0], messages
    assert ("share a token with other characters" in messages[0]) == (word == "ธนาคาร")
    assert caught[0].filename == __file__  # points at the caller, not inside the package
    assert ctx.occurrences["start"].tolist() == starts
    ex = extract(text, minilm)
    for row, start in enumerate(starts):
        overlap = [i for i, o in enumerate(ex.offsets) if o is not None and o[0] < start + len(word) and o[1] > start]
        a, b = overlap[0], overlap[-1] + 1
        np.testing.assert_allclose(ctx.states[row], ex.hidden_states[:, a:b].mean(axis=1), rtol=1e-4, atol=2e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # spaced text: no warning
        word_contexts("bank", TEXTS, minilm, progress=False)


def test_rows_are_the_mean_of_the_pieces_in_extract(minilm):
    ctx = word_contexts("echolocation", TEXTS, minilm, progress=False)
    ex = extract(TEXTS[3], minilm)
    assert len(ctx.occurrences) == 2 and ctx.layers == ex.n_layers + 1
    for row, (start, end) in enumerate(find_word("echolocation", TEXTS[3])):
        a, b = _pieces(ex, start, end)
        assert b - a > 1  # split into word pieces: one occurrence
        assert (ctx.occurrences["token_start"].iat[row], ctx.occurrences["token_end"].iat[row]) == (a, b)
        expected = ex.hidden_states[:, a:b].mean(axis=1)
        np.testing.assert_allclose(ctx.states[row], expected, rtol=1e-4, atol=2e-5)
        np.testing.assert_allclose(ctx.at(2)[row], ex.layer_output(1)[a:b].mean(axis=0), rtol=1e-4, atol=2e-5)
    np.testing.assert_array_equal(ctx.X, ctx.at(-1))
    np.testing.assert_array_equal(word_contexts("echolocation", TEXTS, minilm, layer=0, progress=False).X, ctx.at(0))


def test_attention_keeps_each_heads_largest_attention_to_the_word_max_over_its_pieces(minilm):
    ctx = word_contexts("echolocation", TEXTS, minilm, progress=False, attention=True)
    assert word_contexts("echolocation", TEXTS, minilm, progress=False).max_attention is None  # only when asked
    ex = extract(TEXTS[3], minilm)
    assert ctx.max_attention.shape == (ex.n_layers, ex.n_heads, 2)
    for row, (start, end) in enumerate(find_word("echolocation", TEXTS[3])):
        a, b = _pieces(ex, start, end)
        expected = ex.attentions[:, :, :, a:b].max(axis=(2, 3))  # max over queries and over the word's pieces
        np.testing.assert_allclose(ctx.max_attention[:, :, row], expected, atol=1e-6, rtol=0)
        assert not np.allclose(expected, ex.attentions[:, :, :, a].max(axis=2))  # the pieces differ: max matters
    np.testing.assert_array_equal(ctx.states, word_contexts("echolocation", TEXTS, minilm, progress=False).states)


def test_the_same_sentence_twice_gives_identical_rows(minilm):
    sentence = "He sat on the bank of the river."
    ctx = word_contexts("bank", [sentence, "A bank lends money.", sentence], minilm, progress=False)
    np.testing.assert_array_equal(ctx.states[0], ctx.states[2])
    assert not np.array_equal(ctx.states[0, -1], ctx.states[1, -1])


def _loo_oracle(X: np.ndarray, labels: list[str]) -> float:
    """Leave-one-out nearest centroid by cosine, one occurrence at a time."""
    labels_arr, right = np.asarray(labels), 0
    for i in range(len(X)):
        keep = np.arange(len(X)) != i
        senses = sorted(set(labels))
        cents = [X[keep & (labels_arr == s)].mean(axis=0) for s in senses]
        cos = [X[i] @ c / np.linalg.norm(X[i]) / np.linalg.norm(c) for c in cents]
        right += senses[int(np.argmax(cos))] == labels[i]
    return right / len(X)


def test_centroid_accuracy_is_leave_one_out_nearest_centroid(minilm):
    rows = SENSES["spring"]
    ctx = word_contexts("spring", [s for s, _ in rows], minilm, progress=False)
    labels = [label for _, label in rows]
    per_layer = ctx.centroid_accuracy(labels)
    expected = [_loo_oracle(ctx.at(k).astype(np.float64), labels) for k in range(ctx.layers)]
    np.testing.assert_allclose(per_layer.to_numpy(), expected)
    assert ctx.centroid_accuracy(labels, layer=3) == expected[3]
    rng = np.random.default_rng(0)  # three senses, uneven, random points
    ctx.states = rng.normal(size=(20, 2, 5)).astype(np.float32) + np.repeat(np.eye(5)[:2], 10, axis=0)[:, None]
    ctx.occurrences = ctx.occurrences.iloc[:20]
    random_labels = list("aab" * 6 + "cc")
    assert ctx.centroid_accuracy(random_labels, 1) == _loo_oracle(ctx.at(1).astype(np.float64), random_labels)


def test_senses_separate_along_the_layers_on_every_word(minilm):
    first, last = [], []
    for word, rows in SENSES.items():
        assert len(rows) >= 20 and len({label for _, label in rows}) == 2
        ctx = word_contexts(word, [s for s, _ in rows], minilm, progress=False)
        assert len(ctx.occurrences) == len(rows)  # the word once in every sentence: labels line up
        accuracy = ctx.centroid_accuracy([label for _, label in rows])
        first.append(accuracy.iat[0])
        last.append(accuracy.iat[-1])
    assert all(b >= a for a, b in zip(first, last)), (first, last)
    assert np.mean(last) >= 0.9 and np.mean(last) >= np.mean(first) + 0.15, (first, last)


def test_concatenation_pulls_towards_the_other_sense(minilm):
    rows = SENSES["bank"]
    ctx = word_contexts("bank", [s for s, _ in rows], minilm, progress=False)
    ratio = ctx.concatenation_ratio([label for _, label in rows], seed=0)
    assert ratio["layer"].tolist() == list(range(7))
    assert (ratio["concatenated"].iloc[1:] > ratio["alone"].iloc[1:]).all()
    alone = ctx.at(6).astype(np.float64)  # the text is the sentence: "alone" is the rows themselves
    own = alone[11:20].mean(axis=0)  # occurrence 10 (river) against river without it and finance
    other = alone[:10].mean(axis=0)
    cos = [alone[10] @ c / np.linalg.norm(alone[10]) / np.linalg.norm(c) for c in (other, own)]
    assert cos[0] / cos[1] < ratio["alone"].iat[6] + 0.2  # sanity of the measure's scale


def test_decomposed_terms(minilm):
    from headsne_widget.capture.decompose import decompose

    text = "The bank of the river flooded."
    hidden = word_contexts("bank", [text], minilm, progress=False)
    attention = word_contexts("bank", [text], minilm, term="attention", progress=False)
    ex = extract(text, minilm)
    a, b = _pieces(ex, 4, 8)
    # layer 0's input term: the paper's, the embeddings' sum times the embedding LayerNorm's gain / std (no bias, no
    # mean shift), read here from the model's own LayerNorm call
    seen: list = []
    norm = minilm.model.embeddings.LayerNorm
    hook = norm.register_forward_hook(lambda m, args, out: seen.append(args[0][0].double().numpy()))
    with torch.no_grad():
        minilm.model(input_ids=torch.as_tensor(np.array(ex.token_ids))[None])
    hook.remove()
    x0 = seen[0]
    paper = x0 * norm.weight.detach().double().numpy() / np.sqrt(x0.var(axis=1, keepdims=True) + norm.eps)
    inputs = word_contexts("bank", [text], minilm, term="input", progress=False)
    np.testing.assert_allclose(inputs.at(0)[0], paper[a:b].mean(axis=0), rtol=1e-5, atol=1e-6)
    assert not np.allclose(inputs.at(0), hidden.at(0), atol=1e-2)  # the bias and mean shift are not in it
    assert not attention.at(0).any()
    parts = decompose(ex, 5, model=minilm)
    expected = parts.vectors[(parts.terms["term"] == "head").to_numpy()].sum(axis=0)[a:b].mean(axis=0)
    np.testing.assert_allclose(attention.X[0], expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="'hidden', 'input', 'attention', 'mlp'"):
        word_contexts("bank", [text], minilm, term="head")


def test_bad_input(minilm):
    with pytest.raises(ValueError, match=r"'zebra' occurs in none of the 4 texts"):
        word_contexts("zebra", TEXTS, minilm, progress=False)
    with pytest.raises(ValueError, match="empty"):
        word_contexts("bank", [], minilm, progress=False)
    with pytest.raises(TypeError, match="word must be a str"):
        word_contexts(b"bank", TEXTS, minilm, progress=False)
    with pytest.raises(TextTooLongError, match=r"is 600 tokens for .* at most 512 positions"):
        word_contexts(" ".join(["bank"] * 600), TEXTS, minilm, progress=False)
    one = word_contexts("river", TEXTS, minilm, progress=False)
    assert one.X.shape == (1, 384)
    with pytest.raises(ValueError, match="t-SNE needs at least 4 points: 'river' has 1 occurrence"):
        one.tsne()
    ctx = word_contexts("bank", TEXTS, minilm, progress=False)
    with pytest.raises(ValueError, match="labels has 3 entries but 'bank' has 4 occurrences"):
        ctx.centroid_accuracy(["a", "b", "a"])
    with pytest.raises(ValueError, match="at least 2 senses with at least 2 occurrences"):
        ctx.centroid_accuracy(["a", "a", "a", "b"])
    with pytest.raises(IndexError, match="layer 7 is out of range"):
        ctx.at(7)


def test_threads_give_the_in_process_rows(minilm_path):
    pytest.importorskip("distributed")
    rows = [s for s, _ in SENSES["bat"][:6]]
    here = word_contexts("bat", rows, minilm_path, client="sync", progress=False)
    there = word_contexts("bat", rows, minilm_path, client="threads", progress=False)
    np.testing.assert_allclose(here.states, there.states, rtol=1e-5, atol=5e-6)  # torch threads: 1 here, 2 there
    assert here.occurrences.equals(there.occurrences)


@pytest.mark.parametrize(
    ("mode", "what"), [("norm", "value-weighted attention"), ("head-output", "what a head writes")]
)
def test_norm_and_head_output_modes_on_contexts_say_why_not(minilm, mode, what):
    """The contexts view's points are occurrences across texts: the error says that, not "extract(text, model,
    components=True)", which cannot apply there."""
    from headsne_widget import selection_affinities
    from headsne_widget.capture.occurrences import capture_occurrences

    texts = ["the bank of the river", "a bank lends money", "the bank", "bank on it", "my bank"]
    ex = capture_occurrences("bank", texts, minilm)
    with pytest.raises(ValueError, match=rf"{what} .* 5 occurrences of 'bank' across texts.*mode='hidden'") as error:
        selection_affinities(ex, mode, 0, 0)
    assert "components=True" not in str(error.value)
