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
(see :func:`.kernels.kl_rows`), so it is never negative.

Why exact at every size (``benchmarks/tsne_scale.py``): openTSNE's FFT method approximates only the
repulsion; its attraction loops over the non-zeros of P, and attention P (and Gaussian P at
perplexity 30) are dense, so on the same P its cost is O(n^2) as well, with a larger constant: ours
was measured ahead at every n from 512 to 16384 (``python benchmarks/tsne_scale.py`` prints the table).

Divergence (a learning rate or an exaggeration far too large) raises :class:`~.errors.TSNEDivergedError`
with a hint at the next check (every reported step and every batch of plain steps), never a NaN
embedding: non-finite values, coordinates beyond 1e12, or Z / n below ``BLOWN_UP_Z_PER_POINT``.

Memory for a run: P in the working dtype, n^2 x 4 bytes in float32 (1 MiB at n = 512, 256 MiB at
8192, 1 GiB at 16384), used in place when it is already float32, symmetric, zero-diagonal and
normalised (``attention_affinities(A).astype(np.float32)`` is), else one such copy beside the
caller's; plus about 64 bytes per point and run (``restarts * n`` is bounded by ``MAX_STATE_BYTES``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from .._checks import int_at_least, real_array
from .._device import resolve_device
from ..errors import TSNEDivergedError
from .engines import KL_BIG_RATIO as _KL_BIG_RATIO
from .engines import MIN_GAIN, NumbaEngine, make_engine

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

INIT_STD = 1e-2  # N(0, 1e-4 I), as in the t-SNE paper and the thesis
_SYMMETRY_TOL = 1e-6  # relative to the largest entry of P
_SUM_TOL = 1e-4
#: Most runs one call optimises together (``restarts``); beyond it memory and time grow with no gain
#: in the best KL worth having (the thesis uses 100).
MAX_RESTARTS = 1000
#: Bytes the optimiser's per-run state may take (embeddings, forces, gains, steps: about 60 bytes per
#: point and run): ``restarts * n`` is refused beyond it, before anything is allocated.
MAX_STATE_BYTES = 4 << 30
_STATE_BYTES_PER_POINT = 64
#: Divergence: the mean kernel mass per point, Z / n = mean_i sum_j 1 / (1 + |y_i - y_j|^2), below
#: which the embedding has blown up. Converged embeddings keep Z / n of order 0.01 to 100 at every n
#: (a point's neighbours lie within a few units); below 1e-4 the typical neighbour is more than 100
#: units away, where the forces (~ 1 / d^3) have vanished and the run cannot come back. Measured on
#: attention and Gaussian P (n = 271 and 300): learning rates up to 300 stayed above 6e-3, 1e4 and 1e5
#: fell to 5e-5 and 2e-6 with final KLs 2 to 150 times worse.
BLOWN_UP_Z_PER_POINT = 1e-4
#: Coordinates beyond this are 10 orders of magnitude past any t-SNE layout, and float32's q_ij of far
#: pairs underflows there (KL inf): such a run has diverged.
_MAX_EXTENT = 1e12


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


def auto_learning_rate(n: int, early_exaggeration: float = 12.0) -> float:
    """``learning_rate="auto"``: max(n / early_exaggeration, 5), chosen by measurement.

    Median final exact KL over 8 seeds on MiniLM attention P (layer 1, head 2, thesis abstract;
    ``benchmarks/tsne_speed.py --learning-rates``), 1000 iterations:

    ============  ======  ======  ======  ======  ==============  =======
    n             5       50      200     n/12    max(n/48, 50)   n/24
    ============  ======  ======  ======  ======  ==============  =======
    100           0.588   0.735   0.788   0.588   0.735           0.593
    200           0.631   0.682   0.749   0.639   0.682           0.649
    400           0.617   0.591   0.644   0.589   0.591           0.622
    800           2.571   0.731   0.752   0.726   0.731           0.717
    2048 (5)      0.708   0.700   0.740   0.689   0.700           -
    ============  ======  ======  ======  ======  ==============  =======

    n / 12 is best or within 0.01 of the best everywhere; scikit-learn's max(n / 48, 50) is 0.15
    worse at the widget's typical n of 100 to 200, and the thesis's 5 stalls from n = 800 on. The
    floor of 5 (the thesis's value) only matters below 60 points.
    """
    return float(max(n / early_exaggeration, 5.0))


