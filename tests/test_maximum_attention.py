"""max_attention: the thesis's Def. 4.2, MA(A)_j = max_i A_ij, for one head, a layer or the whole model."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from headsne_widget import max_attention
from headsne_widget.capture.maximum_attention import max_attention_update


def test_hand_computed_example():
    A = np.array([[0.1, 0.9, 0.0], [0.6, 0.3, 0.1], [0.2, 0.2, 0.6]], dtype=np.float32)
    np.testing.assert_array_equal(max_attention(A), np.array([0.6, 0.9, 0.6], dtype=np.float32))


def test_model_grid_equals_a_direct_max(abstract_ex):
    grid = max_attention(abstract_ex.attentions)
    L, H, n = abstract_ex.n_layers, abstract_ex.n_heads, abstract_ex.n_tokens
    assert grid.shape == (L, H, n) and grid.dtype == np.float32
    np.testing.assert_array_equal(grid, abstract_ex.attentions.max(axis=2))
    np.testing.assert_array_equal(abstract_ex.max_attention, grid)
    # Every query row sums to 1 over n keys, so some key gets at least 1/n from it; all values lie in (0, 1].
    assert grid.max() <= 1.0 and grid.min() > 0.0
    assert (grid.max(axis=-1) >= 1.0 / n).all()


def test_layer_and_head_slices_agree(abstract_ex):
    grid = max_attention(abstract_ex.attentions)
    np.testing.assert_array_equal(max_attention(abstract_ex.attentions[3]), grid[3])
    np.testing.assert_array_equal(max_attention(abstract_ex.attentions[3, 7]), grid[3, 7])


def test_causal_model_first_token(tiny_gpt2):
    from headsne_widget import extract

    ex = extract("a causal model: the first token attends only to itself", tiny_gpt2)
    # Query 0 can only see key 0, so it gives key 0 all of its attention: MA_0 = 1 in every head.
    np.testing.assert_allclose(ex.max_attention[..., 0], 1.0, atol=1e-6)


def test_accepts_tensors_and_integers():
    A = torch.tensor([[1, 3], [2, 0]])
    np.testing.assert_array_equal(max_attention(A), [2.0, 3.0])


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (np.ones(4), ValueError, r"shape \(\.\.\., n, n\)"),
        (np.ones((2, 3)), ValueError, r"shape \(\.\.\., n, n\)"),
        (np.ones((2, 0, 0)), ValueError, "empty"),
        (np.array([[0.5, np.nan], [0.5, 0.5]]), ValueError, "NaN"),
        (np.array([[True, False], [False, True]]), TypeError, "real numbers"),
    ],
)
def test_bad_input(value, error, match):
    with pytest.raises(error, match=match):
        max_attention(value)


@pytest.mark.parametrize("rows", [1, 7, 64, 1000])
def test_fold_over_query_chunks_equals_the_whole(abstract_ex, rows):
    """Def. 4.2 folded chunk by chunk (as the capture does during the forward) equals the max over all queries."""
    A = torch.from_numpy(abstract_ex.attentions[2])  # (H, n, n) of a real layer
    grid = None
    for start in range(0, A.shape[1], rows):
        grid = max_attention_update(grid, A[:, start : start + rows])
    np.testing.assert_array_equal(grid.numpy(), max_attention(abstract_ex.attentions[2]))
    assert grid.dtype == torch.float32 and grid.shape == (abstract_ex.n_heads, abstract_ex.n_tokens)
