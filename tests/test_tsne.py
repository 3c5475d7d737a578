"""The exact t-SNE engine: gradient and KL against scikit-learn, optimisation, streaming, restarts, bad input."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch

from headsne_widget import attention_affinities
from headsne_widget.embedding.options import initial_embeddings
from headsne_widget.embedding.tsne import (
    THESIS,
    Frame,
    TSNEResult,
    _optimize,
    gradient,
    kl_divergence,
    tsne,
    tsne_frames,
    warmup,
)


def random_P(n: int, seed: int = 0, dtype=np.float64) -> np.ndarray:
    A = np.random.default_rng(seed).random((n, n)) ** 4
    P = A + A.T
    np.fill_diagonal(P, 0.0)
    return (P / P.sum()).astype(dtype)


def block_P(sizes=(10, 10, 10), leak: float = 1e-4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three well-separated groups: strong random affinities inside a block, a faint leak between blocks."""
    labels = np.repeat(np.arange(len(sizes)), sizes)
    rng = np.random.default_rng(seed)
    A = np.where(labels[:, None] == labels[None, :], 0.5 + rng.random((labels.size,) * 2), leak)
    P = A + A.T
    np.fill_diagonal(P, 0.0)
    return P / P.sum(), labels


def sklearn_kl_grad(P: np.ndarray, Y: np.ndarray) -> tuple[float, np.ndarray]:
    from scipy.spatial.distance import squareform
    from sklearn.manifold._t_sne import _kl_divergence

    n = P.shape[0]
    kl, grad = _kl_divergence(Y.ravel().copy(), squareform(P, checks=False), 1, n, 2)
    return float(kl), grad.reshape(n, 2)