# ----------------------------------------------------------------------------------------------
# validation


def _as_numpy(a, name: str) -> np.ndarray:
    """A finite real numpy array from an array or a torch tensor (on any device)."""
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().numpy()
    return real_array(a, name)


_MAX_INIT = 1e4  # a start beyond this is already blown up (see BLOWN_UP_Z_PER_POINT)
_BLOCK = 256  # rows per block in the O(n^2) checks, so that no extra n x n temporary is made


def check_affinities(P, dtype=np.float64) -> np.ndarray:
    """P in ``dtype``, exactly symmetric with zero diagonal and sum 1, or a ValueError naming the problem.

    Works in row blocks: beyond the result, memory stays O(n * 256) (n = 4096 runs in under 1 GB).
    A P that already is all that (in ``dtype``, C-contiguous, exactly symmetric, zero diagonal, sum 1
    within 1e-6, as ``attention_affinities(A, dtype=np.float32)`` is) is returned as is, not copied: that
    is tested first, in one compiled pass (:func:`_ready_as_is`).
    """
    dtype = np.dtype(dtype)
    if _ready_as_is(P, dtype):
        return P
    P = _as_numpy(P, "P")
    if P.ndim != 2 or P.shape[0] != P.shape[1]:
        raise ValueError(f"P must be a square 2-D matrix, got shape {P.shape}")
    n = P.shape[0]
    if n < 4:
        raise ValueError(f"t-SNE needs at least 4 points, P is {n} x {n}")
    smallest = P.min()
    if smallest < 0:
        raise ValueError(f"P must be non-negative, its smallest entry is {smallest:.3g}")
    tol = _SYMMETRY_TOL * max(float(P.max()), np.finfo(float).tiny)
    asymmetry = 0.0 if _exactly_symmetric(P) else _asymmetry(P)
    if asymmetry > tol:
        raise ValueError(
            f"P must be symmetric: max |P - P^T| = {asymmetry:.3g} (largest entry {tol / _SYMMETRY_TOL:.3g})"
        )
    diagonal = float(np.abs(np.diagonal(P)).max())
    if diagonal > tol:
        raise ValueError(f"P must have a zero diagonal (q_ii = 0, so KL would be infinite); max p_ii = {diagonal:.3g}")
    total = float(P.sum(dtype=np.float64))
    if abs(total - 1.0) > _SUM_TOL:
        raise ValueError(f"P must sum to 1 (a joint distribution), it sums to {total:.6g}")
    out = np.empty((n, n), dtype=dtype)
    for i in range(0, n, _BLOCK):
        out[i : i + _BLOCK] = (P[i : i + _BLOCK].astype(np.float64) + P[:, i : i + _BLOCK].T) / (2.0 * total)
    np.fill_diagonal(out, 0.0)
    out /= out.sum(dtype=np.float64)
    return out


def _ready_as_is(P, dtype: np.dtype) -> bool:
    """Whether P already is what the engines need (``dtype``, C-contiguous, finite, non-negative, exactly
    symmetric, zero diagonal, sum 1 within 1e-6), so that no n x n copy is made (1 GiB at n = 16384 in
    float32). One compiled pass in mirrored tiles (0.13 s at n = 8192; numpy's passes took 0.25-0.35 s);
    anything else goes through the checks that name the problem."""
    if not (
        isinstance(P, np.ndarray) and P.dtype == dtype and P.flags.c_contiguous
        and P.ndim == 2 and P.shape[0] == P.shape[1] >= 4
    ):  # fmt: skip
        return False
    from ..affinity.matrix_kernels import census  # numba: imported on first use, as the t-SNE kernels are

    total, negative, unequal, diagonal, _ = census(P)
    return bool(np.isfinite(total) and negative == 0 and unequal == 0 and diagonal == 0 and abs(total - 1.0) <= 1e-6)


