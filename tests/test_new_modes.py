"""The modes of "what a head writes" (issue 28 items 2-3), built as P sources on the one builder: value-weighted
attention (``mode="norm"``) and what a head writes (``mode="head-output"``), in the function API and the widget,
each against an independent computation from the model's own modules (forward hooks)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
import torch
from blas_counts import numpy_blas_threads
from scipy.spatial.distance import pdist

from headsne_widget.affinity.selection import selection_affinities
from headsne_widget.capture.extraction import Extraction, extract
from headsne_widget.embedding.background import start_warmup
from headsne_widget.embedding.tsne import kl_divergence
from headsne_widget.texts import TSNE_ABSTRACT

TEXT = TSNE_ABSTRACT[:200]
LAYER, HEAD = 1, 2


@pytest.fixture(scope="module", autouse=True)
def warm_kernels():
    start_warmup().join()


@pytest.fixture(scope="module")
def ex(tiny_bert) -> Extraction:
    return extract(TEXT, tiny_bert, components=True)


def explicit_head_writes(tiny_bert, ex: Extraction, layer: int, head: int) -> np.ndarray:
    """(n, n, d): what head ``head`` adds to each query i per key j, alpha_ij (x_j W_V + b_V) W_O^h, from the BERT
    layer's own value and output modules (float64), independently of the package's trace."""
    model = tiny_bert.model
    block = model.encoder.layer[layer].attention
    d_h = block.self.attention_head_size
    x = torch.tensor(np.array(ex.hidden_states[layer]), dtype=torch.float64)
    with torch.no_grad():
        v = torch.nn.functional.linear(x, block.self.value.weight.double(), block.self.value.bias.double())
        v_h = v[:, head * d_h : (head + 1) * d_h]
        w_o = block.output.dense.weight.double()[:, head * d_h : (head + 1) * d_h]
        return (v_h @ w_o.T).numpy()  # (n, d): f_h(x_j), per key


def thesis_P(M: np.ndarray) -> np.ndarray:
    S = M.astype(np.float64) + M.astype(np.float64).T
    np.fill_diagonal(S, 0.0)
    return S / S.sum()


def test_norm_mode_is_attention_weighted_by_what_each_key_sends(ex, tiny_bert):
    f = explicit_head_writes(tiny_bert, ex, LAYER, HEAD)
    N = ex.attention(LAYER, HEAD).astype(np.float64) * np.linalg.norm(f, axis=1)[None, :]
    N /= N.sum(axis=1, keepdims=True)
    sel = selection_affinities(ex, "norm", LAYER, HEAD)
    assert sel.label == "value-weighted layer 1 head 2"
    np.testing.assert_allclose(sel.P, thesis_P(N), rtol=1e-5, atol=1e-12)
    assert not np.allclose(sel.P, selection_affinities(ex, "attention", LAYER, HEAD).P, rtol=1e-3)


def test_norm_mode_with_equal_norms_is_attention_mode(ex, monkeypatch):
    from headsne_widget.capture import decompose

    monkeypatch.setattr(
        decompose, "value_norms", lambda ex, model=None: np.ones((ex.n_layers, ex.n_heads, ex.n_tokens))
    )
    np.testing.assert_allclose(selection_affinities(ex, "norm", LAYER, HEAD).P,
                               selection_affinities(ex, "attention", LAYER, HEAD).P, rtol=1e-6, atol=0)  # fmt: skip
    sparse = selection_affinities(ex, "norm", LAYER, HEAD, sparse=True, mass=0.9)
    np.testing.assert_allclose(sparse.P.toarray(), selection_affinities(ex, "attention", LAYER, HEAD, sparse=True,
                               mass=0.9).P.toarray(), rtol=1e-6, atol=0)  # fmt: skip


def test_a_key_that_sends_nothing_gets_no_weight(ex, monkeypatch):
    from headsne_widget.affinity.sources import source
    from headsne_widget.capture import decompose

    norms = np.ones((ex.n_layers, ex.n_heads, ex.n_tokens))
    norms[LAYER, HEAD, 5] = 0.0
    monkeypatch.setattr(decompose, "value_norms", lambda ex, model=None: norms)
    N = source("norm").matrix(ex, LAYER, HEAD)
    assert np.all(N[:, 5] == 0.0) and np.allclose(N.sum(axis=1), 1.0, atol=1e-6)


def test_the_sparse_norm_P_with_every_key_kept_is_the_dense_one(ex):
    dense = selection_affinities(ex, "norm", LAYER, HEAD, dtype=np.float64)
    sparse = selection_affinities(ex, "norm", LAYER, HEAD, sparse=True, mass=1.0, dtype=np.float64)
    assert scipy.sparse.issparse(sparse.P)
    np.testing.assert_allclose(sparse.P.toarray(), dense.P, rtol=1e-6, atol=1e-12)


def test_head_output_mode_embeds_what_the_head_writes(ex, tiny_bert):
    """Distances of the source's points equal those of the explicit (n, d) outputs o_t = sum_j alpha_tj f(x_j), and
    P is the Gaussian P of those outputs."""
    from headsne_widget.affinity.affinities import gaussian_affinities
    from headsne_widget.affinity.sources import source

    f = explicit_head_writes(tiny_bert, ex, LAYER, HEAD)
    outputs = ex.attention(LAYER, HEAD).astype(np.float64) @ f  # (n, d)
    points = source("head-output").space(ex, LAYER, HEAD)
    np.testing.assert_allclose(pdist(points), pdist(outputs), rtol=1e-5, atol=1e-9)
    sel = selection_affinities(ex, "head-output", LAYER, HEAD, perplexity=5.0)
    assert sel.label == "output of layer 1 head 2" and sel.perplexity == 5.0
    np.testing.assert_allclose(sel.P, gaussian_affinities(outputs, 5.0), rtol=1e-4, atol=1e-10)


def test_without_components_the_new_modes_say_what_to_pass(tiny_bert):
    plain = extract(TEXT, tiny_bert)
    for mode in ("norm", "head-output"):
        with pytest.raises(ValueError, match="components=True"):
            selection_affinities(plain, mode, LAYER, HEAD)


@pytest.mark.parametrize("mode", ["norm", "head-output"])
def test_the_widget_runs_the_new_modes(make, ex, mode):
    """The map's KL is that of the source's own P, and the BLAS count a user set is theirs again after the run
    (its P and partners run on one BLAS thread, ``_parallel.one_blas_thread``)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=2, user_api="blas"):  # the user's count, above one whatever the machine's cores
        w, _ = make(ex, mode=mode, layer=LAYER, head=HEAD, n_iter=60, speed=0.0, perplexity=5.0)
        kl = w.wait(60)
        P = selection_affinities(ex, mode, LAYER, HEAD, perplexity=5.0).P
        assert w.state == "done" and kl == pytest.approx(kl_divergence(P, w.embedding), rel=1e-4)
        assert mode in w.status or "output" in w.status or "value-weighted" in w.status
        assert numpy_blas_threads() == [2]


@pytest.mark.parametrize("mode", ["norm", "head-output"])
def test_a_widget_made_from_a_text_runs_the_new_modes_without_components_asked(make, minilm_path, mode):
    """As a user makes it: ``HeadSNE(text, model)`` (no ``components=True``), then the mode control: the widget
    traces the components with its model on demand, and the map's KL is that of the source's own P."""
    w, _ = make(TEXT, minilm_path, n_iter=60, speed=0.0, perplexity=5.0, layer=LAYER, head=HEAD)
    w.wait(60)
    w.mode = mode
    kl = w.wait(60)
    P = selection_affinities(w.extraction, mode, LAYER, HEAD, perplexity=5.0).P
    assert w.state == "done" and kl == pytest.approx(kl_divergence(P, w.embedding), rel=1e-4)
