"""The optimisation loop of t-SNE, shared by the exact engines (:mod:`.engines`) and the sparse one
(:mod:`.sparse_engine`): early exaggeration, the momentum switch, the reported steps with their KLs, and the
divergence checks. :mod:`.tsne` turns its yields into frames and results.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from .._checks import flag, int_at_least
from .._device import resolve_device
from ..errors import TSNEDivergedError
from .engines import MAX_STEP_NORM, make_engine
from .options import (
    MAX_RESTARTS,
    auto_learning_rate,
    check_affinities,
    check_momentum,
    check_restarts,
    check_seed,
    initial_embeddings,
    positive,
    resolve_dtype,
    resolve_learning_rate,
    unchecked_affinities,
)

__all__ = [
    "BLOWN_UP_Z_PER_POINT",
    "MAX_CUT_SHARE",
    "MAX_EXTENT",
    "Schedule",
    "check_divergence",
    "check_schedule",
    "optimize",
    "run",
]

#: Divergence: the mean kernel mass per point, Z / n = mean_i sum_j 1 / (1 + |y_i - y_j|^2), below
#: which the embedding has blown up. Converged embeddings keep Z / n of order 0.01 to 100 at every n
#: (a point's neighbours lie within a few units); below 1e-4 the typical neighbour is more than 100
#: units away, where the forces (~ 1 / d^3) have vanished and the run cannot come back. Measured on
#: attention and Gaussian P (n = 271 and 300): learning rates up to 300 stayed above 6e-3, 1e4 and 1e5
#: fell to 5e-5 and 2e-6 with final KLs 2 to 150 times worse.
BLOWN_UP_Z_PER_POINT = 1e-4
#: Coordinates beyond this are 10 orders of magnitude past any t-SNE layout, and float32's q_ij of far
#: pairs underflows there (KL inf): such a run has diverged.
MAX_EXTENT = 1e12
#: Steps are cut to MAX_STEP_NORM, so a far too large step no longer blows the embedding up: it shakes every point
#: by that length each iteration instead. A run whose share of cut steps at a check is above this has diverged.
#: Measured (share at checks every 10 iterations, 1000 iterations): 4 MiniLM heads at 271 tokens, learning rate
#: "auto" at most 0.011, 10 x "auto" 0.58, 1000 0.90 (KL 1.1-1.5x); 1e4 and 1e5 0.996-1 from iteration 10 (KL
#: 1.2-8x); a sparse head P at 8192 points, "auto" 0.010 and 10 x "auto" 0.12.
MAX_CUT_SHARE = 0.95

#: What :func:`optimize` yields at a reported step: (iteration, embeddings (runs, 2, n) live view, exact KL per
#: run or None, learning rate).
Report = tuple[int, np.ndarray, "np.ndarray | None", float]


class Engine(Protocol):
    """What the loop asks of an engine (:class:`.engines.NumbaEngine`, :class:`.engines.TorchEngine`,
    :class:`.sparse_engine.SparseEngine`)."""

    def forces(self, exaggeration: float, want_kl: bool, final: bool = False) -> np.ndarray | None: ...
    def update(self, momentum: float, learning_rate: float) -> None: ...
    def steps(self, count: int, exaggeration: float, momentum: float, learning_rate: float) -> None: ...
    def restart_optimizer(self) -> None: ...
    def embeddings(self) -> np.ndarray: ...
    def normalisers(self) -> np.ndarray: ...
    def last_steps(self) -> np.ndarray: ...


@dataclass(frozen=True)
class Schedule:
    """The checked options of one optimisation, whatever the engine."""

    dtype: np.dtype
    n_iter: int
    every: int
    kl_every: int
    first_kl: bool
    exaggeration_iters: int
    early_exaggeration: float
    momentum: tuple[float, float]
    seed: int | None


def check_schedule(
    *,
    dtype: Any,
    n_iter: int,
    every: int,
    exaggeration_iters: int,
    early_exaggeration: float,
    momentum: Sequence[float],
    seed: int | None,
    restarts: int,
    kl_every: int | None = None,
    first_kl: bool = True,
) -> Schedule:
    """The options as a :class:`Schedule`, or the error naming the first bad one; ``restarts`` is only
    checked against :data:`.options.MAX_RESTARTS` here (before the O(n^2) checks of P), against memory once
    n is known (:func:`.options.check_restarts`)."""
    dt = resolve_dtype(dtype)
    n_iter, every = int_at_least(n_iter, "n_iter", 1), int_at_least(every, "every", 1)
    kl_every = every if kl_every is None else int_at_least(kl_every, "kl_every", 1)
    exaggeration_iters = int_at_least(exaggeration_iters, "exaggeration_iters", 0)
    early_exaggeration = positive(early_exaggeration, "early_exaggeration")
    mom = check_momentum(momentum)
    seed = check_seed(seed)
    if int_at_least(restarts, "restarts", 1) > MAX_RESTARTS:  # before the O(n^2) checks of P
        check_restarts(restarts, 1)
    first_kl = flag(first_kl, "first_kl")  # "no" is truthy: only a bool says which
    return Schedule(dt, n_iter, every, kl_every, first_kl, exaggeration_iters, early_exaggeration, mom, seed)


def optimize(
    P: Any,
    *,
    n_iter: int,
    learning_rate: Any,
    early_exaggeration: float,
    exaggeration_iters: int,
    momentum: Sequence[float],
    init: Any,
    seed: int | None,
    restarts: int,
    device: Any,
    every: int,
    dtype: Any,
    engine: str | None = None,
    kl_every: int | None = None,
    first_kl: bool = True,
    check_input: bool = True,
) -> Iterator[Report]:
    """Yield (iteration, embeddings (runs, 2, n) live view, exact KL per run or None, learning rate) at reported steps.

    Reported steps are every ``every``-th iteration and the last. The KL of the embedding after
    step t is computed in the same pass as the gradient of step t + 1, so reporting it costs one
    logarithm per pair and nothing else; it is computed at the first report (unless ``first_kl`` is
    False), at the first one at least ``kl_every`` steps (default ``every``) after the previous KL (or
    after the start), and at the last; other reports yield None.
    The logarithm makes the pass 2-3 times a force pass (float32: ``kl_kernels.vector_log``; libm's,
    which does not vectorise, made it 10 times), so a display that wants positions 60 times a second
    asks for the KL less often.
    """
    s = check_schedule(
        dtype=dtype,
        n_iter=n_iter,
        every=every,
        kl_every=kl_every,
        first_kl=first_kl,
        exaggeration_iters=exaggeration_iters,
        early_exaggeration=early_exaggeration,
        momentum=momentum,
        seed=seed,
        restarts=restarts,
    )
    P = check_affinities(P, s.dtype) if flag(check_input, "check_input") else unchecked_affinities(P, s.dtype)
    n = P.shape[0]
    restarts = check_restarts(restarts, n)
    lr = resolve_learning_rate(learning_rate, n, s.early_exaggeration)
    dev = resolve_device(device)
    Y0 = initial_embeddings(init, n, restarts, s.seed, s.dtype)
    yield from run(make_engine(P, Y0, dev, engine), s, n, lr)


def run(eng: Engine, s: Schedule, n: int, lr: float) -> Iterator[Report]:
    """The loop of :func:`optimize` on a ready engine of n points."""

    def check(t: int, exaggeration: float) -> None:
        check_divergence(eng, t, n, lr, exaggeration, s.early_exaggeration)

    t, last_kl = 1, (-s.kl_every if s.first_kl else 0)  # -kl_every: the first report has a KL
    while t <= s.n_iter:
        exaggerating = t <= s.exaggeration_iters
        if t == s.exaggeration_iters + 1 and t > 1:
            eng.restart_optimizer()
        ex, m = (s.early_exaggeration, s.momentum[0]) if exaggerating else (1.0, s.momentum[1])
        if t > 1 and (t - 1) % s.every == 0:  # the KL of iteration t - 1 comes with the forces of t
            want_kl = t - 1 - last_kl >= s.kl_every
            kls = eng.forces(ex, want_kl)
            last_kl = t - 1 if want_kl else last_kl
            check(t - 1, ex)
            yield t - 1, eng.embeddings(), kls, lr
            eng.update(m, lr)
            t += 1
            continue
        # plain iterations up to the next report, the end of exaggeration or the end, in one call
        stop = min(((t - 1) // s.every + 1) * s.every + 1, s.n_iter + 1)
        if exaggerating:
            stop = min(stop, s.exaggeration_iters + 1)
        eng.steps(stop - t, ex, m, lr)
        check(stop - 1, ex)
        t = stop
    kls = eng.forces(1.0, True, final=True)  # the result's KL: exact on every engine
    check(s.n_iter, 1.0)
    yield s.n_iter, eng.embeddings(), kls, lr


def cut_share(steps: np.ndarray) -> float:
    """The largest share, over runs, of points whose last step (``steps``: (runs, 2, n)) was cut to MAX_STEP_NORM."""
    norms = np.hypot(steps[:, 0].astype(np.float64), steps[:, 1])
    return float((norms >= MAX_STEP_NORM * (1.0 - 1e-4)).mean(axis=1).max())


def check_divergence(eng: Engine, t: int, n: int, lr: float, exaggeration: float, early_exaggeration: float) -> None:
    """Raise :class:`TSNEDivergedError` when a run's embedding is non-finite, has blown up or is shaken by steps
    cut to their longest (:data:`MAX_CUT_SHARE`).

    Cheap (O(runs * n)): it reads the normalisers Z of the last force pass, the embeddings and steps. Blown up
    means Z / n < :data:`BLOWN_UP_Z_PER_POINT`: the points are so far apart that the forces vanish and
    the run would end on a poor embedding with no sign of trouble (learning rate 1e5 on 271 tokens
    reached a radius of 1e6 and ended at KL 2.3 instead of 1.8). Z is from the step's positions before
    its update, so a step that overflows is caught at the next check.
    """
    Z = eng.normalisers()
    Y = eng.embeddings()
    finite = bool(np.isfinite(Z).all() and np.isfinite(Y).all())
    extent = float(np.abs(Y).max()) if finite else np.inf
    cut = cut_share(eng.last_steps()) if finite else 0.0
    if finite and (Z >= BLOWN_UP_Z_PER_POINT * n).all() and extent <= MAX_EXTENT and cut <= MAX_CUT_SHARE:
        return
    if not finite:
        what = "the embedding became non-finite (overflow)"
    elif cut > MAX_CUT_SHARE:
        what = f"{cut:.0%} of the points took the longest step allowed ({MAX_STEP_NORM:g} units) at once"
    elif extent > MAX_EXTENT:
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