def _unchecked_affinities(P, dtype: np.dtype) -> np.ndarray:
    """P as given for ``check_input=False``: only its type, shape and dtype are checked (O(1))."""
    if not (isinstance(P, np.ndarray) and P.dtype == dtype and P.ndim == 2 and P.shape[0] == P.shape[1] >= 4):
        raise ValueError(f"check_input=False needs P as a square {dtype} numpy array of n >= 4 points")
    return np.ascontiguousarray(P)


def _exactly_symmetric(P: np.ndarray, block: int = 256) -> bool:
    """Whether P == P^T exactly, compared in square blocks in P's own dtype (cache-friendly, no float64
    copy: 0.3 s instead of 1.8-2.4 s at n = 8192 for the row-block difference below)."""
    n = P.shape[0]
    for i in range(0, n, block):
        for j in range(i, n, block):
            if not np.array_equal(P[i : i + block, j : j + block], P[j : j + block, i : i + block].T):
                return False
    return True


def _asymmetry(P: np.ndarray) -> float:
    """max |P - P^T| in float64, in row blocks."""
    n = P.shape[0]
    return max(
        float(np.abs(P[i : i + _BLOCK].astype(np.float64) - P[:, i : i + _BLOCK].T).max()) for i in range(0, n, _BLOCK)
    )


def _check_embedding(Y, n: int, name: str = "Y") -> np.ndarray:
    Y = _as_numpy(Y, name)
    if Y.shape != (n, 2):
        raise ValueError(f"{name} must have shape ({n}, 2) to match P, got {Y.shape}")
    return Y


def _resolve_dtype(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dt}")
    return dt


