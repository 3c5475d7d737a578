"""The joint probabilities P that t-SNE embeds: from one attention head, or from points in a space.

``attention_affinities`` is the thesis's attention-head based t-SNE (section 3.1): an attention matrix is
right-stochastic, so its rows already are neighbour distributions ``p_{j|i}``; zeroing the diagonal,
symmetrising and normalising gives P. ``gaussian_affinities`` is standard exact t-SNE for comparison:
perplexity-calibrated Gaussians on squared euclidean distances (Appendix A.1), as scikit-learn computes
them, the binary search over the precisions ``beta_i = 1 / (2 sigma_i^2)`` run for all points at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast, overload

import numpy as np
import scipy.sparse as sp
from numpy.typing import ArrayLike, DTypeLike

from .._checks import float_dtype, is_number, real_array
from ..errors import DegenerateAffinitiesError
from .perplexity import conditional_gaussians

__all__ = [
    "attention_P",
    "attention_affinities",
    "binary_search_perplexity",
    "gaussian_affinities",
    "query_key_affinities",
]

MACHINE_EPSILON = np.finfo(np.double).eps


@overload
def attention_affinities(
    A: Any, *, exclude: None = None, dtype: DTypeLike = np.float64, out: np.ndarray | None = None
) -> Any: ...
@overload
def attention_affinities(
    A: Any, *, exclude: ArrayLike, dtype: DTypeLike = np.float64, out: np.ndarray | None = None
) -> tuple[Any, np.ndarray]: ...
def attention_affinities(
    A: Any, *, exclude: ArrayLike | None = None, dtype: DTypeLike = np.float64, out: np.ndarray | None = None
) -> Any:
    """P of one attention head: ``p_ij = (A_ij + A_ji) / sum_{m != n} (A_mn + A_nm)``, ``p_ii = 0``.

    ``A`` is an (n, n) attention matrix (``A[i, j]``: how much query i attends to key j). With ``exclude``,
    a boolean mask of shape (n,), those tokens (typically the special ones, which soak up attention) are
    dropped before symmetrising, and ``(P, kept)`` is returned with ``kept`` the int64 indices of the tokens
    P covers. Raises DegenerateAffinitiesError when no attention mass is left off the diagonal.

    ``dtype`` is P's: float64, or float32 as t-SNE runs it (half the memory, and a P that
    :func:`~headsne_widget.t_sne.check_affinities` takes as is). Either way every entry is computed in
    float64 and rounded once, P is exactly symmetric and its diagonal exactly 0. A is read in square
    tiles by a compiled pass and P is the only n x n array made (A is not copied: at n = 8192 a float64
    copy is 512 MiB; the pass takes about 0.15 s there on two cores, numpy blocks took 0.4-0.8 s).

    ``out``, a C-contiguous array of P's shape and dtype, receives P instead of a new array (the widget
    reuses the P of a finished run: a fresh 256 MiB array costs 30 ms to 1 s of page faults).

    A ``scipy.sparse`` A (a head's kept entries: ``Extraction.sparse_attention``) gives a sparse P
    (:func:`~.sparse.sparse_attention_affinities`, its entries as they are); ``out`` is then refused.
    """
    if sp.issparse(A):
        if out is not None:
            raise ValueError("out= receives a dense P; a sparse A gives a sparse P")
        from .sparse import sparse_attention_affinities

        mask = np.zeros(A.shape[0], dtype=bool) if exclude is None else exclude
        built = cast("tuple[Any, float, np.ndarray]", sparse_attention_affinities(A, exclude=mask, dtype=dtype))
        P_sparse, kept_sparse = built[0], built[2]
        return P_sparse if exclude is None else (P_sparse, kept_sparse)
    P, kept = attention_P(A, exclude=exclude, dtype=dtype, out=out)
    return P if exclude is None else (P, kept)


def attention_P(
    A: ArrayLike, *, exclude: ArrayLike | None = None, dtype: DTypeLike = np.float64, out: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`attention_affinities` of a dense A, always as ``(P, kept)`` (the P sources' call); an ``exclude``
    that drops nothing costs no copy of A."""
    out_dtype = float_dtype(dtype)
    captured = _captured_head(A) if exclude is None or not np.any(exclude) else None
    M, total = captured if captured is not None else (_check_attention(A), None)
    kept = np.arange(M.shape[0], dtype=np.int64)
    if exclude is not None and (mask := _check_mask(exclude, M.shape[0])).any():
        kept = np.flatnonzero(~mask).astype(np.int64)
        M = M[np.ix_(kept, kept)]
    if M.shape[0] < 2:
        raise DegenerateAffinitiesError(
            f"P needs at least 2 tokens, but only {M.shape[0]} remain after excluding tokens"
        )
    from .matrix_kernels import census, symmetrise  # numba: imported on first use (no numba at a cold start)

    if total is None:
        largest = float(M.max())
        if not (largest == 0.0 or 2.0**-500 <= largest <= 2.0**500):
            # P does not depend on A's scale, but A * 1e308 would overflow A + A^T: a power of two, exact
            M = _power_of_two_scaled(M.astype(np.float64))
        M = np.ascontiguousarray(M)
        total = 2.0 * census(M)[4]  # the sum off the diagonal, accumulated apart from it
    if not total > 0.0:
        raise DegenerateAffinitiesError(
            "this attention head puts no attention off the diagonal among the kept tokens "
            "(every token attends only to itself), so P = (A + A^T) / sum is undefined; pick another head"
        )
    P = _output(out, out_dtype, M.shape)
    symmetrise(M, total, P)  # one pass in mirrored tiles, exactly symmetric
    return P, kept


@overload
def query_key_affinities(
    A: ArrayLike, *, exclude: None = None, dtype: DTypeLike = np.float64, out: np.ndarray | None = None
) -> np.ndarray: ...
@overload
def query_key_affinities(
    A: ArrayLike, *, exclude: ArrayLike, dtype: DTypeLike = np.float64, out: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]: ...
def query_key_affinities(
    A: ArrayLike, *, exclude: ArrayLike | None = None, dtype: DTypeLike = np.float64, out: np.ndarray | None = None
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The bipartite P of one head's queries and keys: ``P = [[0, A], [A^T, 0]] / (2 sum A)``, (2m, 2m).

    Rows 0..m-1 are the m kept tokens as queries, rows m..2m-1 the same tokens as keys: a query attracts the keys
    it attends to, and nothing else (no query-query or key-key affinity). ``A_ii`` is kept (query i and key i are
    different points). P is symmetric, its diagonal 0, its sum 1. With ``exclude`` (n,) those tokens are dropped
    from both sides and ``(P, kept)`` is returned, ``kept`` the int64 token indices of the m kept tokens (each
    appears twice in P: row r and row m + r). ``dtype`` and ``out`` as in :func:`attention_affinities`; the sum
    is accumulated in float64. Raises DegenerateAffinitiesError when no attention is left among the kept tokens.
    """
    A_in = np.asarray(A)
    if A_in.ndim != 2 or A_in.shape[0] != A_in.shape[1]:
        raise ValueError(
            f"query-key affinities take one attention head's square (n, n) matrix, got shape {A_in.shape}: hidden "
            "states have no query and key sides (use mode='hidden' for them)"
        )
    out_dtype = float_dtype(dtype)
    M = _check_attention(A_in)
    kept = np.arange(M.shape[0], dtype=np.int64)
    if exclude is not None:
        kept = np.flatnonzero(~_check_mask(exclude, M.shape[0])).astype(np.int64)
        M = M[np.ix_(kept, kept)]
    m = M.shape[0]
    if m < 1:
        raise DegenerateAffinitiesError("query-key P needs at least 1 token, but none remain after excluding tokens")
    total = float(M.sum(dtype=np.float64))
    if not (np.isfinite(total) and total > 0.0):
        raise DegenerateAffinitiesError(
            "this attention head puts no attention among the kept tokens, so the query-key P is undefined"
        )
    P = _output(out, out_dtype, (2 * m, 2 * m))
    scale = 1.0 / (2.0 * total)
    P[:m, :m] = 0.0
    P[m:, m:] = 0.0
    np.multiply(M, scale, out=P[:m, m:], casting="unsafe")
    P[m:, :m] = P[:m, m:].T  # the same rounded entries: exactly symmetric
    return (P, kept) if exclude is not None else P  # (the overloads give each call its one return type)


def _captured_head(A: object) -> tuple[np.ndarray, float] | None:
    """(A, ``sum_{m != n} (A_mn + A_nm)``) for a head as the capture gives it (C-contiguous float32 (n, n)),
    from one compiled pass that also finds every entry finite and non-negative; None for anything else, or
    when the pass finds a bad entry (the numpy checks then name it). float32 entries need no rescaling:
    neither A + A^T in float64 nor the sum can overflow (compare :func:`_power_of_two_scaled`)."""
    if not (
        isinstance(A, np.ndarray) and A.dtype == np.float32 and A.flags.c_contiguous
        and A.ndim == 2 and A.shape[0] == A.shape[1] >= 2
    ):  # fmt: skip
        return None
    from .matrix_kernels import row_census

    total, negative, off = row_census(A)
    return (A, 2.0 * off) if np.isfinite(total) and negative == 0 else None


def gaussian_affinities(
    X: ArrayLike,
    perplexity: float = 20.0,
    *,
    check: Callable[[], None] | None = None,
    dtype: DTypeLike = np.float64,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """P of standard exact t-SNE for points X (n, d): ``p_ij = (p_{j|i} + p_{i|j}) / 2n``.

    Each ``p_{j|i}`` is a Gaussian around ``x_i`` whose width is found by binary search so that the
    perplexity of row i equals ``perplexity`` (the effective number of neighbours). Matches
    ``sklearn.manifold._t_sne._joint_probabilities`` on squared euclidean distances. ``check()`` is called at
    each step of the search (a widget's cancel point: the search over n x n distances takes seconds at 2048
    points) and may raise to stop it. P is computed in float64 and rounded once to ``dtype`` (float32 or
    float64), written into ``out`` when given (a C-contiguous (n, n) array of that dtype).
    """
    X = np.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be a 2-D array (n points, d features), got shape {X.shape}")
    X = real_array(X, "X").astype(np.float64, copy=False)
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"X must have at least 2 points, got {n}")
    perplexity = _check_perplexity(perplexity, n)
    P = _output(out, float_dtype(dtype), (n, n))
    X = _distance_scaled(X)
    conditional_P = binary_search_perplexity(squared_distances(X), perplexity, check=check)
    from .matrix_kernels import symmetrise

    symmetrise(conditional_P, max(2.0 * float(conditional_P.sum()), MACHINE_EPSILON), P)
    return P


def _output(out: np.ndarray | None, out_dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """The array P is written into: ``out`` when it is C-contiguous of ``shape`` and ``out_dtype``, else a new
    one (``out`` None), else a ValueError."""
    if out is None:
        return np.empty(shape, dtype=out_dtype)
    if not (isinstance(out, np.ndarray) and out.shape == shape and out.dtype == out_dtype and out.flags.c_contiguous):
        raise ValueError(f"out must be a C-contiguous {out_dtype} array of shape {shape}")
    return out


def _power_of_two_scaled(A: np.ndarray) -> np.ndarray:
    """A times the power of two that brings its largest entry into [0.5, 1): exact in floating point."""
    largest = float(np.abs(A).max())
    if largest == 0.0:
        return A
    return np.ldexp(A, -int(np.frexp(largest)[1]))


_SAFE_SCALE = 2.0**100


def _distance_scaled(X: np.ndarray) -> np.ndarray:
    """X centred, and scaled by a power of two when its spread would over- or underflow squared distances.

    P depends on X only through distances, and the perplexity search adapts the Gaussians' widths to
    their scale, so P(c X + b) = P(X). Centring keeps the expansion |x|^2 + |y|^2 - 2 x.y of
    :func:`squared_distances` from cancelling (X + 1e10 changed P by 4e-3 uncentred). Coordinates of
    1e200 (squares overflow to inf, then NaN) or 1e-200 (squares underflow to 0, a uniform P) are
    brought to order 1 by a power of two, which is exact.
    """
    if np.abs(X).max() >= _SAFE_SCALE:
        X = _power_of_two_scaled(X)  # within [-1, 1] first, so that the mean cannot overflow
    X = X - X.mean(axis=0)
    spread = float(np.abs(X).max())
    if 1.0 / _SAFE_SCALE <= spread <= _SAFE_SCALE:
        return X
    return _power_of_two_scaled(X)


_GRAM_ROWS = 256  # rows of each product of :func:`squared_distances`


def squared_distances(X: np.ndarray) -> np.ndarray:
    """Squared euclidean distances between the rows of X, exactly symmetric with a zero diagonal: the expansion
    ``|x|^2 + |y|^2 - 2 x.y`` from BLAS's product, floored at 0 (it can go slightly negative by rounding), then
    ``(D + D^T) / 2`` with a zero diagonal, each a compiled pass (:mod:`.matrix_kernels`). The product goes in
    shares of rows on the package's threads, each on one BLAS thread (``_parallel.one_blas_thread``), as products of
    :data:`_GRAM_ROWS` rows whatever the shares: a BLAS product's bits for a row depend on the rows it is computed
    with (OpenBLAS 0.3.31: all rows at once against 256 at a time differ in the last bit), and P must not depend
    on the threads."""
    from .._parallel import in_shares, one_blas_thread
    from .matrix_kernels import gram_to_squared_distances, symmetrise

    sq_norms = np.einsum("ij,ij->i", X, X)
    n = X.shape[0]
    G = np.empty((n, n))

    def rows(lo: int, hi: int) -> None:
        for r in range(lo, hi, _GRAM_ROWS):
            np.matmul(X[r : min(hi, r + _GRAM_ROWS)], X.T, out=G[r : min(hi, r + _GRAM_ROWS)])
        gram_to_squared_distances(G, sq_norms, lo, hi)

    with one_blas_thread():
        in_shares(n, rows, count=max(1, min(16, n // _GRAM_ROWS)), multiple=_GRAM_ROWS)
    D = np.empty_like(G)
    symmetrise(G, 2.0, D)
    return D


def binary_search_perplexity(
    distances: ArrayLike, perplexity: float, *, check: Callable[[], None] | None = None
) -> np.ndarray:
    """Conditional probabilities ``p_{j|i}`` (rows sum to 1, zero diagonal) of the given perplexity.

    For every row, ``beta_i`` is searched (Halley's steps inside a bisection's bracket) until the row's entropy
    ``H(P_i) = log(sum_j exp(-beta_i d_ij)) + beta_i sum_j d_ij p_{j|i}`` is within 1e-5 of
    ``log(perplexity)``, scikit-learn's stopping rule (:func:`.perplexity.conditional_gaussians`: each row stops on
    its own). ``check()`` runs
    between shares of rows (a cancel point) and may raise to stop.
    """
    D = np.asarray(distances, dtype=np.float64)
    return conditional_gaussians(D, np.arange(D.shape[0]), perplexity, check)


def _check_attention(A: ArrayLike) -> np.ndarray:
    A = np.asarray(A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a 2-D square attention matrix (n, n), got shape {A.shape}")
    A = real_array(A, "A")
    if A.dtype not in (np.float32, np.float64):  # integers, float16: what the compiled pass takes
        A = A.astype(np.float64)
    smallest = A.min()
    if smallest < 0:
        raise ValueError(f"A has negative entries (min {smallest:.3g}); attention weights are non-negative")
    return A


def _check_mask(exclude: ArrayLike, n: int) -> np.ndarray:
    mask = np.asarray(exclude)
    if mask.dtype != np.bool_:
        raise TypeError(f"exclude must be a boolean mask, got dtype {mask.dtype}")
    if mask.shape != (n,):
        raise ValueError(f"exclude must have shape ({n},), one flag per token, got shape {mask.shape}")
    return mask


def _check_perplexity(perplexity: float, n: int) -> float:
    if not is_number(perplexity):
        raise TypeError(f"perplexity must be a number, got {type(perplexity).__name__}")
    perplexity = float(perplexity)
    if not np.isfinite(perplexity) or perplexity <= 0:
        raise ValueError(f"perplexity must be > 0, got {perplexity}")
    if perplexity >= n:
        raise ValueError(f"perplexity ({perplexity:g}) must be less than the number of points ({n})")
    return perplexity
