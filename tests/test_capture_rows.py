"""Rows kept at capture (``extract(..., rows=...)``, capture/folds/rows.py): each head's largest keys a row, equal to
``largest_entries`` of the dense head (columns, values, shares, ties), read by ``ex.sparse_attention`` where they
hold what is asked and recomputed exactly where they do not; memmapped past the budget in a folder that goes with
the extraction; refused before allocation where nothing holds them."""

from __future__ import annotations

import gc
import os
import shutil
import tracemalloc
import warnings
from collections import namedtuple

import numpy as np
import pytest
import torch
from conftest import build_tiny_model

from headsne_widget import extract
from headsne_widget.affinity.sparse import largest_entries
from headsne_widget.budget import set_memory_budget
from headsne_widget.capture.folds import rows as rows_module
from headsne_widget.errors import MemoryBudgetError
from headsne_widget.texts import TSNE_ABSTRACT

N = 256
# (mass, max_keys) asked of the rows: all prefixes of what 0.99 and 24 keys keep
SERVED = [(0.99, 24), (0.9, 12), (0.5, 20), (0.3, 3)]


def text_of(n_words: int) -> str:
    words = TSNE_ABSTRACT.split()
    return " ".join(words[i % len(words)] for i in range(n_words))


def capture(path: str, n: int = N, **options):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "text truncated", UserWarning)
        return extract(text_of(n), path, device="cpu", max_tokens=n, progress=False, **options)


def same_rows(S, R) -> None:
    """S (kept rows, float32) is R (largest_entries of the dense head, float64 values of it): every row's columns,
    values bit for bit and share kept."""
    np.testing.assert_array_equal(S.indptr, R.indptr)
    np.testing.assert_array_equal(S.indices, R.indices)
    np.testing.assert_array_equal(S.data.astype(np.float64), R.data)
    np.testing.assert_array_equal(S.kept, R.kept)
    assert S.has_sorted_indices and S.mass == R.mass


@pytest.mark.parametrize("architecture", ["llama", "mistral", "bert", "modernbert"])
def test_kept_rows_are_largest_entries_of_the_dense_head(architecture, tiny_model_dir):
    """Causal GQA (llama), a causal window of 32 (mistral), bidirectional (bert) and a bidirectional window
    (modernbert), 256 tokens: every head's rows read from the capture equal ``largest_entries`` of its dense
    attention for each mass and key cap within what was kept; ``ex.sparse_attention`` gives the same."""
    ex = capture(tiny_model_dir(architecture), rows=24)
    kept = ex.folded["rows"]
    assert ex.kept_row_keys == 24
    for layer in range(ex.n_layers):
        for head in range(ex.n_heads):
            A = ex.attention(layer, head)
            for mass, max_keys in SERVED:
                S = kept.sparse(layer, head, mass, max_keys=max_keys, max_entries=None, label="")
                assert S is not None, (layer, head, mass, max_keys)
                same_rows(S, largest_entries(A, mass, max_keys=max_keys))
    same_rows(ex.sparse_attention(1, 3, 0.9, max_keys=12), largest_entries(ex.attention(1, 3), 0.9, max_keys=12))


@pytest.mark.parametrize("cores", [1, 7])
def test_the_rows_do_not_depend_on_the_threads_sharing_the_fold(cores, tiny_model_dir, machine, monkeypatch):
    """One thread, or seven (each head's chunk rows then split in blocks between them): every head's kept rows are
    still ``largest_entries`` of its dense attention."""
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")  # (the fold then shares its pieces: torch_threads_sleep)
    machine(cores)
    ex = capture(tiny_model_dir("llama"), rows=24)
    for layer in range(ex.n_layers):
        for head in range(ex.n_heads):
            same_rows(
                ex.sparse_attention(layer, head, 0.99, max_keys=24),
                largest_entries(ex.attention(layer, head), 0.99, max_keys=24),
            )


def test_ties_go_to_the_lower_column(bert_tokenizer, tmp_path):
    """A Llama whose queries are zero attends uniformly: each causal row's weights are all equal. The kept rows of a
    mass or a cap take the lowest columns, as ``largest_entries`` does."""
    path = build_tiny_model("llama", tmp_path, bert_tokenizer)
    from transformers import AutoModel

    model = AutoModel.from_pretrained(path)
    with torch.no_grad():
        for layer in model.layers:
            layer.self_attn.q_proj.weight.zero_()
    model.save_pretrained(path)
    ex = capture(path, rows=16)
    A = ex.attention(1, 2)
    assert (A[N - 1] == A[N - 1, 0]).all()  # (the ties are there)
    for mass, max_keys in [(0.99, 16), (0.5, 8), (0.05, None)]:
        S = ex.folded["rows"].sparse(1, 2, mass, max_keys=max_keys, max_entries=None, label="")
        R = largest_entries(A, mass, max_keys=max_keys)
        same_rows(S, R)
    assert list(S[[N - 1]].indices) == list(range(13))  # 13 of 256 equal keys reach 5 %: the first 13


def test_a_head_asked_for_more_keys_than_kept_is_recomputed_exactly(tiny_model_dir):
    """With 4 keys kept a row, the default mass (0.99, no cap) needs more: the rows say so (None) and
    ``ex.sparse_attention`` recomputes the head, equal to ``largest_entries`` of the dense head."""
    ex = capture(tiny_model_dir("llama"), rows=4)
    assert ex.folded["rows"].sparse(0, 1, 0.99, max_keys=None, max_entries=None, label="") is None
    S = ex.sparse_attention(0, 1, 0.99)
    same_rows(S, largest_entries(ex.attention(0, 1), 0.99))
    assert np.diff(S.indptr).max() > 4


