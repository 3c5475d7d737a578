"""Score attribution through query/key norms (issue 53, item 4): Qwen3's and Gemma 3's per-head RMSNorms, OLMo 2's
and OLMoE's over every head at once, Qwen3-MoE's, Persimmon's per-head LayerNorms (centred, with a bias), as tiny
random models (tests/test_architectures_more.py's configs, built and loaded by path) whose norm gains and biases are
drawn away from 1 and 0 so that each must be applied. Every pair's parts sum to the model's own pre-softmax score,
read by the capture's own hook on a forward of its own (float32, float64, and in bfloat16 / float16 to the model's
own rounding); the softmax of the attributed scores is the model's own eager attention; key_attribution and
query_attribution sum to the model's scores; head_composition's q, k, v equal a computation from the model's dense
weight matrices and its q_data / k_data the sums of score_attribution's rows. A norm clipped after it (OLMoE's
clip_qkv) is refused by name, with what works instead."""

from __future__ import annotations

import numpy as np
import pytest
import test_architectures_more as more
import torch
from scipy.special import softmax
from test_architectures_more import N, extract_components, load, model_scores, own_forward

from headsne_widget.capture.attribution import key_attribution, query_attribution, score_attribution
from headsne_widget.capture.composition import head_composition
from headsne_widget.errors import UnsupportedAttentionError

tiny = more.tiny  # the module's tiny random models, built once


QKNORM = ["qwen3", "gemma3", "olmo2", "olmoe", "qwen3_moe", "persimmon"]
#: LayerNorm query/key norms per head (centred, with a bias), rotary on half a head: a config as
#: tests/test_architectures_more.MORE's, added there for this module only (:func:`persimmon`)
PERSIMMON = ("PersimmonConfig", "PersimmonModel", dict(more._D, qk_layernorm=True))
#: parts against the model's score, a share of max(1, |score|). float32: measured up to 9.7e-7 (Qwen3-MoE); float64:
#: the models' RMSNorms compute in float32 whatever the dtype, so their queries and keys are float32-exact
#: (measured up to 3.9e-7, Qwen3)
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-6}
FLOAT64_NORMS = {"persimmon"}  # its LayerNorms compute in float64: to 1e-10 (measured 3.6e-15)
ONE_PLUS = {"gemma3"}  # gain 1 + w
MOE = {"olmoe", "qwen3_moe"}  # transformers' grouped experts refuse float64 ("Expected mat_a to be Float32")
PAIRS = [(i, j) for i in range(2, N, 3) for j in range(0, i + 1, 4)]


