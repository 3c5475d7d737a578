"""Per-head scores (capture/scores.py): each score against its formula on dense attention, heads planted by hand
found and named, the grid above uniform, induction scores, and bad input."""

from __future__ import annotations

import copy
import dataclasses
import math
import warnings

import numpy as np
import pytest
import torch

from headsne_widget import extract, head_scores, induction_scores
from headsne_widget.capture import layers
from headsne_widget.capture.extraction import extract_token_ids, load_model
from headsne_widget.capture.maximum_attention import max_attention, max_attention_above_uniform
from headsne_widget.capture.scores import KINDS, LOG_BLOCK_VALUES, SCORES, fold_pieces, head_kind, statistics
from headsne_widget.texts import TSNE_ABSTRACT


def dense_scores(A: np.ndarray, special: np.ndarray) -> dict[str, float]:
    """The scores' formulas, written out on one head's dense (n, n) attention, in float64."""
    A = A.astype(np.float64)
    n = A.shape[0]
    i = np.arange(n)
    m = np.count_nonzero(A, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        H = -np.where(A > 0, A * np.log(A), 0.0).sum(axis=1)
        rows = m >= 2
        entropy = float(np.mean(H[rows] / np.log(m[rows]))) if rows.any() else math.nan
    band = np.abs(i[:, None] - i[None, :]) <= 3
    return {
        "sink": float(A[:, 0].mean()),
        "previous": float(A[i[1:], i[1:] - 1].mean()) if n > 1 else math.nan,
        "next": float(A[i[:-1], i[:-1] + 1].mean()) if n > 1 else math.nan,
        "self": float(np.diag(A).mean()),
        "local": float((A * band).sum(axis=1).mean()),
        "entropy": entropy,
        "special": float(A[:, special].sum(axis=1).mean()),
        "future": float(np.triu(A, 1).sum(axis=1).mean()),
    }


def assert_scores_match_dense(ex, atol: float = 1e-6) -> None:
    frame = head_scores(ex)
    assert list(frame.columns) == ["layer", "head", *SCORES, "kind"]
    assert len(frame) == ex.n_layers * ex.n_heads
    for row in frame.itertuples():
        expected = dense_scores(ex.attention(row.layer, row.head), np.asarray(ex.special))
        for name in SCORES:
            got = getattr(row, name)
            assert got == pytest.approx(expected[name], abs=atol, nan_ok=True), (row.layer, row.head, name)
        assert row.kind == head_kind(expected)
    np.testing.assert_allclose(statistics(ex).above_uniform, max_attention_above_uniform(ex.attentions), atol=atol)


def test_minilm_scores_equal_the_formulas_on_dense_attention(abstract_ex):
    assert_scores_match_dense(abstract_ex)


@pytest.mark.parametrize("architecture", ["llama", "mistral", "gemma2", "modernbert"])
def test_decoder_scores_equal_the_formulas_across_chunk_borders(architecture, tiny_model_dir, monkeypatch):
    """Chunks of 7 query rows (borders inside the local band and the sliding windows) fold to the same scores."""
    monkeypatch.setattr(layers, "CHUNK_BYTES", 7 * 4 * 4 * 100)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "text truncated", UserWarning)
        ex = extract(TSNE_ABSTRACT, tiny_model_dir(architecture), device="cpu", max_tokens=100)
    assert ex.attention_source.layers[0].chunk_rows() == 7
    assert_scores_match_dense(ex)
    stats = statistics(ex)
    assert stats.causal == (architecture != "modernbert")
    if stats.causal:  # the raw grid draws the causal mask: column 0 is exactly 1 in every head
        assert np.all(ex.max_attention[:, :, 0] == 1.0)
        assert np.all(head_scores(ex)[["next", "future"]].to_numpy() == 0.0)


def test_substituted_attention_gets_its_own_scores(abstract_ex):
    """dataclasses.replace(ex, attentions=A) drops the capture's scores: those of A are computed."""
    n = abstract_ex.n_tokens
    uniform = np.full((abstract_ex.n_layers, abstract_ex.n_heads, n, n), 1.0 / n, dtype=np.float32)
    ex = dataclasses.replace(abstract_ex, attentions=uniform)
    frame = head_scores(ex)
    np.testing.assert_allclose(frame["sink"], 1.0 / n, rtol=1e-6)
    np.testing.assert_allclose(frame["entropy"], 1.0, rtol=1e-6)
    assert set(frame["kind"]) == {"broad"}
    assert_scores_match_dense(ex)
    assert statistics(ex).above_uniform.max() == pytest.approx(0.0, abs=1e-6)


