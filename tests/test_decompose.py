"""decompose(): every layer's output is exactly the sum of its components (input, heads, feed-forwards,
corrections) on MiniLM and on tiny random models of each supported block (post-LN encoders, pre-LN decoders,
Gemma 2's sandwich norms, NeoX's parallel residual), float32 and float64; value norms, norm-weighted attention
and head outputs against explicit computations made with forward hooks, independently of the module."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from conftest import TINY_ARCHITECTURES, build_tiny_model
from scipy.spatial.distance import cdist

from headsne_widget import extract
from headsne_widget.capture import decompose as decomposition
from headsne_widget.capture.attention import capturing
from headsne_widget.capture.components import keep_trace
from headsne_widget.capture.decompose import (
    decompose,
    head_output_distances,
    head_outputs,
    norm_attention,
    value_norms,
)
from headsne_widget.capture.extraction import extract_token_ids
from headsne_widget.errors import IndexOutOfRangeError, UnsupportedAttentionError
from headsne_widget.texts import TSNE_ABSTRACT

N = 48
NEOX = ("GPTNeoXConfig", "GPTNeoXModel", dict(hidden_size=32, num_attention_heads=4, intermediate_size=64,
        use_parallel_residual=True, max_position_embeddings=512))  # fmt: skip
ARCHITECTURES = [
    "bert", "roberta", "distilbert", "modernbert", "gpt2", "llama", "mistral", "qwen2", "phi3", "gemma2", "neox"
]  # fmt: skip
# RMSNorms that compute in float32 whatever the model's dtype: a float64 model is float32-exact after them
FLOAT32_NORMS = {"llama", "mistral", "qwen2", "phi3", "gemma2"}
O_PROJ = {"bert": "attention.output.dense", "gpt2": "attn.c_proj", "llama": "self_attn.o_proj",
          "neox": "attention.dense", "phi3": "self_attn.o_proj", "distilbert": "attention.out_lin"}  # fmt: skip


@pytest.fixture(scope="module")
def tiny(bert_tokenizer, tmp_path_factory):
    built: dict[str, str] = {}

    def make(architecture: str) -> str:
        if architecture not in built:
            if architecture == "neox":
                TINY_ARCHITECTURES.setdefault("neox", NEOX)
            directory = tmp_path_factory.mktemp(f"decompose-{architecture}")
            built[architecture] = build_tiny_model(architecture, directory, bert_tokenizer)
        return built[architecture]

    return make


def load(path: str, dtype: torch.dtype = torch.float32):
    from transformers import AutoModel

    return AutoModel.from_pretrained(path, attn_implementation="eager", dtype=dtype).eval()


def run(model, tokenizer, text: str = TSNE_ABSTRACT, n: int = N):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "text truncated", UserWarning)
        ex = extract(text, model, tokenizer=tokenizer, device="cpu", max_tokens=n)
    keep_trace(ex, model)
    return ex


def check_sums(ex, tolerance: float) -> None:
    for layer in range(ex.n_layers):
        d = decompose(ex, layer)
        target = ex.states.states[layer + 1].double().numpy()
        error = np.abs(d.total - target).max()
        assert error <= tolerance * np.abs(target).max(), f"layer {layer}: {error:.3g}"
        np.testing.assert_allclose(d.shares.sum(axis=0), 1.0, atol=1e-9)
        counts = d.terms.groupby("term").size().to_dict()
        assert counts == {"input": 1, "head": (layer + 1) * ex.n_heads, "mlp": layer + 1, "correction": layer + 1}
        assert len(d.terms) == d.vectors.shape[0] == d.shares.shape[0]
        assert d.vector(0).shape == (ex.n_tokens, target.shape[1])


def test_minilm_components_sum_to_every_layer(minilm_path):
    ex = extract("The quick brown fox jumps over the lazy dog near the river bank today.", minilm_path)
    with pytest.raises(ValueError, match=r"components=True"):
        decompose(ex, 0)
    d = decompose(ex, 5, model=minilm_path)
    assert (d.terms.iloc[0].tolist(), d.terms.iloc[1].tolist()) == (["input", -1, -1], ["head", 0, 0])
    check_sums(ex, 1e-5)
    kept = extract(ex.text, minilm_path, components=True)  # the trace made with the extraction: no model needed
    np.testing.assert_array_equal(decompose(kept, 5).vectors, d.vectors)
    from_ids = extract_token_ids(ex.token_ids, minilm_path, components=True)  # the same from token ids
    np.testing.assert_array_equal(decompose(from_ids, 5).vectors, d.vectors)
    for bad in (lambda: extract(ex.text, minilm_path, components=1),
                lambda: extract_token_ids(ex.token_ids, minilm_path, components="yes"),
                lambda: extract(ex.text, "/no/such/model", components=1)):  # before the model loads  # fmt: skip
        with pytest.raises(TypeError, match="components must be True or False"):
            bad()
    float64 = run(load(minilm_path, torch.float64), ex_tokenizer(minilm_path), ex.text)
    check_sums(float64, 1e-10)


def ex_tokenizer(path: str):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_tiny_components_sum_to_every_layer(architecture, tiny, bert_tokenizer):
    path = tiny(architecture)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "text truncated", UserWarning)
        by_path = extract(TSNE_ABSTRACT, path, device="cpu", max_tokens=N)
    decompose(by_path, 0, model=path)
    check_sums(by_path, 1e-5)
    check_sums(run(load(path, torch.float64), bert_tokenizer), 1e-6 if architecture in FLOAT32_NORMS else 1e-10)


def test_a_t5_encoder_decomposes_exactly(bert_tokenizer):
    """T5: pre-RMSNorm blocks inside a per-block ModuleList, relative position bias, a final norm."""
    from transformers import T5Config, T5EncoderModel

    config = T5Config(vocab_size=bert_tokenizer.vocab_size, d_model=32, d_kv=8, num_heads=4, d_ff=64, num_layers=2)
    torch.manual_seed(0)
    model = T5EncoderModel(config).eval()
    check_sums(run(model, bert_tokenizer), 1e-5)
    check_sums(run(model.to(torch.float64), bert_tokenizer), 1e-6)  # T5's norm computes in float32


# the value bias of query head h (GQA: of its key/value head) and W_O^h as x @ W, read from the modules by name
VALUE_BIAS = {
    "gpt2": lambda b, h: (b.attn.c_attn.bias[64 + 8 * h : 72 + 8 * h], b.attn.c_proj.weight[8 * h : 8 * h + 8]),
    "neox": lambda b, h: (
        b.attention.query_key_value.bias.view(4, 24)[h, 16:],
        b.attention.dense.weight[:, 8 * h : 8 * h + 8].T,
    ),
    "qwen2": lambda b, h: (b.self_attn.v_proj.bias[:8], b.self_attn.o_proj.weight[:, 8 * h : 8 * h + 8].T),
}


@pytest.mark.parametrize("architecture", sorted(VALUE_BIAS))
def test_value_bias_moves_between_its_head_and_the_correction(architecture, tiny, bert_tokenizer):
    """value_bias="head" keeps b_V^h W_O^h in head h (fused, interleaved and GQA value projections alike)."""
    model = load(tiny(architecture), torch.float64)
    torch.manual_seed(1)
    with torch.no_grad():  # the random init leaves biases at 0
        for name, parameter in model.named_parameters():
            if name.endswith("bias") and parameter.ndim == 1:
                parameter.normal_(0.0, 0.5)
    ex = run(model, bert_tokenizer)
    blocks = next(m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == ex.n_layers)
    check_sums(ex, 1e-10 if architecture != "qwen2" else 1e-6)
    paper, kept = decompose(ex, 0), decompose(ex, 0, value_bias="head")
    np.testing.assert_allclose(paper.total, kept.total, rtol=0, atol=1e-12)
    for h in range(ex.n_heads):
        bias, w_o = VALUE_BIAS[architecture](blocks[0], h)
        sent = (bias.detach() @ w_o.detach()).numpy()
        assert np.abs(sent).max() > 1e-3
        np.testing.assert_allclose(kept.vector(1 + h) - paper.vector(1 + h), np.broadcast_to(sent, (N, 32)), atol=1e-12)


@pytest.mark.parametrize("architecture", sorted(O_PROJ))
def test_heads_plus_output_bias_equal_the_output_projection(architecture, tiny, bert_tokenizer):
    """The output projection's own output, read by a forward hook, is the sum of the heads' outputs + its bias."""
    model = load(tiny(architecture), torch.float64)
    ex = run(model, bert_tokenizer)
    blocks = next(m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == ex.n_layers)
    seen: list[torch.Tensor] = []
    hooks = [
        b.get_submodule(O_PROJ[architecture]).register_forward_hook(lambda m, a, o: seen.append(o[0])) for b in blocks
    ]
    with torch.no_grad(), capturing(model):  # the attention extract() computes (eager's softmax runs in float32)
        model(input_ids=torch.tensor(np.array(ex.token_ids))[None])
    for hook in hooks:
        hook.remove()
    for layer, block in enumerate(blocks):
        bias = block.get_submodule(O_PROJ[architecture]).bias
        total = sum(head_outputs(ex, layer, h).outputs() for h in range(ex.n_heads))
        total = total + (0.0 if bias is None else bias.detach().double().numpy())
        np.testing.assert_allclose(total, seen[layer].double().numpy(), rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    ("architecture", "weight"), [("bert", "attention.output.dense"), ("llama", "self_attn.o_proj")]
)
def test_zeroing_a_head_of_w_o_zeroes_its_share_only(architecture, weight, tiny, bert_tokenizer):
    path, head = tiny(architecture), 1
    model = load(path, torch.float64)
    before = run(model, bert_tokenizer)
    blocks = next(m for m in model.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == 2)
    d_h = model.config.hidden_size // model.config.num_attention_heads
    with torch.no_grad():
        blocks[1].get_submodule(weight).weight[:, head * d_h : (head + 1) * d_h] = 0.0
    after = run(model, bert_tokenizer)
    d = decompose(after, 1)
    k = d.terms.index[(d.terms["term"] == "head") & (d.terms["layer"] == 1) & (d.terms["head"] == head)][0]
    assert (d.vector(k) == 0).all() and (d.shares[k] == 0).all()
    assert (np.abs(d.shares[k + 1]) > 0).any()  # the next head still writes
    np.testing.assert_array_equal(decompose(after, 0).vectors, decompose(before, 0).vectors)


def test_value_norms_equal_explicit_value_vectors_through_w_o(tiny, bert_tokenizer):
    """Llama with GQA: ||v_j W_O^h|| from the v_proj output (forward hook) and o_proj's weight, head by head."""
    model = load(tiny("llama"), torch.float64)
    ex = run(model, bert_tokenizer)
    seen: list[torch.Tensor] = []
    hooks = [layer.self_attn.v_proj.register_forward_hook(lambda m, a, o: seen.append(o[0])) for layer in model.layers]
    with torch.no_grad(), capturing(model):  # the attention extract() computes (eager's softmax runs in float32)
        model(input_ids=torch.tensor(np.array(ex.token_ids))[None])
    for hook in hooks:
        hook.remove()
    norms = value_norms(ex)
    assert norms.shape == (ex.n_layers, ex.n_heads, ex.n_tokens) and norms.dtype == np.float32
    d_h, groups = 8, ex.kv_groups
    for layer in range(ex.n_layers):
        w_o = model.layers[layer].self_attn.o_proj.weight.detach().double().numpy()
        for h in range(ex.n_heads):
            kv = h // groups
            v = seen[layer].double().numpy()[:, kv * d_h : (kv + 1) * d_h]
            explicit = np.linalg.norm(v @ w_o[:, h * d_h : (h + 1) * d_h].T, axis=1)
            np.testing.assert_allclose(norms[layer, h], explicit, rtol=1e-6)


