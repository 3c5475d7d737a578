"""Parses as data (headsne_widget.syntax.parses) and words matched to tokens (syntax.alignment).

The parses are checked against hand-written CoNLL-U and a sentence whose spaCy parse is unambiguous; the alignment
against each tokenizer's own character offsets (BERT word pieces, GPT-2 byte-level BPE, a SentencePiece-style
Llama tokenizer trained here with ``tokenizers``' Metaspace: the ``sentencepiece`` package is not installed, and no
Llama tokenizer file is available offline).
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
from conftest import BPE_CORPUS, train_byte_level_bpe

from headsne_widget.errors import ParserUnavailableError
from headsne_widget.syntax import parses
from headsne_widget.syntax.alignment import align_words
from headsne_widget.syntax.parses import WORD_COLUMNS, check_parse, parse

# Two sentences in one text; "sat" is the first root, "It" the second sentence's subject.
TEXT = "The cat sat on the mat. It purred loudly."
CONLLU = """\
# text = The cat sat on the mat.
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_
4\ton\ton\tADP\tIN\t_\t6\tcase\t_\t_
5\tthe\tthe\tDET\tDT\t_\t6\tdet\t_\t_
6\tmat\tmat\tNOUN\tNN\t_\t3\tobl\t_\tSpaceAfter=No
7\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# text = It purred loudly.
1\tIt\tit\tPRON\tPRP\t_\t2\tnsubj\t_\t_
2\tpurred\tpurr\tVERB\tVBD\t_\t0\troot\t_\t_
3\tloudly\tloudly\tADV\tRB\t_\t2\tadvmod\t_\tSpaceAfter=No
4\t.\t.\tPUNCT\t.\t_\t2\tpunct\t_\t_

