"""Align an embedding to a reference by orthogonal Procrustes, for a stable view between runs and frames.

t-SNE's KL depends only on pairwise distances, so a rotation, a reflection and a shift of Y leave it
unchanged; scaling would not, and is not applied.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from .._checks import real_array

__all__ = ["align", "procrustes"]


def _points(a: ArrayLike, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 2 or arr.shape[0] < 1:
        raise ValueError(f"{name} must be a 2-D array of points (n, d), got shape {arr.shape}")
    return real_array(arr, name)


def procrustes(Y: ArrayLike, reference: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The orthogonal map (rotation/reflection, Y mean, reference mean) that best moves Y onto ``reference``.

    With centred Yc and Rc and Yc^T Rc = U S V^T, the best orthogonal map is U V^T (no scaling).
    Fit it on some rows and apply it to all as ``(Y - y_mean) @ rotation + r_mean``.
    """
    Y64 = _points(Y, "Y").astype(np.float64)
    R = _points(reference, "reference").astype(np.float64)
    if Y64.shape != R.shape:
        raise ValueError(f"Y and reference must have the same shape, got {Y64.shape} and {R.shape}")
    # the rotation does not depend on the scale of either cloud: fit it on unit-scaled copies, so that
    # coordinates near 1e200 cannot overflow the cross-covariance (a NaN rotation)
    y_scale, r_scale = _scale(Y64), _scale(R)
    Ys, Rs = Y64 / y_scale, R / r_scale
    ys_mean, rs_mean = Ys.mean(axis=0), Rs.mean(axis=0)
    U, _, Vt = np.linalg.svd((Ys - ys_mean).T @ (Rs - rs_mean))
    return U @ Vt, ys_mean * y_scale, rs_mean * r_scale


def _scale(A: np.ndarray) -> float:
    largest = float(np.abs(A).max())
    return largest if largest > 0 else 1.0


def align(Y: ArrayLike, reference: ArrayLike) -> np.ndarray:
    """Y rotated/reflected and shifted to best match ``reference`` (least squares, same shape, no scaling).

    Float32 stays float32.
    """
    Y_in = np.asarray(Y)
    rotation, y_mean, r_mean = procrustes(Y_in, reference)
    aligned = (Y_in.astype(np.float64) - y_mean) @ rotation + r_mean
    if not np.isfinite(aligned).all():
        raise ValueError("Y and reference are too far apart to align in float64 (coordinates near 1e308)")
    dtype = Y_in.dtype if np.issubdtype(Y_in.dtype, np.floating) else np.float64
    return aligned.astype(dtype)


def align_rows(Y: np.ndarray, kept: np.ndarray, reference: np.ndarray, reference_kept: np.ndarray) -> np.ndarray:
    """Rotate, reflect and shift Y (rows = tokens ``kept``) onto ``reference`` over the tokens both hold.

    With the same tokens this is :func:`align`; otherwise the Procrustes map is fitted on the shared
    tokens and applied to every row. Fewer than 3 shared tokens: Y unchanged. Used for display only.
    """
    if len(kept) == len(reference_kept) and np.array_equal(kept, reference_kept):
        return np.ascontiguousarray(align(Y, reference), dtype=np.float32)
    _, rows, ref_rows = np.intersect1d(kept, reference_kept, assume_unique=True, return_indices=True)
    if len(rows) < 3:
        return Y
    rotation, y_mean, r_mean = procrustes(Y[rows], reference[ref_rows])
    return np.ascontiguousarray((Y - y_mean) @ rotation + r_mean, dtype=np.float32)
