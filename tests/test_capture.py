"""The per-layer capture: chunked queries, bounded memory at long texts, the memory budget of the dense arrays,
attention sinks, and the architectures it refuses or reads the eager way."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import torch

from headsne_widget import errors, extract
from headsne_widget.capture import layers, masks, sources
from headsne_widget.capture.extraction import load_model
from headsne_widget.capture.sources import CapturedAttention, DenseAttention
from headsne_widget.texts import TSNE_ABSTRACT


def eager_attentions(path: str, token_ids: np.ndarray) -> np.ndarray:
    from transformers import AutoModel

    model = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(token_ids)[None], output_attentions=True)
    return torch.cat(out.attentions).float().numpy()


def extract_n(path, n: int, text: str = TSNE_ABSTRACT, **options):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "text truncated", UserWarning)
        return extract(text, path, device="cpu", max_tokens=n, **options)


def long_text(n_words: int) -> str:
    words = TSNE_ABSTRACT.split()
    return " ".join(words[i % len(words)] for i in range(n_words))


def save_tiny(config_name: str, model_name: str, directory, tokenizer, **arguments) -> str:
    """A seeded random model of a class not in TINY_ARCHITECTURES, saved with ``tokenizer``."""
    import transformers

    config = getattr(transformers, config_name)(vocab_size=tokenizer.vocab_size, initializer_range=0.2, **arguments)
    torch.manual_seed(0)
    getattr(transformers, model_name)(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return os.fspath(directory)


# ---------------------------------------------------------------------------------------- query chunks


@pytest.mark.parametrize("architecture", ["mistral", "modernbert", "gemma2"])
def test_many_small_chunks_equal_eager(architecture, tiny_model_dir, monkeypatch):
    """Chunks of 5 query rows (chunk borders inside the sliding windows) give the eager attention exactly."""
    path = tiny_model_dir(architecture)
    monkeypatch.setattr(layers, "CHUNK_BYTES", 5 * 4 * 4 * 100)  # 5 rows of 4 heads x 100 keys
    ex = extract_n(path, n=100)
    assert ex.attention_source.layers[0].chunk_rows() == 5
    if architecture == "mistral":  # a chunk computes only the keys it may see: causal window of 32
        keys, weights = ex.attention_source.layers[0].weights(slice(50, 55))
        assert keys == slice(19, 55) and weights.shape == (4, 5, 36)
    A = eager_attentions(path, ex.token_ids)
    np.testing.assert_allclose(ex.max_attention, A.max(axis=2), atol=1e-5, rtol=0)
    for layer in range(2):
        np.testing.assert_allclose(ex.attention(layer, 3), A[layer, 3], atol=1e-5, rtol=0)
    np.testing.assert_allclose(ex.attentions, A, atol=1e-5, rtol=0)


@pytest.mark.parametrize("architecture", ["llama", "mistral", "modernbert"])
def test_chunks_seen_in_the_forward_are_masked_from_their_spans_with_the_same_bits(
    architecture, tiny_model_dir, monkeypatch
):
    """The forward pass keeps each chunk's mask as every row's first and last key (causal, a causal window, a
    bidirectional window); a head recomputed later masks from those spans: they are the mask's rows, and the
    head is the one transformers' mask function gives over the same chunks, bit for bit."""
    path = tiny_model_dir(architecture)
    monkeypatch.setattr(layers, "CHUNK_BYTES", 5 * 4 * 4 * 100)  # chunks of 5 x 100 scores a head: borders in windows
    ex = extract_n(path, n=100)
    masked = [layer for layer in ex.attention_source.layers if isinstance(layer.mask, masks.MaskRows)]
    assert masked
    for layer in masked:
        for rows in layer.chunks():
            keys, first, last = layer.mask.spans(rows)
            allowed = layer.mask.allowed(rows.start, rows.stop, torch.device("cpu"))[0, 0].numpy()
            columns = np.arange(allowed.shape[1])
            np.testing.assert_array_equal((columns >= first.numpy()) & (columns <= last.numpy()), allowed)
            assert keys == slice(int(first.min()), int(last.max()) + 1)
    from_spans = [layer.heads() for layer in masked]
    monkeypatch.setattr(masks.MaskRows, "spans", lambda self, rows: None)  # the same chunks, masked by
    for layer, heads in zip(masked, from_spans):  # transformers' mask function each time
        np.testing.assert_array_equal(heads, layer.heads())


