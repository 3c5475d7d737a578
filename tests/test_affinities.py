"""P from attention heads (thesis section 3.1) and perplexity-calibrated Gaussians (standard t-SNE)."""

from __future__ import annotations

import numpy as np
import pytest

from headsne_widget import attention_affinities, errors, gaussian_affinities
from headsne_widget.affinity.affinities import binary_search_perplexity, squared_distances


def _sklearn_P(X: np.ndarray, perplexity: float) -> np.ndarray:
    from scipy.spatial.distance import squareform
    from sklearn.manifold._t_sne import _joint_probabilities
    from sklearn.metrics import pairwise_distances

    return squareform(_joint_probabilities(pairwise_distances(X, squared=True), perplexity, 0))


def _entropy(conditional_P: np.ndarray) -> np.ndarray:
    """Natural-log Shannon entropy of each row (0 log 0 = 0)."""
    logs = np.log(np.where(conditional_P > 0, conditional_P, 1.0))
    return -np.sum(conditional_P * logs, axis=1)


# ----------------------------------------------------------------------------------------- attention P


def test_every_head_of_the_abstract_gives_a_joint_distribution(abstract_ex):
    for layer in range(abstract_ex.n_layers):
        for head in range(abstract_ex.n_heads):
            P = attention_affinities(abstract_ex.attentions[layer, head])
            assert P.dtype == np.float64 and P.shape == (abstract_ex.n_tokens,) * 2
            np.testing.assert_array_equal(P, P.T)
            assert np.all(np.diag(P) == 0.0) and P.min() >= 0.0
            assert abs(P.sum() - 1.0) < 1e-6


def test_matches_the_thesis_formula_entry_by_entry(tiny_bert):
    from headsne_widget import extract

    A = extract("a few words for a small head", tiny_bert).attentions[1, 2].astype(np.float64)
    n = A.shape[0]
    denominator = sum((A[m, k] + A[k, m]) for m in range(n) for k in range(n) if m != k)
    expected = np.array([[(i != j) * (A[i, j] + A[j, i]) / denominator for j in range(n)] for i in range(n)])
    np.testing.assert_allclose(attention_affinities(A), expected, rtol=1e-12)


def test_exclude_special_tokens(abstract_ex):
    A = abstract_ex.attentions[2, 5]
    P, kept = attention_affinities(A, exclude=abstract_ex.special)
    n = abstract_ex.n_tokens
    np.testing.assert_array_equal(kept, np.arange(1, n - 1))  # all but [CLS] and [SEP]
    assert kept.dtype == np.int64 and P.shape == (n - 2, n - 2)
    np.testing.assert_allclose(P, attention_affinities(A[1:-1, 1:-1]), rtol=1e-12)
    assert abs(P.sum() - 1.0) < 1e-6 and np.all(np.diag(P) == 0.0)
    # Excluding nothing returns every index.
    P_all, kept_all = attention_affinities(A, exclude=np.zeros(n, dtype=bool))
    np.testing.assert_array_equal(kept_all, np.arange(n))
    np.testing.assert_array_equal(P_all, attention_affinities(A))


def test_self_attention_only_is_degenerate():
    with pytest.raises(errors.DegenerateAffinitiesError, match="no attention off the diagonal"):
        attention_affinities(np.eye(5))


def test_mass_only_on_excluded_tokens_is_degenerate():
    # Every token attends to itself and to token 0; once token 0 is excluded nothing is left off the diagonal.
    A = 0.5 * np.eye(4)
    A[:, 0] += 0.5
    with pytest.raises(errors.DegenerateAffinitiesError, match="no attention off the diagonal"):
        attention_affinities(A, exclude=np.array([True, False, False, False]))


def test_excluding_all_but_one_token_is_degenerate():
    with pytest.raises(errors.DegenerateAffinitiesError, match="at least 2 tokens"):
        attention_affinities(np.full((3, 3), 1 / 3), exclude=np.array([True, True, False]))