def test_scores_refolded_without_the_captures_equal_the_captures(abstract_ex):
    """An extraction without the capture's scores (built by hand from captured layers) gets the same ones, to the
    bit: its layers are refolded from their queries and keys in the capture's chunks and order."""
    bare = copy.copy(abstract_ex)
    bare.head_stats = None
    ours, captured = statistics(bare), abstract_ex.head_stats
    assert ours is not captured
    for got, want in zip((ours.sums, ours.received, ours.above_uniform), dataclasses.astuple(captured)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.slow
def test_scores_of_a_long_hand_built_extraction_fit_in_memory():
    """16384 tokens, 2 heads of uniform rows: a head is 1 GiB, the layer's stack 2 GiB. Under a 3 GiB address space
    the scores come from the queries and keys chunk by chunk (before: every head of the layer as one array, a
    MemoryError), equal to the uniform head's formulas; one head as an (n, n) array is refused beyond the memory
    budget before it is allocated."""
    from tests.test_memory_budget import run_limited

    out = run_limited(LONG_SCORES_CHILD)
    n = 16384
    assert out["kinds"] == ["broad", "broad"]
    for name, value in {"sink": 1 / n, "self": 1 / n, "previous": 1 / n, "local": (7 * n - 12) / n / n}.items():
        assert out[name] == pytest.approx([value, value], rel=1e-5), name
    assert out["entropy"] == pytest.approx([1.0, 1.0], abs=1e-6)
    assert out["refused"].startswith("MemoryBudgetError: layer 0 head 1's attention: 16384 x 16384 float32 weights")
    assert "ex.sparse_attention(0, 1)" in out["refused"]
    assert out["peak"] < 2 * 2**30


LONG_SCORES_CHILD = """
    import json, resource
    import numpy as np, torch
    from headsne_widget import head_scores
    from headsne_widget.budget import set_memory_budget
    from headsne_widget.capture.extraction import Extraction, HiddenStates
    from headsne_widget.capture.layers import LayerAttention
    from headsne_widget.capture.sources import CapturedAttention

    N = 16384
    layer = LayerAttention(query=torch.zeros(2, N, 1), key=torch.zeros(2, N, 1), mask=None, scaling=1.0)
    ex = Extraction(" ".join(["w"] * N), ["w"] * N, np.arange(N), [(2 * i, 2 * i + 1) for i in range(N)],
                    np.zeros(N, bool), max_attention=np.full((1, 2, N), 1 / N, np.float32), model_name="hand-built",
                    attention_source=CapturedAttention([layer]), states=HiddenStates(torch.zeros(2, N, 1)))
    frame = head_scores(ex)
    out = {name: frame[name].tolist() for name in ["sink", "self", "previous", "local", "entropy", "kind"]}
    out["kinds"] = out.pop("kind")
    set_memory_budget(512 * 2**20)
    try:
        ex.attention(0, 1)
        out["refused"] = ""
    except MemoryError as err:
        out["refused"] = f"{type(err).__name__}: {err}"
    out["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out))
"""


def test_one_token_text_has_no_previous_and_no_entropy(tiny_gpt2):
    ex = extract_token_ids([5], tiny_gpt2)
    frame = head_scores(ex)
    assert frame["previous"].isna().all() and frame["entropy"].isna().all()
    assert (frame["sink"] == 1.0).all() and (frame["self"] == 1.0).all()
    assert set(frame["kind"]) == {"sink"}  # sink and self tie at 1: the first of the rule's order


# ----------------------------------------------------------------------------------------------- planted heads


def planted_gpt2(tokenizer, tmp_path) -> str:
    """A GPT-2 (2 layers x 4 heads, hidden 128, one-hot positions, no token embedding) whose layer 0 head 1 attends
    to the previous token and head 2 to the first token; the other heads are random."""
    from transformers import GPT2Config, GPT2Model

    D, hd = 128, 32
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=D, n_layer=2, n_head=4, n_positions=D,
                        initializer_range=0.2, bos_token_id=tokenizer.eos_token_id,
                        eos_token_id=tokenizer.eos_token_id, attn_implementation="eager")  # fmt: skip
    torch.manual_seed(0)
    model = GPT2Model(config)
    with torch.no_grad():
        model.wte.weight.zero_()
        model.wpe.weight.copy_(torch.eye(D))  # layer 0 sees position p as the one-hot e_p (after its layer norm)
        attn = model.h[0].attn.c_attn  # Conv1D: x @ W + b, columns [q | k | v], head h at [h * hd, (h + 1) * hd)
        W, b = attn.weight, attn.bias
        q1, k1 = slice(hd, 2 * hd), slice(D + hd, D + 2 * hd)
        W[:, q1], b[q1], W[:, k1], b[k1] = 0.0, 0.0, 0.0, 0.0
        for d in range(
            hd - 1
        ):  # q_i reads position d + 1 into dimension d, k_j reads position d: q_i . k_j ~ [j = i-1]
            W[d + 1, hd + d] = 1.0
            W[d, D + hd + d] = 1.0
        q2, k2 = slice(2 * hd, 3 * hd), slice(D + 2 * hd, D + 3 * hd)
        W[:, q2], b[q2], W[:, k2], b[k2] = 0.0, 0.0, 0.0, 0.0
        b[2 * hd] = 1.0  # a constant query ...
        W[0, D + 2 * hd] = 10.0  # ... that reads whether the key is position 0
    directory = tmp_path / "planted-gpt2"
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return str(directory)


