"""The engines of the exact t-SNE: the same operations (forces with an optional exact KL, the update, plain
steps) compiled on the CPU (:mod:`.kernels`, :mod:`.kl_kernels`) or in torch on any device; :mod:`.schedule`
runs the loop.

Each engine owns one run's buffers, allocated once: embeddings (runs, 2, n), forces, gains and steps, about
64 bytes per point and run, and P in the working dtype (the compiled engine uses a float32, symmetric P in
place); the torch engine adds three (runs, n, n) buffers, chunked over runs to stay near 1 GiB.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from .kernel_common import KL_BIG_RATIO, MAX_STEP_NORM, MIN_GAIN

__all__ = ["KL_BIG_RATIO", "MAX_STEP_NORM", "MIN_GAIN", "ArrayBuffers", "NumbaEngine", "TorchEngine", "make_engine"]


class ArrayBuffers:
    """The numpy buffers of a CPU engine (:class:`NumbaEngine`, :class:`.sparse_engine.SparseEngine`), allocated
    once per run: embeddings Y (runs, 2, n), forces, steps and gains, Z per run; and the engine methods that
    only read or reset them."""

    def __init__(self, Y0: np.ndarray):
        from . import kernels

        self._update = kernels.update
        self.Y = Y0.copy()
        self.attraction = np.empty_like(self.Y)
        self.repulsion = np.empty_like(self.Y)
        self.step = np.zeros_like(self.Y)
        self.gains = np.ones_like(self.Y)
        self.Z = np.empty(self.Y.shape[0], dtype=np.float64)

    def normalisers(self) -> np.ndarray:
        """Z per run from the last force pass (float64)."""
        return self.Z

    def gradient(self) -> np.ndarray:
        return 4.0 * (self.attraction - self.repulsion / self.Z[:, None, None].astype(self.Y.dtype))

    def last_steps(self) -> np.ndarray:
        """The steps of the last update (runs, 2, n), each point's cut to MAX_STEP_NORM."""
        return self.step

    def restart_optimizer(self) -> None:
        """Gains back to 1 and no momentum, when exaggeration ends."""
        self.gains.fill(1.0)
        self.step.fill(0.0)

    def update(self, momentum: float, learning_rate: float) -> None:
        """One step of the optimiser (:func:`.kernels.update`) from the forces of the last pass."""
        self._update(
            self.Y, self.attraction, self.repulsion, self.Z, self.gains, self.step, momentum, learning_rate, MIN_GAIN
        )

    def embeddings(self) -> np.ndarray:
        """(runs, 2, n) view of the current embeddings (copy before handing out)."""
        return self.Y