def _number(value, name: str) -> float:
    """``value`` as a finite float; a bool or a non-number is a TypeError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    out = float(value)
    if not np.isfinite(out):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return out


def _positive(value, name: str) -> float:
    out = _number(value, name)
    if out <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return out


def _resolve_learning_rate(learning_rate, n: int, early_exaggeration: float) -> float:
    if isinstance(learning_rate, str):
        if learning_rate != "auto":
            raise ValueError(f"learning_rate must be 'auto' or a positive number, got {learning_rate!r}")
        return auto_learning_rate(n, early_exaggeration)
    if learning_rate is None:  # not an alias of "auto": say so rather than guess
        raise TypeError("learning_rate must be a positive number or 'auto' (max(n / early_exaggeration, 5)), got None")
    return _positive(learning_rate, "learning_rate")


def _check_momentum(momentum) -> tuple[float, float]:
    if isinstance(momentum, (str, bytes)) or not hasattr(momentum, "__len__") or len(momentum) != 2:
        raise TypeError(f"momentum must be a pair (during exaggeration, after it) such as (0.5, 0.8), got {momentum!r}")
    mom = tuple(_number(m, "momentum") for m in momentum)
    if not all(0.0 <= m < 1.0 for m in mom):
        raise ValueError(f"momentum must be two values in [0, 1) (during and after exaggeration), got {momentum!r}")
    return mom[0], mom[1]


def _check_seed(seed) -> int | None:
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
    if not 0 <= seed < 2**63 - MAX_RESTARTS:
        raise ValueError(
            f"seed must be a non-negative int below 2**63 - {MAX_RESTARTS} (run r uses seed + r), got {seed}"
        )
    return int(seed)


def _check_restarts(restarts, n: int) -> int:
    """``restarts`` within :data:`MAX_RESTARTS` and the state memory budget, checked before allocating."""
    restarts = int_at_least(restarts, "restarts", 1)
    if restarts > MAX_RESTARTS:
        raise ValueError(f"restarts must be at most {MAX_RESTARTS}, got {restarts}")
    need = restarts * n * _STATE_BYTES_PER_POINT
    if need > MAX_STATE_BYTES:
        raise ValueError(
            f"restarts={restarts} at n={n} needs about {need / 2**30:.1f} GiB of optimiser state "
            f"(the limit is {MAX_STATE_BYTES / 2**30:.0f} GiB); "
            f"use at most {MAX_STATE_BYTES // (n * _STATE_BYTES_PER_POINT)}"
        )
    return restarts


def _initial_embeddings(init, n: int, restarts: int, seed: int | None, dtype: np.dtype) -> np.ndarray:
    """(restarts, 2, n): ``init`` ((n, 2) for every run or (restarts, n, 2)), else N(0, 1e-4 I) from seed + r."""
    if init is None:
        base = int(np.random.default_rng().integers(2**31)) if seed is None else int(seed)
        Y0 = np.stack([np.random.default_rng(base + r).normal(0.0, INIT_STD, size=(n, 2)) for r in range(restarts)])
    else:
        Y0 = _as_numpy(init, "init").astype(np.float64)
        if Y0.shape == (n, 2):
            Y0 = np.broadcast_to(Y0, (restarts, n, 2))
        elif Y0.shape != (restarts, n, 2):
            raise ValueError(f"init must have shape ({n}, 2) or ({restarts}, {n}, 2), got {Y0.shape}")
        spread = np.ptp(Y0, axis=1).max(axis=1)
        if (spread == 0).any():
            raise ValueError(
                "init puts every point at the same place (e.g. all zeros): the gradient is zero there by "
                "symmetry and the run would stay collapsed; start from small random values such as N(0, 1e-4 I)"
            )
        if np.abs(Y0).max() > _MAX_INIT:
            raise ValueError(f"init must have coordinates within +-{_MAX_INIT:g} (t-SNE embeddings span tens of units)")
    return np.ascontiguousarray(Y0.transpose(0, 2, 1), dtype=dtype)


# ----------------------------------------------------------------------------------------------
# the optimisation loop


def _optimize(
    P,
    *,
    n_iter: int,
    learning_rate,
    early_exaggeration: float,
    exaggeration_iters: int,
    momentum: Sequence[float],
    init,
    seed: int | None,
    restarts: int,
    device,
    every: int,
    dtype,
    engine: str | None = None,
    kl_every: int | None = None,
    first_kl: bool = True,
    check_input: bool = True,
) -> Iterator[tuple[int, np.ndarray, np.ndarray | None, float]]:
    """Yield (iteration, embeddings (runs, 2, n) live view, exact KL per run or None, learning rate) at reported steps.

    Reported steps are every ``every``-th iteration and the last. The KL of the embedding after
    step t is computed in the same pass as the gradient of step t + 1, so reporting it costs one
    logarithm per pair and nothing else; it is computed at the first report (unless ``first_kl`` is
    False), at the first one at least ``kl_every`` steps (default ``every``) after the previous KL (or
    after the start), and at the last; other reports yield None.
    The logarithm makes the pass 2-3 times a force pass (float32: ``kernels.vector_log``; libm's,
    which does not vectorise, made it 10 times), so a display that wants positions 60 times a second
    asks for the KL less often.
    """
    dt = _resolve_dtype(dtype)
    n_iter, every = int_at_least(n_iter, "n_iter", 1), int_at_least(every, "every", 1)
    kl_every = every if kl_every is None else int_at_least(kl_every, "kl_every", 1)
    exaggeration_iters = int_at_least(exaggeration_iters, "exaggeration_iters", 0)
    early_exaggeration = _positive(early_exaggeration, "early_exaggeration")
    mom = _check_momentum(momentum)
    seed = _check_seed(seed)
    if int_at_least(restarts, "restarts", 1) > MAX_RESTARTS:  # before the O(n^2) checks of P
        _check_restarts(restarts, 1)
    P = check_affinities(P, dt) if check_input else _unchecked_affinities(P, dt)
    n = P.shape[0]
    restarts = _check_restarts(restarts, n)
    lr = _resolve_learning_rate(learning_rate, n, early_exaggeration)
    dev = resolve_device(device)
    Y0 = _initial_embeddings(init, n, restarts, seed, dt)
    eng = make_engine(P, Y0, dev, engine)

    def check(t: int, exaggeration: float) -> None:
        _check_divergence(eng, t, n, lr, exaggeration, early_exaggeration)

    t, last_kl = 1, (-kl_every if first_kl else 0)  # -kl_every: the first report has a KL
    while t <= n_iter:
        exaggerating = t <= exaggeration_iters
        if t == exaggeration_iters + 1 and t > 1:
            eng.restart_optimizer()
        ex, m = (early_exaggeration, mom[0]) if exaggerating else (1.0, mom[1])
        if t > 1 and (t - 1) % every == 0:  # the KL of iteration t - 1 comes with the forces of t
            want_kl = t - 1 - last_kl >= kl_every
            kls = eng.forces(ex, want_kl)
            last_kl = t - 1 if want_kl else last_kl
            check(t - 1, ex)
            yield t - 1, eng.embeddings(), kls, lr
            eng.update(m, lr)
            t += 1
            continue
        # plain iterations up to the next report, the end of exaggeration or the end, in one call
        stop = min(((t - 1) // every + 1) * every + 1, n_iter + 1)
        if exaggerating:
            stop = min(stop, exaggeration_iters + 1)
        eng.steps(stop - t, ex, m, lr)
        check(stop - 1, ex)
        t = stop
    kls = eng.forces(1.0, True)
    check(n_iter, 1.0)
    yield n_iter, eng.embeddings(), kls, lr


def _check_divergence(eng, t: int, n: int, lr: float, exaggeration: float, early_exaggeration: float) -> None:
    """Raise :class:`TSNEDivergedError` when a run's embedding is non-finite or has blown up.

    Cheap (O(runs * n)): it reads the normalisers Z of the last force pass and the embeddings. Blown up
    means Z / n < :data:`BLOWN_UP_Z_PER_POINT`: the points are so far apart that the forces vanish and
    the run would end on a poor embedding with no sign of trouble (learning rate 1e5 on 271 tokens
    reached a radius of 1e6 and ended at KL 2.3 instead of 1.8). Z is from the step's positions before
    its update, so a step that overflows is caught at the next check.
    """
    Z = eng.normalisers()
    Y = eng.embeddings()
    finite = bool(np.isfinite(Z).all() and np.isfinite(Y).all())
    extent = float(np.abs(Y).max()) if finite else np.inf
    if finite and (Z >= BLOWN_UP_Z_PER_POINT * n).all() and extent <= _MAX_EXTENT:
        return
    if not finite:
        what = "the embedding became non-finite (overflow)"
    elif extent > _MAX_EXTENT:
        what = f"the embedding reached coordinates of {extent:.2g}, far past any t-SNE layout"
    else:
        what = (
            f"the embedding blew up: mean kernel mass per point Z / n = {Z.min() / n:.2g} < {BLOWN_UP_Z_PER_POINT:g}, "
            "so neighbours are over 100 units apart and the forces have vanished"
        )
    hints = []
    auto = auto_learning_rate(n, early_exaggeration)
    if lr > auto or exaggeration <= 1.0:
        hints.append(f"a smaller learning_rate (given {lr:g}; 'auto' would be {auto:g})")
    if exaggeration > 1.0:
        hints.append(f"a smaller early_exaggeration (given {early_exaggeration:g}; 12 is usual)")
    hint = "use " + " or ".join(hints)
    raise TSNEDivergedError(f"t-SNE diverged by iteration {t}: {what}; {hint}")


def _frame(iteration: int, Y: np.ndarray, kls: np.ndarray | None, kl_iteration: int | None) -> Frame:
    best = 0 if kls is None else int(np.argmin(kls))
    embedding = np.ascontiguousarray(Y[best].T, dtype=np.float32).copy()
    if kls is None:  # before the first KL (first_kl=False)
        return Frame(iteration, embedding, None, None, best, None)
    return Frame(iteration, embedding, float(kls[best]), np.array(kls, dtype=np.float64), best, kl_iteration)


def tsne_frames(
    P,
    *,
    n_iter: int = 1000,
    learning_rate: float | str = "auto",
    early_exaggeration: float = 12.0,
    exaggeration_iters: int = 250,
    momentum: tuple[float, float] = (0.5, 0.8),
    init=None,
    seed: int | None = None,
    restarts: int = 1,
    device: str | torch.device | None = None,
    every: int = 1,
    dtype="float32",
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
    P,
    *,
    n_iter: int = 1000,
    learning_rate: float | str = "auto",
    early_exaggeration: float = 12.0,
    exaggeration_iters: int = 250,
    momentum: tuple[float, float] = (0.5, 0.8),
    init=None,
    seed: int | None = None,
    restarts: int = 1,
    device: str | torch.device | None = None,
    every: int = 50,
    dtype="float32",
) -> TSNEResult:
    """Exact t-SNE of the affinities P (n x n, symmetric, zero diagonal, sum 1); best of ``restarts`` runs.

    Parameters
    ----------
    P : the joint probabilities, e.g. from ``attention_affinities`` or ``gaussian_affinities``.
    n_iter : gradient steps (thesis: 1000).
    learning_rate : a positive number, or ``"auto"`` = max(n / early_exaggeration, 5), chosen by
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