def test_planted_previous_and_sink_heads_are_ranked_first_and_named(tiny_gpt2, tmp_path):
    path = planted_gpt2(tiny_gpt2.tokenizer, tmp_path)
    ex = extract_token_ids(np.arange(40, 70), path)  # 30 tokens: positions inside the head's 31 dimensions
    frame = head_scores(ex)
    top_previous = frame.sort_values("previous", ascending=False).iloc[0]
    top_sink = frame.sort_values("sink", ascending=False).iloc[0]
    assert (top_previous["layer"], top_previous["head"], top_previous["kind"]) == (0, 1, "previous")
    assert (top_sink["layer"], top_sink["head"], top_sink["kind"]) == (0, 2, "sink")
    assert top_previous["previous"] > 0.99 and top_sink["sink"] > 0.99
    assert_scores_match_dense(ex)
    # the raw grid is 1 in column 0 of every head; above uniform only the sink head keeps it, and the
    # previous-token head is ~1 in every column it is the previous token of
    assert np.all(ex.max_attention[:, :, 0] == 1.0)
    above = statistics(ex).above_uniform
    assert above[0, 2, 0] > 0.99 and np.all(above[0, 1, :-1] > 0.99) and above[0, 1, -1] == 0.0


def test_kind_rule():
    assert KINDS == ("sink", "previous", "next", "self", "special", "local", "broad", "focused")
    base = dict.fromkeys(SCORES, 0.0)
    assert head_kind({**base, "previous": 0.6, "sink": 0.55}) == "previous"
    assert head_kind({**base, "special": 0.7, "sink": 0.4}) == "special"
    assert head_kind({**base, "local": 0.5, "entropy": 0.9}) == "local"
    assert head_kind({**base, "entropy": 0.8}) == "broad"
    assert head_kind({**base, "entropy": 0.5}) == "focused"
    assert head_kind({**base, "entropy": math.nan}) == "focused"


# ------------------------------------------------------------------------------------------- the grid above uniform