def test_public_names_are_the_functions_whatever_was_imported_first():
    """``from headsne_widget import tsne`` is the function even after every submodule was imported."""
    code = (
        "import types, headsne_widget.embedding.tsne, headsne_widget.widget.headsne, headsne_widget.studies.analyses\n"
        "from headsne_widget import Frame, kl_divergence, tsne, tsne_frames\n"
        "assert callable(tsne) and not isinstance(tsne, types.ModuleType), tsne\n"
        "import headsne_widget\n"
        "assert headsne_widget.tsne is tsne is headsne_widget.embedding.tsne.tsne and callable(tsne_frames)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]


# ---------------------------------------------------------------------------------------------- exactness


def test_gradient_matches_finite_differences_and_sklearn():
    n = 12
    P = random_P(n, seed=1)
    Y = np.random.default_rng(2).normal(scale=2.0, size=(n, 2))
    kl, grad = gradient(P, Y)
    assert grad.shape == (n, 2) and grad.dtype == np.float64
    numeric = np.zeros_like(Y)
    h = 1e-6
    for i in range(n):
        for c in range(2):
            Yp, Ym = Y.copy(), Y.copy()
            Yp[i, c] += h
            Ym[i, c] -= h
            numeric[i, c] = (kl_divergence(P, Yp) - kl_divergence(P, Ym)) / (2 * h)
    np.testing.assert_allclose(grad, numeric, rtol=1e-5, atol=1e-9 * np.abs(numeric).max())
    sk_kl, sk_grad = sklearn_kl_grad(P, Y)
    np.testing.assert_allclose(grad, sk_grad, rtol=1e-5, atol=1e-12)
    assert kl == pytest.approx(sk_kl, rel=1e-10)


@pytest.mark.parametrize("n", [5, 40, 300])
def test_kl_divergence_matches_sklearn(n):
    P = random_P(n, seed=n)
    Y = np.random.default_rng(n).normal(scale=5.0, size=(n, 2))
    assert kl_divergence(P, Y) == pytest.approx(sklearn_kl_grad(P, Y)[0], rel=1e-9)
    # float32 gradient path agrees with the float64 one
    kl32, g32 = gradient(P.astype(np.float32), Y.astype(np.float32))
    kl64, g64 = gradient(P, Y)
    assert g32.dtype == np.float32
    assert kl32 == pytest.approx(kl64, rel=1e-4)
    np.testing.assert_allclose(g32, g64, rtol=1e-3, atol=1e-4 * np.abs(g64).max())


def test_kl_is_invariant_to_rotation_and_zero_for_a_perfect_fit():
    n = 6
    Y = np.random.default_rng(0).normal(size=(n, 2))
    D = ((Y[:, None] - Y[None]) ** 2).sum(-1)
    Q = 1.0 / (1.0 + D)
    np.fill_diagonal(Q, 0.0)
    Q /= Q.sum()
    assert kl_divergence(Q, Y) == pytest.approx(0.0, abs=1e-12)
    _, grad = gradient(Q, Y)
    np.testing.assert_allclose(grad, 0.0, atol=1e-12)
    theta = 0.7
    rot = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    P = random_P(n)
    assert kl_divergence(P, Y @ rot + 3.0) == pytest.approx(kl_divergence(P, Y), rel=1e-12)


# ---------------------------------------------------------------------------------------------- optimisation


def nn_purity(Y: np.ndarray, labels: np.ndarray) -> float:
    D = ((Y[:, None] - Y[None]) ** 2).sum(-1)
    np.fill_diagonal(D, np.inf)
    return float((labels[D.argmin(axis=1)] == labels).mean())


def test_three_blocks_are_separated_and_kl_falls():
    P, labels = block_P()
    res = tsne(P, seed=0, n_iter=500, every=10)
    assert isinstance(res, TSNEResult)
    assert res.embedding.shape == (30, 2) and res.embedding.dtype == np.float32
    assert nn_purity(res.embedding, labels) == 1.0
    assert res.kl_history[-1] < 0.5 * res.kl_history[0]
    assert res.iterations.tolist() == list(range(10, 501, 10))
    assert res.kl == pytest.approx(kl_divergence(P, res.embedding), rel=1e-4)
    # blocks are far apart compared with their own size
    centres = np.array([res.embedding[labels == k].mean(0) for k in range(3)])
    spread = max(np.abs(res.embedding[labels == k] - centres[k]).max() for k in range(3))
    gaps = [np.linalg.norm(centres[a] - centres[b]) for a in range(3) for b in range(a + 1, 3)]
    assert min(gaps) > 2 * spread


def test_real_attention_head_embeds(abstract_ex):
    P = attention_affinities(abstract_ex.attentions[0, 2])
    res = tsne(P, seed=0, n_iter=300, every=50, restarts=2)
    assert np.isfinite(res.embeddings).all()
    assert res.kl_history[-1] < res.kl_history[0]
    assert res.kl == pytest.approx(kl_divergence(P, res.embedding), rel=1e-4)


def test_frames_report_steps_with_exact_kl():
    P = random_P(20, seed=3)
    frames = list(tsne_frames(P, seed=1, n_iter=35, every=10))
    assert [f.iteration for f in frames] == [10, 20, 30, 35]
    for f in frames:
        assert isinstance(f, Frame)
        assert f.embedding.dtype == np.float32 and f.embedding.shape == (20, 2)
        assert f.embedding.flags.c_contiguous and f.embedding.flags.owndata
        assert f.kl == pytest.approx(kl_divergence(P, f.embedding), rel=1e-4)
    # frames are snapshots: later steps do not change earlier frames
    assert not np.array_equal(frames[0].embedding, frames[-1].embedding)
    last = tsne(P, seed=1, n_iter=35)
    np.testing.assert_array_equal(frames[-1].embedding, last.embedding)


def test_kl_every_computes_the_kl_less_often_without_changing_the_steps():
    """Frames every step, KL every 5: the same positions as with a KL at every step; fresh frames carry
    that step's exact KL, the others the latest one (and say so)."""
    P = random_P(24, seed=6)
    every_step = list(tsne_frames(P, seed=2, n_iter=20, every=1))
    sparse = list(tsne_frames(P, seed=2, n_iter=20, every=1, kl_every=5))
    assert [f.iteration for f in sparse] == list(range(1, 21))
    assert [f.iteration for f in sparse if f.fresh] == [1, 6, 11, 16, 20]
    assert all(f.fresh for f in every_step)
    for a, b in zip(every_step, sparse, strict=True):
        np.testing.assert_array_equal(b.embedding, a.embedding)
        assert b.kl == every_step[b.kl_iteration - 1].kl
    assert sparse[-1].kl == pytest.approx(kl_divergence(P, sparse[-1].embedding), rel=1e-4)
    # with restarts, the run shown is the best by the latest KL
    for f in tsne_frames(P, seed=2, n_iter=12, every=1, restarts=3, kl_every=4):
        assert f.run == int(np.argmin(f.kls)) and f.kl == f.kls.min()


def test_frames_show_the_best_run_at_each_step():
    P = random_P(16, seed=4)
    for f in tsne_frames(P, seed=0, n_iter=60, every=20, restarts=3):
        assert f.kls.shape == (3,)
        assert f.run == int(np.argmin(f.kls)) and f.kl == f.kls.min()
        assert f.kl == pytest.approx(kl_divergence(P, f.embedding), rel=1e-4)


def test_closing_the_generator_stops_the_work():
    # a widget made by an earlier test may still be compiling the kernels in its warm-up thread
    # (always so on a fresh clone): that CPU time is not this generator's
    for thread in threading.enumerate():
        if thread.name == "headsne-warmup":
            thread.join(timeout=300)
    P = random_P(400, seed=5)
    threads = threading.active_count()
    gen = tsne_frames(P, seed=0, n_iter=100_000, every=1)
    first = next(gen)
    next(gen)
    gen.close()
    assert gen.gi_frame is None  # finished, cannot resume
    with pytest.raises(StopIteration):
        next(gen)
    cpu = time.process_time()
    time.sleep(0.3)
    # a run still going would burn >= 0.25 s of CPU in these 0.3 s; native threads that earlier tests
    # left spinning down (torch's OpenMP pool) and the garbage collector cost up to ~0.06 s here
    assert time.process_time() - cpu < 0.1  # no work goes on after close
    assert threading.active_count() == threads
    assert first.iteration == 1


def test_seeds_reproduce_and_differ():
    P = random_P(30, seed=6)
    a, b = tsne(P, seed=7, n_iter=200), tsne(P, seed=7, n_iter=200)
    np.testing.assert_array_equal(a.embedding, b.embedding)
    assert a.kl == b.kl
    c = tsne(P, seed=8, n_iter=200)
    assert not np.array_equal(a.embedding, c.embedding)


def test_restarts_are_batched_seeds_and_the_best_wins():
    P = random_P(40, seed=7)
    res = tsne(P, seed=10, restarts=3, n_iter=300)
    assert res.embeddings.shape == (3, 40, 2) and res.kls.shape == (3,)
    assert res.best == int(np.argmin(res.kls)) and res.kl == res.kls.min()
    np.testing.assert_array_equal(res.embedding, res.embeddings[res.best])
    np.testing.assert_array_equal(res.kl_history, res.kl_histories[res.best].astype(np.float32))
    for r in range(3):
        single = tsne(P, seed=10 + r, n_iter=300)
        np.testing.assert_allclose(res.embeddings[r], single.embedding, rtol=1e-5, atol=1e-5)
        assert res.kls[r] == pytest.approx(single.kl, rel=1e-5)
        assert res.kls[r] == pytest.approx(kl_divergence(P, res.embeddings[r]), rel=1e-4)


def test_init_is_used_and_default_init_is_small():
    P = random_P(10, seed=8)
    Y0 = np.random.default_rng(0).normal(size=(10, 2))
    a = tsne(P, init=Y0, seed=1, n_iter=50)
    b = tsne(P, init=Y0, seed=2, n_iter=50)
    np.testing.assert_array_equal(a.embedding, b.embedding)
    per_run = np.stack([Y0, -Y0])
    two = tsne(P, init=per_run, restarts=2, n_iter=50)
    np.testing.assert_allclose(two.embeddings[0], a.embedding, rtol=1e-5, atol=1e-6)
    start = initial_embeddings(None, 1000, 1, 0, np.dtype(np.float32))
    assert start.std() == pytest.approx(1e-2, rel=0.1)  # N(0, 1e-4 I)


def test_torch_engine_matches_compiled_kernels_on_cpu():
    """Same steps in torch (the CUDA code path) and in the compiled kernels, through both schedule phases.

    t-SNE's early dynamics amplify rounding differences about twofold per step, so the comparison
    covers the first steps, where both must agree to rounding.
    """
    P = random_P(50, seed=9)
    kwargs = dict(
        n_iter=8,
        learning_rate="auto",
        early_exaggeration=12.0,
        exaggeration_iters=4,
        momentum=(0.5, 0.8),
        init=None,
        seed=3,
        restarts=2,
        device="cpu",
        every=1,
    )
    for dtype, rtol in (("float64", 1e-10), ("float32", 1e-4)):
        runs = {}
        for engine in ("numba", "torch"):
            runs[engine] = [(t, Y.copy(), kls) for t, Y, kls, _ in _optimize(P, dtype=dtype, engine=engine, **kwargs)]
        assert [t for t, _, _ in runs["torch"]] == list(range(1, 9))
        for (t1, Y1, k1), (t2, Y2, k2) in zip(runs["numba"], runs["torch"]):
            assert t1 == t2
            np.testing.assert_allclose(Y1, Y2, rtol=rtol, atol=rtol * np.abs(Y1).max())
            np.testing.assert_allclose(k1, k2, rtol=rtol)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    P = random_P(64, seed=10)
    cpu = tsne(P, seed=0, n_iter=100, device="cpu", dtype="float64")
    gpu = tsne(P, seed=0, n_iter=100, device="cuda", dtype="float64")
    np.testing.assert_allclose(gpu.embedding, cpu.embedding, rtol=1e-5, atol=1e-5)
    again = tsne(P, seed=0, n_iter=100, device="cuda", dtype="float64")
    np.testing.assert_array_equal(gpu.embedding, again.embedding)


def test_float32_and_float64_P_are_accepted():
    P = random_P(12, seed=11)
    a = tsne(P.astype(np.float32), seed=0, n_iter=100)
    b = tsne(P, seed=0, n_iter=100)
    np.testing.assert_allclose(a.embedding, b.embedding, rtol=1e-3, atol=1e-4)
    assert tsne(torch.as_tensor(P), seed=0, n_iter=100).kl == pytest.approx(b.kl, rel=1e-6)


def test_thesis_preset_and_warmup():
    assert THESIS == {"n_iter": 1000, "learning_rate": 5.0, "restarts": 100}
    warmup()
    P = random_P(8, seed=12)
    res = tsne(P, seed=0, **{**THESIS, "restarts": 4, "n_iter": 100})
    assert res.learning_rate == 5.0 and res.embeddings.shape == (4, 8, 2)


# ---------------------------------------------------------------------------------------------- degenerate but valid P


def star_P(n: int) -> np.ndarray:
    P = np.zeros((n, n))
    P[0, 1:] = P[1:, 0] = 1.0
    return P / P.sum()


def isolated_P(n: int) -> np.ndarray:
    P, _ = block_P((4, 4), leak=0.0)
    full = np.zeros((n, n))
    full[:8, :8] = P  # tokens 8.. have all-zero rows
    return full


def single_pair_P(n: int) -> np.ndarray:
    P = np.zeros((n, n))
    P[0, 1] = P[1, 0] = 0.5
    return P


@pytest.mark.parametrize("make", [star_P, isolated_P, single_pair_P])
def test_degenerate_P_gives_finite_results(make):
    P = make(12)
    res = tsne(P, seed=0, n_iter=1000, restarts=2, every=100)
    assert np.isfinite(res.embeddings).all()
    assert np.isfinite(res.kls).all() and np.isfinite(res.kl_history).all()
    assert res.kl == pytest.approx(kl_divergence(P, res.embedding), rel=1e-3, abs=1e-6)


# ---------------------------------------------------------------------------------------------- bad input


def _bad_P_cases():
    good = random_P(6)
    asym = good.copy()
    asym[0, 1] += 1e-3
    asym /= asym.sum()
    neg = good.copy()
    neg[0, 1] = neg[1, 0] = -1e-3
    nan = good.copy()
    nan[2, 3] = nan[3, 2] = np.nan
    inf = good.copy()
    inf[2, 3] = inf[3, 2] = np.inf
    diag = good.copy()
    diag[0, 0] = 0.1
    diag /= diag.sum()
    return [
        (good[0], "square 2-D"),
        (good[:, :5], "square 2-D"),
        (good[None], "square 2-D"),
        (random_P(3), "at least 4 points"),
        (asym, "symmetric"),
        (neg, "non-negative"),
        (nan, "NaN or infinite"),
        (inf, "NaN or infinite"),
        (good * 1.01, "sum to 1"),
        (good * 0.5, "sum to 1"),
        (np.zeros((6, 6)), "sum to 1"),
        (diag, "zero diagonal"),
    ]


@pytest.mark.parametrize("P, message", _bad_P_cases())
def test_bad_P_is_refused_by_name(P, message):
    for call in (
        lambda: tsne(P, n_iter=5),
        lambda: next(tsne_frames(P, n_iter=5)),
        lambda: kl_divergence(P, np.zeros((P.shape[0], 2)) if P.ndim == 2 else np.zeros((6, 2))),
    ):
        with pytest.raises(ValueError, match=message):
            call()


def test_P_sum_tolerance_accepts_rounding():
    P = random_P(6) * (1 + 5e-5)
    assert np.isfinite(tsne(P, n_iter=5, seed=0).kl)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"init": np.zeros((5, 2))}, "init must have shape"),
        ({"init": np.zeros((6, 3))}, "init must have shape"),
        ({"init": np.zeros((2, 6, 2)), "restarts": 3}, "init must have shape"),
        ({"init": np.full((6, 2), np.nan)}, "init contains NaN"),
        ({"n_iter": 0}, "n_iter must be at least 1"),
        ({"restarts": 0}, "restarts must be at least 1"),
        ({"every": 0}, "every must be at least 1"),
        ({"learning_rate": 0.0}, "learning_rate must be positive"),
        ({"learning_rate": -5.0}, "learning_rate must be positive"),
        ({"learning_rate": float("nan")}, "learning_rate must be positive"),
        ({"learning_rate": "fast"}, "learning_rate must be 'auto'"),
        ({"early_exaggeration": 0.0}, "early_exaggeration must be positive"),
        ({"exaggeration_iters": -1}, "exaggeration_iters must be non-negative"),
        ({"momentum": (0.5, 1.5)}, "momentum must be two values"),
        ({"dtype": "float16"}, "dtype must be float32 or float64"),
        ({"device": "tpu9"}, "device"),
    ],
)
def test_bad_arguments_are_refused_by_name(kwargs, message):
    P = random_P(6)
    with pytest.raises(ValueError, match=message):
        tsne(P, **kwargs)
    with pytest.raises(ValueError, match=message):
        next(tsne_frames(P, **kwargs))