def test_one_head_recomputed_alone_is_the_every_head_pass_bit_for_bit(bert_tokenizer, tmp_path, monkeypatch):
    """A GQA head of 64 dimensions in chunks of 2 query rows (as a long causal text's last chunks): the head
    recomputed alone (the dense head, its sparse rows) is, bit for bit, what the pass over every head gave
    (``heads()``, and the forward pass's grid); torch's product of fewer rows sums in another order."""
    path = save_tiny(
        "LlamaConfig", "LlamaModel", tmp_path / "llama64", bert_tokenizer, hidden_size=256, num_attention_heads=4,
        num_key_value_heads=2, head_dim=64, intermediate_size=64, num_hidden_layers=1, max_position_embeddings=512,
    )  # fmt: skip
    n = 300
    monkeypatch.setattr(layers, "CHUNK_BYTES", 2 * 4 * 4 * n)  # 2 rows of 4 heads over every key
    ex = extract_n(path, n=n, text=long_text(300))
    layer = ex.attention_source.layers[0]
    every = layer.heads()
    for head in range(4):
        np.testing.assert_array_equal(layer.heads(head)[0], every[head])
        S = ex.sparse_attention(0, head, 1.0)
        np.testing.assert_array_equal(S.toarray(), every[head])
    np.testing.assert_array_equal(ex.max_attention[0], every.max(axis=1))


@pytest.mark.parametrize(("architecture", "n"), [("llama", 100), ("mistral", 100), ("modernbert", 100), ("bert", 60)])
def test_chunks_tile_the_rows_and_are_sized_by_their_key_span(architecture, n, tiny_model_dir, monkeypatch):
    """A pass takes its query rows in consecutive chunks; where the mask's rows are unbroken runs of keys
    (causal, windows) a chunk takes as many rows as keep its scores within CHUNK_BYTES over its key span, so a
    window's chunks take more rows than a full row's width allows; without a mask, chunk_rows() rows each."""
    budget = 5 * 4 * 4 * 100
    monkeypatch.setattr(layers, "CHUNK_BYTES", budget)
    ex = extract_n(tiny_model_dir(architecture), n=n)
    for layer in ex.attention_source.layers:
        chunks = list(layer.chunks())
        assert [c.start for c in chunks] == [0] + [c.stop for c in chunks[:-1]] and chunks[-1].stop == n
        sizes = []
        for rows in chunks:
            keys, weights = layer.weights(rows)
            sizes.append(rows.stop - rows.start)
            assert weights.shape == (4, sizes[-1], keys.stop - keys.start)
            assert weights.numel() * 4 <= budget or sizes[-1] == 1
        if isinstance(layer.mask, masks.MaskRows):  # every mask here has rows that see fewer than n keys
            assert max(sizes) > layer.chunk_rows() == budget // (4 * 4 * n)
        else:
            assert set(sizes[:-1]) == {layer.chunk_rows()}


def test_a_mask_with_holes_or_an_empty_row_keeps_transformers_mask_function():
    """Spans only where every row attends to one unbroken run of keys: a row with a hole, or none at all, is
    masked by the mask function every time."""
    rows = slice(0, 6)
    for holes in (lambda b, h, q, kv: (kv % 2 == 0) | (kv == q), lambda b, h, q, kv: (kv <= q) & (q != 3)):
        mask = masks.MaskRows(1, 6, 6, 0, 0, holes, None, False, torch.float32)
        assert mask.spans(rows) is None  # nothing learnt yet
        mask.learn_spans(rows, mask.allowed(0, 6, torch.device("cpu"))[0])
        assert mask.spans(rows) is None
    causal = masks.MaskRows(1, 6, 6, 0, 0, lambda b, h, q, kv: kv <= q, None, False, torch.float32)
    causal.learn_spans(slice(2, 5), causal.allowed(2, 5, torch.device("cpu"))[0])
    keys, first, last = causal.spans(slice(2, 5))
    assert keys == slice(0, 5) and first.ravel().tolist() == [0, 0, 0] and last.ravel().tolist() == [2, 3, 4]
    keys, first, last = causal.spans(slice(3, 4))  # rows are learnt one by one: any chunk of them has its spans
    assert keys == slice(0, 4) and last.ravel().tolist() == [3]
    assert causal.spans(slice(1, 4)) is None  # row 1 was never built
    causal.forget_spans()
    assert causal.spans(slice(2, 5)) is None