"""


def test_conllu_gives_the_contract_with_rows_spans_and_heads():
    (frame,) = parse(TEXT, CONLLU)
    assert list(frame.columns) == list(WORD_COLUMNS)
    assert frame["word"].tolist() == ["The", "cat", "sat", "on", "the", "mat", ".", "It", "purred", "loudly", "."]
    assert frame["head"].tolist() == [1, 2, -1, 5, 5, 2, 2, 8, -1, 8, 8]  # rows of the frame, -1 at the roots
    assert frame["sentence"].tolist() == [0] * 7 + [1] * 4
    assert frame["dep"].tolist()[:3] == ["det", "nsubj", "root"]
    for word, start, end in zip(frame["word"], frame["start"], frame["end"]):
        assert TEXT[start:end] == word
    assert frame.attrs == {"text": TEXT, "parser": "CoNLL-U"}


def test_conllu_sentences_fill_several_texts_in_order_and_files_work(tmp_path):
    path = tmp_path / "two.conllu"
    path.write_text(CONLLU, encoding="utf-8")
    first, second = parse(["The cat sat on the mat.", "It purred loudly."], str(path))
    assert first["word"].tolist()[-1] == "." and second["word"].tolist()[0] == "It"
    assert second["head"].tolist() == [1, -1, 1, 1]  # rows restart in each text


def test_a_multiword_token_splits_its_span_among_its_words():
    conllu = (
        "1-2\tdel\t_\t_\t_\t_\t_\t_\t_\t_\n1\tde\tde\tADP\t_\t_\t3\tcase\t_\t_\n2\tel\tel\tDET\t_\t_\t3\tdet\t_\t_\n"
        "3\tmar\tmar\tNOUN\t_\t_\t0\troot\t_\t_\n\n"
    )
    (frame,) = parse("del mar", conllu)
    assert frame["word"].tolist() == ["de", "el", "mar"]
    assert list(zip(frame["start"], frame["end"])) == [(0, 3), (3, 3), (4, 7)]  # "de"+"el" != "del": first takes it


def test_conllu_whose_words_are_not_the_text_says_where_they_part():
    with pytest.raises(ValueError, match=r"sentence 1, word 2 'cat' should come at character 4 .* 'dog sat"):
        parse("The dog sat on the mat. It purred loudly.", CONLLU)
    with pytest.raises(ValueError, match="ends before the texts do"):
        parse([TEXT, "Another text."], CONLLU)
    with pytest.raises(ValueError, match="more sentences than the texts hold"):
        parse("The cat sat on the mat.", CONLLU)


def test_spacy_parses_an_unambiguous_sentence():
    pytest.importorskip("spacy")
    (frame,) = parse("The cat sat on the mat.")
    assert frame["word"].tolist() == ["The", "cat", "sat", "on", "the", "mat", "."]
    assert frame["dep"].tolist() == ["det", "nsubj", "ROOT", "prep", "det", "pobj", "punct"]
    assert frame["head"].tolist() == [1, 2, -1, 2, 5, 3, 2]
    assert frame["pos"].tolist()[:3] == ["DET", "NOUN", "VERB"]
    assert frame.attrs["parser"].startswith("spaCy core_web_sm")


def test_spacy_drops_whitespace_tokens_and_counts_sentences():
    pytest.importorskip("spacy")
    text = "The cat sat.\n\n  It purred."
    (frame,) = parse(text)
    assert " " not in "".join(frame["word"]) and "\n" not in "".join(frame["word"])
    assert frame["sentence"].tolist() == [0, 0, 0, 0, 1, 1, 1]
    check_parse(frame, text)  # spans, heads, one root per sentence: the contract holds


def test_a_missing_parser_names_the_extra(monkeypatch):
    pytest.importorskip("spacy")
    with pytest.raises(ParserUnavailableError, match=r"no_such_pipeline.*headsne-widget\[syntax\]"):
        parse("The cat sat.", spacy_model="no_such_pipeline")
    parses._load_spacy.cache_clear()
    monkeypatch.setitem(sys.modules, "spacy", None)  # as if spaCy were not installed
    try:
        with pytest.raises(ParserUnavailableError, match=r"pip install 'headsne-widget\[syntax\]'"):
            parse("The cat sat.")
    finally:
        parses._load_spacy.cache_clear()
    monkeypatch.setitem(sys.modules, "conllu", None)
    with pytest.raises(ParserUnavailableError, match="conllu"):
        parse(TEXT, CONLLU)
    assert issubclass(ParserUnavailableError, ImportError)


def test_a_callable_parser_and_what_check_parse_refuses():
    def whitespace_chain(text: str) -> list[dict]:  # each word's head is the next word, the last a root
        words, rows, pos = text.split(), [], 0
        for i, w in enumerate(words):
            pos = text.index(w, pos)
            rows.append({"word": w, "start": pos, "end": pos + len(w), "dep": "dep", "head": i + 1})
            pos += len(w)
        rows[-1]["head"] = -1
        return rows

    (frame,) = parse("one two three", whitespace_chain)
    assert frame["head"].tolist() == [1, 2, -1] and frame["pos"].tolist() == ["", "", ""]
    assert frame.attrs["parser"].endswith("whitespace_chain")
    good = frame.copy()
    cycle = good.assign(head=[1, 0, -1])
    with pytest.raises(ValueError, match="cycle"):
        check_parse(cycle, "one two three")
    with pytest.raises(ValueError, match="has head 7"):
        check_parse(good.assign(head=[1, 7, -1]), "one two three")
    with pytest.raises(ValueError, match=r"word 1 'two' is 'twx'"):
        check_parse(good, "one twx three")
    with pytest.raises(ValueError, match="lacks the columns"):
        check_parse(good.drop(columns="head"), "one two three")
    with pytest.raises(ValueError, match="another sentence"):
        check_parse(good.assign(sentence=[0, 1, 1]), "one two three")
    with pytest.raises(TypeError, match="must return a DataFrame"):
        parse("one two", lambda text: 3)
    with pytest.raises(TypeError, match="parser must be"):
        parse("one two", 3)


# ------------------------------------------------------------------------------------------------ alignment

ALIGN_TEXT = "Well-known owners sold 1,234.5 kg (of tea) 😀 in São Paulo, didn't they?"


def hand_words(text: str) -> pd.DataFrame:
    """Words as a parser would cut them: runs of letters/digits (with , . inside numbers), runs of emoji (BERT
    keeps "😀😀" as one [UNK]: two words in one token is the case below) and single ASCII symbols."""
    import re

    spans = [m.span() for m in re.finditer(r"\d[\d,.]*\d|\w+|[^\w\s\x00-\x7f]+|[^\w\s]", text)]
    return pd.DataFrame({"word": [text[s:e] for s, e in spans], "start": [s for s, _ in spans],
                         "end": [e for _, e in spans], "dep": "dep", "head": -1})  # fmt: skip


def sentencepiece_tokenizer():
    """A Llama-style tokenizer: SentencePiece's Metaspace ("▁" for a space, prepended to the first word) and BPE
    with byte fallback, trained on the tests' small corpus."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"], show_progress=False)
    tok.train_from_iterator(BPE_CORPUS, trainer)
    return LlamaTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def tokenizer_named(name: str, bert_tokenizer):
    from transformers import GPT2TokenizerFast

    if name == "bert":
        return bert_tokenizer
    if name == "gpt2":
        return GPT2TokenizerFast(tokenizer_object=train_byte_level_bpe(["<|endoftext|>"]))
    return sentencepiece_tokenizer()