def test_bad_types_and_embedding_shapes():
    P = random_P(6)
    with pytest.raises(TypeError, match="n_iter must be an int"):
        tsne(P, n_iter=10.5)
    with pytest.raises(TypeError, match="P must be a real-valued numeric array"):
        tsne(np.full((6, 6), "a"))
    with pytest.raises(ValueError, match=r"Y must have shape \(6, 2\)"):
        kl_divergence(P, np.zeros((5, 2)))
    with pytest.raises(ValueError, match="Y contains NaN"):
        gradient(P, np.full((6, 2), np.inf))


@pytest.mark.parametrize("layer, head", [(0, 0), (0, 3)])
def test_near_uniform_heads_do_not_collapse_in_float32(abstract_ex, layer, head):
    """Early exaggeration contracts a near-uniform P to spreads of ~1e-15; centred, float32 keeps the
    points apart and they expand afterwards (uncentred, they merged for good at KL(P || uniform))."""
    from headsne_widget.affinity.affinities import attention_affinities

    P = attention_affinities(abstract_ex.attentions[layer, head])
    n = P.shape[0]
    collapsed_kl = kl_divergence(P, np.zeros((n, 2)) + np.arange(n)[:, None] * 1e-12)
    res = tsne(P, seed=0, restarts=2)
    assert np.isfinite(res.embeddings).all()
    assert (res.embeddings.std(axis=1).min(axis=1) > 0.1).all()
    assert len(np.unique(res.embedding[:, 0])) == n
    assert (res.kls < collapsed_kl - 0.05).all(), (res.kls, collapsed_kl)


