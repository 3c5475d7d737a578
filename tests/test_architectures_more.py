"""The architectures users load beyond tests/test_architectures.py's (issue 53, item 4), each a tiny random model
built from its config, saved with MiniLM's tokenizer and loaded by path as a user loads it: the capture equals
transformers' own eager forward, ``decompose`` sums to the model's own hidden states at every layer, and
``score_attribution``'s pairs sum to the model's own pre-softmax score, or the refusal names the model, the reason
and what to use instead. Mixtures of experts (Mixtral, Qwen2-MoE, Qwen3-MoE, OLMoE, Granite MoE), Cohere's and
Nemotron's norms, OLMo's gainless LayerNorm, query/key norms (Qwen3, Gemma 3, OLMo 2, OLMoE), partial rotary
(Phi, Nemotron, GPT-NeoX at head width 64) and OPT's flattened states."""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
import torch

from headsne_widget import extract
from headsne_widget.capture.attention import capturing
from headsne_widget.capture.attribution import score_attribution
from headsne_widget.capture.decompose import decompose
from headsne_widget.errors import UnsupportedAttentionError
from headsne_widget.texts import TSNE_ABSTRACT

N = 32
_D = dict(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=64, **{
    "num_hidden_layers": 2, "max_position_embeddings": 512, "initializer_range": 0.2, "pad_token_id": 0,
    "bos_token_id": 101, "eos_token_id": 102})  # fmt: skip
_MOE = dict(num_experts=4, num_experts_per_tok=2)
# architecture -> (config class, model class, arguments); each feature active at N tokens
MORE: dict[str, tuple[str, str, dict]] = {
    "mixtral": ("MixtralConfig", "MixtralModel", dict(_D, num_local_experts=4, num_experts_per_tok=2)),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeModel",  # routed experts and a gated shared expert
                  dict(_D, **_MOE, moe_intermediate_size=32, shared_expert_intermediate_size=32)),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeModel", dict(_D, **_MOE, moe_intermediate_size=32, head_dim=8)),
    "olmoe": ("OlmoeConfig", "OlmoeModel", dict(_D, **_MOE)),  # query/key norms over all heads
    "granitemoe": ("GraniteMoeConfig", "GraniteMoeModel", dict(_D, num_local_experts=4, num_experts_per_tok=2)),
    "cohere": ("CohereConfig", "CohereModel", dict(_D)),  # a LayerNorm without bias, parallel block
    "nemotron": ("NemotronConfig", "NemotronModel", dict(_D)),  # LayerNorm1P (gain 1 + w), rotary on half a head
    "olmo": ("OlmoConfig", "OlmoModel", dict(_D)),  # LayerNorms without gain or bias
    "olmo2": ("Olmo2Config", "Olmo2Model", dict(_D)),  # query/key RMSNorms over all heads, post norms
    "qwen3": ("Qwen3Config", "Qwen3Model", dict(_D, head_dim=8)),  # per-head query/key RMSNorms
    "gemma3": ("Gemma3TextConfig", "Gemma3TextModel", dict(_D, head_dim=8, sliding_window=16)),  # (1 + w) q/k norms
    "phi": ("PhiConfig", "PhiModel", dict(_D, partial_rotary_factor=0.5)),  # rotary on half of each head
    "neox64": ("GPTNeoXConfig", "GPTNeoXModel",  # Pythia's head width 64, rotary on a quarter
               dict(hidden_size=128, num_attention_heads=2, intermediate_size=64, num_hidden_layers=2,
                    max_position_embeddings=512, initializer_range=0.2, rotary_pct=0.25)),
    "opt": ("OPTConfig", "OPTModel",  # states flattened to (n, d) before the feed-forward; scaled queries
            dict(hidden_size=32, num_attention_heads=4, ffn_dim=64, num_hidden_layers=2, max_position_embeddings=512,
                 init_std=0.2, word_embed_proj_dim=32, pad_token_id=0, bos_token_id=101, eos_token_id=102)),
}  # fmt: skip
#: attribution refused today, with the words the refusal must hold (besides the model's class name)
REFUSED: dict[str, str] = {
    **dict.fromkeys(["opt"], "not a projection's output columns"),  # query/key norms: tests/test_attribution_qknorm.py
}


