"""Models loaded in bfloat16 or float16, as most checkpoints ship (issue 53, item 3): every component feature
(decompose, value norms for mode='norm', head outputs, score attribution) computed in float64 from the model's own
half-precision values, against the model's own forward in its dtype; a refusal says to load it in float32."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from test_architectures_more import model_scores

from headsne_widget import extract
from headsne_widget.capture import decompose as decomposition
from headsne_widget.capture.attribution import score_attribution
from headsne_widget.capture.decompose import decompose, head_outputs, value_norms
from headsne_widget.errors import UnsupportedAttentionError
from headsne_widget.texts import TSNE_ABSTRACT

N = 48
O_PROJ = {"bert": "attention.output.dense", "llama": "self_attn.o_proj"}


def load(path: str, dtype: torch.dtype):
    from transformers import AutoModel

    return AutoModel.from_pretrained(path, dtype=dtype).eval()  # as a user loads it (torch_dtype= before v5)


def captured(path: str, model):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "text truncated", UserWarning)
        return extract(TSNE_ABSTRACT, model, tokenizer=path, max_tokens=N, components=True)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("architecture", ["bert", "llama"])
def test_half_precision_models_get_every_component_feature(architecture, dtype, tiny_model_dir):
    path = tiny_model_dir(architecture)
    model = load(path, dtype)
    ex = captured(path, model)
    eps = torch.finfo(dtype).eps
    ids = torch.as_tensor(np.array(ex.token_ids))[None]
    blocks = next(b for b in model.modules() if isinstance(b, torch.nn.ModuleList))
    written: list[torch.Tensor] = []  # each layer's output projection as the model computes it, in its dtype
    hooks = [b.get_submodule(O_PROJ[architecture]).register_forward_hook(lambda m, a, o: written.append(o[0]))
             for b in blocks]  # fmt: skip
    with torch.no_grad():
        out = model(input_ids=ids, output_hidden_states=True)
    for hook in hooks:
        hook.remove()
    for layer in range(ex.n_layers):  # the model's own states in its dtype: measured 0.4-0.9 epsilons of max|e|
        target = (out.hidden_states[layer + 1] if layer < ex.n_layers - 1 else out.last_hidden_state)[0]
        target = target.double().numpy()
        d = decompose(ex, layer)
        assert np.abs(d.total - target).max() <= 2 * eps * np.abs(target).max(), (layer, dtype)
        np.testing.assert_allclose(d.shares.sum(axis=0), 1.0, atol=1e-9)
        # the heads' outputs and the projection's bias are the projection's output the model rounded
        heads = sum(head_outputs(ex, layer, h).outputs() for h in range(ex.n_heads))
        bias = blocks[layer].get_submodule(O_PROJ[architecture]).bias
        heads = heads + (0.0 if bias is None else bias.detach().double().numpy())
        own = written[layer].double().numpy()
        assert np.abs(heads - own).max() <= 2 * eps * np.abs(own).max(), (layer, dtype)
    norms = value_norms(ex)  # mode="norm": against the same weights in float64 on the model's own values
    assert norms.shape == (ex.n_layers, ex.n_heads, ex.n_tokens) and np.isfinite(norms).all()
    assert (norms > 0).all()
    for layer, attention in enumerate(model_scores(model, ex)):  # the model's own half-precision q and k
        for head in range(ex.n_heads):
            for i, j in ((5, 2), (20, 19), (47, 3)):
                q = attention.query[head, i].double()
                k = attention.key[head // attention.kv_groups, j].double()
                target = float(q @ k) * attention.scaling
                frame = score_attribution(ex, layer, head, i, j)
                scale = float(q.norm() * k.norm()) * attention.scaling  # the score's size before cancellation
                assert abs(frame["score"].sum() - target) <= 4 * eps * scale, (layer, head, i, j, dtype)


def test_value_norms_in_half_precision_follow_the_float32_model(tiny_model_dir):
    """The same weights in bfloat16 and float32: the value norms agree to bfloat16's rounding of the states."""
    path = tiny_model_dir("llama")
    half = value_norms(captured(path, load(path, torch.bfloat16)))
    full = value_norms(captured(path, load(path, torch.float32)))
    assert np.abs(half - full).max() <= 8 * torch.finfo(torch.bfloat16).eps * full.max()


def test_a_half_precision_refusal_says_to_load_the_model_in_float32(tiny_model_dir, monkeypatch):
    path = tiny_model_dir("llama")
    ex = captured(path, load(path, torch.bfloat16))
    monkeypatch.setattr(decomposition, "HALF_ULPS", 1e-3)  # a bound the model's own rounding exceeds
    with pytest.raises(UnsupportedAttentionError, match=r"LlamaModel.*bfloat16.*torch_dtype=torch\.float32"):
        decompose(ex, 1)