@pytest.mark.parametrize(
    ("A", "error", "match"),
    [
        (np.ones((3, 4)), ValueError, "square"),
        (np.ones((2, 3, 3)), ValueError, "2-D square"),
        (np.array([[0.5, np.nan], [0.5, 0.5]]), ValueError, "NaN or infinite"),
        (np.array([[0.5, np.inf], [0.5, 0.5]]), ValueError, "NaN or infinite"),
        (np.array([[1.5, -0.5], [0.5, 0.5]]), ValueError, "negative"),
        (np.array([["a", "b"], ["c", "d"]]), TypeError, "real numbers"),
    ],
)
def test_bad_attention_matrix(A, error, match):
    with pytest.raises(error, match=match):
        attention_affinities(A)


@pytest.mark.parametrize(
    ("value", "match"), [(np.nan, "NaN or infinite"), (np.inf, "NaN or infinite"), (-1e-3, "negative")]
)
@pytest.mark.parametrize("where", [(590, 300), (3, 597), (299, 299)])
def test_one_bad_entry_of_a_captured_head_is_named(value, match, where):
    """A C-contiguous float32 head (what the capture gives) is checked by one compiled pass in tiles
    (n = 600: the ragged last tile, the diagonal); a bad entry anywhere must still be named."""
    A = np.random.default_rng(5).random((600, 600), dtype=np.float32)
    A /= A.sum(axis=1, keepdims=True)
    expected = attention_affinities(A.astype(np.float64), dtype=np.float32)
    np.testing.assert_array_equal(attention_affinities(A, dtype=np.float32), expected)  # same P either way
    A[where] = value
    with pytest.raises(ValueError, match=match):
        attention_affinities(A)


@pytest.mark.parametrize(
    ("exclude", "error", "match"),
    [(np.array([1, 0, 0]), TypeError, "boolean"), (np.array([True, False]), ValueError, r"shape \(3,\)")],
)
def test_bad_exclude_mask(exclude, error, match):
    with pytest.raises(error, match=match):
        attention_affinities(np.full((3, 3), 1 / 3), exclude=exclude)


# ------------------------------------------------------------------------------------------ Gaussian P


@pytest.mark.parametrize(
    ("n", "d", "perplexity", "scale"),
    [(60, 5, 5.0, 1.0), (200, 20, 20.0, 1.0), (120, 3, 30.0, 50.0), (30, 4, 29.5, 1.0)],
)
def test_gaussian_equals_sklearn(n, d, perplexity, scale):
    X = np.random.default_rng(n).normal(size=(n, d)) * scale
    P, expected = gaussian_affinities(X, perplexity), _sklearn_P(X, perplexity)
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-6)
    assert np.abs(P - expected).max() <= 1e-4 * expected.max()  # tight relative to P's own scale too
    np.testing.assert_array_equal(P, P.T)
    assert abs(P.sum() - 1.0) < 1e-12 and np.all(np.diag(P) == 0.0)


def test_gaussian_on_hidden_states_equals_sklearn(abstract_ex):
    X = abstract_ex.hidden_states[6]
    P, expected = gaussian_affinities(X, 20.0), _sklearn_P(X.astype(np.float64), 20.0)
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-6)
    assert np.abs(P - expected).max() <= 1e-4 * expected.max()


@pytest.fixture(scope="module")
def long_states(minilm):
    """MiniLM's hidden states on 512 tokens of the abstract repeated (the widget's hidden mode at its full context)."""
    from headsne_widget import extract
    from headsne_widget.texts import TSNE_ABSTRACT

    return extract(" ".join([TSNE_ABSTRACT] * 4), minilm, max_tokens=512).hidden_states


