"""The checks of t-SNE's inputs (P, an embedding, the options) and its start, shared by the exact engine's
:mod:`.schedule` and the sparse one's (:mod:`.sparse_engine`): each names what is wrong before anything large
is allocated, and P already in the form the engines need is used as is (no n x n copy).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .._checks import int_at_least, is_int, is_number, real_array

__all__ = [
    "INIT_STD",
    "MAX_RESTARTS",
    "MAX_STATE_BYTES",
    "as_numpy",
    "auto_learning_rate",
    "check_affinities",
    "check_embedding",
    "check_momentum",
    "check_restarts",
    "check_seed",
    "initial_embeddings",
    "positive",
    "resolve_dtype",
    "resolve_learning_rate",
    "unchecked_affinities",
]

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
_FLOOR = 5.0  # the 'auto' learning rate's least value from 10 points on (the thesis's rate)


def auto_learning_rate(n: int, early_exaggeration: float = 12.0) -> float:
    """``learning_rate="auto"``: max(n / early_exaggeration, min(5, n / 2)), chosen by measurement.

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
    worse at the widget's typical n of 100 to 200, and the thesis's 5 stalls from n = 800 on.

    The floor keeps the rate from vanishing under a huge ``early_exaggeration`` (the steps after
    exaggeration would not move). It is the thesis's 5 from 10 points on, and n / 2 below (issue 32.7): 5
    diverged on 5 of 24 MiniLM heads of a 4-token text (3 at 3, none at 1 or 2 over 144 runs). A floor as low
    as n / 12 diverged nowhere but collapsed short runs: with n_iter at or under the exaggeration's 250
    iterations (the atlas's 300, a study's 200) the exaggerated attraction shrank 18 of 24 heads of a
    4-token text, and 2 of 24 of a 16-token one, to a point (|Y| < 1e-3, KL that of a uniform Q).
    """
    return float(max(n / early_exaggeration, min(_FLOOR, n / 2.0)))


def as_numpy(a: Any, name: str) -> np.ndarray:
    """A finite real numpy array from an array or a dense torch tensor (on any device, in a dtype numpy has)."""
    if isinstance(a, torch.Tensor):
        if a.layout != torch.strided:
            raise TypeError(
                f"{name} is a torch sparse tensor ({a.layout}); pass a scipy.sparse matrix (the sparse engine: "
                f"scipy.sparse.csr_matrix) or a dense one ({name}.to_dense())"
            )
        if a.is_floating_point() and a.dtype not in (torch.float16, torch.float32, torch.float64):
            raise TypeError(f"{name} is a torch {a.dtype} tensor, which numpy cannot hold; pass {name}.float()")
        a = a.detach().cpu().numpy()
    return real_array(a, name)


_MAX_INIT = 1e4  # a start beyond this is already blown up (see :data:`.schedule.BLOWN_UP_Z_PER_POINT`)
_BLOCK = 256  # rows per block in the O(n^2) checks, so that no extra n x n temporary is made


def check_affinities(P: Any, dtype: Any = np.float64) -> np.ndarray:
    """P in ``dtype``, exactly symmetric with zero diagonal and sum 1, or a ValueError naming the problem.

    Works in row blocks: beyond the result, memory stays O(n * 256) (n = 4096 runs in under 1 GB).
    A P that already is all that (in ``dtype``, C-contiguous, exactly symmetric, zero diagonal, sum 1
    within 1e-6, as ``attention_affinities(A, dtype=np.float32)`` is) is returned as is, not copied: that
    is tested first, in one compiled pass (:func:`_ready_as_is`).
    """
    dtype = np.dtype(dtype)
    if _ready_as_is(P, dtype):
        return P
    P = as_numpy(P, "P")
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


def _ready_as_is(P: Any, dtype: np.dtype) -> bool:
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


def unchecked_affinities(P: Any, dtype: np.dtype) -> np.ndarray:
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


def check_embedding(Y: Any, n: int, name: str = "Y") -> np.ndarray:
    Y = as_numpy(Y, name)
    if Y.shape != (n, 2):
        raise ValueError(f"{name} must have shape ({n}, 2) to match P, got {Y.shape}")
    return Y


def resolve_dtype(dtype: Any) -> np.dtype:
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be float32 or float64, got {dt}")
    return dt


def _number(value: Any, name: str) -> float:
    """``value`` as a finite float; a bool or a non-number is a TypeError naming ``name``."""
    if not is_number(value):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    out = float(value)
    if not np.isfinite(out):
        raise ValueError(f"{name} must be positive and finite, got {value!r}")
    return out


def positive(value: Any, name: str) -> float:
    out = _number(value, name)
    if out <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    return out


def resolve_learning_rate(learning_rate: Any, n: int, early_exaggeration: float) -> float:
    if isinstance(learning_rate, str):
        if learning_rate != "auto":
            raise ValueError(f"learning_rate must be 'auto' or a positive number, got {learning_rate!r}")
        return auto_learning_rate(n, early_exaggeration)
    if learning_rate is None:  # not an alias of "auto": say so rather than guess
        raise TypeError(
            "learning_rate must be a positive number or 'auto' (max(n / early_exaggeration, min(5, n / 12))), got None"
        )
    return positive(learning_rate, "learning_rate")


def check_momentum(momentum: Any) -> tuple[float, float]:
    if isinstance(momentum, (str, bytes)) or not hasattr(momentum, "__len__") or len(momentum) != 2:
        raise TypeError(f"momentum must be a pair (during exaggeration, after it) such as (0.5, 0.8), got {momentum!r}")
    mom = tuple(_number(m, "momentum") for m in momentum)
    if not all(0.0 <= m < 1.0 for m in mom):
        raise ValueError(f"momentum must be two values in [0, 1) (during and after exaggeration), got {momentum!r}")
    return mom[0], mom[1]


def check_seed(seed: Any) -> int | None:
    if seed is None:
        return None
    if not is_int(seed):
        raise TypeError(f"seed must be an int or None, got {type(seed).__name__}")
    if not 0 <= seed < 2**63 - MAX_RESTARTS:
        raise ValueError(
            f"seed must be a non-negative int below 2**63 - {MAX_RESTARTS} (run r uses seed + r), got {seed}"
        )
    return int(seed)


def check_restarts(restarts: Any, n: int) -> int:
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


def initial_embeddings(init: Any, n: int, restarts: int, seed: int | None, dtype: np.dtype) -> np.ndarray:
    """(restarts, 2, n): ``init`` ((n, 2) for every run or (restarts, n, 2)), else N(0, 1e-4 I) from seed + r."""
    if init is None:
        base = int(np.random.default_rng().integers(2**31)) if seed is None else int(seed)
        Y0 = np.stack([np.random.default_rng(base + r).normal(0.0, INIT_STD, size=(n, 2)) for r in range(restarts)])
    else:
        Y0 = as_numpy(init, "init").astype(np.float64)
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