# ---------------------------------------------------------------------------------------------- numeric robustness


def head_P(abstract_ex, layer: int = 3, head: int = 3) -> np.ndarray:
    return attention_affinities(abstract_ex.attention(layer, head))


def test_float32_kl_of_a_blown_up_embedding_is_exact(abstract_ex):
    """The float32 engine's KL equals the float64 exact KL on an embedding spread to a radius of 1e6.

    Z used to be accumulated as (1 + sum_j w_ij) - 1 in float32: with every w_ij near 1e-12 the sum
    rounded to 1 and Z to about 0, so log Z and the reported KL were far too small (KL -1.20 in the
    widget with learning rate 1e6 on this head).
    """
    P = head_P(abstract_ex)
    n = P.shape[0]
    Y = np.random.default_rng(0).normal(0.0, 1e6, size=(n, 2))
    exact = kl_divergence(P, Y)
    kl32, _ = gradient(P.astype(np.float32), Y.astype(np.float32))
    assert exact > 0
    assert kl32 == pytest.approx(exact, rel=1e-4)


@pytest.mark.parametrize("learning_rate", [1e5, 1e6])
def test_a_too_large_learning_rate_is_detected_early_with_a_hint(abstract_ex, learning_rate):
    """Learning rate 1e6 on layer 3 head 3 reported KL -1.20 then NaN; 1e5 ended "done" at KL 4.18."""
    from headsne_widget.errors import TSNEDivergedError

    P = head_P(abstract_ex)
    kls = []
    with pytest.raises(TSNEDivergedError, match="smaller learning_rate") as info:
        for f in tsne_frames(P, n_iter=3000, learning_rate=learning_rate, seed=0, every=10):
            kls.append(f.kl)
            assert np.isfinite(f.embedding).all()
    assert all(kl >= 0 for kl in kls)
    assert int(str(info.value).split("iteration ")[1].split(":")[0]) <= 500  # early, not at the end
    assert isinstance(info.value, ArithmeticError)