@pytest.mark.parametrize("name", ["bert", "gpt2", "sentencepiece"])
@pytest.mark.parametrize("text", [ALIGN_TEXT, "Go!", "  x-ray 42\t😀😀  "])
def test_every_word_gets_exactly_its_own_characters_from_the_tokenizers_offsets(name, text, bert_tokenizer):
    tokenizer = tokenizer_named(name, bert_tokenizer)
    enc = tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True)
    offsets = [None if special else tuple(o) for o, special in zip(enc["offset_mapping"], enc["special_tokens_mask"])]
    words = hand_words(text)
    al = align_words(text, offsets, words)
    assert al.aligned.all(), f"{name}: words without a token {words['word'][~al.aligned].tolist()}"
    for w, (start, end) in enumerate(zip(words["start"], words["end"])):
        pieces = al.tokens(w)
        assert np.all(np.diff(pieces) == 1), "a word's tokens are consecutive"
        # the oracle: the word's characters are those its tokens' offsets cover, less whitespace (a byte-level
        # BPE gives each byte token of an emoji the emoji's whole span)
        covered = {c for t in pieces for c in range(*offsets[t]) if not text[c].isspace()}
        assert covered == set(range(start, end)), (name, words["word"][w], [text[c] for c in sorted(covered)])
    for t, span in enumerate(offsets):
        if span is None or not text[span[0] : span[1]].strip():  # specials and "▁" / " " tokens alone
            assert al.token_word[t] == -1
    owned = al.token_word[al.token_word >= 0]
    assert owned[0] == 0 and owned[-1] == len(words) - 1  # the words at the very start and end have their tokens
    assert np.all(np.diff(owned) >= 0)  # tokens and words in the same order


def test_word_pooling_sums_to_a_word_and_averages_from_it():
    # tokens: [CLS] well - known owners [SEP]; words: "well-known" (3 pieces), "owners"
    text = "well-known owners"
    offsets = [None, (0, 4), (4, 5), (5, 10), (11, 17), None]
    al = align_words(text, offsets, [(0, 10), (11, 17)])
    assert al.token_word.tolist() == [-1, 0, 0, 0, 1, -1] and al.pieces.tolist() == [3, 1]
    rng = np.random.default_rng(0)
    a = rng.random((6, 6))
    a /= a.sum(axis=1, keepdims=True)
    w = al.to_words(a)
    assert w[0, 1] == pytest.approx(a[1:4, 4].mean())  # from a word: the mean of its pieces' rows
    assert w[1, 0] == pytest.approx(a[4, 1:4].sum())  # to a word: the sum over its pieces
    reaching_words = a[:, 1:5].sum(axis=1)  # each row's share that goes to words, not to [CLS] and [SEP]
    assert w.sum(axis=1) == pytest.approx([reaching_words[1:4].mean(), reaching_words[4]])
    states = rng.random((6, 3))
    assert al.states(states)[0] == pytest.approx(states[1:4].mean(axis=0))


def test_two_words_in_one_token_leave_the_second_without_one():
    # BERT's "[UNK]" for "😀😀": the token goes to the first word that holds its characters; the second word has
    # no token and is left out of every score (aligned False), never given a share of another's
    al = align_words("a 😀😀", [None, (0, 1), (2, 4), None], [(0, 1), (2, 3), (3, 4)])
    assert al.token_word.tolist() == [-1, 0, 1, -1] and al.aligned.tolist() == [True, True, False]
    assert al.to_words(np.full((4, 4), 0.25))[:, 2].tolist() == [0, 0, 0]
