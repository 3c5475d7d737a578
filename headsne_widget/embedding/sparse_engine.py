"""t-SNE of a sparse P in O(nnz + n) per iteration: exact attraction over P's non-zeros, interpolated repulsion.

:func:`~headsne_widget.tsne`, :func:`~headsne_widget.tsne_frames` and :func:`~headsne_widget.kl_divergence`
take a ``scipy.sparse`` P (issue 21: long texts) and come here (:func:`dispatch_optimize`,
:func:`dispatch_kl`); a dense P keeps the exact engine. The optimisation is the same as the exact one's
(the same loop, schedule, gains, momentum, restarts batched along a leading axis, divergence checks, frames
streamed from inside ``next()`` so that closing the generator stops the work), with the gradient

    dC/dy_i = 4 (sum_j p_ij w_ij (y_i - y_j) - sum_j w_ij^2 (y_i - y_j) / Z)

split as in FIt-SNE / openTSNE (Linderman et al. 2019): the attraction is exact over the non-zeros of P
(:func:`.interpolation_kernels.attraction_part`, rows in shares of equal non-zeros on the worker threads),
the repulsion and Z are interpolated on a grid (:class:`.interpolation.Repulsion`). A force pass is one
dispatch (:func:`.._parallel.shares`): the grid's far field (a serial chain: spread, FFT, gather) is the first
piece, so that it runs on one thread while the others take the attraction's rows and the near field's pieces.
From :data:`REORDER_MIN_N` points the engine keeps P's points in reverse Cuthill-McKee order (the attraction's
reads of y_j then hit the cache) unless P already is a narrow band (:data:`BANDED_MAX`) or its rows are broad
(:data:`REORDER_MAX_ROW`), and hands out embeddings and gradients in the points' own order.

The KL reported with the frames is sum_{p_ij > 0} p_ij log(p_ij / q_ij) over P's non-zeros (with sum p = 1
the pairs with p_ij = 0 add nothing), with Z summed exactly over all pairs (:func:`exact_z`, O(n^2) time in
O(n) memory) up to :data:`EXACT_KL_MAX_N` points and at the last step at every n, so the result's KL and its
choice of the best restart are exact (issue 32.9: the interpolated Z had made them 18 % too high at n = 4,
2.6 % at 8, 0.09 % at 200, and picked another restart). Above that size the KLs between use the interpolated
Z of the gradient (off by 1.4e-5 to 5.6e-5 of the KL on converged embeddings of 4096 and 1000 points): an exact Z
at every report would add an O(n^2) pass (about 2 s at 65536 points on 2 cores) to every ``kl_every`` iterations
of O(nnz + n) each.

Memory: P's non-zeros (8 bytes each in float32: 12 MiB for 64 keys a row at 16384 tokens, against 1 GiB
dense), plus about 100 bytes per point and run, plus the grid (a few MiB).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar, cast

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import reverse_cuthill_mckee

from .._checks import flag, real_dtype
from .._parallel import shares
from ..affinity.sparse import SparseAffinities, check_sparse_affinities, in_row_shares, permuted, row_shares
from . import interpolation_kernels as ik
from .engines import ArrayBuffers
from .interpolation import NEAR_PIECES, Repulsion
from .options import check_embedding, check_restarts, initial_embeddings, resolve_learning_rate
from .schedule import Report, check_schedule, run

__all__ = [
    "BANDED_MAX",
    "EXACT_KL_MAX_N",
    "REORDER_MAX_ROW",
    "REORDER_MIN_N",
    "SparseEngine",
    "dispatch_kl",
    "dispatch_optimize",
    "exact_kl",
    "exact_z",
    "optimize",
]

_KL = TypeVar("_KL", bound=Callable[[Any, Any], float])

#: shares of the work handed to the worker threads (each a range of rows of equal work)
SHARES = 16
#: points up to which every KL's Z is summed exactly (an O(n^2) pass: a few ms at 2048 points); above, only the
#: last step's. Measured at load 8 on 2 cores: the pass took 150 ms at 8192 points, 15 % of a run of 300 iterations
#: with a KL every 50, where the interpolated Z moved the KL by 1e-5 to 6e-5 of itself
EXACT_KL_MAX_N = 2048
#: points from which the engine works on P's points in reverse Cuthill-McKee order (:func:`_reordered`)
REORDER_MIN_N = 4096
#: P's bandwidth (the farthest any point's non-zero lies from it, in places) up to which its own order is kept:
#: the attraction then reads y_j from a window of 2 x 4096 points (128 KiB of float64 coordinates, within any
#: core's L2 cache), which no reordering shortens by much; a windowed head's P (window 1024) is such a band, and
#: its reordering cost 0.3-0.5 s of a head change at 65536 tokens
BANDED_MAX = 4096
#: P's mean non-zeros a row above which its own order is kept: a row then reads so many y_j that no order gives
#: the attraction more cache hits. A causal tiny Llama's head at 65536 tokens, its rows capped (2 cores, forces
#: a pass, 3 runs each way, interleaved): 1013 a row 114-119 ms reordered against 112-119 ms, 4824 a row 518-597
#: against 478-520 ms, while the reordering cost 0.5-0.6 s and 2.3-2.6 s of the head change's first frame and a
#: second copy of P (2.5 GB at 316 M non-zeros); at 255 a row a tie (37-39 against 33-38 ms, 0.2 s); the
#: synthetic top-64 head's P, 128 a row, gains (21.9-26.0 against 20.4-29.4 ms, 0.14 s). The reordering is one
#: scipy thread, the forces all of them: on more cores its cost weighs more, so the limit holds there too
REORDER_MAX_ROW = 512


def _reordered(S: SparseAffinities) -> tuple[SparseAffinities, np.ndarray | None]:
    """P with its points in reverse Cuthill-McKee order (``scipy.sparse.csgraph``), and that order (``order[k]``:
    the point at place k), from :data:`REORDER_MIN_N` points; else P itself and None. Points that share
    non-zeros get nearby places, so that the attraction's reads of y_j hit the cache: at 65536 points (8.4 M
    non-zeros, a synthetic head whose rows keep keys all over the text) the pass took 30 ms against 52 ms in
    the head's own order on one thread (not where a P's rows hold more than :data:`REORDER_MAX_ROW` non-zeros on
    average). The rows are moved by :func:`.affinity.sparse.permuted` (a row's entries keep their sequence: the
    attraction reads them in any order): 0.3-0.8 s for 59 M non-zeros, where scipy's ``P[order][:, order]`` and
    its sort took 3.7-5.2 s of a head change's wait."""
    if S.n < REORDER_MIN_N or S.indices.shape[0] > REORDER_MAX_ROW * S.n or _bandwidth(S) <= BANDED_MAX:
        return S, None
    P = sp.csr_matrix((S.data, S.indices, S.indptr), shape=(S.n, S.n))
    order = reverse_cuthill_mckee(P, symmetric_mode=True).astype(np.int64)
    return permuted(S, order), order


