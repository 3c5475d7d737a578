"""Every supported architecture, as a tiny random model saved with MiniLM's tokenizer and loaded by path: the
captured grid and every recomputed head equal transformers' own eager forward with output_attentions=True."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from conftest import TINY_ARCHITECTURES

from headsne_widget import extract
from headsne_widget.capture import sources
from headsne_widget.capture.sources import CapturedAttention
from headsne_widget.texts import TSNE_ABSTRACT

N = 128
KV_GROUPS = {"llama": 2, "mistral": 2, "qwen2": 4, "gemma2": 2, "phi3": 2}
CAUSAL = {"gpt2", "llama", "mistral", "qwen2", "gemma2", "phi3"}
# (layer, window): keys further than the window are masked. Mistral: causal window 32 (j > i - 32); Qwen2 layer 1:
# 48; Gemma 2 layer 0: 24; ModernBERT layer 1: |i - j| <= 16.
WINDOWS = {"mistral": [(0, 32), (1, 32)], "qwen2": [(1, 48)], "gemma2": [(0, 24)], "modernbert": [(1, 16)]}


def eager_reference(path: str, token_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Attentions (L, H, n, n) and hidden states (L + 1, n, d) from a fresh eager load of the saved model."""
    from transformers import AutoModel

    model = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(token_ids)[None], output_attentions=True, output_hidden_states=True)
    return torch.cat(out.attentions).numpy(), torch.cat(out.hidden_states).numpy()


def extract_n(path: str, n: int = N, text: str = TSNE_ABSTRACT):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "text truncated", UserWarning)
        return extract(text, path, device="cpu", max_tokens=n)


@pytest.mark.parametrize("architecture", sorted(TINY_ARCHITECTURES))
def test_capture_equals_eager_forward(architecture, tiny_model_dir, monkeypatch):
    path = tiny_model_dir(architecture)
    ex = extract_n(path)
    assert ex.n_tokens == N and isinstance(ex.attention_source, CapturedAttention)
    A, X = eager_reference(path, ex.token_ids)
    L, H = A.shape[:2]
    assert (ex.n_layers, ex.n_heads) == (L, H) == (2, 4)
    assert ex.kv_groups == KV_GROUPS.get(architecture, 1)
    assert ex.max_attention.dtype == np.float32 and ex.max_attention.shape == (L, H, N)
    np.testing.assert_allclose(ex.max_attention, A.max(axis=2), atol=1e-5, rtol=0)
    for layer in range(L):
        for head in range(H):
            got = ex.attention(layer, head)
            assert got.dtype == np.float32 and got.shape == (N, N)
            np.testing.assert_allclose(got, A[layer, head], atol=1e-5, rtol=0, err_msg=f"layer {layer} head {head}")
        np.testing.assert_allclose(ex.layer_output(layer), X[layer + 1], atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(ex.attentions, A, atol=1e-5, rtol=0)
    # the reference really has the feature the architecture is here for
    i, j = np.indices((N, N))
    assert (A[..., j > i] == 0).all() == (architecture in CAUSAL)
    for layer, window in WINDOWS.get(architecture, []):
        outside = (j <= i - window) if architecture in CAUSAL else (abs(i - j) > window)
        assert (A[layer][:, outside] == 0).all() and (A[layer][:, ~outside & (j <= i)] > 0).all()
        np.testing.assert_array_equal(ex.attention(layer, 1)[outside], 0.0)
    if architecture in KV_GROUPS:  # heads sharing a key/value head still differ (their queries differ)
        assert not np.allclose(ex.attention(0, 0), ex.attention(0, 1), atol=1e-3)
    # one head at a time (the path of long texts, where a layer's heads exceed the dense budget)
    monkeypatch.setattr(sources, "DENSE_BUDGET_BYTES", 4 * N * N)
    single = extract_n(path)
    for layer in range(L):
        for head in range(H):
            np.testing.assert_allclose(single.attention(layer, head), A[layer, head], atol=1e-5, rtol=0)


def test_gemma2_softcap_shapes_the_attention(tiny_model_dir, bert_tokenizer, tmp_path):
    """The same weights with the softcap lifted attend differently: the capture follows the cap, not a default."""
    from conftest import build_tiny_model

    capped = extract_n(tiny_model_dir("gemma2"), n=64)
    uncapped_dir = build_tiny_model("gemma2", tmp_path / "uncapped", bert_tokenizer, attn_logit_softcapping=None)
    uncapped = extract_n(uncapped_dir, n=64)
    assert np.abs(capped.max_attention - uncapped.max_attention).max() > 0.05
    A, _ = eager_reference(uncapped_dir, uncapped.token_ids)
    np.testing.assert_allclose(uncapped.max_attention, A.max(axis=2), atol=1e-5, rtol=0)


def test_bf16_model_reduces_in_its_dtype(tiny_model_dir):
    """A bf16 model: queries and keys are kept in bf16 and the heads equal the bf16 eager forward."""
    from transformers import AutoModel

    from headsne_widget.capture.extraction import load_model

    path = tiny_model_dir("llama")
    model = AutoModel.from_pretrained(path, attn_implementation="eager", dtype=torch.bfloat16).eval()
    loaded = load_model(model, tokenizer=path, device="cpu")
    ids = extract_n(path, n=96).token_ids
    from headsne_widget.capture.extraction import extract_token_ids

    ex = extract_token_ids(ids, loaded)
    layer0 = ex.attention_source.layers[0]
    assert layer0.query.dtype == torch.bfloat16 and layer0.key.dtype == torch.bfloat16
    assert layer0.key.shape == (2, 96, 8)  # 2 key/value heads, not repeated to 4
    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(ids)[None], output_attentions=True, output_hidden_states=True)
    A = torch.cat(out.attentions).float().numpy()
    np.testing.assert_allclose(ex.max_attention, A.max(axis=2), atol=2**-8, rtol=0)
    np.testing.assert_allclose(ex.attention(1, 3), A[1, 3], atol=2**-8, rtol=0)
    assert ex.states.states.dtype == torch.bfloat16  # hidden states kept in the model's dtype
    assert ex.layer_output(1).dtype == np.float32