@pytest.fixture(scope="module", autouse=True)
def persimmon():
    """PERSIMMON among tests/test_architectures_more.MORE's models while this module runs."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(more.MORE, "persimmon", PERSIMMON)
        yield


def prepared(tiny, architecture: str, dtype: torch.dtype = torch.float32):
    """The tiny model with every norm's gain drawn in [0.2, 2] (the random init leaves them all 1), and its
    extraction with components."""
    path = tiny(architecture)
    model = load(path, dtype)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name:
                gain = 0.2 + 1.8 * torch.rand(parameter.shape, generator=generator, dtype=torch.float64)
                parameter.copy_(gain - 1 if architecture in ONE_PLUS else gain)
    return model, extract_components(path, model)


@pytest.mark.parametrize(
    ("architecture", "dtype"),
    [(a, torch.float32) for a in QKNORM] + [(a, torch.float64) for a in QKNORM if a not in MOE],
    ids=str,
)
def test_pairs_sum_to_the_models_own_score(architecture, dtype, tiny):
    model, ex = prepared(tiny, architecture, dtype)
    worst = 0.0
    layers = model_scores(model, ex)
    for layer, attention in enumerate(layers):
        for head in range(ex.n_heads):
            for i, j in PAIRS:
                if ex.attention(layer, head)[i, j] == 0:  # masked (Gemma 3's window)
                    continue
                q = attention.query[head, i].double()
                k = attention.key[head // attention.kv_groups, j].double()
                target = float(q @ k) * attention.scaling
                frame = score_attribution(ex, layer, head, i, j)
                worst = max(worst, abs(float(frame["score"].sum()) - target) / max(1.0, abs(target)))
                assert frame.attrs["score"] == pytest.approx(target, rel=1e-12, abs=1e-12)
                assert len(frame) >= (1 if layer == 0 else 4)
    print(f"{architecture} {dtype}: the parts within {worst:.2g} of max(1, |score|)")
    assert worst <= (1e-10 if architecture in FLOAT64_NORMS and dtype == torch.float64 else TOLERANCE[dtype])
    if architecture == "persimmon":  # its norms' biases: a part of their own on each side
        assert {"query norm bias", "key norm bias"} <= set(frame["query_term"]) | set(frame["key_term"])
    if architecture == "gemma3":  # its queries scaled by query_pre_attn_scalar^-0.5 (256), not head_dim^-0.5 (8)
        assert layers[0].scaling == 256**-0.5
    if dtype == torch.float32:
        kv = 1 // layers[1].kv_groups
        keys = key_attribution(ex, 1, 1, 5, top=6)
        expected = [float(layers[1].query[1, t].double() @ layers[1].key[kv, 5].double()) * layers[1].scaling
                    for t in keys.attrs["tokens"]]  # fmt: skip
        np.testing.assert_allclose(keys.attrs["scores"], expected, rtol=1e-9)
        assert keys["share"].sum() == pytest.approx(1.0, abs=TOLERANCE[dtype])
        queries = query_attribution(ex, 1, 1, N - 1, top=6)
        assert queries["share"].sum() == pytest.approx(1.0, abs=TOLERANCE[dtype])


@pytest.mark.parametrize(
    ("architecture", "dtype"),
    [(a, torch.bfloat16) for a in QKNORM] + [("qwen3", torch.float16), ("gemma3", torch.float16)],
    ids=str,
)
def test_half_precision_pairs_sum_to_the_models_own_score(architecture, dtype, tiny):
    """In bfloat16 / float16 the model rounds its normalised queries and keys: the parts, computed in float64 from
    its own half-precision values, sum to its own score within 4 epsilons of |q| |k| scaling (the criterion of
    tests/test_half_precision.py; measured up to 0.93 in bfloat16, OLMoE, and 0.89 in float16, Qwen3)."""
    model, ex = prepared(tiny, architecture, dtype)
    eps, worst = torch.finfo(dtype).eps, 0.0
    for layer, attention in enumerate(model_scores(model, ex)):
        for head in range(ex.n_heads):
            for i, j in PAIRS[::3]:
                if ex.attention(layer, head)[i, j] == 0:
                    continue
                q = attention.query[head, i].double()
                k = attention.key[head // attention.kv_groups, j].double()
                scale = float(q.norm() * k.norm()) * attention.scaling  # the score's size before cancellation
                total = float(score_attribution(ex, layer, head, i, j)["score"].sum())
                worst = max(worst, abs(total - float(q @ k) * attention.scaling) / (eps * scale))
    print(f"{architecture} {dtype}: the parts within {worst:.2f} epsilons of |q| |k| scaling")
    assert worst <= 4, (architecture, dtype, worst)


@pytest.mark.parametrize("architecture", QKNORM)
def test_softmax_of_the_attributed_scores_is_the_models_attention(architecture, tiny):
    model, ex = prepared(tiny, architecture)
    A, _ = own_forward(model, ex)
    for layer in range(ex.n_layers):
        for head in range(ex.n_heads):
            for i in (20, N - 1):
                row = ex.attention(layer, head)[i]
                keys = np.flatnonzero(row > 0)
                scores = [score_attribution(ex, layer, head, i, int(j))["score"].sum() for j in keys]
                np.testing.assert_allclose(softmax(scores), A[layer, head, i, keys], atol=2e-6, rtol=0)
                np.testing.assert_allclose(row, A[layer, head, i], atol=1e-6, rtol=0)


def dense_composition(model, architecture: str, picks: list[tuple[int, int, int, int]]) -> np.ndarray:
    """q, k, v of each (src layer, src head, dst layer, dst head) from the model's d x d matrices: W_QK = W_Q W_K^T
    with the input norm's gain on the rows of both and the query/key norm's on their columns (a LayerNorm's
    centring first: each head's mean column taken out); W_OV = W_V W_O with the input norm's gain on W_V, and for
    the source the gain of its norm on the attention's output (Gemma 3's, OLMo 2's post norms)."""
    config = model.config
    groups = config.num_attention_heads // getattr(config, "num_key_value_heads", config.num_attention_heads)

    def gain(norm, cols: slice):
        w = norm.weight.detach().double()
        w = w[cols] if w.numel() > cols.stop - cols.start else w  # (d_h,): a per-head norm's, the same for each
        return 1.0 + w if architecture in ONE_PLUS else w

    def weights(attn, head: int) -> tuple:
        """The head's raw W_Q, W_K, W_V (d, d_h), W_O (d_h, d), its columns, its query and key norms."""
        if architecture == "persimmon":  # fused, per head (q, k, v); LayerNorms per head, centred
            d_h = attn.dense.in_features // config.num_attention_heads
            qkv = attn.query_key_value.weight.detach().double().T.reshape(config.hidden_size, -1, 3, d_h)[:, head]
            q, k = (w - w.mean(dim=1, keepdim=True) for w in (qkv[:, 0], qkv[:, 1]))
            o = attn.dense.weight.detach().double().T[head * d_h : (head + 1) * d_h]
            return q, k, qkv[:, 2], o, slice(0, d_h), slice(0, d_h), attn.q_layernorm, attn.k_layernorm
        d_h = attn.q_proj.out_features // config.num_attention_heads
        q_cols, kv_cols = slice(head * d_h, (head + 1) * d_h), slice(head // groups * d_h, (head // groups + 1) * d_h)
        q, k, v = (p.weight.detach().double().T for p in (attn.q_proj, attn.k_proj, attn.v_proj))
        o = attn.o_proj.weight.detach().double().T[q_cols]
        return q[:, q_cols], k[:, kv_cols], v[:, kv_cols], o, q_cols, kv_cols, attn.q_norm, attn.k_norm

    def mats(layer: int, head: int, source: bool):
        block = model.layers[layer]
        w_q, w_k, w_v, w_o, q_cols, kv_cols, q_norm, k_norm = weights(block.self_attn, head)
        every = slice(0, config.hidden_size)
        g = gain(block.input_layernorm, every) if architecture != "olmo2" else torch.ones(config.hidden_size).double()
        w_q, w_k, w_v = (
            g[:, None] * w_q * gain(q_norm, q_cols),
            g[:, None] * w_k * gain(k_norm, kv_cols),
            g[:, None] * w_v,
        )
        if source and architecture in {"gemma3", "olmo2"}:
            w_o = w_o * gain(block.post_attention_layernorm, every)[None]
        return w_q @ w_k.T, w_v @ w_o

    norm = torch.linalg.matrix_norm
    out = []
    for sl, sh, dl, dh in picks:
        _, ov = mats(sl, sh, True)
        qk, ov_d = mats(dl, dh, False)
        q = norm(ov @ qk) / (norm(ov) * norm(qk))
        k = norm(qk @ ov.T) / (norm(ov) * norm(qk))
        v = norm(ov @ ov_d) / (norm(ov) * norm(ov_d))
        out.append((float(q), float(k), float(v)))
    return np.array(out)


def data_shares(ex, src: int, src_head: int, dst: int, dst_head: int, edges: int) -> tuple[float, float]:
    """q_data, k_data of a pair from score_attribution's rows: over the destination's strongest edges (each
    query's heaviest key, for the ``edges`` queries whose is heaviest), the source head's query-side (key-side)
    rows summed, over the summed scores."""
    weights = ex.attention(dst, dst_head)
    keys = weights.argmax(axis=1)
    queries = np.argsort(-weights[np.arange(len(keys)), keys], kind="stable")[:edges]
    q_part = k_part = total = 0.0
    for i in queries:
        frame = score_attribution(ex, dst, dst_head, int(i), int(keys[i]))
        q_part += frame.loc[frame["query_term"].eq("head") & frame["query_layer"].eq(src)
                            & frame["query_head"].eq(src_head), "score"].sum()  # fmt: skip
        k_part += frame.loc[frame["key_term"].eq("head") & frame["key_layer"].eq(src)
                            & frame["key_head"].eq(src_head), "score"].sum()  # fmt: skip
        total += frame.attrs["score"]
    return q_part / total, k_part / total


@pytest.mark.parametrize("architecture", QKNORM)
def test_composition_matches_dense_matrices_and_the_attribution(architecture, tiny):
    model, ex = prepared(tiny, architecture)
    composition = head_composition(ex, edges=4).set_index(["src_layer", "src_head", "dst_layer", "dst_head"])
    picks = [(0, 0, 1, 0), (0, 1, 1, 3), (0, 3, 1, 2), (0, 2, 1, 1)]
    expected = dense_composition(model, architecture, picks)
    np.testing.assert_allclose(composition.loc[picks, ["q", "k", "v"]].to_numpy(), expected, rtol=1e-8)
    for pick in picks:
        shares = data_shares(ex, *pick, edges=4)
        data = composition.loc[pick, ["q_data", "k_data"]].to_numpy(float)
        # q_data takes the source's query part with the model's key, the rows with the sum of the key's parts (its
        # float64 rebuild): the two keys differ by the model's float32 rounding (measured up to 5e-8 of the share)
        np.testing.assert_allclose(data, shares, atol=1e-6)


REFUSED = {  # (config, model, arguments) as tests/test_architectures_more.MORE's, added there only in the test
    "olmoe_clipped": ("OlmoeConfig", "OlmoeModel", dict(more.MORE["olmoe"][2], clip_qkv=0.5)),  # clipped after
}


@pytest.mark.parametrize(
    ("architecture", "reason"),
    [("olmoe_clipped", r"OlmoeModel\): its query/key norm OlmoeRMSNorm is neither .* changed after it .*clip_qkv")],
)
def test_what_cannot_be_exact_is_refused_by_name(architecture, reason, tiny, monkeypatch):
    monkeypatch.setitem(more.MORE, architecture, REFUSED[architecture])
    path = tiny(architecture)
    ex = extract_components(path, load(path))
    with pytest.raises(UnsupportedAttentionError, match=rf"{reason}.*decompose, mode='norm' and mode='head-output'"):
        score_attribution(ex, 1, 1, 20, 5)
    with pytest.raises(UnsupportedAttentionError, match=reason):
        head_composition(ex)