class NumbaEngine(ArrayBuffers):
    """Fused CPU kernels; buffers allocated once per run.

    Serial or in shares: on one thread (:func:`.._parallel.threads`, one core or the cores kept free by
    :func:`.._parallel.set_spare_cores`) or below ``kernels.POOL_MIN_PAIRS`` pairs, every pass is one compiled
    call in this thread (:func:`.kernels.steps_serial`). Otherwise the first plain iterations (:meth:`steps`) are
    timed one at a time, serial and with each pass in shares of the rows on the worker threads
    (:func:`.kernels.forces`) in turn, :data:`PROBE_ITERS` each, and the run goes on with the faster:
    what pays depends on the machine's cores, caches and load, not on the size alone (on 2 cores the shares
    lost below about 512 points and won from about 1024; a pass in shares costs some 30 us of dispatch). Both
    give the same bits (the rows are independent), so the choice changes the speed only. The load a run meets
    changes while it runs (a browser drawing, another kernel), so the choice is measured again after every
    :data:`RECHECK_ITERS` plain iterations.
    """

    #: iterations timed each way before the choice (each way's median counts)
    PROBE_ITERS = 5
    #: plain iterations between two measurements (10 of them timed: at most 2 % of a run's iterations go the
    #: slower way, where one way is twice as slow)
    RECHECK_ITERS = 250

    def __init__(self, P: np.ndarray, Y0: np.ndarray, one: float = 1.0):
        from .. import _parallel
        from . import kernels, kl_kernels

        runs, _, n = Y0.shape
        self._kernels, self._kl = kernels, kl_kernels
        # None: not measured yet (serial until then); False: serial; True: each pass in shares
        self.pooled: bool | None = None
        self._seconds: dict[bool, list[float]] = {False: [], True: []}  # the iterations timed each way
        self._started = False  # the first iteration in shares (untimed) is done
        self._since = 0  # plain iterations since the last choice
        # one thread or a small P: serial for good, nothing measured
        self._fixed = runs * n * n < kernels.POOL_MIN_PAIRS or _parallel.threads() < 2
        if self._fixed:
            self.pooled = False
        dtype = Y0.dtype
        super().__init__(Y0)
        self.P = np.ascontiguousarray(P, dtype=dtype)
        self.one = dtype.type(one)  # the 1 of 1 / (1 + d^2); see _one_embedding
        self.z = np.empty(self.Y.shape[::2], dtype=dtype)
        self.kl_rows = np.empty_like(self.z)

    def forces(self, exaggeration: float, want_kl: bool, final: bool = False) -> np.ndarray | None:
        """Compute attraction/repulsion/Z at the current Y; return the exact KL(P || Q) per run if asked (always
        exact: ``final`` matters to the sparse engine only)."""
        dt = self.Y.dtype.type
        if self.pooled:
            self._kernels.forces(self.P, self.Y, dt(exaggeration), self.one, self.attraction, self.repulsion, self.z)
            self._kernels._sum_rows(self.z, self.Z)
        else:
            self._serial(0, 1, dt(exaggeration), 0.0, 0.0)  # half-step 0: forces and Z
        if not want_kl:
            return None
        inv_z = (1.0 / self.Z).astype(self.Y.dtype)
        kl_rows = self._kl.kl_rows if self.pooled else self._kl.kl_rows_serial
        kl_rows(self.P, self.Y, self.one, inv_z, dt(KL_BIG_RATIO), self.kl_rows)
        return self.kl_rows.sum(axis=1, dtype=np.float64)

    def update(self, momentum: float, learning_rate: float) -> None:
        if not self.pooled:
            self._serial(1, 2, self.one, momentum, learning_rate)  # half-step 1: the update
            return
        super().update(momentum, learning_rate)

    def steps(self, count: int, exaggeration: float, momentum: float, learning_rate: float) -> None:
        """``count`` iterations of forces + update (no KL): serial, one compiled call; or a loop over the passes in
        shares on the worker threads (``kernels.forces``); undecided, the iterations are the measure (see the class)."""
        while count and self.pooled is None:
            self._probe(exaggeration, momentum, learning_rate)
            count -= 1
        if not count:
            return
        if self.pooled:
            for _ in range(count):
                self.forces(exaggeration, False)
                self.update(momentum, learning_rate)
        else:
            self._serial(0, 2 * count, self.Y.dtype.type(exaggeration), momentum, learning_rate)
        self._since += count
        if not self._fixed and self._since >= self.RECHECK_ITERS:  # measured again from the next call
            self._since, self.pooled = 0, None
            self._seconds = {False: [], True: []}

    def _probe(self, exaggeration: float, momentum: float, learning_rate: float) -> None:
        """One iteration, serial and in shares in turn (the first in shares untimed: the threads start), timed;
        after :data:`PROBE_ITERS` of each, :attr:`pooled` is whichever's median iteration was shorter."""
        pooled = len(self._seconds[True]) < len(self._seconds[False])
        self.pooled = pooled
        start = time.perf_counter()
        self.steps(1, exaggeration, momentum, learning_rate)
        seconds = time.perf_counter() - start
        self.pooled = None
        if pooled and not self._started:
            self._started = True
        else:
            self._seconds[pooled].append(seconds)
        if len(self._seconds[True]) >= self.PROBE_ITERS:
            self.pooled = bool(np.median(self._seconds[True]) < np.median(self._seconds[False]))

    def _serial(self, start: int, stop: int, exaggeration: np.floating, momentum: float, learning_rate: float) -> None:
        """Half-steps ``start .. stop - 1`` of ``kernels.steps_serial`` (even: forces and Z, odd: update)."""
        self._kernels.steps_serial(
            self.P,
            self.Y,
            exaggeration,
            self.one,
            self.attraction,
            self.repulsion,
            self.z,
            self.Z,
            self.gains,
            self.step,
            float(momentum),
            float(learning_rate),
            MIN_GAIN,
            start,
            stop,
        )


