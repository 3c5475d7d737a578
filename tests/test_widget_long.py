"""The widget's own click above the sparse threshold (issue 21): a sparse P from the head's kept rows, the
partners from those rows, and no n x n array anywhere (docs/long-texts.md).

A tiny random Mistral with a sliding window of 64 at ``SPARSE_MIN_TOKENS`` + 104 tokens: its rows keep at most
64 keys, so the whole run's arrays stay far below one n x n float32 (measured with tracemalloc, as
tests/test_memory.py)."""

from __future__ import annotations

import gc
import math
import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import build_tiny_model
from recording_comm import wait_until
from widget_probes import count_builds, count_leases, prefetch_idle

from headsne_widget.affinity.partners import neighbour_partners
from headsne_widget.affinity.sparse import SPARSE_MIN_TOKENS
from headsne_widget.capture.extraction import extract
from headsne_widget.embedding.background import start_warmup
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget.selections import SPARSE_MASS

N = SPARSE_MIN_TOKENS + 104
WINDOW = 64
MIB = 2**20


LONG_TEXT = " ".join(TSNE_ABSTRACT.split()[i % len(TSNE_ABSTRACT.split())] for i in range(N + 400))


@pytest.fixture(scope="module")
def long_model(bert_tokenizer, tmp_path_factory) -> str:
    directory = tmp_path_factory.mktemp("tiny-mistral-window")
    return build_tiny_model(
        "mistral", directory, bert_tokenizer, hidden_size=64, max_position_embeddings=8192, sliding_window=WINDOW
    )