@pytest.mark.parametrize(
    "kwargs, hint",
    [({"learning_rate": 1e8}, "smaller learning_rate"), ({"early_exaggeration": 1e30}, "smaller early_exaggeration")],
)
def test_absurd_step_sizes_raise_instead_of_returning_nan(kwargs, hint):
    from headsne_widget.errors import TSNEDivergedError

    P, _ = block_P()
    with pytest.raises(TSNEDivergedError, match=hint):
        tsne(P, seed=0, n_iter=300, **kwargs)


def test_healthy_runs_are_not_flagged_as_diverged(abstract_ex):
    """The divergence rule leaves ordinary runs alone: several heads, learning rates up to 10 x auto."""
    for layer, head in [(0, 0), (1, 2), (3, 3), (5, 7)]:
        P = head_P(abstract_ex, layer, head)
        res = tsne(P, seed=0, restarts=2, learning_rate=10 * P.shape[0] / 12)
        assert np.isfinite(res.kls).all() and (res.kls > 0).all()


def test_kl_and_gradient_at_extreme_scales_are_finite():
    """Q only depends on Y through 1 / (1 + d^2): at 1e100 and beyond it is the d^-2 limit, the same at every scale."""
    P = random_P(12, seed=5)
    Y = np.random.default_rng(1).normal(size=(12, 2))
    limit = kl_divergence(P, Y * 1e100)
    for scale in (1e150, 1e200, 1e300, 1e307):
        assert kl_divergence(P, Y * scale) == pytest.approx(limit, rel=1e-12)
    assert limit > 0
    kl, g = gradient(P, Y * 1e100)
    assert kl == pytest.approx(limit, rel=1e-12) and np.isfinite(g).all() and 0 < np.abs(g).max() < 1e-99
    # in the d^-2 regime w ~ 1 / scale^2 and y_i - y_j ~ scale: the gradient scales as 1 / scale
    _, g150 = gradient(P, Y * 1e150)
    np.testing.assert_allclose(g150 * 1e50, g, rtol=1e-6, atol=1e-9 * np.abs(g).max())
    with pytest.raises(ValueError, match="too large for an exact gradient"):
        gradient(P, Y * 1e200)


def test_restarts_are_bounded_quickly():
    from headsne_widget.embedding.options import MAX_RESTARTS, check_restarts

    P = random_P(6)
    for restarts in (10**6, 200_000, MAX_RESTARTS + 1):  # refused before P is checked or anything allocated
        with pytest.raises(ValueError, match=f"restarts must be at most {MAX_RESTARTS}"):
            tsne(P, restarts=restarts)
        with pytest.raises(ValueError, match="restarts must be at most"):
            next(tsne_frames(P, restarts=restarts))
    with pytest.raises(ValueError, match=r"6.0 GiB of optimiser state.*use at most 671$"):
        check_restarts(1000, 100_000)
    assert check_restarts(1000, 60_000) == 1000


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"seed": -1}, ValueError, "seed must be a non-negative int"),
        ({"seed": True}, TypeError, "seed must be an int or None, got bool"),
        ({"seed": 2.0}, TypeError, "seed must be an int"),
        ({"n_iter": True}, TypeError, "n_iter must be an int, got bool"),
        ({"restarts": True}, TypeError, "restarts must be an int, got bool"),
        ({"learning_rate": None}, TypeError, "learning_rate must be a positive number or 'auto'"),
        ({"learning_rate": True}, TypeError, "learning_rate must be a number, got bool"),
        ({"early_exaggeration": None}, TypeError, "early_exaggeration must be a number"),
        ({"early_exaggeration": float("inf")}, ValueError, "early_exaggeration must be positive"),
        ({"momentum": 0.5}, TypeError, r"momentum must be a pair .* such as \(0.5, 0.8\)"),
        ({"momentum": "ab"}, TypeError, "momentum must be a pair"),
        ({"momentum": (0.5, None)}, TypeError, "momentum must be a number"),
        ({"init": np.zeros((6, 2))}, ValueError, "every point at the same place"),
        ({"init": np.ones((6, 2))}, ValueError, "every point at the same place"),
        ({"init": np.full((6, 2), 1e6) * np.arange(6)[:, None]}, ValueError, "init must have coordinates within"),
    ],
)
def test_bad_numbers_get_clear_errors(kwargs, error, message):
    P = random_P(6)
    with pytest.raises(error, match=message):
        tsne(P, **kwargs)
    with pytest.raises(error, match=message):
        next(tsne_frames(P, **kwargs))