def _bandwidth(S: SparseAffinities) -> int:
    """The largest |i - j| over P's non-zeros p_ij (0 for an empty P); a row's entries in any order."""
    filled = np.flatnonzero(np.diff(S.indptr))
    if filled.size == 0:
        return 0
    starts = S.indptr[filled]
    low, high = np.minimum.reduceat(S.indices, starts), np.maximum.reduceat(S.indices, starts)
    return int(max((filled - low).max(), (high - filled).max()))


class SparseEngine(ArrayBuffers):
    """The operations of :class:`.engines.NumbaEngine` for a sparse P: forces (with the KL if asked), update,
    plain steps; one run's buffers allocated once."""

    def __init__(self, S: SparseAffinities, Y0: np.ndarray, **grid: Any):
        runs, _, n = Y0.shape
        S, self.order = _reordered(S)
        # with the exact engine's update: the same optimiser, bit for bit; Y in the order of S
        super().__init__(Y0 if self.order is None else np.ascontiguousarray(Y0[:, :, self.order]))
        self.place = None if self.order is None else np.argsort(self.order)
        self.S = S
        self.data = S.data.astype(Y0.dtype, copy=False)
        self.z = np.empty((runs, n))
        self.xy = np.empty((runs, n, 2), Y0.dtype)  # Y with each point's coordinates side by side (attraction_part)
        self.kl_rows = np.empty((runs, n))
        self.grids = [Repulsion(n, **grid) for _ in range(runs)]
        # ranges of rows with equal non-zeros (a row of a token every query attends to can hold n of them)
        self._rows = row_shares(S.indptr + np.arange(n + 1), SHARES)

    def forces(self, exaggeration: float, want_kl: bool, final: bool = False) -> np.ndarray | None:
        """Attraction (exact), repulsion and Z (interpolated) at the current Y; the KL per run if asked, with the
        exact Z when ``final`` or n <= :data:`EXACT_KL_MAX_N` (see the module doc)."""
        S, Y = self.S, self.Y
        np.copyto(self.xy, Y.transpose(0, 2, 1))
        pieces = self._pieces(Y.dtype.type(exaggeration))
        shares(len(pieces), lambda k: pieces[k]())
        for r, grid in enumerate(self.grids):
            self.Z[r] = grid.finish()
        if not want_kl:
            return None
        exact = final or S.n <= EXACT_KL_MAX_N
        log_z = np.log([exact_z(Y[r, 0], Y[r, 1]) for r in range(Y.shape[0])] if exact else self.Z)
        in_row_shares(
            self._rows, lambda lo, hi: ik.kl_part(S.indptr, S.indices, self.data, Y, log_z, self.kl_rows, lo, hi)
        )
        return self.kl_rows.sum(axis=1)

    def _pieces(self, ex: np.floating) -> list[Callable[[], None]]:
        """One force pass as pieces for one dispatch: each grid's plan and far field (a serial chain: plan, spread,
        FFT, gather) first, so that it runs on one thread while the others take the attraction's rows, then the
        near field's pieces (up to :data:`.interpolation.NEAR_PIECES` a grid), which wait for their grid's plan.

        The plan ran before the dispatch on the calling thread alone (2-2.5 ms of a pass of some 30 on 2 threads,
        65536 points); here the attraction's rows, which do not need it, go on beside it."""
        S, Y, rows, xy, one = self.S, self.Y, self._rows, self.xy, self.Y.dtype.type(1.0)
        planned = [threading.Event() for _ in self.grids]
        counts = [0] * len(self.grids)

        def far(r: int) -> None:
            try:
                counts[r] = self.grids[r].begin(Y[r, 0], Y[r, 1], self.repulsion[r], self.z[r])
            finally:
                planned[r].set()  # (a failed plan leaves no near pieces; the dispatch raises its error)
            self.grids[r].far()

        def near(r: int, k: int) -> None:
            planned[r].wait()
            if k < counts[r]:
                self.grids[r].near_piece(k)

        def attraction(k: int) -> None:
            lo, hi = int(rows[k]), int(rows[k + 1])
            ik.attraction_part(S.indptr, S.indices, self.data, xy, ex, one, self.attraction, lo, hi)

        pieces: list[Callable[[], None]] = [functools.partial(far, r) for r in range(len(self.grids))]
        pieces += [functools.partial(attraction, k) for k in range(len(rows) - 1)]
        pieces += [functools.partial(near, r, k) for r in range(len(self.grids)) for k in range(NEAR_PIECES)]
        return pieces

    def _original(self, A: np.ndarray) -> np.ndarray:
        """(runs, 2, n) in the points' own order (a copy where the engine reordered them)."""
        return A if self.place is None else A[:, :, self.place]

    def embeddings(self) -> np.ndarray:
        return self._original(self.Y)

    def gradient(self) -> np.ndarray:
        return self._original(super().gradient())

    def steps(self, count: int, exaggeration: float, momentum: float, learning_rate: float) -> None:
        for _ in range(count):
            self.forces(exaggeration, False)
            self.update(momentum, learning_rate)