def test_grid_above_uniform_on_dense_matrices():
    causal_uniform = np.tril(np.ones((6, 6))) / np.arange(1, 7)[:, None]
    assert np.all(max_attention(causal_uniform) == 1.0 / np.arange(1, 7))  # the raw grid draws the mask
    np.testing.assert_allclose(max_attention_above_uniform(causal_uniform), 0.0, atol=1e-12)
    previous = np.tril(np.full((6, 6), 1e-9), -2) + np.eye(6, k=-1) + np.eye(6) * 1e-9  # softmax never gives 0
    previous /= previous.sum(axis=1, keepdims=True)
    previous[0, 0] = 1.0
    np.testing.assert_allclose(max_attention_above_uniform(previous), [1, 1, 1, 1, 1, 0], atol=1e-8)
    one_hot = np.eye(6, k=-1) + np.eye(6, k=5)  # m_i counts non-zero entries: a row of one key is left out
    assert np.all(max_attention_above_uniform(one_hot) == 0.0)
    half = np.array([[0.5, 0.5, 0.0], [0.0, 0.75, 0.25], [0.2, 0.2, 0.6]])
    m = np.array([2, 2, 3])[:, None]
    np.testing.assert_allclose(max_attention_above_uniform(half), np.maximum((half * m - 1) / (m - 1), 0).max(0))


# ---------------------------------------------------------------------------------------------------- induction


def test_induction_scores_come_with_their_token_ids(tiny_model_dir):
    path = tiny_model_dir("llama")
    result = induction_scores(path, length=20, seed=3)
    loaded = load_model(path)
    assert result.token_ids[0] == loaded.tokenizer.cls_token_id and len(result.token_ids) == 41
    assert np.array_equal(result.token_ids[1:21], result.token_ids[21:])
    assert not np.isin(result.token_ids[1:], loaded.tokenizer.all_special_ids).any()
    assert list(result.scores.columns) == ["layer", "head", "induction"] and len(result.scores) == 2 * 4
    ex = extract_token_ids(result.token_ids, path)  # a user recomputes it from the ids
    queries, keys = result.pairs()
    for row in result.scores.itertuples():
        assert row.induction == pytest.approx(float(ex.attention(row.layer, row.head)[queries, keys].mean()), abs=1e-6)
    again = induction_scores(path, length=20, seed=3)
    assert np.array_equal(again.token_ids, result.token_ids)


@pytest.mark.parametrize("architecture", ["mistral", "bert"])
def test_torch_fold_equals_the_compiled_fold(architecture, tiny_model_dir):
    """On a GPU the chunks are folded with torch's operations: the same sums and profiles as the CPU's compiled pass
    (checked here on the CPU, chunk borders inside the band; a causal window, and bidirectional attention)."""
    from headsne_widget.capture.scores import LayerScores

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "text truncated", UserWarning)
        ex = extract(TSNE_ABSTRACT, tiny_model_dir(architecture), device="cpu", max_tokens=100)
    A = torch.from_numpy(np.stack([ex.attention(1, h) for h in range(ex.n_heads)]))
    compiled, with_torch = LayerScores(ex.n_heads, 100), LayerScores(ex.n_heads, 100)
    for start in range(0, 100, 9):
        rows = slice(start, min(start + 9, 100))
        causal = architecture == "mistral"  # a chunk's key span: every weight outside it is 0
        keys = slice(max(0, start - 40), rows.stop) if causal else slice(0, 100)
        compiled.update(rows, keys, A[:, rows, keys].contiguous())
        with_torch.update_with_torch(rows, keys, A[:, rows, keys].contiguous())
    for a, b in zip(compiled.finish(), with_torch.finish()):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(
    ("n_heads", "r", "k", "threads"), [(32, 128, 128, 2), (32, 3, 2048, 16), (12, 512, 512, 2), (8, 1, 65536, 4)]
)
def test_the_folds_pieces_keep_each_heads_rows_on_one_thread_and_their_blocks_in_cache(n_heads, r, k, threads):
    """Every head in exactly one piece (its rows then folded in order by one thread: two pieces sharing a head
    would race on its sums); a block of a piece's heads within LOG_BLOCK_VALUES weights unless one row of one head
    is longer; two pieces a thread where there are heads enough."""
    pieces, step = fold_pieces(n_heads, r, k, threads)
    heads = [h for piece in pieces for h in range(piece.start, piece.stop)]
    assert heads == list(range(n_heads))
    widest = max(piece.stop - piece.start for piece in pieces)
    assert 1 <= step <= r
    assert widest * step * k <= LOG_BLOCK_VALUES or (widest, step) == (1, 1)
    assert len(pieces) >= min(n_heads, 2 * threads)
