"""decompose() against an independent implementation of Mickus, Paperno & Constant (TACL 2022, section 2.2) on the
real MiniLM in float64: the paper's four terms computed here from BertModel's parameters by name, the attention
weights from our own softmax, every LayerNorm as its z-scaling. i_t is the static embedding "after having gone
through all the LN gains and rescaling"; c_t "includes the biases and mean-shifts of the LNs" (the embedding
LayerNorm's included), the FF and MHA output biases and the value biases through W_O."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from headsne_widget import decompose, extract

TEXT = "The quick brown fox jumps over the lazy dog near the river bank, and the bank opened at nine."
KINDS = ("input", "head", "mlp", "correction")


def _layer_norm(ln: torch.nn.LayerNorm, terms: dict[str, torch.Tensor]) -> None:
    """LN(x) = g (x - m) / s + b with x the sum of the terms: each term scaled by g / s, b - g m / s into c."""
    x = sum(terms.values())
    m = x.mean(-1, keepdim=True)
    s = torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + ln.eps)
    for kind in terms:
        terms[kind] = terms[kind] * ln.weight / s
    terms["correction"] = terms["correction"] + ln.bias - ln.weight * m / s


def paper_terms(model, ids: torch.Tensor, embedding_bias: str = "correction") -> list[dict[str, torch.Tensor]]:
    """Each layer's (i, h, f, c) as the paper defines them, float64, from the weights and our own attention."""
    emb, layers = model.embeddings, model.encoder.layer
    n = ids.shape[0]
    x0 = emb.word_embeddings.weight[ids] + emb.position_embeddings.weight[:n] + emb.token_type_embeddings.weight[0]
    zero = torch.zeros_like(x0)
    terms = {"input": x0, "head": zero, "mlp": zero, "correction": zero}
    _layer_norm(emb.LayerNorm, terms)
    if embedding_bias == "input":  # the embedding LayerNorm's output whole in the input term
        terms = {"input": terms["input"] + terms["correction"], "head": zero, "mlp": zero, "correction": zero}
    out = []
    for block in layers:
        att = block.attention.self
        x = sum(terms.values())
        H, d_h = att.num_attention_heads, att.attention_head_size
        q = (x @ att.query.weight.T + att.query.bias).view(n, H, d_h).transpose(0, 1)
        k = (x @ att.key.weight.T + att.key.bias).view(n, H, d_h).transpose(0, 1)
        alpha = torch.softmax(q @ k.transpose(1, 2) / d_h**0.5, dim=-1)  # (H, n, n)
        w_o = block.attention.output.dense.weight.T  # (H d_h, d), x @ W
        unbiased_v = (x @ att.value.weight.T).view(n, H, d_h).transpose(0, 1)  # the paper's Z: no value bias
        heads = sum((alpha[h] @ unbiased_v[h]) @ w_o[h * d_h : (h + 1) * d_h] for h in range(H))
        terms["head"] = terms["head"] + heads
        terms["correction"] = terms["correction"] + att.value.bias @ w_o + block.attention.output.dense.bias
        _layer_norm(block.attention.output.LayerNorm, terms)
        y = sum(terms.values())
        hidden = F.gelu(y @ block.intermediate.dense.weight.T + block.intermediate.dense.bias)
        terms["mlp"] = terms["mlp"] + hidden @ block.output.dense.weight.T
        terms["correction"] = terms["correction"] + block.output.dense.bias
        _layer_norm(block.output.LayerNorm, terms)
        out.append(dict(terms))
    return out


@pytest.fixture(scope="module")
def minilm64(minilm_path):
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(minilm_path, attn_implementation="eager", dtype=torch.float64).eval()
    return model, AutoTokenizer.from_pretrained(minilm_path)


def _kinds(dec) -> dict[str, np.ndarray]:
    kinds = dec.terms["term"].to_numpy()
    return {kind: dec.vectors[kinds == kind].sum(axis=0) for kind in KINDS}


@pytest.mark.parametrize("embedding_bias", ["correction", "input"])
def test_each_term_is_the_papers_on_minilm_float64(minilm64, embedding_bias):
    """Default: the paper's i_t and c_t (the embedding LayerNorm's bias and mean shift in c_t); ``"input"`` keeps
    the embedding LayerNorm's output whole in the input term. Each of the four terms equals the oracle's to 1e-6
    of max|e| at every layer (measured: 3e-15), heads one by one too, and the sum is the model's hidden state."""
    model, tokenizer = minilm64
    ex = extract(TEXT, model, tokenizer=tokenizer, device="cpu", components=True)
    ids = torch.as_tensor(np.array(ex.token_ids))
    with torch.no_grad():
        oracle = paper_terms(model, ids, embedding_bias)
        states = model(input_ids=ids[None], output_hidden_states=True).hidden_states
    for layer, terms in enumerate(oracle):
        e = states[layer + 1][0].numpy()
        scale = np.abs(e).max()
        np.testing.assert_allclose(sum(terms.values()).numpy(), e, rtol=0, atol=1e-10 * scale)
        dec = decompose(ex, layer, embedding_bias=embedding_bias)
        for kind, vector in _kinds(dec).items():
            error = np.abs(vector - terms[kind].numpy()).max() / scale
            assert error <= 1e-6, f"layer {layer} {kind}: {error:.3g} of max|e|"
    # the two conventions move the embedding norm's bias and mean shift between input and correction, nothing else
    paper, kept = (_kinds(decompose(ex, 5, embedding_bias=b)) for b in ("correction", "input"))
    moved = kept["input"] - paper["input"]
    assert np.abs(moved).max() > 0.05 * np.abs(ex.layer_output(5)).max()
    np.testing.assert_allclose(paper["correction"] - kept["correction"], moved, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(paper["head"], kept["head"])


def test_the_paper_input_term_is_the_embeddings_through_every_gain_and_scale(minilm64):
    """i_t = x_0 * prod(g / s) over the LayerNorms, directly: the embedding sum times each norm's per-token
    gain / std, with no bias or mean anywhere (the paper's equation for i_t). The norms' inputs come from the model's
    own forward, whose softmax runs in float64 where the capture's runs in float32: 1e-7 of the largest entry."""
    model, tokenizer = minilm64
    ex = extract(TEXT, model, tokenizer=tokenizer, device="cpu", components=True)
    ids = torch.as_tensor(np.array(ex.token_ids))
    norms = [model.embeddings.LayerNorm]
    for block in model.encoder.layer[:2]:
        norms += [block.attention.output.LayerNorm, block.output.LayerNorm]
    inputs: list[torch.Tensor] = []
    hooks = [ln.register_forward_hook(lambda m, a, o: inputs.append(a[0][0])) for ln in norms]
    with torch.no_grad():
        model(input_ids=ids[None])
    for hook in hooks:
        hook.remove()
    x0 = inputs[0].numpy()
    product = np.ones_like(x0)
    for ln, x in zip(norms, inputs):
        s = np.sqrt(x.numpy().var(axis=-1, keepdims=True) + ln.eps)
        product = product * ln.weight.detach().numpy() / s
    dec = decompose(ex, 1)
    np.testing.assert_allclose(dec.vector(0), x0 * product, rtol=0, atol=1e-7 * np.abs(x0 * product).max())


def test_embedding_bias_is_checked(minilm64):
    model, tokenizer = minilm64
    ex = extract("a short text", model, tokenizer=tokenizer, device="cpu", components=True)
    with pytest.raises(ValueError, match="embedding_bias must be one of"):
        decompose(ex, 0, embedding_bias="layer")
