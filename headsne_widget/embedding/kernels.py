"""Compiled CPU kernels of the exact t-SNE's forces and steps: one fused pass over all pairs per iteration.

The pass computes, for every run r and point i, without any n x n temporary,

    w_ij = 1 / (1 + |y_i - y_j|^2)
    attraction_i = sum_j p_ij w_ij (y_i - y_j)       (times the exaggeration)
    repulsion_i  = sum_j w_ij^2 (y_i - y_j)
    z_i          = sum_{j != i} w_ij                  (Z = sum_i z_i)

so that the gradient of eq. 3 is ``4 (attraction - repulsion / Z)``; the KL of reported steps is a kernel of
its own (:mod:`.kl_kernels`), and the flags, MXCSR handling and GIL release every kernel shares are
:mod:`.kernel_common`.

Embeddings are stored as (runs, 2, n) so that the inner loop over j reads contiguous memory and
vectorises; each row of P is read once per point and reused by every run while it sits in cache, and
from :data:`FOUR_ROWS_MIN_N` points the force pass takes four points at a time (:func:`_block_sums4`).
Serial, the engine runs all the plain steps between two reports in one compiled call (:func:`steps_serial`); in
shares, each pass goes in shares of the rows to the worker threads (the engine measures which is faster, from
:data:`POOL_MIN_PAIRS`). Rows are
independent (no atomics), and per-row sums are reduced in a fixed order afterwards, so a seed gives the
same result on every call, in one thread or in shares of the rows on the worker threads (:func:`forces`,
:func:`.kl_kernels.kl_rows`).

Determinism rule: no cached kernel calls another non-inlined kernel (see :func:`steps_serial`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._parallel import in_shares, threads
from .kernel_common import FASTMATH as _FASTMATH
from .kernel_common import MAX_STEP_NORM, SHARES, flush_denormals, restore_fp_state

#: pairs summed in the working precision before a block's sums are added up in float64
BLOCK = 1024


@njit(inline="always", fastmath=_FASTMATH, error_model="numpy")
def _pair_sums(p, x, y, keep, i, one):  # pragma: no cover - compiled
    """The sums of :func:`forces` for point ``i`` over all j != i, in float64 across blocks of ``BLOCK``.

    Near convergence the attraction and the repulsion / Z of a point nearly cancel, and each is a sum
    of n terms: accumulated in float32 over all n, that rounding noise limited the reachable KL at
    large n (n = 16384, 500 iterations: exact KL 2.061 against 2.026 with float64 everywhere and
    2.027 for openTSNE). Each block is summed in the working precision by the vectorised loop of
    :func:`_block_sums`, and the blocks in float64: KL 2.026, for 2-4 % of the pass (serial, ns per pair
    with and without the blocks: n = 1536 0.219 / 0.214, 4096 0.276 / 0.265, 8192 0.271 / 0.260; below
    1024 points a row is one block). ``keep`` is 1 but at j = i, 0 (see :func:`_block_sums`).
    """
    xi = x[i]
    yi = y[i]
    n = x.shape[0]
    ax = ay = rx = ry = zi = 0.0
    for lo in range(0, n, BLOCK):
        hi = min(lo + BLOCK, n)
        bx, by, sx, sy, bz = _block_sums(p[lo:hi], x[lo:hi], y[lo:hi], keep[lo:hi], xi, yi, one)
        ax += bx
        ay += by
        rx += sx
        ry += sy
        zi += bz
    return ax, ay, rx, ry, zi


@njit(inline="always", fastmath=_FASTMATH, error_model="numpy")
def _block_sums(p, x, y, keep, xi, yi, one):  # pragma: no cover - compiled
    """Sums over the pairs (point at ``xi, yi``, j) of one block, each w_ij times ``keep[j]`` (one vectorised
    loop): 1, but 0 at j = i.

    j = i is masked (w_ii = 0) inside the one loop from 0 rather than split into the loops [0, i) and
    (i, n): LLVM vectorised loops that do not start at 0 5-6 times slower (1.45 against 0.24 ns per
    pair, serial, n = 2048, AVX-512), hence also the slices; subtracting the w_ii = 1 term afterwards
    would lose precision. The mask is a product with ``keep``, one instruction per 16 pairs where the int64
    index test ``j == i`` took four (serial, n = 512, AVX-512, ns per pair: no mask 0.204, product 0.222,
    ``j == i`` 0.244; a compare of the indices as floats was 5 % slower than the product). The same bits as
    with ``j == i``: w_ij times 1 is w_ij, and at j = i (dx = dy = 0) every other term is 0 either way.
    """
    zero = xi - xi
    ax = ay = rx = ry = zi = zero
    for j in range(x.shape[0]):
        dx = xi - x[j]
        dy = yi - y[j]
        w = keep[j] * (one / (one + dx * dx + dy * dy))
        pw = p[j] * w
        ax += pw * dx
        ay += pw * dy
        w2 = w * w
        rx += w2 * dx
        ry += w2 * dy
        zi += w
    return ax, ay, rx, ry, zi


@njit(inline="always", fastmath=_FASTMATH, error_model="numpy")
def _pair_terms(pj, xi, yi, xj, yj, keep, one):  # pragma: no cover - compiled
    """The terms of pair (i, j) in the sums of :func:`forces`: p w dx, p w dy, w^2 dx, w^2 dy, w (w times ``keep``)."""
    dx = xi - xj
    dy = yi - yj
    w = keep * (one / (one + dx * dx + dy * dy))
    pw = pj * w
    w2 = w * w
    return pw * dx, pw * dy, w2 * dx, w2 * dy, w


@njit(inline="always", fastmath=_FASTMATH, error_model="numpy")
def _block_sums4(p0, p1, p2, p3, x, y, keep, xi, yi, one):  # pragma: no cover - compiled
    """:func:`_block_sums` for the four points at ``xi[k], yi[k]`` (masked by ``keep[k]``) at once: 20 sums.

    Each y_j is loaded once for four rows, and four rows of P stream at once. Where P no longer fits in the
    caches the pass is bound by waiting for P's rows rather than by arithmetic; four rows at a time keep
    four streams in flight (see :data:`FOUR_ROWS_MIN_N`).
    """
    zero = one - one
    a0 = b0 = c0 = d0 = e0 = a1 = b1 = c1 = d1 = e1 = zero
    a2 = b2 = c2 = d2 = e2 = a3 = b3 = c3 = d3 = e3 = zero
    x0, x1, x2, x3 = xi
    y0, y1, y2, y3 = yi
    k0, k1, k2, k3 = keep[0], keep[1], keep[2], keep[3]
    for j in range(x.shape[0]):
        xj = x[j]
        yj = y[j]
        t = _pair_terms(p0[j], x0, y0, xj, yj, k0[j], one)
        a0, b0, c0, d0, e0 = a0 + t[0], b0 + t[1], c0 + t[2], d0 + t[3], e0 + t[4]
        t = _pair_terms(p1[j], x1, y1, xj, yj, k1[j], one)
        a1, b1, c1, d1, e1 = a1 + t[0], b1 + t[1], c1 + t[2], d1 + t[3], e1 + t[4]
        t = _pair_terms(p2[j], x2, y2, xj, yj, k2[j], one)
        a2, b2, c2, d2, e2 = a2 + t[0], b2 + t[1], c2 + t[2], d2 + t[3], e2 + t[4]
        t = _pair_terms(p3[j], x3, y3, xj, yj, k3[j], one)
        a3, b3, c3, d3, e3 = a3 + t[0], b3 + t[1], c3 + t[2], d3 + t[3], e3 + t[4]
    return (a0, b0, c0, d0, e0, a1, b1, c1, d1, e1, a2, b2, c2, d2, e2, a3, b3, c3, d3, e3)


@njit(inline="always")
def _store(attraction, repulsion, z, r, i, exaggeration, ax, ay, rx, ry, zi):  # pragma: no cover - compiled
    attraction[r, 0, i] = exaggeration * ax
    attraction[r, 1, i] = exaggeration * ay
    repulsion[r, 0, i] = rx
    repulsion[r, 1, i] = ry
    z[r, i] = zi


#: from this many points the force pass takes four rows of P at a time (:func:`_block_sums4`); below, where P
#: stays in the caches, one row at a time is faster. Serial, AVX-512 (2 cores, 32 MiB L3 shared with other
#: jobs), ns per pair, one row / four rows: n = 512 0.222 / 0.245, 1024 0.213 / 0.227, 1536 0.212 / 0.233;
#: 2048 0.25 / 0.23 with P (16 MiB) in the L3 cache, 0.48 / 0.33 with the cache taken by other jobs; 3072
#: 0.50 / 0.32, 4096 0.45 / 0.29, 8192 0.43 / 0.26 (bcc952d's one row without a mask: 0.21, 0.19, 0.19, 0.19
#: to 0.39, 0.45, 0.44, 0.37).
FOUR_ROWS_MIN_N = 2048


@njit(fastmath=_FASTMATH, error_model="numpy", cache=True, nogil=True, inline="always")
def forces_rows(P, Y, exaggeration, one, attraction, repulsion, z, lo, hi):  # pragma: no cover - compiled
    """Fill ``attraction``, ``repulsion`` (runs, 2, n) and ``z`` (runs, n) at the points ``lo .. hi - 1``.

    From :data:`FOUR_ROWS_MIN_N` points, points go four at a time from ``lo`` (the rest one at a time), so
    a row's sums are the same bits whichever share of the rows a call gets, as long as shares start at
    multiples of four; below, one at a time.
    ``inline="always"``: :func:`steps_serial` takes it in as numba IR rather than calling it (see there).
    """
    runs, _, n = Y.shape
    fp_state = flush_denormals()
    keep = np.ones((4, n), dtype=Y.dtype)  # row k of a group masks its own point: keep[k, i + k] = 0
    sums = np.zeros(20)
    top = lo + (hi - lo) // 4 * 4 if n >= FOUR_ROWS_MIN_N else lo
    for i in range(lo, top, 4):
        rows = (P[i], P[i + 1], P[i + 2], P[i + 3])
        for k in range(4):
            keep[k, i + k] = 0.0
        for r in range(runs):
            x = Y[r, 0]
            y = Y[r, 1]
            xi = (x[i], x[i + 1], x[i + 2], x[i + 3])
            yi = (y[i], y[i + 1], y[i + 2], y[i + 3])
            sums[:] = 0.0
            for start in range(0, n, BLOCK):
                stop = min(start + BLOCK, n)
                block = _block_sums4(
                    rows[0][start:stop], rows[1][start:stop], rows[2][start:stop], rows[3][start:stop],
                    x[start:stop], y[start:stop], keep[:, start:stop], xi, yi, one,
                )  # fmt: skip
                for c in range(20):
                    sums[c] += block[c]
            for k in range(4):
                s = sums[5 * k : 5 * k + 5]
                _store(attraction, repulsion, z, r, i + k, exaggeration, s[0], s[1], s[2], s[3], s[4])
        for k in range(4):
            keep[k, i + k] = 1.0
    for i in range(top, hi):
        keep[0, i] = 0.0
        for r in range(runs):
            ax, ay, rx, ry, zi = _pair_sums(P[i], Y[r, 0], Y[r, 1], keep[0], i, one)
            _store(attraction, repulsion, z, r, i, exaggeration, ax, ay, rx, ry, zi)
        keep[0, i] = 1.0
    restore_fp_state(fp_state)


def forces_serial(P, Y, exaggeration, one, attraction, repulsion, z) -> None:
    """Fill ``attraction``, ``repulsion`` (runs, 2, n) and ``z`` (runs, n) for embeddings ``Y``, in this thread.

    :func:`forces_rows` over every row: the very machine code of the shares (:func:`forces`), as
    :func:`.kl_kernels.kl_rows_serial` runs :func:`.kl_kernels.kl_part`. The engine's serial runs take the forces from
    :func:`steps_serial` instead, so that their steps and their reports run one code (see there).

    The KL is a kernel of its own (:func:`.kl_kernels.kl_rows`, which needs Z first): the forces are then the very
    same machine code whether a step reports or not, so a run does not depend on how often it
    reports (one loop with a loop-invariant ``want_kl`` flag was vectorised differently in its two
    versions, which changed the rounding of the forces).

    The pair j = i is masked to w_ii = 0 in the pair loop rather than added and subtracted: its
    w_ii = 1 would dominate z_i when the points are far apart, and ``(1 + sum_j w_ij) - 1`` in float32
    loses every w_ij below 6e-8. That cancellation made Z, log Z and so the reported KL far too small
    (KL -1.20 on a run blown up to a radius of 3e6 by learning rate 1e6).
    """
    forces_rows(P, Y, exaggeration, one, attraction, repulsion, z, 0, Y.shape[2])


def forces(P, Y, exaggeration, one, attraction, repulsion, z) -> None:
    """:func:`forces_serial` in shares of the rows (:data:`SHARES`, or four per thread on more than four threads,
    so that a thread slowed down by another process leaves its share of the work to the others), each to
    whichever thread is free, this one included.

    Not a numba parallel loop: that splits the rows in one fixed share per thread and meets at a barrier,
    so a core taken by the browser held the whole pass back (8192 points, one core 40% busy: 25 ms a pass
    against 22 ms in shares). The same bits as :func:`forces_serial` (shares start at multiples of four).
    """
    count = max(SHARES, 4 * threads())
    in_shares(
        Y.shape[2], lambda lo, hi: forces_rows(P, Y, exaggeration, one, attraction, repulsion, z, lo, hi), count, 4
    )


@njit(fastmath=_FASTMATH, error_model="numpy", cache=True, nogil=True, inline="always")
def update(Y, attraction, repulsion, Z, gains, step, momentum, learning_rate, min_gain):  # pragma: no cover
    """One gradient-descent step with momentum and per-parameter gains, in place, then zero mean.

    gradient = 4 (attraction - repulsion / Z); gains grow by 0.2 where the gradient changes sign
    against the last step and shrink by 0.8 elsewhere (the reference implementation's rule); a point's
    step is cut to :data:`MAX_STEP_NORM` (openTSNE's ``max_step_norm``).
    """
    runs, dims, n = Y.shape
    fp_state = flush_denormals()
    for r in range(runs):
        inv_z = 1.0 / Z[r]
        for i in range(n):
            norm2 = 0.0
            for c in range(dims):
                g = 4.0 * (attraction[r, c, i] - repulsion[r, c, i] * inv_z)
                s = step[r, c, i]
                gain = gains[r, c, i]
                if s * g < 0.0:
                    gain = gain + 0.2
                else:
                    gain = gain * 0.8
                if gain < min_gain:
                    gain = min_gain
                gains[r, c, i] = gain
                s = momentum * s - learning_rate * gain * g
                step[r, c, i] = s
                norm2 += np.float64(s) * np.float64(s)  # (float32's square overflows from 1.8e19)
            if norm2 > MAX_STEP_NORM * MAX_STEP_NORM:
                cut = MAX_STEP_NORM / np.sqrt(norm2)
                for c in range(dims):
                    step[r, c, i] *= cut
            for c in range(dims):
                Y[r, c, i] += step[r, c, i]
        for c in range(dims):
            # zero mean, as the reference implementation does after each step: t-SNE is
            # translation invariant, and a drifting centroid costs float32 its resolution when
            # early exaggeration contracts a near-uniform P to spreads of 1e-10 (points merged
            # for good at a centroid of 6e-4; centred they stay apart and expand afterwards)
            mean = 0.0
            for i in range(n):
                mean += Y[r, c, i]
            mean /= n
            for i in range(n):
                Y[r, c, i] -= mean
    restore_fp_state(fp_state)


#: pairs x runs from which the engine may run :func:`forces` and :func:`.kl_kernels.kl_rows` in shares on the worker
#: threads (:class:`.engines.NumbaEngine` times both ways on this machine and takes the faster); below, always
#: serial. A pass of fewer pairs takes under 0.13 ms serial (n = 724), and handing out its shares costs some
#: 0.03 ms on 2 cores, more on more: on 2 idle cores the shares tied with serial at 512 points (0.070 ms an
#: iteration serial, 0.065-0.12 in shares) and lost at 256 (0.022 against 0.1).
POOL_MIN_PAIRS = 1 << 19


@njit(fastmath=False, error_model="numpy", cache=True, nogil=True, inline="always")
def _sum_rows(z, Z):  # pragma: no cover - compiled
    """Z[r] = sum_i z[r, i] in float64, in a fixed order (deterministic).

    ``fastmath=False`` stated, not left out: numba gives a function without flags of its own the flags of
    the caller it is first compiled for, so this sum was a vectorised, re-associated one when the serial
    steps compiled it first and a sequential one when the shares' loop called it first from Python, and
    numba's cache kept whichever came first (float64 Z differed in the last bit with the cache's history).
    Inlined in :func:`steps_serial`, it is compiled with that kernel's flags, always the same ones."""
    for r in range(z.shape[0]):
        total = 0.0
        for i in range(z.shape[1]):
            total += z[r, i]
        Z[r] = total


@njit(fastmath=_FASTMATH, error_model="numpy", cache=True, nogil=True)
def steps_serial(
    P, Y, exaggeration, one, attraction, repulsion, z, Z, gains, step, momentum, learning_rate, min_gain, start, stop
):  # pragma: no cover - compiled
    """Half-steps ``start .. stop - 1`` of a serial run in this thread, without returning to Python between
    them: an even one computes the forces and Z (:func:`forces_rows` over every row, :func:`_sum_rows`), an
    odd one updates (:func:`update`). ``count`` plain iterations are half-steps 0 .. 2 count - 1, a reported
    step's forces half-step 0 and its update half-step 1 (where the engine runs serial; in shares it loops over
    the passes in Python, for some 30 us of dispatch per iteration on 2 cores).

    Every serial pass of a run, reported or not, is this one compiled loop, and it calls no other compiled
    kernel: the passes are numba IR inlined here (``inline="always"``). A kernel that calls another links in
    a private copy of it, optimised again inside the caller, and the copies of one function differ in their
    machine code (forces_rows was three different codes under one symbol name); the JIT binds every call
    of that name to the copy loaded first. A process that compiles loads the callee first, one that reads
    numba's cache loads the caller first: the first process after a fresh compile ran other code than the
    later ones. Without calls between kernels each symbol has one code, wherever it was compiled.
    """
    n = Y.shape[2]
    for half in range(start, stop):
        if half % 2 == 0:
            forces_rows(P, Y, exaggeration, one, attraction, repulsion, z, 0, n)
            _sum_rows(z, Z)
        else:
            update(Y, attraction, repulsion, Z, gains, step, momentum, learning_rate, min_gain)