def _check_device(device: Any) -> None:
    """A sparse P runs on the CPU: ``None`` and ``"cpu"`` are fine, another device is named."""
    if device is None:
        return
    import torch

    if torch.device(device).type != "cpu":
        raise ValueError(f"a sparse P runs on the CPU (interpolated repulsion, compiled kernels), not on {device}")


def optimize(
    P: Any,
    *,
    learning_rate: Any,
    init: Any,
    restarts: int,
    device: Any,
    engine: str | None = None,
    check_input: bool = True,
    grid: dict[str, Any] | None = None,
    **schedule: Any,
) -> Iterator[Report]:
    """:func:`.schedule.optimize` for a sparse P: the same arguments (``schedule``: the keywords of
    :func:`.schedule.check_schedule`), checks, loop and yields, on a :class:`SparseEngine` (``grid``:
    keywords of :class:`.interpolation.Repulsion`)."""
    s = check_schedule(restarts=restarts, **schedule)
    if engine not in (None, "numba", "sparse"):
        raise ValueError(f"a sparse P runs on the sparse engine, not {engine!r}")
    _check_device(device)
    S = _checked(P, s.dtype, flag(check_input, "check_input"))
    n = S.n
    restarts = check_restarts(restarts, n)
    lr = resolve_learning_rate(learning_rate, n, s.early_exaggeration)
    Y0 = initial_embeddings(init, n, restarts, s.seed, s.dtype)
    yield from run(SparseEngine(S, Y0, **(grid or {})), s, n, lr)