def test_gemma2_query_pre_attn_scalar_sets_the_scaling(bert_tokenizer, tmp_path):
    """Gemma 2 scales by query_pre_attn_scalar^-0.5, not head_dim^-0.5: the capture uses the layer's own scaling."""
    from conftest import build_tiny_model

    path = build_tiny_model("gemma2", tmp_path / "scalar", bert_tokenizer, query_pre_attn_scalar=64)
    ex = extract_n(path, n=64)
    assert ex.attention_source.layers[0].scaling == 64**-0.5 != 16**-0.5
    A, _ = eager_reference(path, ex.token_ids)
    np.testing.assert_allclose(ex.attentions, A, atol=1e-5, rtol=0)


def test_device_map_with_an_offloaded_layer_is_captured_exactly(tiny_model_dir, tmp_path):
    """A model loaded with ``device_map`` (accelerate's hooks), one layer offloaded to disk: its weights sit on
    the meta device until its hook brings them in for the forward; the capture still equals the eager forward."""
    pytest.importorskip("accelerate")
    from transformers import AutoModel

    from headsne_widget.capture.extraction import extract_token_ids, load_model

    path = tiny_model_dir("llama")
    device_map = {"embed_tokens": "cpu", "layers.0": "cpu", "layers.1": "disk", "norm": "cpu", "rotary_emb": "cpu"}
    model = AutoModel.from_pretrained(
        path, attn_implementation="eager", device_map=device_map, offload_folder=tmp_path
    ).eval()
    assert model.layers[1].self_attn.q_proj.weight.device.type == "meta"  # really offloaded
    loaded = load_model(model, tokenizer=path, device=None)
    ids = extract_n(path, n=96).token_ids
    ex = extract_token_ids(ids, loaded)
    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(ids)[None], output_attentions=True)
    A = torch.cat(out.attentions).float().numpy()
    np.testing.assert_allclose(ex.max_attention, A.max(axis=2), atol=1e-5, rtol=0)
    np.testing.assert_allclose(ex.attention(1, 3), A[1, 3], atol=1e-5, rtol=0)
    np.testing.assert_allclose(ex.attention(0, 0), A[0, 0], atol=1e-5, rtol=0)


def test_a_t5_encoder_with_its_relative_position_bias_is_captured_exactly(bert_tokenizer, tmp_path):
    """Issue 23.9: the T5 encoder path that the encoder-decoder refusal recommends failed with a raw RuntimeError
    (the capture ignored T5's position_bias). T5's bias is now added as eager adds it: every head equals the
    eager forward, loaded by path (a saved T5EncoderModel stays the encoder) or given as an object."""
    from transformers import T5Config, T5EncoderModel

    config = T5Config(vocab_size=bert_tokenizer.vocab_size, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                      relative_attention_num_buckets=8, initializer_factor=2.0)  # fmt: skip
    torch.manual_seed(0)
    model = T5EncoderModel(config).eval()
    model.set_attn_implementation("eager")  # the reference: output_attentions
    model.save_pretrained(tmp_path)
    bert_tokenizer.save_pretrained(tmp_path)
    ex = extract_n(str(tmp_path), n=64)
    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(np.array(ex.token_ids))[None], output_attentions=True)
    A = torch.cat(out.attentions).numpy()
    assert not np.allclose(A[0, 0], A[0, 0].mean(axis=1, keepdims=True)), "the bias shapes the heads"
    np.testing.assert_allclose(ex.attentions, A, atol=1e-5, rtol=0)
    from headsne_widget.capture.extraction import extract_token_ids, load_model

    as_object = extract_token_ids(ex.token_ids, load_model(model, tokenizer=str(tmp_path)))
    np.testing.assert_allclose(as_object.attentions, A, atol=1e-5, rtol=0)


def test_gemma3n_reads_the_stream_its_layers_predict_with(bert_tokenizer, tmp_path):
    """Issue 23.9: Gemma 3n failed with a ValueError that named no model: it keeps several hidden streams (AltUp,
    (streams, 1, n, d) per layer). The layers' output is the active stream; its attention (with key/value
    sharing across layers) equals the eager forward."""
    from transformers import Gemma3nTextConfig, Gemma3nTextModel

    types = ["sliding_attention", "full_attention", "full_attention"]
    config = Gemma3nTextConfig(
        vocab_size=bert_tokenizer.vocab_size, vocab_size_per_layer_input=bert_tokenizer.vocab_size, hidden_size=32,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2, head_dim=8, intermediate_size=64,
        num_kv_shared_layers=1, layer_types=types, sliding_window=8, hidden_size_per_layer_input=8, laurel_rank=4,
        activation_sparsity_pattern=[0.0] * 3,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Gemma3nTextModel(config).eval()
    model.set_attn_implementation("eager")  # the reference: output_attentions
    model.save_pretrained(tmp_path)
    bert_tokenizer.save_pretrained(tmp_path)
    ex = extract_n(str(tmp_path), n=48)
    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(np.array(ex.token_ids))[None], output_attentions=True,
                    output_hidden_states=True)  # fmt: skip
    np.testing.assert_allclose(ex.attentions, torch.cat(out.attentions).numpy(), atol=1e-5, rtol=0)
    active = config.altup_active_idx
    np.testing.assert_allclose(ex.layer_output(2), out.hidden_states[3][active, 0].numpy(), atol=1e-5, rtol=1e-5)