def test_norm_attention_reweights_attention_by_value_norms(tiny, bert_tokenizer, monkeypatch):
    ex = run(load(tiny("bert")), bert_tokenizer)
    real = norm_attention(ex, 1, 2)
    np.testing.assert_allclose(real.sum(axis=1), 1.0, atol=1e-6)
    expected = ex.attention(1, 2) * value_norms(ex)[1, 2][None, :]
    np.testing.assert_allclose(real, expected / expected.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    equal = np.full((ex.n_layers, ex.n_heads, ex.n_tokens), 3.0, dtype=np.float32)
    monkeypatch.setattr(decomposition, "value_norms", lambda ex, model=None: equal)
    np.testing.assert_allclose(norm_attention(ex, 1, 2), ex.attention(1, 2), rtol=0, atol=1e-6)
    equal[1, 2, 5] = 0.0  # a key whose value vector is zero
    weighted = norm_attention(ex, 1, 2)
    assert (weighted[:, 5] == 0).all() and (ex.attention(1, 2)[:, 5] > 0).all()
    np.testing.assert_allclose(weighted.sum(axis=1), 1.0, atol=1e-6)


@pytest.mark.parametrize("architecture", ["bert", "llama", "gpt2"])
def test_head_output_distances_equal_the_explicit_outputs(architecture, tiny, bert_tokenizer):
    ex = run(load(tiny(architecture)), bert_tokenizer)
    for layer, head in [(0, 0), (1, 3)]:
        outputs = head_outputs(ex, layer, head)
        assert outputs.context.shape == (ex.n_tokens, 8) and outputs.factor.shape[0] == 8
        np.testing.assert_allclose(outputs.factor @ outputs.factor.T, outputs.gram, rtol=1e-12, atol=1e-12)
        explicit = cdist(outputs.outputs(), outputs.outputs(), "sqeuclidean")
        distances = head_output_distances(ex, layer, head)
        np.testing.assert_allclose(distances, explicit, rtol=1e-5, atol=1e-5 * explicit.max() * 1e-3)


def test_bad_input_is_refused_clearly(tiny, bert_tokenizer, tiny_gpt2):
    ex = run(load(tiny("bert")), bert_tokenizer)
    with pytest.raises(IndexOutOfRangeError, match="layer 2 is out of range"):
        decompose(ex, 2)
    with pytest.raises(ValueError, match="value_bias"):
        decompose(ex, 0, value_bias="values")
    one = extract_token_ids([40], tiny_gpt2)
    assert one.n_tokens == 1
    with pytest.raises(ValueError, match="at least 2 tokens"):
        decompose(one, 0, model=tiny_gpt2)
    # Mixtral's mixture of experts, refused here before, decomposes exactly: tests/test_architectures_more.py


def test_gemma3n_altup_streams_are_refused_by_name(bert_tokenizer):
    from transformers import Gemma3nTextConfig, Gemma3nTextModel

    config = Gemma3nTextConfig(
        vocab_size=bert_tokenizer.vocab_size, vocab_size_per_layer_input=bert_tokenizer.vocab_size, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8, intermediate_size=64,
        num_kv_shared_layers=0, layer_types=["sliding_attention", "full_attention"], sliding_window=8,
        hidden_size_per_layer_input=8, laurel_rank=4, activation_sparsity_pattern=[0.0] * 2,
    )  # fmt: skip
    torch.manual_seed(0)
    model = Gemma3nTextModel(config).eval()
    ex = extract("a short text about nothing much", model, tokenizer=bert_tokenizer, device="cpu")
    with pytest.raises(UnsupportedAttentionError, match=r"Gemma3nTextModel .*AltUp"):
        decompose(ex, 0, model=model)


def test_value_norms_are_computed_once_per_extraction(tiny, bert_tokenizer):
    """Each norm-mode click reads every head's value norms: the second read is the first's (read-only) array."""
    ex = run(load(tiny("llama"), torch.float64), bert_tokenizer)
    first = value_norms(ex)
    assert value_norms(ex) is first and not first.flags.writeable


def test_decompose_and_norm_attention_are_refused_beyond_the_memory_budget(tiny, bert_tokenizer):
    """decompose keeps K (n, d) float64 components (K = 1 + each layer's heads, feed-forward and correction) and
    stacks them once; norm_attention makes one (n, n) float32 array (the head's, weighted in place): both are
    refused before allocating past the budget, with what to do, and run at the budget."""
    from headsne_widget import budget
    from headsne_widget.errors import MemoryBudgetError

    ex = run(load(tiny("llama"), torch.float64), bert_tokenizer)
    n, d = ex.layer_output(0).shape
    last = ex.n_layers - 1
    needed = 2 * (1 + ex.n_layers * (ex.n_heads + 2)) * n * d * 8
    try:
        budget.set_memory_budget(needed - 1)
        with pytest.raises(MemoryBudgetError, match=r"earlier layer.*max_tokens=.*set_memory_budget"):
            decompose(ex, last)
        budget.set_memory_budget(needed)
        assert len(decompose(ex, last).terms) == 1 + ex.n_layers * (ex.n_heads + 2)
        budget.set_memory_budget(4 * n * n - 1)
        with pytest.raises(MemoryBudgetError, match=r"norm_attention.*max_tokens="):
            norm_attention(ex, 1, 2)
        budget.set_memory_budget(4 * n * n)
        assert norm_attention(ex, 1, 2).shape == (n, n)
    finally:
        budget.set_memory_budget(None)


def test_components_made_on_demand_with_the_allowed_model_and_within_the_budget(tiny, bert_tokenizer):
    """An extraction without components: a clear error, until a model is allowed for it (the widget's text); then
    the first decomposition makes the trace with that model, equal to one made with the model passed. The trace is
    refused before its forward pass past the memory budget, and what it keeps is within its estimate."""
    from headsne_widget import budget
    from headsne_widget.capture.components import allow_components, trace_bytes
    from headsne_widget.errors import MemoryBudgetError

    model = load(tiny("llama"), torch.float64)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "text truncated", UserWarning)
        ex, twin = (extract(TSNE_ABSTRACT, model, tokenizer=bert_tokenizer, device="cpu", max_tokens=N) for _ in "ab")
    with pytest.raises(ValueError, match=r"components=True"):
        decompose(ex, 1)
    n, d = ex.layer_output(0).shape
    estimate = ex.n_layers * 10 * n * d * 8  # float64 model: ten (n, d) arrays a layer
    assert trace_bytes(ex) == estimate
    allow_components(ex, model)
    try:
        budget.set_memory_budget(estimate - 1)
        with pytest.raises(MemoryBudgetError, match=r"components of \d+ tokens over \d+ layers.*max_tokens="):
            decompose(ex, 1)
    finally:
        budget.set_memory_budget(None)
    made = decompose(ex, 1)
    np.testing.assert_array_equal(made.vectors, decompose(twin, 1, model=model).vectors)
    assert keep_trace(twin, model).nbytes <= estimate


