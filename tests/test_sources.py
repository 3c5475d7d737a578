"""The P sources and the one P builder (issue 27): every mode of the table builds, through
``selection_affinities``, the P its paper construction gives (an independent numpy oracle), the selection is
checked once at the boundary with one meaning, and the table is what the widget's protocol offers."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse
import scipy.spatial.distance

from headsne_widget.affinity.selection import selection_affinities
from headsne_widget.affinity.sources import MODES, SOURCES, PSource, source
from headsne_widget.capture.extraction import Extraction, extract
from headsne_widget.texts import TSNE_ABSTRACT


@pytest.fixture(scope="module")
def ex(tiny_bert) -> Extraction:
    return extract(TSNE_ABSTRACT[:200], tiny_bert)


def attention_oracle(A: np.ndarray) -> np.ndarray:
    """Thesis Def. 3.1 written out: (A + A^T), zero diagonal, normalised."""
    S = A.astype(np.float64) + A.astype(np.float64).T
    np.fill_diagonal(S, 0.0)
    return S / S.sum()


def gaussian_oracle(X: np.ndarray, perplexity: float) -> np.ndarray:
    """Standard exact t-SNE P by scikit-learn (an independent implementation)."""
    from sklearn.manifold._t_sne import _joint_probabilities
    from sklearn.metrics import pairwise_distances

    D = pairwise_distances(X.astype(np.float64), squared=True)
    return scipy.spatial.distance.squareform(_joint_probabilities(D, perplexity, 0))


def test_the_table_names_every_mode_the_widget_offers():
    from headsne_widget.widget.protocol import MODES as PROTOCOL_MODES

    assert PROTOCOL_MODES == MODES == tuple(SOURCES)
    assert {"attention", "hidden", "query-key"} <= set(MODES)
    for name, src in SOURCES.items():
        assert isinstance(src, PSource) and src.name == name and source(name) is src and src.describes


@pytest.mark.parametrize("exclude_special", [False, True])
def test_attention_mode_is_the_thesis_P(ex, exclude_special):
    sel = selection_affinities(ex, "attention", 1, 2, exclude_special=exclude_special)
    kept = np.flatnonzero(~ex.special) if exclude_special else np.arange(ex.n_tokens)
    assert sel.kept.tolist() == kept.tolist() and sel.label == "layer 1 head 2"
    np.testing.assert_allclose(sel.P, attention_oracle(ex.attention(1, 2)[np.ix_(kept, kept)]), rtol=1e-12, atol=0)


def test_hidden_mode_is_scikit_learns_P(ex):
    sel = selection_affinities(ex, "hidden", 1, perplexity=5.0)
    assert sel.label == "hidden states of layer 1" and sel.perplexity == 5.0
    # (sklearn: float32 distances, and its bisection stops at another precision within the same entropy tolerance
    # as our Newton steps: the far, tiny entries differ by up to 2e-4 relative, 1.3e-10 absolute)
    np.testing.assert_allclose(sel.P, gaussian_oracle(ex.layer_output(1), 5.0), rtol=1e-4, atol=1e-9)


def test_the_sparse_branch_with_every_entry_kept_is_the_dense_P(ex):
    for mode in ("attention", "hidden"):
        dense = selection_affinities(ex, mode, 1, 3, perplexity=5.0, sparse=False)
        sparse = selection_affinities(ex, mode, 1, 3, perplexity=5.0, sparse=True, mass=1.0)
        assert scipy.sparse.issparse(sparse.P) and not scipy.sparse.issparse(dense.P)
        if mode == "attention":
            np.testing.assert_allclose(sparse.P.toarray(), dense.P, rtol=1e-12, atol=0)
            assert sparse.mass == pytest.approx(1.0)


def test_a_selection_is_checked_once_with_one_meaning(ex):
    with pytest.raises(ValueError, match="head -1 is out of range"):
        selection_affinities(ex, "attention", 0, -1)  # negative: refused, not the last head
    with pytest.raises(ValueError, match="layer -1 is out of range"):
        selection_affinities(ex, "hidden", -1)
    with pytest.raises(TypeError, match="layer must be an int"):
        selection_affinities(ex, "attention", True, 0)
    with pytest.raises(ValueError, match="mode must be one of 'attention', 'hidden', 'query-key'"):
        selection_affinities(ex, "values", 0, 0)
    with pytest.raises(TypeError, match="sparse must be None"):
        selection_affinities(ex, "attention", 0, 0, sparse=1)
    with pytest.raises(TypeError, match="perplexity must be a number"):
        selection_affinities(ex, "hidden", 0, perplexity=True)
    with pytest.raises(ValueError, match="mass must lie in"):
        selection_affinities(ex, "attention", 0, 0, mass=0.0)
    with pytest.raises(TypeError, match="exclude_special must be True or False"):
        selection_affinities(ex, "attention", 0, 0, exclude_special="yes")


def test_an_attention_matrix_of_another_text_is_refused(ex):
    """Issue 32 finding 6: a (10, 10) matrix on a longer text gave a (10, 10) P with every token ``kept``."""
    with pytest.raises(ValueError, match=rf"attention must be the head's \({ex.n_tokens}, {ex.n_tokens}\) matrix"):
        selection_affinities(ex, "attention", 1, 2, attention=np.full((10, 10), 0.1))
    with pytest.raises(ValueError, match="hidden mode is not built from one"):
        selection_affinities(ex, "hidden", 1, attention=ex.attention(1, 2))
    A = ex.attention(1, 2)
    np.testing.assert_array_equal(selection_affinities(ex, "attention", 1, 2, attention=A).P,
                                  selection_affinities(ex, "attention", 1, 2).P)  # fmt: skip


def test_too_few_kept_tokens_name_the_excluded_ones(tiny_bert):
    short = extract("[SEP] [SEP]", tiny_bert)
    with pytest.raises(ValueError, match=r"only 0 tokens are kept \(4 special tokens excluded\)"):
        selection_affinities(short, "attention", 0, 0, exclude_special=True)