def _checked(P: Any, dtype: Any, check: bool = True) -> SparseAffinities:
    """:func:`.affinity.sparse.check_sparse_affinities` of a P with real entries: a complex one is refused as a
    dense one is (scipy would drop the imaginary parts with a warning only)."""
    real_dtype(P.dtype, "P")
    return check_sparse_affinities(P, dtype, check)


def exact_kl(P: Any, Y: Any) -> float:
    """Exact KL(P || Q(Y)) for a sparse P and an embedding Y (n, 2), in float64: sum_{p > 0} p log(p / q) with
    Z = sum_{i != j} 1 / (1 + |y_i - y_j|^2) summed over all pairs (O(n^2) time in shares on the worker
    threads, O(n) memory: about 2 s at 65536 points on 2 cores)."""
    S = _checked(P, np.float64)
    Yc = check_embedding(Y, S.n).astype(np.float64)
    Yc = Yc - Yc.mean(axis=0)
    largest = float(np.abs(Yc).max())
    if largest > 1e100:  # d^2 would overflow; t-SNE layouts span tens of units
        raise ValueError(f"Y has coordinates up to {largest:.3g}: too large for the KL of a sparse P")
    x, y = np.ascontiguousarray(Yc[:, 0]), np.ascontiguousarray(Yc[:, 1])
    n = S.n
    Z = exact_z(x, y)
    kl = np.empty((1, n))
    ik.kl_part(S.indptr, S.indices, S.data, np.stack([x, y])[None], np.array([np.log(Z)]), kl, 0, n)
    value = float(kl.sum())
    if not np.isfinite(value):
        raise ValueError("KL(P || Q(Y)) is not finite for this Y")
    return value


def exact_z(x: np.ndarray, y: np.ndarray) -> float:
    """Z = sum_{i != j} 1 / (1 + |y_i - y_j|^2) of the points (x, y), summed in float64 over all pairs: O(n^2)
    time in shares of equal pairs on the worker threads, O(n) memory."""
    x, y = np.ascontiguousarray(x, dtype=np.float64), np.ascontiguousarray(y, dtype=np.float64)
    n = x.shape[0]
    z = np.empty(n)
    pairs = np.concatenate([[0], np.cumsum(np.arange(n - 1, -1, -1, dtype=np.float64))])
    in_row_shares(row_shares(pairs, 4 * SHARES), lambda lo, hi: ik.exact_z_part(x, y, z, lo, hi))
    return 2.0 * float(z.sum())


def dispatch_optimize(dense: Callable[..., Iterator]) -> Callable[..., Iterator]:
    """:func:`.schedule.optimize` that sends a ``scipy.sparse`` P to :func:`optimize` and any other P to ``dense``."""

    @functools.wraps(dense)
    def _optimize(P: Any, **options: Any) -> Iterator:
        return optimize(P, **options) if sp.issparse(P) else dense(P, **options)

    return _optimize


def dispatch_kl(dense: _KL) -> _KL:
    """``kl_divergence`` that computes :func:`exact_kl` for a ``scipy.sparse`` P and ``dense(P, Y)`` otherwise."""

    @functools.wraps(dense)
    def kl_divergence(P: Any, Y: Any) -> float:
        return exact_kl(P, Y) if sp.issparse(P) else dense(P, Y)

    return cast(_KL, kl_divergence)