class TorchEngine:
    """The same steps as :class:`NumbaEngine` with torch tensors (CUDA, or the CPU for comparison).

    Three (runs, n, n) buffers are allocated once per run; runs are processed in chunks that keep
    them under about 1 GiB.
    """

    _BUFFER_BYTES = 1 << 30

    def __init__(self, P: np.ndarray, Y0: np.ndarray, device: torch.device):
        dtype = torch.float32 if Y0.dtype == np.float32 else torch.float64
        runs, _, n = Y0.shape
        self.P = torch.as_tensor(np.ascontiguousarray(P), device=device).to(dtype)
        self.Y = torch.as_tensor(Y0, device=device).clone()
        self.attraction = torch.empty_like(self.Y)
        self.repulsion = torch.empty_like(self.Y)
        self.step = torch.zeros_like(self.Y)
        self.gains = torch.ones_like(self.Y)
        self.Z = torch.empty(runs, dtype=torch.float64, device=device)
        self.chunk = int(max(1, min(runs, self._BUFFER_BYTES // (3 * n * n * self.Y.element_size()))))
        shape = (self.chunk, n, n)
        self.D = torch.empty(shape, dtype=dtype, device=device)
        self.W = torch.empty(shape, dtype=dtype, device=device)
        self.M = torch.empty(shape, dtype=dtype, device=device)

    def _chunk_forces(
        self, Y: torch.Tensor, ex: float, want_kl: bool, att: torch.Tensor, rep: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        c = Y.shape[0]
        D, W, M = self.D[:c], self.W[:c], self.M[:c]
        x, y = Y[:, 0], Y[:, 1]
        torch.sub(x[:, :, None], x[:, None, :], out=D)
        torch.mul(D, D, out=W)
        torch.sub(y[:, :, None], y[:, None, :], out=D)
        W.addcmul_(D, D).add_(1.0)
        W.reciprocal_()
        W.diagonal(dim1=1, dim2=2).zero_()
        Z = W.sum(dim=(1, 2), dtype=torch.float64)
        # sum_j m_ij (y_i - y_j) = y_i * sum_j m_ij - (M y)_i, for M = P * W and M = W * W
        Yt = Y.transpose(1, 2)
        torch.mul(W, self.P, out=M)
        att.copy_((M.sum(dim=2)[:, None, :] * Y - torch.bmm(M, Yt).transpose(1, 2)) * ex)
        torch.mul(W, W, out=M)
        rep.copy_(M.sum(dim=2)[:, None, :] * Y - torch.bmm(M, Yt).transpose(1, 2))
        kl = None
        if want_kl:  # the non-negative Bregman form of the compiled kl_rows
            torch.mul(W, (1.0 / Z).to(W.dtype)[:, None, None], out=M)  # q
            torch.div(M, self.P, out=D)  # r = q / p (inf where p = 0)
            use_p = (self.P > 0) & (D < KL_BIG_RATIO)
            torch.log(D, out=W)
            D.sub_(1.0).sub_(W).mul_(self.P)
            kl = torch.where(use_p, D, M).sum(dim=(1, 2), dtype=torch.float64)
        return Z, kl

    def forces(self, exaggeration: float, want_kl: bool, final: bool = False) -> np.ndarray | None:
        """As :meth:`NumbaEngine.forces`, chunked over runs."""
        kls: list[torch.Tensor] = []
        for start in range(0, self.Y.shape[0], self.chunk):
            sl = slice(start, start + self.chunk)
            Z, kl = self._chunk_forces(self.Y[sl], exaggeration, want_kl, self.attraction[sl], self.repulsion[sl])
            self.Z[sl] = Z
            if kl is not None:  # every chunk's with want_kl
                kls.append(kl)
        return torch.cat(kls).cpu().numpy() if want_kl else None

    def normalisers(self) -> np.ndarray:
        return self.Z.cpu().numpy()

    def gradient(self) -> np.ndarray:
        g = 4.0 * (self.attraction - self.repulsion / self.Z[:, None, None].to(self.Y.dtype))
        return g.cpu().numpy()

    def last_steps(self) -> np.ndarray:
        return self.step.cpu().numpy()

    def restart_optimizer(self) -> None:
        self.gains.fill_(1.0)
        self.step.zero_()

    def update(self, momentum: float, learning_rate: float) -> None:
        g = 4.0 * (self.attraction - self.repulsion * (1.0 / self.Z).to(self.Y.dtype)[:, None, None])
        grow = self.step * g < 0.0
        self.gains.copy_(torch.where(grow, self.gains + 0.2, self.gains * 0.8).clamp_(min=MIN_GAIN))
        self.step.mul_(momentum).sub_(learning_rate * self.gains * g)
        norm = torch.linalg.vector_norm(self.step, dim=1, keepdim=True)  # a point's step, cut as the compiled one
        self.step.mul_(torch.where(norm > MAX_STEP_NORM, MAX_STEP_NORM / norm, 1.0).to(self.step.dtype))
        self.Y.add_(self.step)
        self.Y.sub_(self.Y.mean(dim=2, keepdim=True))  # zero mean, as in the compiled update

    def steps(self, count: int, exaggeration: float, momentum: float, learning_rate: float) -> None:
        """``count`` iterations of forces + update (no KL)."""
        for _ in range(count):
            self.forces(exaggeration, False)
            self.update(momentum, learning_rate)

    def embeddings(self) -> np.ndarray:
        return self.Y.cpu().numpy()


def make_engine(P: np.ndarray, Y0: np.ndarray, device: torch.device, engine: str | None) -> NumbaEngine | TorchEngine:
    engine = engine or ("numba" if device.type == "cpu" else "torch")
    if engine == "numba":
        if device.type != "cpu":
            raise ValueError(f"the compiled kernels run on the CPU only, not on {device}")
        return NumbaEngine(P, Y0)
    if engine == "torch":
        return TorchEngine(P, Y0, device)
    raise ValueError(f"unknown engine {engine!r}: 'numba' or 'torch'")