def test_one_collapsed_run_in_a_batched_init_is_refused():
    P = random_P(6)
    init = np.random.default_rng(0).normal(0, 1e-2, size=(3, 6, 2))
    init[1] = 0.0
    with pytest.raises(ValueError, match="every point at the same place"):
        tsne(P, init=init, restarts=3)


def test_kl_is_never_negative_at_a_perfect_fit():
    """KL is summed as p h(q / p) with h >= 0: sum p log p + sum p log(1 + d^2) + log Z gave -4.4e-16
    (float64) and -3.8e-8 (float32 run) for a uniform P and coinciding points, where KL = 0."""
    U = np.ones((5, 5)) - np.eye(5)
    U /= U.sum()
    assert kl_divergence(U, np.zeros((5, 2))) >= 0.0
    U4 = np.ones((4, 4)) - np.eye(4)
    U4 /= U4.sum()
    res = tsne(U4, n_iter=1, exaggeration_iters=0, every=1, seed=0, restarts=3)
    assert (res.kl_histories >= 0).all()
    # near the fit the KL is small but exact to relative precision, not to 1e-7 of log n^2
    Y = np.random.default_rng(0).normal(0.0, 1e-4, size=(5, 2))
    kl = kl_divergence(U, Y)
    assert 0 < kl < 1e-7
    assert gradient(U.astype(np.float32), Y.astype(np.float32))[0] == pytest.approx(kl, rel=1e-3)


def test_a_huge_step_is_cut_so_the_kl_stays_finite():
    """One step with exaggeration 2e19 threw a pair to 1e18 while two free points stayed close (Z / n large);
    far pairs' q underflowed in float32 and the KL was inf. Steps are cut to MAX_STEP_NORM units now: the
    pair moves 5 units, and the KL is finite and non-negative."""
    from headsne_widget.embedding.engines import MAX_STEP_NORM

    P = np.zeros((4, 4))
    P[0, 1] = P[1, 0] = 0.5
    start = np.random.default_rng(0).normal(0.0, 1e-4, size=(4, 2))
    result = tsne(P, n_iter=1, exaggeration_iters=1, early_exaggeration=2e19, every=1, init=start)
    moved = np.hypot(*(result.embedding - start).T)
    assert moved.max() <= 2 * MAX_STEP_NORM  # (the zero mean shifts every point by less than a step)
    assert moved.max() > 1.0
    assert 0.0 <= kl_divergence(P, result.embedding) < np.inf


def test_a_ready_float32_P_is_not_copied():
    from headsne_widget.embedding.tsne import check_affinities

    P = random_P(300, dtype=np.float32)
    assert check_affinities(P, np.float32) is P
    assert check_affinities(P, np.float64) is not P
    Q = P.copy()
    Q[0, 1] = np.nextafter(Q[0, 1], np.float32(1))  # asymmetric by one ulp (accepted): symmetrised into a new array
    out = check_affinities(Q, np.float32)
    assert out is not Q and out[0, 1] == out[1, 0]


