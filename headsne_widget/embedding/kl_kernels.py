"""Compiled CPU kernels of the exact t-SNE's KL(P || Q): one pass over all pairs at reported steps only.

For every run r and point i, without any n x n temporary,

    kl_i = sum_j p_ij h(q_ij / p_ij) + sum_{j: p_ij = 0} q_ij

with q_ij = w_ij / Z, Z from the force pass (:mod:`.kernels`), and h(r) = r - 1 - log r >= 0, so that
``KL(P || Q) = sum_i kl_i`` (see :func:`kl_rows_serial`). The KL is a kernel of its own so that the forces
are the very same machine code whether a step reports or not (see :func:`.kernels.forces_serial`); its
logarithm is :func:`vector_log`, which vectorises in float32.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

from .._parallel import in_shares
from .kernel_common import FASTMATH as _FASTMATH
from .kernel_common import SHARES, flush_denormals, restore_fp_state

__all__ = ["kl_part", "kl_rows", "kl_rows_serial", "vector_log"]


@intrinsic
def _float32_bits(typingctx, x):
    """The bits of a float32 as an int32 (a bitcast, which LLVM vectorises)."""

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(types.float32), codegen


@intrinsic
def _bits_float32(typingctx, bits):
    """The float32 whose bits are the int32 ``bits``."""

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


_F32 = np.float32
_LOG_POLY = tuple(_F32(c) for c in (
    7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
    -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1,
))  # fmt: skip
_SQRT_HALF, _LN2_LOW, _LN2_HIGH = _F32(0.707106781186547524), _F32(-2.12194440e-4), _F32(0.693359375)
_HALF, _ONE32, _INF32, _NAN32 = _F32(0.5), _F32(1.0), _F32(np.inf), _F32(np.nan)


def vector_log(x):  # pragma: no cover - replaced in compiled code by the overload below
    """log x. In compiled code a float32 is taken apart in its bits and the mantissa's logarithm is
    Cephes' ``logf`` polynomial (within 1 ulp of float32 over its range), all plain arithmetic that
    LLVM vectorises: np.log is a libm call per element that it does not (the exact KL took about 10
    force passes because of it). float64 uses np.log."""
    return np.log(x)


@overload(vector_log, inline="always", jit_options={"fastmath": _FASTMATH, "error_model": "numpy"})
def _vector_log(x):
    if not (isinstance(x, types.Float) and x.bitwidth == 32):
        return lambda x: np.log(x)

    def log32(x):  # pragma: no cover - compiled
        c0, c1, c2, c3, c4, c5, c6, c7, c8 = _LOG_POLY
        bits = _float32_bits(x)
        e = ((bits >> 23) & 0xFF) - 126  # x = m 2^e with m in [0.5, 1) (frexp)
        m = _bits_float32(np.int32((bits & 0x007FFFFF) | 0x3F000000))
        small = m < _SQRT_HALF
        e = e - 1 if small else e
        f = (m + m - _ONE32) if small else (m - _ONE32)  # log x = log(1 + f) + e log 2, f in [-0.29, 0.41]
        z = f * f
        y = ((((((((c0 * f + c1) * f + c2) * f + c3) * f + c4) * f + c5) * f + c6) * f + c7) * f + c8) * f * z
        fe = _F32(e)
        y += _LN2_LOW * fe
        y -= _HALF * z
        out = f + y + _LN2_HIGH * fe
        out = -_INF32 if x == 0 else out  # (subnormals are zero in the kernels: DAZ)
        out = x if not (x < _INF32) else out  # log inf = inf, NaN stays NaN
        return _NAN32 if x < 0 else out

    return log32


@njit(inline="always", fastmath=_FASTMATH, error_model="numpy")
def _kl_terms(p, x, y, i, one, inv_z, big, unit):  # pragma: no cover - compiled
    """sum over j != i of p_ij h(q_ij / p_ij) (h(r) = r - 1 - log r >= 0), or q_ij where p_ij = 0.

    j = i is masked inside one loop over [0, n), as in :func:`.kernels._pair_sums`, for the same reason.
    """
    xi = x[i]
    yi = y[i]
    zero = xi - xi
    li = zero
    for j in range(x.shape[0]):
        dx = xi - x[j]
        dy = yi - y[j]
        q = inv_z * (one / (one + dx * dx + dy * dy))
        pj = p[j]
        r = q / pj  # inf where p_ij = 0: that term is q_ij, selected below
        h = pj * (r - unit - vector_log(r))  # unit = 1 (``one`` is the kernel's epsilon, not always 1)
        term = h if r < big else q  # p_ij = 0 gives r = inf (or NaN where q is 0 too): the term is q
        li += zero if j == i else term  # two plain selects: with ``pj > 0 and ...`` it did not vectorise
    return li


@njit(fastmath=_FASTMATH, error_model="numpy", cache=True, nogil=True)
def kl_part(P, Y, one, inv_z, big, kl, lo, hi):  # pragma: no cover - compiled
    """``kl[:, lo:hi]``: the shares of KL(P || Q) of rows ``lo .. hi - 1`` (see :func:`kl_rows_serial`)."""
    runs = Y.shape[0]
    unit = big / big
    fp_state = flush_denormals()
    for i in range(lo, hi):
        p = P[i]
        for r in range(runs):
            kl[r, i] = _kl_terms(p, Y[r, 0], Y[r, 1], i, one, inv_z[r], big, unit)
    restore_fp_state(fp_state)


def kl_rows_serial(P, Y, one, inv_z, big, kl) -> None:
    """``kl`` (runs, n): row i's share of KL(P || Q) for embeddings ``Y`` with ``inv_z`` = 1 / Z per run.

    KL is summed in its Bregman form, sum_ij [p_ij log(p_ij / q_ij) - p_ij + q_ij] (equal to the KL as
    P and Q both sum to 1), as p h(q / p) with h(r) = r - 1 - log r. Every term is non-negative, so
    the sum is non-negative and accurate to relative precision. The textbook split
    sum p log p + sum p log(1 + d^2) + log Z cancels terms of size log n^2 down to a KL that can be
    near 0, and rounding made it negative (-4e-16 in float64, -4e-8 in float32 for a uniform P).
    Where q / p exceeds ``big`` the term is q to working precision (p h(r) = q (1 - (1 + log r) / r)).
    """
    kl_part(P, Y, one, inv_z, big, kl, 0, Y.shape[2])  # the very code of the shares (compiled inside an
    # njit caller, the same loop was vectorised differently: other bits than in shares)


def kl_rows(P, Y, one, inv_z, big, kl) -> None:
    """:func:`kl_rows_serial` in shares of the rows on the worker threads (see :func:`.kernels.forces`): the same
    bits."""
    in_shares(Y.shape[2], lambda lo, hi: kl_part(P, Y, one, inv_z, big, kl, lo, hi), SHARES, 4)