def _built_runs(mask_function, q_offset, q_length, kv_offset, kv_length):
    """Each row's first and last allowed key and whether they are one unbroken run, read off transformers' own
    built mask (the oracle for spans derived without building it)."""
    from transformers.masking_utils import sdpa_mask

    grid = sdpa_mask(
        batch_size=1, q_length=q_length, kv_length=kv_length, q_offset=q_offset, kv_offset=kv_offset,
        mask_function=mask_function, allow_is_causal_skip=False,
    )[0, 0].numpy()  # fmt: skip
    runs = []
    for row in grid:
        keys = np.flatnonzero(row)
        unbroken = keys.size > 0 and keys[-1] - keys[0] + 1 == keys.size
        runs.append((int(keys[0]), int(keys[-1]), True) if unbroken else (None, None, False))
    return runs


def _mask_functions():
    from transformers import masking_utils as m

    pad = torch.tensor([3])
    return {
        "causal": m.causal_mask_function,
        "bidirectional": m.bidirectional_mask_function,
        "window 5": m.sliding_window_causal_mask_function(5),
        "window 1": m.sliding_window_causal_mask_function(1),
        "bidirectional window 4": m.sliding_window_bidirectional_mask_function(4),
        "chunks of 7 after 3 padded": m.chunked_causal_mask_function(7, pad),
        "window and chunks": m.and_masks(m.sliding_window_overlay(4), m.chunked_causal_mask_function(6, pad)),
    }


@pytest.mark.parametrize("name", list(_mask_functions()))
@pytest.mark.parametrize(
    ("q_offset", "q_length", "kv_offset", "kv_length"), [(0, 40, 0, 40), (5, 20, 0, 25), (9, 12, 4, 30)]
)
def test_spans_derived_from_transformers_mask_functions_equal_their_built_rows(
    name, q_offset, q_length, kv_offset, kv_length
):
    """Causal, window and chunk masks (transformers' own functions) give every row's run of keys without building
    the rows, equal to the built mask's row by row, with offsets and rows that see no key at all."""
    function = _mask_functions()[name]
    derived = masks.known_spans(function, q_offset, q_length, kv_offset, kv_length)
    assert derived is not None
    first, last, unbroken = derived
    expected = _built_runs(function, q_offset, q_length, kv_offset, kv_length)
    got = [(int(a), int(b), True) if u else (None, None, False) for a, b, u in zip(first, last, unbroken)]
    assert got == expected


def test_spans_are_built_for_any_other_mask_function():
    """A union of masks, padding, or a function of one's own may leave holes: its rows are built, as before, and
    a MaskRows with padding learns nothing without them."""
    from transformers import masking_utils as m

    for function in (
        m.or_masks(m.sliding_window_overlay(3), m.causal_mask_function),
        m.and_masks(m.causal_mask_function, m.padding_mask_function(torch.ones(1, 8, dtype=torch.bool))),
        lambda b, h, q, kv: kv <= q,
    ):
        assert masks.known_spans(function, 0, 8, 0, 8) is None
    padded = masks.MaskRows(1, 8, 8, 0, 0, m.causal_mask_function, torch.ones(1, 8, dtype=bool), False, torch.float32)
    assert not padded.learn_known_spans() and padded.spans(slice(0, 8)) is None
    causal = masks.MaskRows(1, 8, 8, 0, 0, m.causal_mask_function, None, False, torch.float32)
    assert causal.learn_known_spans() and causal.learnt()
    assert causal.spans(slice(6, 8))[2].ravel().tolist() == [6, 7]