@pytest.fixture(scope="module")
def tiny(bert_tokenizer, tmp_path_factory):
    """``tiny(architecture)``: the directory of its tiny random model, built once."""
    import transformers

    built: dict[str, str] = {}

    def make(architecture: str) -> str:
        if architecture not in built:
            config_name, model_name, arguments = MORE[architecture]
            config = getattr(transformers, config_name)(vocab_size=bert_tokenizer.vocab_size, **arguments)
            torch.manual_seed(0)
            directory = tmp_path_factory.mktemp(f"more-{architecture}")
            getattr(transformers, model_name)(config).save_pretrained(directory)
            bert_tokenizer.save_pretrained(directory)
            built[architecture] = os.fspath(directory)
        return built[architecture]

    return make


def load(path: str, dtype: torch.dtype = torch.float32):
    from transformers import AutoModel

    return AutoModel.from_pretrained(path, dtype=dtype, attn_implementation="eager").eval()


def own_forward(model, ex) -> tuple[np.ndarray, list[np.ndarray]]:
    """The model's own eager forward on the extraction's tokens: attentions (L, H, n, n) and, per layer, its
    output as the model hands it on (the last one: the final norm's output, ``last_hidden_state``)."""
    with torch.no_grad():
        out = model(input_ids=torch.as_tensor(np.array(ex.token_ids))[None], output_attentions=True,
                    output_hidden_states=True)  # fmt: skip
    states = [h[0].double().numpy() for h in out.hidden_states[1:]]
    states[-1] = out.last_hidden_state[0].double().numpy()
    return torch.cat(out.attentions).float().numpy(), states


def extract_components(path: str, model):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "text truncated", UserWarning)
        return extract(TSNE_ABSTRACT, model, tokenizer=path, max_tokens=N, components=True)


def model_scores(model, ex) -> list:
    """Each layer's (q, k, scaling) as the model hands them to its attention, read by the capture's own session."""
    with torch.no_grad(), capturing(model) as session:
        model(input_ids=torch.tensor(np.array(ex.token_ids))[None])
    return session.layers


@pytest.mark.parametrize("architecture", ["mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "granitemoe"])
def test_a_float64_mixture_of_experts_decomposes_exactly(architecture, tiny):
    """Loaded in float64, a mixture of experts ran into torch's "Expected mat_a to be Float32" (transformers' grouped
    experts): the capture puts it on the eager experts, and its decomposition sums to the model's own float64 state
    (to 1e-10 of its largest entry; the final RMSNorm of some computes in float32, so the last layer to 1e-6)."""
    path = tiny(architecture)
    model = load(path, torch.float64)
    ex = extract_components(path, model)
    _, states = own_forward(model, ex)
    for layer in range(ex.n_layers):
        target = states[layer]
        tolerance = 1e-6 if layer == ex.n_layers - 1 else 1e-10
        assert np.abs(decompose(ex, layer).total - target).max() <= tolerance * np.abs(target).max(), layer


@pytest.mark.parametrize("architecture", sorted(MORE))
def test_capture_decompose_and_attribute(architecture, tiny):
    path = tiny(architecture)
    model = load(path)
    ex = extract_components(path, model)
    A, states = own_forward(model, ex)
    np.testing.assert_allclose(ex.attentions, A, atol=1e-5, rtol=0)
    for layer in range(ex.n_layers):  # float32: to 1e-5 of the state's largest entry (measured: under 1e-6)
        d = decompose(ex, layer)
        target = states[layer]
        assert np.abs(d.total - target).max() <= 1e-5 * np.abs(target).max(), (architecture, layer)
        assert set(d.terms["term"]) == {"input", "head", "mlp", "correction"}
    if architecture in REFUSED:
        refusal = rf"{type(model).__name__}.*{REFUSED[architecture]}.*decompose, mode='norm'"
        with pytest.raises(UnsupportedAttentionError, match=refusal):
            score_attribution(ex, 1, 1, 20, 5)
        return
    layers = model_scores(model, ex)
    for layer, attention in enumerate(layers):
        for head in range(ex.n_heads):
            for i, j in ((5, 2), (20, 19), (31, 0), (31, 31)):
                if ex.attention(layer, head)[i, j] == 0:  # masked (Gemma 3's window of 16)
                    continue
                q = attention.query[head, i].double()
                k = attention.key[head // attention.kv_groups, j].double()
                target = float(q @ k) * attention.scaling
                frame = score_attribution(ex, layer, head, i, j)
                total = float(frame["score"].sum())  # float32: to 1e-5 of the score (measured: ~1e-7)
                assert abs(total - target) <= 1e-5 * max(1.0, abs(target)), (architecture, layer, head, i, j)
                assert len(frame) >= (1 if layer == 0 else 4)
