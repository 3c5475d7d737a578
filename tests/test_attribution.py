"""score_attribution(): the (query component, key component) pairs sum to the model's own pre-softmax score on
MiniLM and on tiny random models (GQA + RoPE, sliding windows, softcap, fused and biased projections), float32 and
float64; a planted induction circuit is found by the attribution and by head_composition; the composition scores
against a direct computation from dense weight matrices; bad input refused by name."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch
from conftest import TINY_ARCHITECTURES
from test_decompose import NEOX, load, run

from headsne_widget import extract
from headsne_widget.capture.attention import capturing
from headsne_widget.capture.attribution import key_attribution, query_attribution, score_attribution
from headsne_widget.capture.components import keep_trace
from headsne_widget.capture.composition import head_composition
from headsne_widget.capture.extraction import extract_token_ids
from headsne_widget.capture.induction import induction_scores
from headsne_widget.errors import IndexOutOfRangeError, UnsupportedAttentionError
from headsne_widget.texts import TSNE_ABSTRACT

N = 48
ARCHITECTURES = [
    "gpt2",
    "llama",
    "mistral",
    "gemma2",
    "qwen2",
    "bert",
    "roberta",
    "distilbert",
    "modernbert",
    "phi3",
    "neox",
]
FLOAT32_NORMS = {"llama", "mistral", "qwen2", "gemma2", "phi3"}  # their RMSNorms compute in float32 whatever the dtype


def reference_scores(model, ex) -> list:
    """Every layer's (q, k, scaling, bias) as the model hands them to its attention, read by the capture stage's
    own session (not by the components' trace): s_ij = q_i . k_j * scaling (+ T5's bias)."""
    with torch.no_grad(), capturing(model) as session:
        model(input_ids=torch.tensor(np.array(ex.token_ids))[None])
    return session.layers


def check_pairs(ex, layers, tolerance: float, pairs=((5, 2), (20, 19), (40, 3), (47, 47))) -> None:
    for layer, attention in enumerate(layers):
        for head in range(ex.n_heads):
            for i, j in pairs:
                if i >= ex.n_tokens or ex.attention(layer, head)[i, j] == 0:
                    continue
                kv = head // attention.kv_groups
                q, k = attention.query[head, i].double(), attention.key[kv, j].double()
                target = float(q @ k) * attention.scaling
                if attention.bias is not None:
                    target += float(attention.bias[0, head, i, j])
                frame = score_attribution(ex, layer, head, i, j)
                total = float(frame["score"].sum())
                assert abs(total - target) <= tolerance * max(1.0, abs(target)), (layer, head, i, j, total, target)
                assert len(frame) >= (1 if layer == 0 else 4)


def test_minilm_pairs_sum_to_the_score(minilm_path):
    ex = extract(TSNE_ABSTRACT[:300], minilm_path, components=True)
    model = load(minilm_path)
    check_pairs(ex, reference_scores(model, ex), 1e-5)
    frame = score_attribution(ex, 3, 2, 8, 5)
    assert list(frame.columns) == [
        "query_term", "query_layer", "query_head", "key_term", "key_layer", "key_head", "score"
    ]  # fmt: skip
    assert (frame.iloc[0, :6].tolist()) == ["input", -1, -1, "input", -1, -1]
    assert {"head", "mlp", "correction", "query bias"} <= set(frame["query_term"])
    assert "key bias" in set(frame["key_term"])
    assert frame.attrs["score"] == pytest.approx(frame["score"].sum(), rel=1e-5)
    start = time.perf_counter()
    score_attribution(ex, 5, 0, 40, 3)
    print(f"one edge of MiniLM layer 5: {1000 * (time.perf_counter() - start):.1f} ms")
    float64 = load(minilm_path, torch.float64)
    ex64 = run(float64, _tokenizer(minilm_path), ex.text, n=ex.n_tokens)
    check_pairs(ex64, reference_scores(float64, ex64), 1e-10)


def _tokenizer(path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


@pytest.fixture
def tiny(tiny_model_dir):
    TINY_ARCHITECTURES.setdefault("neox", NEOX)
    return tiny_model_dir


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_tiny_pairs_sum_to_the_score(architecture, tiny, bert_tokenizer):
    """GPT-2 (fused c_attn), Llama (GQA, RoPE), Mistral (window: the far pairs are masked), Gemma 2 (the pre-cap
    score), Qwen2 (q/k biases: named rows); the post-LN encoders, ModernBERT (fused Wqkv, RoPE), Phi-3 (fused
    qkv_proj) and NeoX (interleaved qkv, RoPE on a quarter of each head, parallel residual)."""
    assert architecture in TINY_ARCHITECTURES
    model = load(tiny(architecture))
    if architecture == "qwen2":
        with torch.no_grad():  # the random init leaves biases at 0
            for name, parameter in model.named_parameters():
                if name.endswith("bias"):
                    parameter.normal_(0.0, 0.5)
    ex = run(model, bert_tokenizer)
    check_pairs(ex, reference_scores(model, ex), 1e-5)
    if architecture == "qwen2":
        frame = score_attribution(ex, 1, 3, 20, 19)
        assert {"query bias", "key bias"} <= set(frame["query_term"]) | set(frame["key_term"])
    if architecture == "gemma2":
        assert score_attribution(ex, 0, 0, 20, 19).attrs["softcap"] is not None
    model64 = load(tiny(architecture), torch.float64)
    ex64 = run(model64, bert_tokenizer)
    if architecture == "modernbert":  # its RoPE runs in float32: a float64 query's bits change even at position 0
        with pytest.raises(UnsupportedAttentionError, match="ModernBertModel: its queries or keys are not a"):
            score_attribution(ex64, 0, 0, 5, 2)
        return
    check_pairs(ex64, reference_scores(model64, ex64), 1e-6 if architecture in FLOAT32_NORMS else 1e-10)


# --- a planted induction circuit -------------------------------------------------------------------------------
# GPT-2 shapes, 2 layers x 2 heads, d = 64 = token one-hots T (16) + position one-hots P (32) + "previous token"
# one-hots S (16); head size 32. MLPs, biases and LayerNorm biases are 0, LayerNorm gains 1 (the residual then only
# ever holds one-hots: each norm is a per-token scale and a small mean shift). Layer 0 head 0 (previous token):
# W_Q maps P[p] to e_p, W_K maps P[p] to e_{p+1} (so q_i . k_j peaks at j = i - 1), W_OV maps T[t] to S[t].
# Layer 0 head 1 (current token): W_Q, W_K both map P[p] to e_p, W_OV copies T to T. Layer 1 head 0 (induction):
# W_Q maps T[t] to e_t, W_K maps S[t] to e_t: key j matches query i when the token before j is token i's.
# Layer 1 head 1: W_Q, W_K read positions, W_OV 0. Every attention weight gets noise of 1e-3.
V, P, D, DH = 16, 32, 64, 32
T0, P0, S0 = 0, V, V + P


def planted_model():
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(vocab_size=V, n_positions=P, n_embd=D, n_layer=2, n_head=2, resid_pdrop=0.0,
                        embd_pdrop=0.0, attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)  # fmt: skip
    torch.manual_seed(0)
    model = GPT2Model(config).eval().to(torch.float64)
    beta, gamma = 2.7, 4.0
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        model.wte.weight[:, T0:P0] = torch.eye(V)
        model.wpe.weight[:, P0:S0] = torch.eye(P)
        qkv = [block.attn.c_attn.weight for block in model.h]  # (D, 3D): x @ W, q | k | v, heads of DH columns
        out = [block.attn.c_proj.weight for block in model.h]  # (D, D): rows of head h at h*DH ...
        for p in range(P):
            qkv[0][P0 + p, p] = beta  # L0H0 query: position p
            if p + 1 < DH:
                qkv[0][P0 + p, D + p + 1] = beta  # L0H0 key: position p + 1
            qkv[0][P0 + p, DH + p] = qkv[0][P0 + p, D + DH + p] = 1.0  # L0H1: itself
            qkv[1][P0 + p, DH + p] = qkv[1][P0 + p, D + DH + p] = 1.0  # L1H1: itself
        for t in range(V):
            qkv[0][T0 + t, 2 * D + t] = 1.0  # L0H0 value: the token
            out[0][t, S0 + t] = 1.0  # ... written as the previous token
            qkv[0][T0 + t, 2 * D + DH + t] = 1.0  # L0H1 value: the token, written back to T
            out[0][DH + t, T0 + t] = 1.0
            qkv[1][T0 + t, t] = gamma  # L1H0 query: the current token
            qkv[1][S0 + t, D + t] = gamma  # L1H0 key: the previous token
            qkv[1][T0 + t, 2 * D + t] = 1.0  # L1H0 value: the token, written to T
            out[1][t, T0 + t] = 1.0
        for block in model.h:
            block.ln_1.weight.fill_(1.0)
            block.ln_2.weight.fill_(1.0)
            block.attn.c_attn.weight.add_(1e-3 * torch.randn_like(block.attn.c_attn.weight))
            block.attn.c_proj.weight.add_(1e-3 * torch.randn_like(block.attn.c_proj.weight))
        model.ln_f.weight.fill_(1.0)
    return model


def planted_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<s>": 0, **{f"t{k}": k for k in range(1, V)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<s>"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", unk_token="<s>")


@pytest.fixture(scope="module")
def planted():
    from headsne_widget.capture.loading import LoadedModel

    model, tokenizer = planted_model(), planted_tokenizer()
    return LoadedModel(model, tokenizer, "planted-induction", torch.device("cpu"))


def test_planted_induction_circuit(planted):
    scores = induction_scores(planted, length=15, seed=3).scores.set_index(["layer", "head"])["induction"]
    assert scores.idxmax() == (1, 0) and scores[(1, 0)] > 0.9, scores
    ids = induction_scores(planted, length=15, seed=3).token_ids
    ex = extract_token_ids(ids, planted)
    keep_trace(ex, planted.model)
    prev = ex.attention(0, 0)
    assert np.all(prev[np.arange(2, ex.n_tokens), np.arange(1, ex.n_tokens - 1)] > 0.9)
    weights = ex.attention(1, 0)
    for i in range(17, ex.n_tokens):  # second copy: the induction edges, each explained by L0H0 on the key side
        j = int(np.argmax(weights[i]))
        assert j == i - 15 + 1 and weights[i, j] > 0.9
        frame = score_attribution(ex, 1, 0, i, j)
        key_side = frame.groupby(["key_term", "key_layer", "key_head"])["score"].sum()
        assert key_side[("head", 0, 0)] > 0.8 * frame["score"].sum(), key_side
        query_side = frame.groupby(["query_term", "query_layer", "query_head"])["score"].sum()
        current = query_side[("input", -1, -1)] + query_side[("head", 0, 1)]  # the token itself, twice written
        assert current > 0.9 * frame["score"].sum(), query_side
    shares = key_attribution(ex, 1, 0, 5).set_index(["term", "layer", "head"])["share"]
    assert shares.idxmax() == ("head", 0, 0) and shares.max() > 0.8
    assert query_attribution(ex, 1, 0, 20).set_index(["term", "layer", "head"])["share"].idxmax() == ("head", 0, 1)
    composition = head_composition(ex)
    assert tuple(composition.sort_values("k", ascending=False).iloc[0, :4]) == (0, 0, 1, 0)
    assert tuple(composition.sort_values("q", ascending=False).iloc[0, :4]) == (0, 1, 1, 0)  # copies T, read by W_Q
    top = composition.sort_values("k_data", ascending=False).iloc[0]
    assert tuple(top.iloc[:4]) == (0, 0, 1, 0) and top["k_data"] > 0.8


def dense_composition(ex_model, layer_heads):
    """q, k, v of (src layer, src head, dst layer, dst head) from the dense d x d matrices of a GPT-2 (pre-LN: the
    destination's ln_1 gain folded into its W_Q, W_K, W_V)."""
    blocks = ex_model.h
    d = blocks[0].attn.c_attn.weight.shape[0]
    dh = d // ex_model.config.n_head

    def mats(layer, head):
        w = blocks[layer].attn.c_attn.weight.detach().double()
        g = blocks[layer].ln_1.weight.detach().double()[:, None]
        w_q, w_k = g * w[:, head * dh : (head + 1) * dh], g * w[:, d + head * dh : d + (head + 1) * dh]
        w_v = g * w[:, 2 * d + head * dh : 2 * d + (head + 1) * dh]
        w_o = blocks[layer].attn.c_proj.weight.detach().double()[head * dh : (head + 1) * dh]
        return w_q @ w_k.T, w_v @ w_o

    out = []
    for sl, sh, dl, dhd in layer_heads:
        _, ov = mats(sl, sh)
        qk, ov_d = mats(dl, dhd)
        norm = torch.linalg.matrix_norm
        q = norm(ov @ qk) / (norm(ov) * norm(qk))
        k = norm(qk @ ov.T) / (norm(ov) * norm(qk))
        v = norm(ov @ ov_d) / (norm(ov) * norm(ov_d))
        out.append((float(q), float(k), float(v)))
    return np.array(out)


def test_composition_matches_dense_matrices(tiny, bert_tokenizer):
    model = load(tiny("gpt2"))
    with torch.no_grad():  # gains away from 1, so that folding them in matters
        for block in model.h:
            block.ln_1.weight.uniform_(0.2, 2.0)
    ex = run(model, bert_tokenizer)
    composition = head_composition(ex).set_index(["src_layer", "src_head", "dst_layer", "dst_head"])
    assert len(composition) == ex.n_heads**2 * ex.n_layers * (ex.n_layers - 1) // 2
    picks = [(0, 0, 1, 0), (0, 1, 1, 3), (0, 3, 1, 2)]
    expected = dense_composition(model, picks)
    np.testing.assert_allclose(composition.loc[picks, ["q", "k", "v"]].to_numpy(), expected, rtol=1e-8)
    values = composition[["q", "k", "v"]].to_numpy()
    assert np.all((values >= 0) & (values <= 1))
    data = composition[["q_data", "k_data"]].to_numpy()
    assert np.isfinite(data).all()


def test_bad_input(minilm_path, tiny, bert_tokenizer):
    ex = extract("The quick brown fox jumps over the lazy dog.", minilm_path)
    with pytest.raises(ValueError, match="components=True"):
        score_attribution(ex, 0, 0, 1, 2)
    ex = extract("The quick brown fox jumps over the lazy dog.", minilm_path, components=True)
    with pytest.raises(IndexOutOfRangeError, match="token i 99 is out of range"):
        score_attribution(ex, 0, 0, 99, 2)
    with pytest.raises(IndexOutOfRangeError, match="layer 6 is out of range"):
        score_attribution(ex, 6, 0, 1, 2)
    with pytest.raises(IndexOutOfRangeError, match="head 12 is out of range"):
        key_attribution(ex, 0, 12, 1)
    with pytest.raises(TypeError, match="j must be an int token index, got float"):
        score_attribution(ex, 0, 0, 1, 2.0)
    with pytest.raises(ValueError, match="top must be a positive int"):
        query_attribution(ex, 0, 0, 1, top=0)
    causal = run(load(tiny("mistral")), bert_tokenizer)
    with pytest.raises(ValueError, match=r"token 9 is not visible to token 3 in layer 0 \(masked: its score is -inf"):
        score_attribution(causal, 0, 0, 3, 9)
    with pytest.raises(ValueError, match="not visible"):  # outside Mistral's window of 32
        score_attribution(causal, 1, 0, 47, 2)
    trace = keep_trace(causal, load(tiny("mistral")))
    trace.layers[1].qk.error = "Mistral: test"
    with pytest.raises(UnsupportedAttentionError, match="Mistral: test; its attention scores cannot be attributed"):
        score_attribution(causal, 1, 0, 5, 2)
    with pytest.raises(ValueError, match="edges must be a positive int"):
        head_composition(causal, edges=0)