def test_derived_spans_that_disagree_with_the_built_rows_are_not_learnt(monkeypatch):
    """The derived runs are checked against rows built at the start, the middle and the end of the mask: a run
    one key off anywhere there (as a transformers that changed a function's meaning would give) learns nothing."""
    from transformers import masking_utils as m

    derive = masks.known_spans
    for row in (0, 50, 99):

        def off_by_one(*args, row=row):
            first, last, unbroken = derive(*args)
            last = last.copy()
            last[row] += 1
            return first, last, unbroken

        monkeypatch.setattr(masks, "known_spans", off_by_one)
        mask = masks.MaskRows(1, 100, 101, 0, 0, m.sliding_window_causal_mask_function(8), None, False, torch.float32)
        assert not mask.learn_known_spans() and not mask.learnt()
    monkeypatch.setattr(masks, "known_spans", derive)
    assert mask.learn_known_spans() and mask.learnt()


# ------------------------------------------------------------------------------------------- long texts


def test_4k_tokens_store_o_n_bytes(long_llama_dir):
    """At 4096 tokens the extraction keeps the grid, q/k and hidden states: O(L*H*n), far below L*H*n^2."""
    ex = extract_n(long_llama_dir, n=4096, text=long_text(4000))
    L, H, n, kv_heads, head_dim, d = 2, 4, 4096, 2, 16, 64
    assert (ex.n_layers, ex.n_heads, ex.n_tokens, ex.kv_groups) == (L, H, n, 2)
    expected = 4 * (L * H * n + L * n * (H + kv_heads) * head_dim + (L + 1) * n * d)
    assert ex.nbytes == expected  # 6.1 MiB
    assert ex.nbytes < 4 * L * H * n * n / 80  # the dense heads would be 512 MiB
    layer = ex.attention_source.layers[1]
    assert layer.query.shape == (H, n, head_dim) and layer.key.shape == (kv_heads, n, head_dim)
    assert layer.chunk_rows() < n  # the forward really ran in query chunks
    A = ex.attention(1, 2)
    np.testing.assert_allclose(A.sum(axis=1), 1.0, atol=1e-4)
    assert (A[np.triu_indices(n, k=1)] == 0).all()  # causal
    np.testing.assert_allclose(A.max(axis=0), ex.max_attention[1, 2], atol=1e-6, rtol=0)
    np.testing.assert_allclose(A[0, 0], 1.0)


def test_2k_tokens_equal_eager(long_llama_dir):
    """Across 2048 tokens (32 query chunks of 64 rows), a GQA head equals transformers' eager attention."""
    ex = extract_n(long_llama_dir, n=2048, text=long_text(2000))
    assert ex.attention_source.layers[0].chunk_rows() == 64
    A = eager_attentions(long_llama_dir, ex.token_ids)
    np.testing.assert_allclose(ex.max_attention, A.max(axis=2), atol=1e-5, rtol=0)
    np.testing.assert_allclose(ex.attention(1, 3), A[1, 3], atol=1e-5, rtol=0)
    np.testing.assert_allclose(ex.layer_output(1).shape, (2048, 64))


def test_dense_arrays_beyond_the_budget_name_the_per_head_accessors(tiny_model_dir, monkeypatch):
    ex = extract_n(tiny_model_dir("llama"), n=128)
    head = ex.attention(1, 2).copy()
    monkeypatch.setattr(sources, "DENSE_BUDGET_BYTES", 4 * 2 * 4 * 128 * 128 - 1)  # one float32 short
    with pytest.raises(errors.MemoryBudgetError, match=r"ex\.attention\(layer, head\)") as info:
        _ = ex.attentions
    assert "DENSE_BUDGET_BYTES" in str(info.value)
    fresh = extract_n(tiny_model_dir("llama"), n=128)
    np.testing.assert_array_equal(fresh.attention(1, 2), head)  # one head at a time still works
    monkeypatch.setattr(sources, "DENSE_BUDGET_BYTES", 4 * 128 * 128 - 1)  # not even one head: no cache
    np.testing.assert_allclose(extract_n(tiny_model_dir("llama"), n=128).attention(1, 2), head, atol=1e-6, rtol=0)


