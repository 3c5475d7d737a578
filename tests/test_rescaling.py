"""Quantile-equidistant rescaling (thesis Appendix A.3)."""

from __future__ import annotations

import numpy as np
import pytest

from headsne_widget import quantile_rescale
from headsne_widget.embedding.rescaling import QuantileMap


def clustered(n: int = 200, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [20.0, 1.0], [-3.0, 40.0]])
    return (centres[rng.integers(0, 3, n)] + rng.normal(scale=[0.5, 3.0], size=(n, 2))).astype(np.float32)


def test_k_equal_n_gives_uniform_marginals_and_keeps_order():
    Y = clustered(150)
    R, maps = quantile_rescale(Y, k=150)
    assert R.shape == Y.shape and R.dtype == np.float32
    assert len(maps) == 2 and all(isinstance(m, QuantileMap) for m in maps)
    for a in range(2):
        np.testing.assert_allclose(np.sort(R[:, a]), np.linspace(0, 1, 150), atol=1e-6)
        order = np.argsort(Y[:, a], kind="stable")
        assert np.all(np.diff(R[order, a]) > 0)  # strictly monotone: distinct values stay distinct


def test_rescaled_points_fill_the_unit_square():
    R, _ = quantile_rescale(clustered(300), k=100)
    assert R.min() == 0.0 and R.max() == 1.0
    # roughly uniform: every tenth of each axis holds about a tenth of the points
    for a in range(2):
        counts = np.histogram(R[:, a], bins=10, range=(0, 1))[0]
        assert counts.min() >= 20 and counts.max() <= 40


def test_small_k_is_linear_between_its_quantiles():
    Y = clustered(101).astype(np.float64)
    R, (mx, _) = quantile_rescale(Y, k=5)
    q = np.quantile(Y[:, 0], [0, 0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(mx(q), [0, 0.25, 0.5, 0.75, 1.0], atol=1e-12)
    mid = (q[1] + q[2]) / 2
    assert mx(mid) == pytest.approx(0.375)


def test_maps_invert_and_give_ticks():
    Y = clustered(200)
    R, maps = quantile_rescale(Y, k=51)  # knots at levels i / 50, 0.5 among them
    for a, m in enumerate(maps):
        np.testing.assert_allclose(m.inverse(R[:, a]), Y[:, a], rtol=1e-5, atol=1e-4)
        u = np.linspace(0, 1, 33)
        np.testing.assert_allclose(m(m.inverse(u)), u, atol=1e-12)
        positions, labels = m.ticks(5)
        np.testing.assert_allclose(positions, [0, 0.25, 0.5, 0.75, 1])
        assert labels[0] == pytest.approx(Y[:, a].min()) and labels[-1] == pytest.approx(Y[:, a].max())
        assert np.all(np.diff(labels) > 0)
        np.testing.assert_allclose(labels[2], np.median(Y[:, a]), rtol=1e-5)


def test_ties_and_constant_axes_stay_finite():
    Y = np.array([[0.0, 1.0]] * 5 + [[1.0, 1.0], [2.0, 1.0]])
    R, (mx, my) = quantile_rescale(Y, k=7)
    assert np.isfinite(R).all() and R.min() >= 0 and R.max() <= 1
    np.testing.assert_array_equal(R[:, 1], 0.5)  # a constant axis sits in the middle
    assert R[0, 0] == 0.0 and R[-1, 0] == 1.0 and 0 < R[5, 0] < 1
    assert np.all(np.diff(mx.values) > 0) and np.all(np.diff(mx.levels) > 0)
    assert my.inverse(0.3) == 1.0


@pytest.mark.parametrize(
    "Y, k, error, message",
    [
        (np.zeros(5), 10, ValueError, "2-D array"),
        (np.zeros((0, 2)), 10, ValueError, "2-D array"),
        (np.array([[0.0, np.nan], [1.0, 2.0]]), 10, ValueError, "NaN or infinite"),
        (np.zeros((4, 2)), 1, ValueError, "between 2 and 1000 quantiles"),
        (np.zeros((4, 2)), 2.5, TypeError, "k must be an int"),
        (np.full((3, 2), "x"), 10, TypeError, "numeric"),
    ],
)
def test_bad_input(Y, k, error, message):
    with pytest.raises(error, match=message):
        quantile_rescale(Y, k=k)
    with pytest.raises(ValueError, match="at least 2 ticks"):
        quantile_rescale(np.arange(8.0).reshape(4, 2))[1][0].ticks(1)


def test_the_inverse_map_stays_finite_for_knots_near_the_float64_limit():
    """Found by hypothesis: np.interp's slope (v1 - v0) / (l1 - l0) overflowed between -1.8e308 and -1.5e308."""
    from headsne_widget.embedding.rescaling import QuantileMap

    Y = np.zeros((28, 2))
    Y[0, 0], Y[1, 0] = -np.finfo(np.float64).max, -1.0
    out, maps = quantile_rescale(Y)
    back = maps[0].inverse(out[:, 0])
    assert np.isfinite(back).all() and back[0] == Y[0, 0] and (back[1:] == 0.0).sum() >= 26
    assert np.all(np.diff(maps[0].inverse(np.linspace(0, 1, 101))) >= 0)  # still increasing
    m = QuantileMap(np.array([-1.0, 2.0, 5.0]), np.array([0.0, 0.5, 1.0]))
    np.testing.assert_allclose(m.inverse([-0.5, 0.0, 0.25, 0.75, 1.0, 2.0]), [-1.0, -1.0, 0.5, 3.5, 5.0, 5.0])
    assert np.isnan(m.inverse([np.nan])).all()