def _one_embedding(P64: np.ndarray, Y: np.ndarray, dt: np.dtype, exact_scale: bool):
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
    if largest > (_MAX_EXTENT if dt == np.float32 else 1e100):  # q_ij could underflow beyond
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


def gradient(P, Y) -> tuple[float, np.ndarray]:
    """Exact KL(P || Q(Y)) and its gradient (eq. 3) for one embedding Y (n, 2).

    Computed in float64 unless both P and Y are float32.
    """
    P_in, Y_in = _as_numpy(P, "P"), _as_numpy(Y, "Y")
    P64 = check_affinities(P_in)
    Yc = _check_embedding(Y_in, P64.shape[0])
    dt = np.dtype(np.float32) if (P_in.dtype == np.float32 and Yc.dtype == np.float32) else np.dtype(np.float64)
    kl, eng, c = _one_embedding(P64, Yc.astype(np.float64), dt, exact_scale=True)
    return kl, (eng.gradient()[0].T * c).astype(eng.Y.dtype)


def kl_divergence(P, Y) -> float:
    """Exact KL(P || Q(Y)) = sum p_ij log(p_ij / q_ij) of an embedding Y (n, 2), in float64.

    Finite and non-negative for any finite Y (huge coordinates are rescaled without changing Q).
    """
    P64 = check_affinities(P)
    Yc = _check_embedding(Y, P64.shape[0]).astype(np.float64)
    return _one_embedding(P64, Yc, np.dtype(np.float64), exact_scale=False)[0]


