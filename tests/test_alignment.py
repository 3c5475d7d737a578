"""Orthogonal Procrustes alignment: a stable view that keeps the KL."""

from __future__ import annotations

import numpy as np
import pytest

from headsne_widget import align
from headsne_widget.embedding.tsne import kl_divergence


def rotation(theta: float) -> np.ndarray:
    return np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])


@pytest.mark.parametrize("reflect", [False, True])
def test_rotated_reflected_shifted_copy_maps_back(reflect):
    ref = np.random.default_rng(0).normal(scale=10, size=(50, 2))
    M = rotation(2.1) @ (np.diag([1.0, -1.0]) if reflect else np.eye(2))
    moved = ref @ M + np.array([35.0, -12.0])
    np.testing.assert_allclose(align(moved, ref), ref, atol=1e-9)


def test_alignment_keeps_distances_and_kl():
    rng = np.random.default_rng(1)
    n = 30
    A = rng.random((n, n))
    P = A + A.T
    np.fill_diagonal(P, 0)
    P /= P.sum()
    Y = rng.normal(scale=5, size=(n, 2))
    ref = rng.normal(scale=5, size=(n, 2))
    out = align(Y, ref)
    D = lambda Z: ((Z[:, None] - Z[None]) ** 2).sum(-1)  # noqa: E731
    np.testing.assert_allclose(D(out), D(Y), rtol=1e-10, atol=1e-9)  # no scaling
    assert kl_divergence(P, out) == pytest.approx(kl_divergence(P, Y), rel=1e-10)
    # and it is the best orthogonal fit: no rotation of the result gets closer to ref
    best = np.linalg.norm(out - ref)
    centred = out - out.mean(0)
    for theta in np.linspace(0.05, 2 * np.pi, 40, endpoint=False):
        assert np.linalg.norm(centred @ rotation(theta) + out.mean(0) - ref) >= best - 1e-9


def test_float32_stays_float32_and_noisy_copy_is_close():
    ref = np.random.default_rng(2).normal(size=(40, 2)).astype(np.float32)
    noisy = (ref @ rotation(-0.9) + 3 + np.random.default_rng(3).normal(scale=1e-3, size=ref.shape)).astype(np.float32)
    out = align(noisy, ref)
    assert out.dtype == np.float32 and out.shape == ref.shape
    np.testing.assert_allclose(out, ref, atol=5e-3)


@pytest.mark.parametrize(
    "Y, ref, message",
    [
        (np.zeros((5, 2)), np.zeros((6, 2)), "same shape"),
        (np.zeros(5), np.zeros(5), "2-D array"),
        (np.full((3, 2), np.nan), np.zeros((3, 2)), "Y contains NaN"),
        (np.zeros((3, 2)), np.full((3, 2), np.inf), "reference contains NaN"),
    ],
)
def test_bad_input(Y, ref, message):
    with pytest.raises(ValueError, match=message):
        align(Y, ref)


def test_align_at_extreme_scales_is_finite_and_the_same_map():
    """The rotation is fitted on unit-scaled copies: Y^T R overflowed to inf (a NaN result) near 1e200."""
    rng = np.random.default_rng(7)
    R = rng.normal(size=(30, 2))
    theta = 0.9
    rot = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    Y = R @ rot.T + 3.0
    for scale in (1e200, 1e-200):
        out = align(Y * scale, R * scale)
        assert np.isfinite(out).all()
        np.testing.assert_allclose(out / scale, R, atol=1e-9)
