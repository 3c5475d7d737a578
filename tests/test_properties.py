"""Property tests (hypothesis) over the numeric public functions: any input gives a clear error or a finite
result, and KL(P || Q) >= 0 always."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from headsne_widget import errors
from headsne_widget.affinity.affinities import attention_affinities, gaussian_affinities
from headsne_widget.embedding.alignment import align
from headsne_widget.embedding.rescaling import quantile_rescale
from headsne_widget.embedding.tsne import kl_divergence, tsne

CLEAR = (ValueError, TypeError, errors.HeadSNEError)
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# any float64, extremes included; also some exact zeros and small integers
anything = st.floats(allow_nan=True, allow_infinity=True, width=64)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
scales = st.sampled_from([1e-300, 1e-100, 1e-8, 1.0, 1e8, 1e100, 1e300])


def matrices(elements, n_min=1, n_max=8):
    return st.integers(n_min, n_max).flatmap(lambda n: arrays(np.float64, (n, n), elements=elements))


def joint_P(draw, n_min=4, n_max=9) -> np.ndarray:
    """A valid P (symmetric, zero diagonal, sum 1) with entries spanning many orders of magnitude."""
    n = draw(st.integers(n_min, n_max))
    logs = draw(arrays(np.float64, (n, n), elements=st.floats(-300, 0)))
    A = 10.0**logs * draw(arrays(np.float64, (n, n), elements=st.sampled_from([0.0, 1.0, 1.0, 1.0])))
    P = A + A.T
    np.fill_diagonal(P, 0.0)
    if not P.sum() > 0:
        P = np.ones((n, n)) - np.eye(n)
    return P / P.sum()


@st.composite
def P_and_Y(draw):
    P = joint_P(draw)
    n = P.shape[0]
    Y = draw(arrays(np.float64, (n, 2), elements=st.floats(-1e3, 1e3))) * draw(scales)
    return P, Y


@SETTINGS
@given(P_and_Y())
def test_kl_divergence_is_finite_and_non_negative(case):
    P, Y = case
    try:
        kl = kl_divergence(P, Y)
    except CLEAR:
        return
    assert np.isfinite(kl) and kl >= 0.0


@SETTINGS
@given(P=matrices(anything, 1, 7), Y=arrays(np.float64, (6, 2), elements=anything))
def test_kl_divergence_of_garbage_is_an_error_or_non_negative(P, Y):
    try:
        kl = kl_divergence(P, Y)
    except CLEAR:
        return
    assert np.isfinite(kl) and kl >= 0.0


@st.composite
def tsne_case(draw):
    P = joint_P(draw, 4, 12)
    kwargs = {
        "n_iter": draw(st.integers(1, 60)),
        "exaggeration_iters": draw(st.integers(0, 40)),
        "every": draw(st.integers(1, 30)),
        "seed": draw(st.integers(0, 2**32)),
        "restarts": draw(st.integers(1, 3)),
        "learning_rate": draw(st.one_of(st.just("auto"), st.floats(1e-3, 1e9), st.sampled_from([None, -1.0, 0.0]))),
        "early_exaggeration": draw(st.one_of(st.floats(1e-3, 1e32), st.sampled_from([0.0, float("nan")]))),
        "momentum": draw(st.sampled_from([(0.5, 0.8), (0.0, 0.0), (0.9, 0.99), 0.5, (1.0, 0.5)])),
        "dtype": draw(st.sampled_from(["float32", "float64"])),
    }
    return P, kwargs


@SETTINGS
@given(tsne_case())
def test_tsne_gives_a_finite_embedding_and_a_non_negative_kl_or_a_clear_error(case):
    P, kwargs = case
    try:
        res = tsne(P, device="cpu", **kwargs)
    except CLEAR:
        return
    assert np.isfinite(res.embeddings).all()
    assert np.isfinite(res.kls).all() and (res.kls >= 0).all()
    assert np.isfinite(res.kl_histories).all() and (res.kl_histories >= 0).all()
    assert res.kl == pytest.approx(kl_divergence(P, res.embedding), rel=1e-3, abs=1e-6)


@SETTINGS
@given(
    X=st.integers(2, 9).flatmap(lambda n: arrays(np.float64, (n, 3), elements=finite)),
    scale=scales,
    perplexity=st.floats(0.01, 10),
)
def test_gaussian_affinities_are_a_joint_distribution_or_an_error(X, scale, perplexity):
    try:
        P = gaussian_affinities(X * scale if np.isfinite(X * scale).all() else X, perplexity=perplexity)
    except CLEAR:
        return
    assert np.isfinite(P).all() and (P >= 0).all()
    assert P.sum() == pytest.approx(1.0) or P.sum() == 0.0
    np.testing.assert_allclose(P, P.T, rtol=1e-12, atol=0)


@SETTINGS
@given(A=matrices(st.one_of(st.floats(0, 1e308), st.just(0.0)), 1, 8), exclude_first=st.booleans())
def test_attention_affinities_are_a_joint_distribution_or_an_error(A, exclude_first):
    exclude = np.zeros(A.shape[0], dtype=bool)
    exclude[0] = exclude_first
    try:
        P, _ = attention_affinities(A, exclude=exclude)
    except CLEAR:
        return
    assert np.isfinite(P).all() and (P >= 0).all()
    assert P.sum() == pytest.approx(1.0)
    assert np.all(np.diagonal(P) == 0) and np.array_equal(P, P.T)


@SETTINGS
@given(A=matrices(anything, 1, 6))
def test_attention_affinities_of_garbage_is_an_error_or_a_distribution(A):
    try:
        P = attention_affinities(A)
    except CLEAR:
        return
    assert np.isfinite(P).all() and P.sum() == pytest.approx(1.0)


@SETTINGS
@given(
    Y=st.integers(1, 30).flatmap(lambda n: arrays(np.float64, (n, 2), elements=anything)),
    k=st.one_of(st.integers(-2, 200), st.just(True), st.just(2.5)),
)
def test_quantile_rescale_lands_in_the_unit_square_or_errors(Y, k):
    try:
        out, maps = quantile_rescale(Y, k=k)
    except CLEAR:
        return
    assert out.shape == Y.shape and np.isfinite(out).all()
    assert (out >= 0).all() and (out <= 1).all()
    for a, m in enumerate(maps):
        assert np.isfinite(m.inverse(out[:, a])).all()


@SETTINGS
@given(Y=arrays(np.float64, (7, 2), elements=anything), R=arrays(np.float64, (7, 2), elements=anything))
def test_align_is_finite_and_keeps_distances_or_errors(Y, R):
    try:
        out = align(Y, R)
    except CLEAR:
        return
    assert np.isfinite(out).all()
    if np.abs(Y).max() < 1e150 and np.abs(R).max() < 1e150:  # a rotation keeps the distances (to R's precision)
        d_in = np.linalg.norm(Y[:, None] - Y[None], axis=-1)
        d_out = np.linalg.norm(out[:, None] - out[None], axis=-1)
        np.testing.assert_allclose(d_out, d_in, rtol=1e-9, atol=1e-9 * max(1.0, np.abs(Y).max(), np.abs(R).max()))