def warmup() -> None:
    """Compile (or load from numba's cache) every CPU kernel, float32 and float64, on a tiny problem: the
    t-SNE passes, and the passes that build and check P and rank a head's partners.

    The widget calls this in a background thread at start so that the first head click does not
    wait for compilation (seconds the first time, well under a second from the cache).
    """
    from ..affinity import matrix_kernels
    from . import kernels

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
        kernels.kl_rows(P, Y, one, np.ones(1, dtype), dtype(_KL_BIG_RATIO), kl)  # in shares: kl_part
        kernels.kl_rows_serial(P, Y, one, np.ones(1, dtype), dtype(_KL_BIG_RATIO), kl)
        kernels.steps_serial(P, Y, one, one, att, rep, z, np.ones(1), gains + 1, step, 0.5, 1.0, MIN_GAIN, 0, 2)
        kernels._sum_rows(z, np.ones(1))  # the pooled passes (the serial ones are all inside steps_serial)
        kernels.update(Y, att, rep, z.sum(axis=1, dtype=np.float64), gains + 1, step, 0.5, 1.0, MIN_GAIN)


# ----------------------------------------------------------------------------------------------
# sparse P (issue 21): a scipy.sparse P runs the interpolation engine of .sparse_engine (O(nnz + n) an
# iteration), any other P the exact engine above; kl_divergence of a sparse P is exact in O(n) memory.
from .sparse_engine import dispatch_kl, dispatch_optimize  # noqa: E402  (it reuses the helpers above)

_optimize = dispatch_optimize(_optimize)
kl_divergence = dispatch_kl(kl_divergence)