def test_rows_auto_keeps_them_from_the_threshold_on(tiny_model_dir, monkeypatch):
    """rows="auto" (the default): none below ROWS_MIN_TOKENS, kept from it on; rows=False never."""
    path = tiny_model_dir("mistral")
    assert "rows" not in capture(path).folded
    monkeypatch.setattr(rows_module, "ROWS_MIN_TOKENS", N)
    assert capture(path).kept_row_keys == rows_module.ROW_KEYS
    assert capture(path, rows=False).kept_row_keys is None
    for bad, error in [("yes", TypeError), (0, ValueError), (2.5, TypeError)]:
        with pytest.raises(error, match="rows"):
            capture(path, rows=bad)


@pytest.fixture
def budget():
    yield set_memory_budget
    set_memory_budget(None)


def test_rows_past_the_budget_are_memmapped_and_their_folder_goes_with_the_extraction(tiny_model_dir, budget):
    """A budget of 1 byte: the rows go to numpy memmaps in a temporary folder; they read the same; after ``del
    ex`` the folder is gone."""
    budget(1)
    ex = capture(tiny_model_dir("llama"), rows=24)
    folder = ex.folded["rows"].folder
    assert folder is not None and len(os.listdir(folder)) == 8  # 2 layers x columns, values, counts, totals
    budget(None)  # (the dense head of the comparison)
    same_rows(ex.sparse_attention(1, 2, 0.9, max_keys=12), largest_entries(ex.attention(1, 2), 0.9, max_keys=12))
    del ex
    gc.collect()
    assert not os.path.exists(folder)


def test_a_dead_processs_folder_is_removed_by_the_next_store(tiny_model_dir, budget, tmp_path, monkeypatch):
    """A kernel killed with its rows on disk leaves their folder; the next store that needs one removes it."""
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    orphan = tmp_path / f"headsne-rows-{2**22 + 12345}-x"  # (above the kernel's pid_max: no such process)
    orphan.mkdir()
    (orphan / "0-values.npy").write_bytes(b"x")
    budget(1)
    ex = capture(tiny_model_dir("llama"), rows=8)
    assert not orphan.exists() and os.path.exists(ex.folded["rows"].folder)


def test_the_budget_refuses_before_allocation(tiny_model_dir, budget, monkeypatch):
    """Past the memory budget and half the disk's free space, rows=True raises MemoryBudgetError before a row is
    allocated (traced memory stays far below what they would need; no folder made); rows="auto" warns and keeps
    none."""
    budget(1)
    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(2**20, 2**20 - 1000, 1000))
    made = set(os.listdir(rows_module.tempfile.gettempdir()))
    path = tiny_model_dir("llama")
    tracemalloc.start()
    try:
        with pytest.raises(MemoryBudgetError, match="kept rows") as refused:
            capture(path, rows=4096)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert refused.value.needed_bytes > 4 * peak
    assert {f for f in os.listdir(rows_module.tempfile.gettempdir()) if f.startswith("headsne-rows-")} <= made
    monkeypatch.setattr(rows_module, "ROWS_MIN_TOKENS", N)
    with pytest.warns(UserWarning, match="no rows kept"):
        assert capture(path).kept_row_keys is None


def test_a_heads_sparse_p_is_read_within_the_kept_rows_and_uncapped_without_them(tiny_model_dir, monkeypatch):
    """A head's rows within what the capture kept are read, not recomputed (the captured layer's pass and the dense
    head are never called), equal to ``largest_entries`` of the dense head; a sparse P (``selection_affinities``,
    the widget's and the studies' P) keeps each row's mass within the keys the capture kept, and is the thesis's
    uncapped P where the capture kept none (``rows=False``)."""
    from headsne_widget.affinity.selection import selection_affinities
    from headsne_widget.affinity.sparse import sparse_attention_affinities
    from headsne_widget.capture.layers import LayerAttention

    ex = capture(tiny_model_dir("mistral"), rows=24)

    def recompute(*args, **kwargs):
        raise AssertionError("the head was recomputed")

    with monkeypatch.context() as patched:
        patched.setattr(LayerAttention, "sparse", recompute)
        patched.setattr(LayerAttention, "heads", recompute)
        read = ex.sparse_attention(1, 2, max_keys=24)
    rows = largest_entries(ex.attention(1, 2), 0.99, max_keys=24)
    assert (read != rows).nnz == 0 and read.nnz == rows.nnz
    with monkeypatch.context() as patched:
        patched.setattr(LayerAttention, "sparse", recompute)
        patched.setattr(LayerAttention, "heads", recompute)
        chosen = selection_affinities(ex, "attention", 1, 2, sparse=True, dtype=np.float32)
    P = sparse_attention_affinities(rows, dtype=np.float32)[0]
    assert (chosen.P != P).nnz == 0 and chosen.P.nnz == P.nnz
    assert "its 24 largest keys (kept at capture" in chosen.note
    uncapped = capture(tiny_model_dir("mistral"), rows=False)
    chosen = selection_affinities(uncapped, "attention", 1, 2, sparse=True, dtype=np.float32)
    P = sparse_attention_affinities(largest_entries(uncapped.attention(1, 2), 0.99), dtype=np.float32)[0]
    assert (chosen.P != P).nnz == 0 and chosen.P.nnz == P.nnz and chosen.note == ""