def test_bf16_hidden_states_beyond_the_budget_name_layer_output(tiny_model_dir, monkeypatch):
    from transformers import AutoModel

    path = tiny_model_dir("qwen2")
    model = AutoModel.from_pretrained(path, dtype=torch.bfloat16)
    ex = extract_n(load_model(model, tokenizer=path, device="cpu"), n=64)
    monkeypatch.setattr(sources, "DENSE_BUDGET_BYTES", 4 * 3 * 64 * 32 - 1)
    with pytest.raises(errors.MemoryBudgetError, match=r"ex\.layer_output\(l\)"):
        _ = ex.hidden_states
    assert ex.layer_output(0).shape == (64, 32) and ex.layer_output(ex.n_layers - 1).dtype == np.float32


@pytest.mark.parametrize(
    ("layer", "head", "error"),
    [(2, 0, IndexError), (0, 4, IndexError), (-3, 0, IndexError), (0.5, 0, TypeError), (True, 0, TypeError)],
)
def test_bad_layer_or_head(tiny_model_dir, layer, head, error):
    ex = extract_n(tiny_model_dir("bert"), n=32)
    with pytest.raises(error, match=r"^(layer|head)"):
        ex.attention(layer, head)


def test_negative_indices_are_refused_as_selection_affinities_refuses_them(tiny_model_dir):
    """Issue 32 finding 11: ``ex.attention(-1, h)`` took -1 as the last layer where ``selection_affinities`` and
    the widget refuse it; every accessor now refuses it with check_index's message (an IndexError and a
    ValueError)."""
    ex = extract_n(tiny_model_dir("bert"), n=32)
    out = np.empty((32, 32), np.float32)
    calls = [
        lambda: ex.attention(-1, 0),
        lambda: ex.attention(0, -1),
        lambda: ex.attention_into(-1, 0, out),
        lambda: ex.sparse_attention(0, -4),
        lambda: ex.layer_output(-1),
    ]
    for call in calls:
        with pytest.raises(
            IndexError, match=r"^(layer|head) -\d is out of range: the model has \d (layers|heads per layer)"
        ):
            call()
        with pytest.raises(ValueError, match="out of range"):
            call()


# -------------------------------------------------------------------------- sinks and refused architectures


def test_attention_sinks_gpt_oss(bert_tokenizer, tmp_path):
    """GPT-OSS's learned sinks take part of each row's mass: rows sum to less than 1, as in its eager attention."""
    path = save_tiny(
        "GptOssConfig", "GptOssModel", tmp_path / "gpt-oss", bert_tokenizer, hidden_size=32, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, intermediate_size=32, num_local_experts=2, num_experts_per_tok=1,
        sliding_window=16, num_hidden_layers=2, max_position_embeddings=512,
    )  # fmt: skip
    ex = extract_n(path, n=64)
    A = eager_attentions(path, ex.token_ids)
    assert A.sum(axis=-1).min() < 0.5  # the sinks take visible mass
    np.testing.assert_allclose(ex.attentions, A, atol=1e-5, rtol=0)
    np.testing.assert_allclose(ex.max_attention, A.max(axis=2), atol=1e-5, rtol=0)


def test_architecture_whose_eager_attention_differs_is_refused(bert_tokenizer, tmp_path):
    """Granite-SWA reports plain softmax weights but scales its output by a sink: not the capture's attention,
    so it is refused by name rather than shown approximately."""
    path = save_tiny(
        "GraniteSWAConfig", "GraniteSWAModel", tmp_path / "granite", bert_tokenizer, hidden_size=32,
        num_attention_heads=4, num_key_value_heads=2, intermediate_size=32, sliding_window=16, num_hidden_layers=2,
        max_position_embeddings=512, bos_token_id=101, eos_token_id=102, pad_token_id=0,
    )  # fmt: skip
    with pytest.raises(errors.UnsupportedAttentionError, match=r"GraniteSWAAttention.*Supported:.*Llama"):
        extract_n(path, n=32)
    loaded = load_model(path, device="cpu")
    assert loaded.model.config._attn_implementation == "eager"  # the switch was undone


