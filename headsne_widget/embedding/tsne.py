"""Exact t-SNE of a given affinity matrix P: streamed frame by frame, batched over restarts.

The optimisation is the thesis's Algorithm 2.1 (Section 2.5.1): the exact gradient of eq. 3,

    dC/dy_i = 4 sum_j (p_ij - q_ij) (y_i - y_j) / (1 + |y_i - y_j|^2),

early exaggeration (P times ``early_exaggeration`` for the first ``exaggeration_iters`` steps),
momentum switching from ``momentum[0]`` to ``momentum[1]`` when exaggeration ends, and the
per-parameter gains of the reference implementation and scikit-learn (+0.2 / *0.8, at least 0.01).
As in scikit-learn, gains and the momentum term restart when exaggeration ends: on attention P
(n = 512, 6 seeds) that lowered the median final KL from 0.680 to 0.652 against keeping them, as
the reference implementation does.

``restarts=N`` optimises N embeddings at once along a leading axis; run r starts from
N(0, 1e-4 I) drawn with ``seed + r``, so it equals the single run with that seed. On the CPU a fused,
compiled pass over all pairs (:mod:`.kernels`) does the work without n x n temporaries; on
CUDA the same steps run in torch. KL(P || Q) is exact (no Barnes-Hut approximation) and is only
computed at reported steps, where it costs a logarithm per pair; it is summed as non-negative terms
(see :func:`.kl_kernels.kl_rows`), so it is never negative.

Why exact at every size (``benchmarks/tsne_scale.py``): openTSNE's FFT method approximates only the
repulsion; its attraction loops over the non-zeros of P, and attention P (and Gaussian P at
perplexity 30) are dense, so on the same P its cost is O(n^2) as well, with a larger constant: ours
was measured ahead at every n from 512 to 16384 (``python benchmarks/tsne_scale.py`` prints the table).

Divergence (a learning rate or an exaggeration far too large) raises :class:`~.errors.TSNEDivergedError`
with a hint at the next check (every reported step and every batch of plain steps), never a NaN
embedding: non-finite values, coordinates beyond 1e12, or Z / n below :data:`.schedule.BLOWN_UP_Z_PER_POINT`.

Memory for a run: P in the working dtype, n^2 x 4 bytes in float32 (1 MiB at n = 512, 256 MiB at
8192, 1 GiB at 16384), used in place when it is already float32, symmetric, zero-diagonal and
normalised (``attention_affinities(A).astype(np.float32)`` is), else one such copy beside the
caller's; plus about 64 bytes per point and run (``restarts * n`` is bounded by :data:`.options.MAX_STATE_BYTES`).

This module is the API (frames, results, the KL and gradient of one embedding, the warm-up); the checks of
the inputs are :mod:`.options`, the loop :mod:`.schedule`, the engines :mod:`.engines` and :mod:`.sparse_engine`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .engines import KL_BIG_RATIO as _KL_BIG_RATIO
from .engines import MIN_GAIN, NumbaEngine
from .options import as_numpy, auto_learning_rate, check_affinities, check_embedding
from .schedule import MAX_EXTENT, optimize
from .sparse_engine import dispatch_kl, dispatch_optimize

__all__ = [
    "THESIS",
    "Frame",
    "TSNEResult",
    "auto_learning_rate",
    "gradient",
    "kl_divergence",
    "tsne",
    "tsne_frames",
    "warmup",
]

#: The settings of the thesis (Appendix A.2): 1000 iterations, learning rate 5, best of 100 runs by KL.
#: ``tsne(P, **THESIS)`` reproduces them (perplexity 20 belongs to ``gaussian_affinities``).
THESIS = {"n_iter": 1000, "learning_rate": 5.0, "restarts": 100}

#: the optimisation loop of :mod:`.schedule`; a ``scipy.sparse`` P runs the interpolation engine of
#: :mod:`.sparse_engine` (issue 21: O(nnz + n) an iteration), any other P the exact engine
_optimize = dispatch_optimize(optimize)


@dataclass(frozen=True)
class Frame:
    """One reported step of :func:`tsne_frames`.

    ``embedding`` is the run with the lowest KL (index ``run``), a float32 (n, 2) C-contiguous copy
    that is safe to hand to another thread; ``kls`` holds every run's exact KL after ``kl_iteration``
    steps: this step when ``fresh``, else the latest step whose KL was computed (``kl_every``). Before
    the first KL (only with ``first_kl=False``) ``kl``, ``kls`` and ``kl_iteration`` are None and the
    frame shows run 0.
    """

    iteration: int
    embedding: np.ndarray
    kl: float | None
    kls: np.ndarray | None
    run: int
    kl_iteration: int | None

    @property
    def fresh(self) -> bool:
        """Whether ``kl`` is the KL of this very step."""
        return self.kl_iteration == self.iteration


@dataclass(frozen=True)
class TSNEResult:
    """The outcome of :func:`tsne`: the best run by final exact KL and every run.

    ``kl_history[k]`` is the best run's KL after ``iterations[k]`` steps; ``kl_histories`` has
    one row per run.
    """

    embedding: np.ndarray
    kl: float
    kl_history: np.ndarray
    embeddings: np.ndarray
    kls: np.ndarray
    best: int
    iterations: np.ndarray
    kl_histories: np.ndarray
    learning_rate: float


def _frame(iteration: int, Y: np.ndarray, kls: np.ndarray | None, kl_iteration: int | None) -> Frame:
    best = 0 if kls is None else int(np.argmin(kls))
    embedding = np.ascontiguousarray(Y[best].T, dtype=np.float32).copy()
    if kls is None:  # before the first KL (first_kl=False)
        return Frame(iteration, embedding, None, None, best, None)
    return Frame(iteration, embedding, float(kls[best]), np.array(kls, dtype=np.float64), best, kl_iteration)


def tsne_frames(
    P: Any,
    *,
    n_iter: int = 1000,
    learning_rate: float | str = "auto",
    early_exaggeration: float = 12.0,
    exaggeration_iters: int = 250,
    momentum: tuple[float, float] = (0.5, 0.8),
    init: Any = None,
    seed: int | None = None,
    restarts: int = 1,
    device: str | torch.device | None = None,
    every: int = 1,
    dtype: Any = "float32",
    kl_every: int | None = None,
    first_kl: bool = True,
    check_input: bool = True,
) -> Iterator[Frame]:
    """Stream the optimisation: a :class:`Frame` after every ``every``-th iteration and after the last.

    Takes the keyword arguments of :func:`tsne`. The exact KL is computed at the first frame at least
    ``kl_every`` iterations (default ``every``) after the previous one and at the last; frames in
    between carry that latest KL (``Frame.fresh`` is False). With ``restarts > 1`` each frame shows
    the run with the lowest latest KL. ``first_kl=False`` leaves the KL out of the first frame (it
    needs a logarithm per pair, 60 ms at n = 8192 (0.35 s with libm's log), which a display waiting for its first frame
    does without): the first KL then comes ``kl_every`` iterations in, and frames before it carry none.
    The last frame always has its KL. ``check_input=False`` skips the O(n^2) checks of P (as
    scikit-learn's ``check_input``): only for a P made by :func:`~headsne_widget.attention_affinities`
    or :func:`~headsne_widget.gaussian_affinities` in the run's dtype, valid by construction (the widget's
    runs; 0.13 s at n = 8192). The work happens inside ``next()``: closing the generator (or
    dropping it) stops the optimisation at once, and no thread is left behind.
    """
    latest, latest_t = None, -1
    for t, Y, kls, _ in _optimize(
        P,
        n_iter=n_iter,
        learning_rate=learning_rate,
        early_exaggeration=early_exaggeration,
        exaggeration_iters=exaggeration_iters,
        momentum=momentum,
        init=init,
        seed=seed,
        restarts=restarts,
        device=device,
        every=every,
        dtype=dtype,
        kl_every=kl_every,
        first_kl=first_kl,
        check_input=check_input,
    ):
        if kls is not None:
            latest, latest_t = kls, t
        yield _frame(t, Y, latest, None if latest is None else latest_t)


def tsne(
    P: Any,
    *,
    n_iter: int = 1000,
    learning_rate: float | str = "auto",
    early_exaggeration: float = 12.0,
    exaggeration_iters: int = 250,
    momentum: tuple[float, float] = (0.5, 0.8),
    init: Any = None,
    seed: int | None = None,
    restarts: int = 1,
    device: str | torch.device | None = None,
    every: int = 50,
    dtype: Any = "float32",
) -> TSNEResult:
    """Exact t-SNE of the affinities P (n x n, symmetric, zero diagonal, sum 1); best of ``restarts`` runs.

    Parameters
    ----------
    P : the joint probabilities, e.g. from ``attention_affinities`` or ``gaussian_affinities``.
    n_iter : gradient steps (thesis: 1000).
    learning_rate : a positive number, or ``"auto"`` = max(n / early_exaggeration, min(5, n / 12)), chosen by
        measurement on real attention P (median KL over seeds, n = 100 to 2048; the table is in
        :func:`auto_learning_rate`): scikit-learn's max(n / 48, 50) is clearly worse at n <= 200
        and the thesis's 5 stalls from n = 800 on. ``tsne(P, **THESIS)`` gives the thesis preset
        (learning rate 5, 100 restarts).
    early_exaggeration, exaggeration_iters : P is multiplied by the first for the first steps.
    momentum : (during exaggeration, after it).
    init : (n, 2) start for every run, or (restarts, n, 2); default N(0, 1e-4 I) from ``seed + r``.
    seed : base seed; run r uses ``seed + r``, so it equals ``tsne(P, seed=seed + r)``.
    restarts : runs optimised together in one batched computation; the lowest final KL wins.
    device : ``None`` = CUDA when available, else the CPU (compiled kernels).
    every : ``kl_history`` holds the exact KL every ``every`` steps and after the last.
    dtype : ``"float32"`` (default) or ``"float64"``.

    Raises
    ------
    TSNEDivergedError
        The run diverged (learning rate or exaggeration too large); the message says which to lower.
    ValueError, TypeError
        Bad input, named: e.g. ``restarts`` above ``MAX_RESTARTS`` (1000), ``seed`` < 0, a bool
        where a number is expected, ``momentum`` not a pair, an ``init`` with every point in one
        place, ``learning_rate=None`` (write ``"auto"``).
    """
    iterations, histories, lr, Y = [], [], 0.0, None
    for t, Y, kls, lr in _optimize(  # noqa: B007 - the last Y and lr are the result
        P,
        n_iter=n_iter,
        learning_rate=learning_rate,
        early_exaggeration=early_exaggeration,
        exaggeration_iters=exaggeration_iters,
        momentum=momentum,
        init=init,
        seed=seed,
        restarts=restarts,
        device=device,
        every=every,
        dtype=dtype,
    ):
        iterations.append(t)
        histories.append(kls)
    kl_histories = np.asarray(histories, dtype=np.float64).T  # (runs, steps)
    kls = kl_histories[:, -1].copy()
    best = int(np.argmin(kls))
    embeddings = np.ascontiguousarray(np.asarray(Y).transpose(0, 2, 1), dtype=np.float32)
    return TSNEResult(
        embedding=embeddings[best].copy(),
        kl=float(kls[best]),
        kl_history=kl_histories[best].astype(np.float32),
        embeddings=embeddings,
        kls=kls,
        best=best,
        iterations=np.asarray(iterations, dtype=np.int64),
        kl_histories=kl_histories,
        learning_rate=lr,
    )


# ----------------------------------------------------------------------------------------------
# exact KL and gradient of one embedding


def _one_embedding(P64: np.ndarray, Y: np.ndarray, dt: np.dtype, exact_scale: bool) -> tuple[float, NumbaEngine, float]:
    """Forces and KL of one embedding, in units where no |y_i - y_j|^2 overflows; returns (KL, engine, c).

    KL and Q only depend on Y through w_ij = 1 / (1 + |y_i - y_j|^2). Written with Y = c Y' this is
    w_ij = eps / (eps + |y'_i - y'_j|^2) with eps = 1 / c^2: the kernel with ``one = eps`` on Y' gives
    the same w, Z and q, sum_j p log(eps + d'^2) = sum_j p log(1 + d^2) + log eps, and forces c times
    smaller. Coordinates beyond sqrt(max float) / 8 (1.7e153 in float64) are rescaled this way; when
    1 / c^2 is below the smallest normal float, eps is held there: q then stays exact for every pair not
    closer than 1e-150 of the largest coordinate, which ``exact_scale`` (the gradient) refuses instead.
    """
    largest = float(np.abs(Y).max())
    c, eps = 1.0, 1.0
    if largest > (MAX_EXTENT if dt == np.float32 else 1e100):  # q_ij could underflow beyond
        dt = np.dtype(np.float64)
        c = largest
        eps = c**-2
        floor = np.finfo(np.float64).tiny * 2**20
        if eps < floor:
            if exact_scale:
                raise ValueError(f"Y has coordinates up to {largest:.3g}: too large for an exact gradient in float64")
            eps = floor
        Y = Y / c
    Y = Y - Y.mean(axis=0)  # translation invariant; the centred coordinates stay within [-2, 2] after scaling
    eng = NumbaEngine(P64, np.ascontiguousarray(Y.T[None], dtype=dt), one=eps)
    kls = eng.forces(1.0, True)
    assert kls is not None  # want_kl=True returns the KLs
    kl = float(kls[0])
    if not np.isfinite(kl):
        raise ValueError("KL(P || Q(Y)) is not finite for this Y (coinciding points at an extreme scale?)")
    return kl, eng, c


def gradient(P: Any, Y: Any) -> tuple[float, np.ndarray]:
    """Exact KL(P || Q(Y)) and its gradient (eq. 3) for one embedding Y (n, 2).

    Computed in float64 unless both P and Y are float32.
    """
    P_in, Y_in = as_numpy(P, "P"), as_numpy(Y, "Y")
    P64 = check_affinities(P_in)
    Yc = check_embedding(Y_in, P64.shape[0])
    dt = np.dtype(np.float32) if (P_in.dtype == np.float32 and Yc.dtype == np.float32) else np.dtype(np.float64)
    kl, eng, c = _one_embedding(P64, Yc.astype(np.float64), dt, exact_scale=True)
    return kl, (eng.gradient()[0].T * c).astype(eng.Y.dtype)


def kl_divergence(P: Any, Y: Any) -> float:
    """Exact KL(P || Q(Y)) = sum p_ij log(p_ij / q_ij) of an embedding Y (n, 2), in float64.

    Finite and non-negative for any finite Y (huge coordinates are rescaled without changing Q).
    """
    P64 = check_affinities(P)
    Yc = check_embedding(Y, P64.shape[0]).astype(np.float64)
    return _one_embedding(P64, Yc, np.dtype(np.float64), exact_scale=False)[0]


def warmup() -> None:
    """Compile (or load from numba's cache) every CPU kernel, float32 and float64, on a tiny problem: the
    t-SNE passes, and the passes that build and check P and rank a head's partners.

    The widget calls this in a background thread at start so that the first head click does not
    wait for compilation (seconds the first time, well under a second from the cache).
    """
    from ..affinity import matrix_kernels
    from . import kernels, kl_kernels

    n = 8
    for dtype in (np.float32, np.float64):
        P = np.full((n, n), 1.0 / (n * (n - 1)), dtype=dtype)
        np.fill_diagonal(P, 0.0)
        matrix_kernels.census(P)  # check_affinities, P from a head (A in either dtype, P in either), partners
        matrix_kernels.row_census(P)  # a captured head's census
        for out_dtype in (np.float32, np.float64):
            matrix_kernels.symmetrise(P, 1.0, np.empty((n, n), out_dtype))
        matrix_kernels.partners(P, np.ones(n, bool), np.empty((3, n, 2), np.float32), np.empty((3, n, 2), np.int32))
        Y = np.random.default_rng(0).normal(size=(1, 2, n)).astype(dtype)
        one = dtype(1)
        att, rep, step, gains = (np.zeros_like(Y) for _ in range(4))
        z, kl = np.empty((1, n), dtype), np.empty((1, n), dtype)
        kernels.forces(P, Y, one, one, att, rep, z)  # in shares: forces_rows, for every size
        kernels.forces_serial(P, Y, one, one, att, rep, z)
        kl_kernels.kl_rows(P, Y, one, np.ones(1, dtype), dtype(_KL_BIG_RATIO), kl)  # in shares: kl_part
        kl_kernels.kl_rows_serial(P, Y, one, np.ones(1, dtype), dtype(_KL_BIG_RATIO), kl)
        kernels.steps_serial(P, Y, one, one, att, rep, z, np.ones(1), gains + 1, step, 0.5, 1.0, MIN_GAIN, 0, 2)
        kernels._sum_rows(z, np.ones(1))  # the pooled passes (the serial ones are all inside steps_serial)
        kernels.update(Y, att, rep, z.sum(axis=1, dtype=np.float64), gains + 1, step, 0.5, 1.0, MIN_GAIN)


#: a ``scipy.sparse`` P's exact KL in O(n) memory (:func:`.sparse_engine.exact_kl`), any other P's above
kl_divergence = dispatch_kl(kl_divergence)