@pytest.mark.parametrize(("layer", "perplexity"), [(6, 20.0), (6, 5.0), (5, 5.0), (1, 2.0)])
def test_each_real_state_reaches_the_perplexity(long_states, layer, perplexity):
    """Real states at 512 tokens, down to a perplexity of 2. A row whose nearest state is far nearer than the rest
    (row 221 at layer 6: 22.7 against 137 and more), after rows of close states, starts from a precision at which
    its Gaussian sits on the nearest state alone: the variance of its distances, and the square of the entropy's
    slope, underflow (a search step that divided by that square raised ZeroDivisionError in hidden mode).
    scikit-learn is no oracle here: without the nearest distance subtracted its sums underflow at a perplexity of
    2-5 on these states; each row's entropy is."""
    conditional_P = binary_search_perplexity(squared_distances(long_states[layer].astype(np.float64)), perplexity)
    np.testing.assert_allclose(conditional_P.sum(axis=1), 1.0, atol=1e-12)
    np.testing.assert_allclose(np.exp(_entropy(conditional_P)), perplexity, rtol=1e-4)


@pytest.mark.parametrize("scale", [1e-300, 1e300, 1e-310, 1e307])
def test_the_search_on_distances_of_any_scale(scale):
    """Each row's search starts from beta times its mean offset (a number without units), so distances of 1e-300
    or 1e300 reach the perplexity as distances of 1 do; subnormal ones (1e-310: beta would start at inf, and
    exp(-0 * inf) is NaN) and ones that overflow to inf give rows of finite weights summing to 1, never NaN."""
    D = squared_distances(np.random.default_rng(0).normal(size=(30, 3)))
    with np.errstate(over="ignore"):
        scaled = D * scale
    conditional_P = binary_search_perplexity(scaled, 5.0)
    assert np.isfinite(conditional_P).all()
    np.testing.assert_allclose(conditional_P.sum(axis=1), 1.0, atol=1e-12)
    if 1e-300 <= scale <= 1e300:
        np.testing.assert_allclose(np.exp(_entropy(conditional_P)), 5.0, rtol=1e-4)