def test_components_come_from_the_capture_pass_itself_equal_to_a_trace_of_their_own(tiny, bert_tokenizer):
    """extract(..., components=True) runs the model once (the component hooks inside the capture's own pass), and
    what it keeps decomposes every layer to the same bits as a trace made by a pass of its own; its budget is
    checked before that pass."""
    from headsne_widget import budget
    from headsne_widget.capture.components import trace_bytes
    from headsne_widget.errors import MemoryBudgetError

    model = load(tiny("llama"), torch.float64)
    passes: list[int] = []
    hook = model.register_forward_pre_hook(lambda *_: passes.append(1))
    options = dict(tokenizer=bert_tokenizer, device="cpu", max_tokens=N)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "text truncated", UserWarning)
            one = extract(TSNE_ABSTRACT, model, components=True, **options)
            assert len(passes) == 1
            plain = extract(TSNE_ABSTRACT, model, **options)
            keep_trace(plain, model)  # a pass of its own
            assert len(passes) == 3
            np.testing.assert_array_equal(one.hidden_states, plain.hidden_states)
            for layer in range(one.n_layers):
                np.testing.assert_array_equal(decompose(one, layer).vectors, decompose(plain, layer).vectors)
            estimate = trace_bytes(one)
            budget.set_memory_budget(estimate - 1)
            with pytest.raises(MemoryBudgetError, match=r"components of \d+ tokens over \d+ layers"):
                extract(TSNE_ABSTRACT, model, components=True, **options)
            assert len(passes) == 3  # refused before the pass
            budget.set_memory_budget(estimate)
            extract(TSNE_ABSTRACT, model, components=True, **options)
    finally:
        budget.set_memory_budget(None)
        hook.remove()


def test_a_column_is_matched_to_the_output_equal_in_every_row_not_only_the_first():
    """The matcher the value biases and the queries' and keys' rebuild share: a value column whose first row two
    projections' columns start with belongs to the one equal in every row (bit for bit); unmatched, None."""
    from headsne_widget.capture.trace_layers import output_columns

    rng = torch.Generator().manual_seed(0)
    a, b = torch.randn(5, 4, generator=rng), torch.randn(5, 6, generator=rng)
    b[0, 3] = a[0, 1]  # b's column 3 starts as a's column 1, then differs
    target = torch.stack([b[:, 3], a[:, 2]], dim=1)[None]  # (1 head, 5 tokens, 2 columns)
    assert output_columns(target, [a, b], every_row=True) == [(1, 3), (0, 2)]
    assert output_columns(target, [a, b], every_row=False) == [(0, 1), (0, 2)]  # the first row alone cannot tell
    target[0, 4, 0] += 1.0
    assert output_columns(target, [a, b], every_row=True) is None