def test_a_half_filled_kernel_cache_does_not_crash_later_processes(tmp_path):
    """numba's disk cache filled in three processes: the first compiles only the force passes (as a first
    start killed early leaves it), the second and third run a 2048-point t-SNE from that cache. Before the
    fix the third crashed with a segmentation fault (a cached compiled loop around the parallel pass, when
    2048 points ran in parallel)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    first = (
        "import numpy as np\n"
        "from headsne_widget.embedding.kernels import forces, forces_serial\n"
        "n = 64\n"
        "P = np.full((n, n), 1 / n**2, np.float32); Y = np.random.rand(1, 2, n).astype(np.float32)\n"
        "for f in (forces_serial, forces):\n"
        "    f(P, Y, np.float32(1), np.float32(1), np.zeros_like(Y), np.zeros_like(Y), np.zeros((1, n), np.float32))\n"
    )
    run = (
        "import numpy as np\n"
        "from headsne_widget.embedding.tsne import tsne\n"
        "rng = np.random.default_rng(0)\n"
        "P = rng.random((2048, 2048)).astype(np.float32); P = P + P.T; np.fill_diagonal(P, 0); P /= P.sum()\n"
        "print(tsne(P, n_iter=300, seed=0, every=300, device='cpu').kl)\n"
    )
    # as script files: with ``python -c`` the crash did not reproduce
    (tmp_path / "first.py").write_text(first)
    (tmp_path / "run.py").write_text(run)
    subprocess.run([sys.executable, str(tmp_path / "first.py")], env=env, check=True, timeout=600)
    kls = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, str(tmp_path / "run.py")], env=env, capture_output=True, text=True, timeout=600
        )
        assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
        kls.append(float(done.stdout.split()[-1]))
    assert kls[0] == kls[1] and np.isfinite(kls[0])


@pytest.mark.parametrize(
    "defect, match",
    [("nan", "NaN or infinite"), ("inf", "NaN or infinite"), ("negative", "non-negative"),
     ("diagonal", "zero diagonal"), ("one ulp", None)],
)  # fmt: skip
@pytest.mark.parametrize("where", [(590, 300), (3, 597), (257, 255)])
def test_one_bad_entry_in_any_tile_is_not_taken_as_is(defect, match, where):
    """P is accepted without a copy by one compiled pass in tiles of 256 (affinity.matrix_kernels.census): an entry
    in the ragged last tile, or either side of a tile edge, must still be seen (n = 600)."""
    from headsne_widget.embedding.tsne import check_affinities

    P = random_P(600, dtype=np.float32)
    i, j = where
    value = {"nan": np.nan, "inf": np.inf, "negative": -P[i, j], "one ulp": np.nextafter(P[i, j], np.float32(1))}
    if defect == "diagonal":
        P[i, i] = P.max()
    else:
        P[i, j] = value[defect]
    if match is None:  # within the symmetry tolerance: symmetrised into a new array
        out = check_affinities(P, np.float32)
        assert out is not P and out[i, j] == out[j, i]
    else:
        with pytest.raises(ValueError, match=match):
            check_affinities(P, np.float32)


def test_without_a_first_kl_the_frames_are_the_same_and_the_kl_comes_kl_every_in():
    """The widget leaves the KL out of a run's first frame (first_kl=False): the positions are unchanged."""
    P = random_P(60)
    kw = dict(n_iter=40, seed=3, every=4, kl_every=10, exaggeration_iters=20)
    with_kl = list(tsne_frames(P, **kw))
    without = list(tsne_frames(P, first_kl=False, **kw))
    assert [f.iteration for f in without] == [f.iteration for f in with_kl]
    for a, b in zip(with_kl, without):
        np.testing.assert_array_equal(a.embedding, b.embedding)
    assert with_kl[0].kl_iteration == 4 and np.isfinite(with_kl[0].kl)
    assert [(f.kl, f.kls, f.kl_iteration, f.fresh) for f in without[:2]] == [(None, None, None, False)] * 2
    assert [f.kl_iteration for f in without[2:]] == [12, 12, 12, 24, 24, 24, 36, 40]
    assert without[-1].kl == with_kl[-1].kl and without[-1].fresh


def test_the_kl_kernels_float32_logarithm_is_within_two_ulp_of_log():
    """The exact KL's float32 log (embedding.kl_kernels.vector_log: bits and Cephes' polynomial, so that the pass
    vectorises) against float64 np.log over float32's whole range, and its special values."""
    from numba import njit

    from headsne_widget.embedding.kl_kernels import vector_log

    @njit
    def logs(a, out):
        for i in range(a.shape[0]):
            out[i] = vector_log(a[i])

    rng = np.random.default_rng(0)
    a = np.concatenate([10 ** rng.uniform(-37.9, 38.5, 200_000), rng.uniform(0.5, 2.0, 200_000), [1.0, 2.0, 0.5]])
    a = a.astype(np.float32)
    out = np.empty_like(a)
    logs(a, out)
    exact = np.log(a.astype(np.float64))
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert (np.abs(out - exact) <= 2 * np.maximum(ulp, np.spacing(np.float32(1)) / 2)).all()
    specials = np.array([0.0, np.inf, np.nan, -1.0], dtype=np.float32)
    out = np.empty_like(specials)
    logs(specials, out)
    assert out[0] == -np.inf and out[1] == np.inf and np.isnan(out[2]) and np.isnan(out[3])


def test_unchecked_input_gives_the_same_frames_and_still_refuses_the_wrong_array():
    """check_input=False (the widget's runs, on a P built by the affinity functions) skips the O(n^2) checks only."""
    P = random_P(80, dtype=np.float32)
    kw = dict(n_iter=30, seed=1, every=10)
    checked = list(tsne_frames(P, **kw))
    unchecked = list(tsne_frames(P, check_input=False, **kw))
    for a, b in zip(checked, unchecked, strict=True):
        np.testing.assert_array_equal(a.embedding, b.embedding)
        assert a.kl == b.kl
    for bad in (P.astype(np.float64), P[:, :-1], [[0.0]], P[:3, :3]):
        with pytest.raises(ValueError, match="check_input=False needs P"):
            next(tsne_frames(bad, check_input=False, **kw))


def test_the_compiled_passes_leave_python_free_to_run():
    """The kernels release the GIL, so the kernel's main thread handles a click while the run thread is inside
    a pass (with the GIL held, the serial steps of one frame period delayed it by up to 16 ms at 512 tokens)."""
    import threading
    import time

    from headsne_widget.embedding import kernels
    from headsne_widget.embedding.tsne import MIN_GAIN

    n = 1024
    P = random_P(n, dtype=np.float32)
    Y = np.random.default_rng(0).normal(size=(1, 2, n)).astype(np.float32)
    att, rep, step = (np.zeros_like(Y) for _ in range(3))
    gains, z, one = np.ones_like(Y), np.empty((1, n), np.float32), np.float32(1)

    def steps(count: int) -> None:
        kernels.steps_serial(P, Y, one, one, att, rep, z, np.ones(1), gains, step, 0.5, 1.0, MIN_GAIN, 0, 2 * count)

    steps(1)  # compiled (or loaded) before timing
    inside: list[float] = []
    worker = threading.Thread(
        target=lambda: (inside.append(time.perf_counter()), steps(1000), inside.append(time.perf_counter()))
    )
    ticks = []
    worker.start()
    while worker.is_alive():
        ticks.append(time.perf_counter())
    worker.join()
    start, end = inside
    during = np.array([t for t in ticks if start <= t <= end])
    gaps = np.diff(np.concatenate([[start], during, [end]]))
    assert end - start > 0.05 and gaps.max() < 0.5 * (end - start), (end - start, gaps.max())