@pytest.fixture(scope="module")
def long_ex(long_model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ex = extract(LONG_TEXT, long_model, max_tokens=N)
    assert ex.n_tokens == N
    return ex


FIRST_RUNS = """
import sys, types, warnings
warnings.simplefilter("ignore")
import numba
from headsne_widget import HeadSNE
from headsne_widget.capture.extraction import extract
from headsne_widget.texts import TSNE_ABSTRACT
from headsne_widget.widget.loading import start_widget_warmup
import test_widget_long as here

path, long = sys.argv[1], sys.argv[2] == "long"
if long:
    ex = extract(here.LONG_TEXT, path, max_tokens=here.N)
else:
    ex = extract(TSNE_ABSTRACT, path, components=True)
start_widget_warmup().join()


def compiled():
    found = {}
    for name, module in list(sys.modules.items()):
        if name.startswith("headsne_widget") and isinstance(module, types.ModuleType):
            for attr, value in vars(module).items():
                if isinstance(value, numba.core.registry.CPUDispatcher):
                    found[f"{value.py_func.__module__}.{attr}"] = set(map(str, value.signatures))
    return found


for mode in sys.argv[3:]:
    before = compiled()
    w = HeadSNE(ex, mode=mode, layer=1, head=2, n_iter=40, speed=0.0, autostart=False)
    w.run()
    w.wait(120)
    assert w.state == "done", w.status
    if long:  # a long text's hover lines, which come after its first frame
        here.wait_until(lambda: w.edges is not None, 60, "the hover lines")
    w.close()
    after = compiled()
    print(mode, sorted(f"{k}{sorted(after[k] - before.get(k, set()))}" for k in after
                       if after[k] - before.get(k, set())))
"""


@pytest.mark.parametrize(
    ("text", "modes"), [("long", ["attention", "hidden"]), ("short", ["attention", "norm", "head-output", "hidden"])]
)
def test_after_the_warm_up_a_first_run_in_each_mode_waits_for_no_compiled_kernel(text, modes, long_model, minilm_path):
    """A fresh process, as a user's kernel: the background warm-up done, the first run in each mode of a long text
    (the sparse path, its hover lines included) and of a short one uses only kernels the warm-up compiled or
    loaded. At a fresh install the long text's key selection took 16 s to compile,
    which its first frame waited for, and a source of points' distances and search 9 s."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])}
    path = long_model if text == "long" else minilm_path
    result = subprocess.run(
        [sys.executable, "-c", FIRST_RUNS, path, text, *modes], capture_output=True, text=True, timeout=600, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-len(modes) :] == [f"{mode} []" for mode in modes], (
        "kernels the warm-up left out: " + result.stdout
    )


def top_k(entries: dict[int, float], k: int, own: int, kept: set[int]) -> list[tuple[int, float]]:
    """The k largest of ``{token: weight}``, self and tokens not kept left out, equal weights the lower first."""
    ranked = sorted(((-w, j) for j, w in entries.items() if j != own and j in kept and w > 0))
    return [(j, -w) for w, j in ranked[:k]]


def expected_partners(S: sp.csr_array, k: int, kept: np.ndarray, tokens: np.ndarray) -> dict[str, list]:
    """Per token of ``tokens``, plain Python: the top-k of its row, of its column and of max(row, column)."""
    rows, cols, keep = sp.csr_array(S), sp.csc_array(S), set(kept.tolist())
    out: dict[str, list] = {"attends_to": [], "attended_by": [], "edges": []}
    for i in tokens.tolist():
        row = dict(zip(rows.indices[rows.indptr[i] : rows.indptr[i + 1]].tolist(),
                       rows.data[rows.indptr[i] : rows.indptr[i + 1]].tolist()))  # fmt: skip
        col = dict(zip(cols.indices[cols.indptr[i] : cols.indptr[i + 1]].tolist(),
                       cols.data[cols.indptr[i] : cols.indptr[i + 1]].tolist()))  # fmt: skip
        both = {j: max(row.get(j, 0.0), col.get(j, 0.0)) for j in row.keys() | col.keys()}
        for name, entries in (("attends_to", row), ("attended_by", col), ("edges", both)):
            out[name].append(top_k(entries, k, i, keep))
    return out


def listed(trait: dict, tokens: np.ndarray) -> list[list[tuple[int, float]]]:
    """A partner trait's lists for ``tokens``, the padding (index -1, weight 0) left out."""
    return [[(int(j), float(w)) for j, w in zip(trait["indices"][i], trait["weights"][i]) if j >= 0]
            for i in tokens.tolist()]  # fmt: skip


def test_a_head_click_above_the_threshold_runs_sparse_with_no_n_by_n_array(make, long_ex, monkeypatch):
    ex, k = long_ex, 4
    start_warmup().join()
    leased = count_leases(monkeypatch)
    w, c = make(ex, autostart=False, n_iter=40, speed=0.0, edge_k=k, exclude_special=True)
    wait_until(lambda: w.head_map is not None, 60, "the head map")  # its own O(n) arrays, before the click
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        c.from_browser(layer=1, head=2)
        kl = w.wait(120)
        wait_until(lambda: w.attended_by is not None, 60, "the partners")
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    kept = np.flatnonzero(~np.asarray(ex.special))
    assert w.state == "done" and kl is not None and math.isfinite(kl)
    assert w.embedding.shape == (len(kept), 2) and np.isfinite(w.embedding).all()
    assert len(c.frames()) >= 2  # frames streamed, not only the last
    sent = c.states()
    progress = [state["progress"] for state in sent if "progress" in state]
    assert 1.0 in progress and progress[-1] is None  # the rows' progress, withdrawn when the run starts
    assert any("selecting each token's keys (100%)" in state.get("status", "") for state in sent)
    S = ex.sparse_attention(1, 2, mass=SPARSE_MASS)
    assert S.nnz <= N * WINDOW
    tokens = np.random.default_rng(0).choice(N, 200, replace=False)
    expected = expected_partners(S, k, kept, tokens)
    for name in ("attends_to", "attended_by", "edges"):
        trait = getattr(w, name)
        assert trait["indices"].shape == (N, k)
        assert listed(trait, tokens) == expected[name], name
    assert leased == []  # no n x n array was ever made
    one_head = 4 * N * N
    assert peak < one_head / 3, f"peak {peak / MIB:.1f} MiB; one n x n float32 is {one_head / MIB:.0f} MiB"
    print(f"n = {N}: peak {peak / MIB:.1f} MiB of numpy arrays (one n x n float32: {one_head / MIB:.0f} MiB)")


def test_a_hidden_run_above_the_threshold_takes_the_knn_p_and_neighbours(make, long_ex, monkeypatch):
    ex, k = long_ex, 3
    leased = count_leases(monkeypatch)
    w, _ = make(ex, n_iter=30, speed=0.0, edge_k=k, layer=0, mode="hidden")
    kl = w.wait(120)
    wait_until(lambda: w.edges is not None, 60, "the neighbours")
    assert w.state == "done" and kl is not None and math.isfinite(kl)
    assert w.embedding.shape == (N, 2)
    assert w.attends_to is None and w.attended_by is None
    assert leased == []
    indices, weights = neighbour_partners(ex.layer_output(0), k, np.arange(N), method=None)
    np.testing.assert_array_equal(w.edges["indices"], indices)
    # the P's search ran on its scaled copy: the nearest pairs' distances (1e-8 of the largest, the text repeats
    # itself) differ in their last bits, and where the median's float32 rounding tips, every weight by an ulp
    np.testing.assert_allclose(w.edges["weights"], weights, rtol=1e-6)


def test_a_long_hidden_runs_partners_come_from_its_own_p_search(make, long_ex, monkeypatch):
    """From SPARSE_MIN_TOKENS kept tokens on, a hidden run's hover partners are the first edge_k of its kNN P's
    own neighbours: one search a run, not a second one after the first frame (here the exact search). The
    oracle subtracts every pair of states in float64; the weights are ``1 / (1 + d^2 / median d^2)``."""
    from headsne_widget.affinity import neighbours as knn

    ex, k = long_ex, 3
    monkeypatch.setattr(knn.settings, "neighbours", "exact")
    X = np.asarray(ex.layer_output(0), dtype=np.float64)
    d2 = np.concatenate([((X[lo : lo + 64, None, :] - X[None, :, :]) ** 2).sum(axis=2) for lo in range(0, N, 64)])
    np.fill_diagonal(d2, np.inf)
    indices = np.argsort(d2, axis=1, kind="stable")[:, :k]
    nearest = np.take_along_axis(d2, indices, axis=1)
    weights = 1.0 / (1.0 + nearest / np.median(nearest))
    searched: list[int] = []
    exact = knn.exact_neighbours

    def counted(X, k, *args, **kwargs):
        searched.append(len(X))
        return exact(X, k, *args, **kwargs)

    monkeypatch.setattr(knn, "exact_neighbours", counted)
    w, _ = make(ex, n_iter=30, speed=0.0, edge_k=k, layer=0, mode="hidden")
    w.wait(120)
    wait_until(lambda: w.edges is not None, 60, "the neighbours")
    assert searched == [N], "the P's search, and no other"
    np.testing.assert_array_equal(w.edges["indices"], indices)
    np.testing.assert_allclose(w.edges["weights"], weights, rtol=1e-6)  # float32 weights


def test_a_long_hidden_run_beyond_the_budget_is_refused_with_a_reason(make, long_ex, monkeypatch):
    """The exact search's memory is checked before it is allocated: under a budget that holds the kNN P's entries
    but not the search, a hidden click shows why in the status line and what to use instead (the approximate
    search), and the widget goes on: with the budget back, the same click runs to the end."""
    from headsne_widget.affinity import neighbours as knn
    from headsne_widget.budget import set_memory_budget

    ex = long_ex
    monkeypatch.setattr(knn.settings, "neighbours", "exact")
    w, c = make(ex, n_iter=30, speed=0.0, layer=0, perplexity=30.0, autostart=False)
    need = knn.exact_bytes(N, ex.layer_output(0).shape[1], N, 90)  # perplexity 30: 90 neighbours a token
    set_memory_budget(need - 1)
    try:
        c.from_browser(mode="hidden")
        wait_until(lambda: w.state in ("error", "done"), 60, "the refusal")
    finally:
        set_memory_budget(None)
    assert w.state == "error" and "memory budget" in w.status and f"search of {N:,} points" in w.status, w.status
    assert "neighbours='approx'" in w.status
    c.control("restart")
    kl = w.wait(120)
    assert w.state == "done" and kl is not None and math.isfinite(kl)


def test_a_hovered_head_then_a_new_edge_k_give_that_heads_sparse_partners(make, long_ex, monkeypatch):
    ex = long_ex
    built, leased = count_builds(monkeypatch), count_leases(monkeypatch)
    w, c = make(ex, autostart=False, n_iter=20, speed=0.0, edge_k=3)
    c.from_browser(hovered_head=[0, 1])  # its sparse P and rows built ahead
    wait_until(lambda: built == [("attention", 0, 1)] and prefetch_idle(), 60, "the prefetch")
    c.from_browser(layer=0, head=1)  # the click takes them
    w.wait(120)
    assert built == [("attention", 0, 1)], "the click took the P built ahead"
    wait_until(lambda: w.edges is not None, 60, "the partners")
    w.edge_k = 5  # the partners again, the rows computed again
    wait_until(lambda: w.edges is not None and w.edges["indices"].shape == (N, 5), 60, "the partners for 5")
    S, kept, tokens = ex.sparse_attention(0, 1, mass=SPARSE_MASS), np.arange(N), np.arange(0, N, 37)
    expected = expected_partners(S, 5, kept, tokens)
    for name in ("attends_to", "attended_by", "edges"):
        assert listed(getattr(w, name), tokens) == expected[name], name
    assert leased == []