@pytest.mark.parametrize("perplexity", [2.0, 10.0, 20.0, 45.0])
def test_each_point_reaches_the_perplexity(perplexity):
    X = np.random.default_rng(7).normal(size=(100, 8))
    conditional_P = binary_search_perplexity(squared_distances(X), perplexity)
    np.testing.assert_allclose(conditional_P.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(np.diag(conditional_P) == 0.0)
    np.testing.assert_allclose(np.exp(_entropy(conditional_P)), perplexity, rtol=1e-4)


def test_a_row_after_an_unreachable_one_still_reaches_the_perplexity():
    """Each row's search starts from its predecessor's precision, unless that row did not converge: 12 copies of
    one point cannot reach a perplexity of 4 (their entropy stays above log 12), and their precision doubles
    at every step to 2^100, from which the next rows would need 100 halvings."""
    rng = np.random.default_rng(5)
    X = np.concatenate([np.full((12, 4), 50.0), rng.normal(size=(60, 4))])  # far: no other point's nearest
    conditional_P = binary_search_perplexity(squared_distances(X), 4.0)
    np.testing.assert_allclose(np.exp(_entropy(conditional_P[12:])), 4.0, rtol=1e-4)


def test_copies_beyond_the_perplexity_give_scikit_learns_P():
    """40 copies of one point cannot reach a perplexity of 10 (their entropy stays above log 39): the search's end,
    the uniform over the copies, is written at once, and P is scikit-learn's (which searches all 100 steps)."""
    rng = np.random.default_rng(11)  # integer coordinates: every distance exact, so the copies tie exactly
    X = np.concatenate([np.full((40, 6), 7.0), rng.integers(-5, 6, size=(60, 6)).astype(np.float64)])
    P, expected = gaussian_affinities(X, 10.0), _sklearn_P(X, 10.0)
    np.testing.assert_allclose(P, expected, rtol=0, atol=1e-6)
    assert np.abs(P - expected).max() <= 1e-4 * expected.max()
    conditional_P = binary_search_perplexity(squared_distances(X), 10.0)
    np.testing.assert_array_equal(conditional_P[:40, :40], (1 - np.eye(40)) / 39)  # each copy: 1/39 on the others


def test_gaussian_P_does_not_depend_on_the_threads():
    """The search's chains of rows restart at fixed rows, so that the pool's shares and one thread give the same
    bits (the same seed, the same map, on any machine)."""
    from headsne_widget import _parallel

    X = np.random.default_rng(9).normal(size=(700, 12))
    shared = gaussian_affinities(X, 15.0)
    try:
        _parallel.set_spare_cores(_parallel.cores())  # one thread: every row in this thread, in order
        alone = gaussian_affinities(X, 15.0)
    finally:
        _parallel.set_spare_cores(None)
    np.testing.assert_array_equal(alone, shared)


def test_gaussian_P_into_out_in_float32():
    X = np.random.default_rng(2).normal(size=(90, 5))
    expected = gaussian_affinities(X, 10.0)
    out = np.full((90, 90), np.nan, dtype=np.float32)
    P = gaussian_affinities(X, 10.0, dtype=np.float32, out=out)
    assert P is out
    np.testing.assert_array_equal(out, expected.astype(np.float32))  # rounded once from the float64 P
    with pytest.raises(ValueError, match="C-contiguous float32"):
        gaussian_affinities(X, 10.0, dtype=np.float32, out=np.empty((90, 90)))
    with pytest.raises(TypeError, match="float32 or float64"):
        gaussian_affinities(X, 10.0, dtype=np.int32)


def test_far_apart_points_do_not_underflow():
    # Squared distances ~1e6: exp(-beta d) underflows to 0 at the starting beta = 1; the search must recover.
    X = np.random.default_rng(3).normal(size=(40, 2)) * 1e3
    P = gaussian_affinities(X, 10.0)
    assert np.isfinite(P).all() and abs(P.sum() - 1.0) < 1e-12
    conditional_P = binary_search_perplexity(squared_distances(X), 10.0)
    np.testing.assert_allclose(np.exp(_entropy(conditional_P)), 10.0, rtol=1e-4)


def test_identical_points_give_uniform_P():
    P = gaussian_affinities(np.ones((6, 3)), 3.0)
    expected = (1 - np.eye(6)) / 30
    np.testing.assert_allclose(P, expected, atol=1e-15)


@pytest.mark.parametrize(
    ("X", "perplexity", "error", "match"),
    [
        (np.ones(5), 2.0, ValueError, "2-D"),
        (np.ones((4, 2, 2)), 2.0, ValueError, "2-D"),
        (np.array([[0.0, 1.0], [np.nan, 1.0], [2.0, 2.0]]), 1.5, ValueError, "NaN or infinite"),
        (np.array([[0.0, 1.0], [np.inf, 1.0], [2.0, 2.0]]), 1.5, ValueError, "NaN or infinite"),
        (np.ones((10, 2)), 0.0, ValueError, "perplexity must be > 0"),
        (np.ones((10, 2)), -5.0, ValueError, "perplexity must be > 0"),
        (np.ones((10, 2)), float("nan"), ValueError, "perplexity must be > 0"),
        (np.ones((10, 2)), 10.0, ValueError, r"less than the number of points \(10\)"),
        (np.ones((10, 2)), 30.0, ValueError, r"less than the number of points \(10\)"),
        (np.ones((10, 2)), "20", TypeError, "perplexity must be a number"),
        (np.ones((1, 2)), 0.5, ValueError, "at least 2 points"),
    ],
)
def test_bad_gaussian_input(X, perplexity, error, match):
    with pytest.raises(error, match=match):
        gaussian_affinities(X, perplexity)


@pytest.mark.parametrize("scale", [1e200, 1e-200, 1e307, 1e-300])
def test_gaussian_affinities_do_not_depend_on_the_scale_of_X(scale):
    """P(c X) = P(X): squared distances of X * 1e200 overflowed to inf (a NaN P), of X * 1e-200 underflowed
    to 0 (a uniform P)."""
    X = np.random.default_rng(3).normal(size=(40, 6))
    P = gaussian_affinities(X, perplexity=8)
    P_scaled = gaussian_affinities(X * scale, perplexity=8)
    assert np.isfinite(P_scaled).all()
    # equal up to the perplexity search's tolerance: scaled distances round differently, and a row may stop a step
    # sooner or later
    np.testing.assert_allclose(P_scaled, P, rtol=2e-4, atol=1e-9)


def test_gaussian_affinities_do_not_depend_on_where_X_sits():
    """Centring first: |x|^2 + |y|^2 - 2 x.y cancelled for X + 1e10 (P off by 4e-3)."""
    X = np.random.default_rng(4).normal(size=(40, 6))
    np.testing.assert_allclose(
        gaussian_affinities(X + 1e10, perplexity=8), gaussian_affinities(X, perplexity=8), rtol=2e-4, atol=1e-9
    )


@pytest.mark.parametrize("scale", [1e308, 1e-300, 2.0**-1000])
def test_attention_affinities_do_not_depend_on_the_scale_of_A(scale):
    """A * 1e308 overflowed A + A^T to inf and gave an all-zero P."""
    A = np.random.default_rng(5).random((12, 12))
    A /= A.sum(axis=1, keepdims=True)
    P = attention_affinities(A)
    P_scaled = attention_affinities(A * scale)
    assert P_scaled.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(P_scaled, P, rtol=1e-12, atol=0)


def test_blocked_P_equals_the_formula_across_block_edges():
    """n = 600 spans three blocks of 256, the last one ragged."""
    A = np.random.default_rng(7).random((600, 600))
    A /= A.sum(axis=1, keepdims=True)
    expected = A + A.T
    np.fill_diagonal(expected, 0.0)
    expected /= expected.sum()
    P = attention_affinities(A)
    np.testing.assert_allclose(P, expected, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(P, P.T)


@pytest.mark.parametrize("n", [2100, 2304])  # 9 tile rows (one ragged; the middle one alone), 9 full ones
def test_P_on_every_core_is_the_serial_P_bit_for_bit(n, monkeypatch):
    """From PARALLEL_MIN_N P's census and symmetrisation run on the worker threads, tile rows paired (k, nb - 1 -
    k): every band must be visited once, and the result must not depend on which thread took which pair."""
    from headsne_widget import _parallel
    from headsne_widget.affinity import matrix_kernels as mk

    assert n >= mk.PARALLEL_MIN_N
    A = np.random.default_rng(9).random((n, n), dtype=np.float32)
    A /= A.sum(axis=1, keepdims=True)
    expected = A.astype(np.float64) + A.T
    np.fill_diagonal(expected, 0.0)
    expected /= expected.sum()
    P = attention_affinities(A, dtype=np.float32)
    np.testing.assert_allclose(P, expected, rtol=2e-7, atol=0)
    on_workers = mk.census(A)
    bad = []
    for i, j in [(n - 1, n // 2), (n // 2, 3), (1040, 1300)]:  # the last band, the middle one, a mirror tile
        B = P.copy()
        B[i, j] = -B[i, j]
        bad.append(B)
        assert mk.census(B)[1:4] == (1, 1, 0)
    monkeypatch.setattr(_parallel, "workers", lambda: None)  # every pair in this thread, in order
    serial = np.empty_like(P)
    mk.symmetrise(A, 2.0 * mk.census(A)[4], serial)
    np.testing.assert_array_equal(P, serial)
    assert on_workers == mk.census(A)
    for B in bad:
        assert mk.census(B)[1:4] == (1, 1, 0)


def test_float32_P_is_the_float64_P_rounded_once_and_taken_as_is_by_tsne():
    from headsne_widget.embedding.tsne import check_affinities

    A = np.random.default_rng(8).random((300, 300), dtype=np.float32)
    A /= A.sum(axis=1, keepdims=True)
    P32 = attention_affinities(A, dtype=np.float32)
    assert P32.dtype == np.float32
    np.testing.assert_array_equal(P32, attention_affinities(A).astype(np.float32))
    np.testing.assert_array_equal(P32, P32.T)
    assert np.all(np.diag(P32) == 0.0) and abs(P32.sum(dtype=np.float64) - 1.0) < 1e-6
    assert check_affinities(P32, np.float32) is P32  # no n x n copy before the run
    P, kept = attention_affinities(A, exclude=np.arange(300) % 7 == 0, dtype=np.float32)
    assert P.dtype == np.float32 and P.shape == (len(kept),) * 2
    with pytest.raises(TypeError, match="float32 or float64"):
        attention_affinities(A, dtype=np.int32)


def test_a_head_attending_almost_only_to_itself_still_sums_to_one():
    """The normaliser leaves the diagonal out: sum(A) - trace(A) cancelled to noise here."""
    n, eps = 300, 1e-12
    A = np.full((n, n), eps / (n - 1))
    np.fill_diagonal(A, 1.0 - eps)
    P = attention_affinities(A)
    assert abs(P.sum() - 1.0) < 1e-9
    np.testing.assert_allclose(P[0, 1], 1.0 / (n * (n - 1)), rtol=1e-9)


def test_a_head_whose_off_diagonal_mass_is_subnormal_after_rescaling_gives_a_finite_P():
    """Found by hypothesis: a diagonal of 2.7e300 against 4e-9 off it leaves a subnormal normaliser once A is
    rescaled by a power of two, and P as a product with its reciprocal (inf) was infinite."""
    A = np.array([[2.67877152e300, 4e-9], [4e-9, 4e-9]])
    P = attention_affinities(A)
    np.testing.assert_array_equal(P, [[0.0, 0.5], [0.5, 0.0]])


def test_the_row_census_of_a_captured_head_finds_every_bad_entry_and_the_exact_off_diagonal_mass(monkeypatch):
    """The census P of a captured head starts from (row by row): its off-diagonal mass is accumulated apart
    from the diagonal (a head attending almost only to itself keeps its 1e-30s), entries below 0 or NaN are
    counted and an infinity makes the sum infinite, wherever they are, and the result does not depend on
    the worker threads."""
    from headsne_widget import _parallel
    from headsne_widget.affinity import matrix_kernels as mk

    n = 2100
    assert n >= mk.PARALLEL_MIN_N
    A = np.random.default_rng(5).random((n, n), dtype=np.float32)
    A /= A.sum(axis=1, keepdims=True)
    total, negative, off = mk.row_census(A)
    wide = A.astype(np.float64)
    assert off == pytest.approx(wide.sum() - np.trace(wide), rel=1e-12)
    assert total == pytest.approx(wide.sum(), rel=1e-12) and negative == 0
    selfish = np.full((n, n), 1e-30, np.float32)
    np.fill_diagonal(selfish, 1.0)
    assert mk.row_census(selfish)[2] == pytest.approx(n * (n - 1) * np.float64(np.float32(1e-30)), rel=1e-9)
    for (i, j), value in [((n - 1, 5), np.nan), ((1000, 2000), -1e-3), ((7, 7), -0.5), ((2099, 2099), np.nan)]:
        B = A.copy()
        B[i, j] = value
        assert mk.row_census(B)[1] == 1, (i, j, value)
    B = A.copy()
    B[1500, 1499] = np.inf
    assert mk.row_census(B)[0] == np.inf and mk.row_census(B)[1] == 0
    monkeypatch.setattr(_parallel, "workers", lambda: None)
    assert mk.row_census(A) == (total, negative, off)