@pytest.fixture(scope="module")
def tiny_deberta(bert_tokenizer, tmp_path_factory) -> str:
    """DeBERTa-v2 does not route attention through the AttentionInterface (disentangled relative attention)."""
    return save_tiny(
        "DebertaV2Config", "DebertaV2Model", tmp_path_factory.mktemp("deberta"), bert_tokenizer, hidden_size=32,
        num_attention_heads=4, intermediate_size=64, num_hidden_layers=2,
    )  # fmt: skip


def test_architecture_outside_the_interface_runs_eager_within_the_budget(tiny_deberta):
    ex = extract_n(tiny_deberta, n=64)
    assert isinstance(ex.attention_source, DenseAttention) and ex.kv_groups == 1
    A = eager_attentions(tiny_deberta, ex.token_ids)
    np.testing.assert_allclose(ex.attentions, A, atol=1e-6, rtol=0)
    np.testing.assert_array_equal(ex.max_attention, A.max(axis=2))
    np.testing.assert_array_equal(ex.attention(1, 2), ex.attentions[1, 2])


def test_architecture_outside_the_interface_is_refused_beyond_the_budget(tiny_deberta, monkeypatch):
    monkeypatch.setattr(sources, "DENSE_BUDGET_BYTES", 4 * 2 * 4 * 64 * 64 - 1)
    with pytest.raises(errors.UnsupportedAttentionError, match=r"DebertaV2Model.*AttentionInterface.*Supported:"):
        extract_n(tiny_deberta, n=64)
    assert isinstance(extract_n(tiny_deberta, n=63).attention_source, DenseAttention)


def test_implementation_is_restored_and_the_model_still_runs_eager(tiny_model_dir):
    loaded = load_model(tiny_model_dir("mistral"), device="cpu")
    ex = extract_n(loaded, n=40)
    assert isinstance(ex.attention_source, CapturedAttention)
    assert loaded.model.config._attn_implementation == "eager"
    ids = torch.as_tensor(ex.token_ids)[None]
    with torch.no_grad():
        out = loaded.model(input_ids=ids, output_attentions=True)
    np.testing.assert_allclose(ex.attentions, torch.cat(out.attentions).numpy(), atol=1e-5, rtol=0)


def test_prefetch_fills_every_layer_within_the_budget_and_nothing_beyond(tiny_model_dir, monkeypatch):
    """HeadSNE starts it in a thread, so a head click finds its layer computed (10-20 ms a layer at 512 tokens,
    70-145 ms of a click in the live kernel under load); a long text's heads (above the budget) are left
    to the click."""
    ex = extract_n(tiny_model_dir("llama"), n=128)
    source = ex.attention_source
    assert isinstance(source, CapturedAttention)
    source.prefetch()
    computed = _count_head_computations(monkeypatch)
    for layer in range(ex.n_layers):
        for head in range(ex.n_heads):
            np.testing.assert_array_equal(ex.attention(layer, head), source.layers[layer].heads(head)[0])
    assert computed == [1] * (ex.n_layers * ex.n_heads), "only the references were computed: every head was ready"
    fresh = extract_n(tiny_model_dir("llama"), n=128)
    monkeypatch.setattr(sources, "DENSE_BUDGET_BYTES", 4 * 2 * 4 * 128 * 128 - 1)  # all heads one float32 short
    fresh.attention_source.prefetch()
    computed.clear()
    fresh.attention(1, 3)
    assert computed, "beyond the budget nothing was computed ahead"


def _count_head_computations(monkeypatch) -> list[int]:
    """Calls of LayerAttention.heads from here on, one entry (the number of heads asked) per call."""
    calls: list[int] = []
    real = layers.LayerAttention.heads

    def counted(self, head=None, out=None):
        calls.append(1 if head is not None else self.n_heads)
        return real(self, head, out)

    monkeypatch.setattr(layers.LayerAttention, "heads", counted)
    return calls