@pytest.mark.parametrize("n", [515, 2051])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_passes_in_shares_equal_one_thread_and_the_formulas(dtype, n):
    """The passes the engine runs from POOL_MIN_PAIRS (in shares of the rows on the worker threads) give the
    bits of the one-thread passes, and the sums of the module doc at every row, with the forces one row at a
    time (n = 515) and four rows at a time (n = 2051 leaves three rows past the last group of four); two runs
    share each row of P."""
    from headsne_widget.embedding import kernels, kl_kernels

    runs = 2
    assert (n >= kernels.FOUR_ROWS_MIN_N) == (n == 2051)
    P = random_P(n, seed=3, dtype=dtype)
    Y = np.random.default_rng(4).normal(scale=3.0, size=(runs, 2, n)).astype(dtype)
    one, ex = dtype(1), dtype(4)
    got = []
    for fn in (kernels.forces, kernels.forces_serial):
        att, rep, z = np.zeros_like(Y), np.zeros_like(Y), np.zeros((runs, n), dtype)
        fn(P, Y, ex, one, att, rep, z)
        got.append((att, rep, z))
    for a, b in zip(*got):
        np.testing.assert_array_equal(a, b)
    att, rep, z = got[0]
    rtol = 1e-10 if dtype == np.float64 else 2e-5
    for r in range(runs):
        y = Y[r].T.astype(np.float64)
        d = y[:, None, :] - y[None, :, :]
        w = 1.0 / (1.0 + (d**2).sum(-1))
        np.fill_diagonal(w, 0.0)
        Pd = P.astype(np.float64)
        expected = (4.0 * ((Pd * w)[:, :, None] * d).sum(1).T, ((w**2)[:, :, None] * d).sum(1).T, w.sum(1))
        for value, want in zip((att[r], rep[r], z[r]), expected):
            np.testing.assert_allclose(value, want, rtol=rtol, atol=rtol * np.abs(want).max())
    inv_z = (1.0 / z.sum(axis=1, dtype=np.float64)).astype(dtype)
    kls = []
    for fn in (kl_kernels.kl_rows, kl_kernels.kl_rows_serial):
        kl = np.zeros((runs, n), dtype)
        fn(P, Y, one, inv_z, dtype(1e30), kl)
        kls.append(kl)
    np.testing.assert_array_equal(*kls)
    for r in range(runs):
        want = kl_divergence(P.astype(np.float64), Y[r].T.astype(np.float64))
        assert kls[0][r].sum(dtype=np.float64) == pytest.approx(want, rel=rtol)


def test_a_pool_worker_never_waits_for_its_own_pool_and_only_the_pool_marks_its_workers():
    """Work split with ``_parallel.each`` from inside a pool worker runs in that worker (every worker inside such
    a wait would leave none to do the work: here every worker does it at once, which deadlocked otherwise). The
    workers are known by a mark the pool's initializer sets, not by their name: a thread of the caller's that is
    named like them still hands its pieces to the pool."""
    from headsne_widget import _parallel

    pool = _parallel.workers()
    if pool is None:
        pytest.skip("one core: no pool")
    busy = pool._max_workers
    started = threading.Barrier(busy)

    def nested(_: int) -> list[int]:
        started.wait(timeout=30)  # every worker is inside this call before any splits its work
        seen: list[int] = []
        _parallel.each(8, lambda k: seen.append(threading.get_ident()))
        return [threading.get_ident(), *seen]

    for idents in [f.result(timeout=60) for f in [pool.submit(nested, k) for k in range(busy)]]:
        assert len(idents) == 9 and set(idents) == {idents[0]}  # all eight pieces in the worker itself
    assert not _parallel.in_worker()

    where: list[tuple[bool, int]] = []
    caller = threading.Thread(
        target=lambda: _parallel.each(4, lambda k: where.append((_parallel.in_worker(), threading.get_ident()))),
        name="headsne-worker-lookalike",
    )
    caller.start()
    caller.join(timeout=60)
    assert len(where) == 4 and all(marked and ident != caller.ident for marked, ident in where)


@pytest.mark.parametrize("n", [300, 2051])
def test_the_engine_gives_the_same_bits_in_one_compiled_call_and_in_shares(n, monkeypatch):
    """Where the engine switches from one compiled call of serial steps to the passes in shares
    (kernels.POOL_MIN_PAIRS, chosen by measurement on one machine) does not change a run: the same frames,
    bit for bit, with either (one row at a time at n = 300, four at 2051)."""
    from headsne_widget.embedding import kernels

    P = random_P(n, seed=2, dtype=np.float32)
    kw = dict(n_iter=60, seed=5, every=20, exaggeration_iters=30)
    runs = []
    for pairs in (1 << 62, 1):  # every size serial, then every size in shares
        monkeypatch.setattr(kernels, "POOL_MIN_PAIRS", pairs)
        runs.append(list(tsne_frames(P, **kw)))
    for a, b in zip(*runs, strict=True):
        np.testing.assert_array_equal(a.embedding, b.embedding)
        assert a.kl == b.kl