@pytest.mark.parametrize("architecture", ["llama", "mistral"])  # causal; a sliding window (keys cut on both sides)
def test_a_head_handed_out_is_read_only_and_never_changes(architecture, tiny_model_dir, monkeypatch):
    """A head from ``ex.attention`` cannot be written (a caller's edit would change later P and partners) and
    keeps its values while other heads pass through the cache; ``attention_into`` writes the same head into an
    array of the caller's, every entry of it, whatever it held."""
    monkeypatch.setattr(sources, "DENSE_BUDGET_BYTES", 2 * 4 * 100 * 100)  # two single heads, not a layer
    monkeypatch.setattr(layers, "CHUNK_BYTES", 5 * 4 * 4 * 100)  # chunks of 5 rows: keys outside their spans
    ex = extract_n(tiny_model_dir(architecture), n=100)
    source = ex.attention_source
    expected = {(layer, head): source.layers[layer].heads(head)[0] for layer in range(2) for head in range(4)}
    held = ex.attention(0, 0)
    with pytest.raises(ValueError, match="read-only"):
        held[0, 0] = 1.0
    with pytest.raises(ValueError, match="read-only"):
        np.fill_diagonal(held, 0.0)
    for layer, head in expected:
        ex.attention(layer, head)  # (0, 0) leaves the cache
    np.testing.assert_array_equal(held, expected[(0, 0)])
    out = np.full((100, 100), 7.0, np.float32)  # no zero where the mask puts them
    for (layer, head), A in expected.items():
        np.testing.assert_array_equal(ex.attention(layer, head), A, err_msg=f"layer {layer} head {head}")
        np.testing.assert_array_equal(ex.attention_into(layer, head, out), A)
    for array in (ex.max_attention, ex.special, ex.token_ids, ex.layer_output(0), ex.hidden_states):
        assert not array.flags.writeable


def test_chunks_on_worker_threads_equal_the_sequential_head_and_leave_torch_threads_alone(tiny_model_dir, monkeypatch):
    """On the CPU a head's query chunks go to threads of one torch thread each (robust to a core taken by
    the browser): the same array as one thread doing every chunk, and torch's thread count is left as it
    was, for this thread and for threads that start later."""
    import threading

    import torch

    monkeypatch.setattr(layers, "CHUNK_BYTES", 5 * 4 * 4 * 100)  # 20 chunks of 5 rows
    ex = extract_n(tiny_model_dir("mistral"), n=100)
    layer = ex.attention_source.layers[1]
    if layers.workers() is None:
        pytest.skip("one core: chunks run in the calling thread")
    before = torch.get_num_threads()
    pooled = layer.heads()
    seen: list[int] = []
    later = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))
    later.start()
    later.join()
    assert torch.get_num_threads() == before and seen == [before]
    monkeypatch.setattr(layers, "workers", lambda: None)
    np.testing.assert_array_equal(pooled, layer.heads())


def test_spans_mask_scores_that_autograd_records_as_those_it_does_not():
    """A chunk's scores masked from the rows' spans: the same entries with or without an autograd graph (a
    forward pass run with gradients), and the gradient flows through the kept entries only."""
    scores = torch.randn(2, 3, 6, dtype=torch.float32)
    first, last = torch.tensor([[1], [2], [3]]), torch.tensor([[3], [4], [5]])
    plain = scores.clone()
    masks.mask_spans(plain, slice(1, 7), first, last, torch.float32)
    leaf = scores.clone().requires_grad_(True)
    recorded = leaf * 1.0
    masks.mask_spans(recorded, slice(1, 7), first, last, torch.float32)
    np.testing.assert_array_equal(recorded.detach().numpy(), plain.numpy())
    recorded.sum().backward()
    np.testing.assert_array_equal(leaf.grad.numpy(), (plain != torch.finfo(torch.float32).min).float().numpy())
