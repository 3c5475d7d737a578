"""The t-SNE repulsion in O(n) plus an FFT: polynomial interpolation on a grid (Linderman et al. 2019).

The repulsion of t-SNE's gradient and its normaliser are sums over all n^2 pairs,

    repulsion_i = sum_j w_ij^2 (y_i - y_j),   Z = sum_{i != j} w_ij,   w_ij = 1 / (1 + |y_i - y_j|^2),

which :func:`interpolated_repulsion` approximates as FIt-SNE and openTSNE do (Linderman, Rachh, Hoskins,
Steinerberger, Kluger, "Fast interpolation-based t-SNE for improved visualization of single-cell RNA-seq
data", Nature Methods 16, 2019): the embedding's bounding box is cut into square-ish boxes of side at most
``box`` (1 unit by default: the kernel's own scale), each with ``points x points`` equispaced interpolation
nodes; every point's charges (1, x, y; the split grid's 1 alone) are spread to its box's nodes with Lagrange
weights (:func:`.interpolation_kernels.spread`), the node-to-node sums of the kernels are FFT convolutions on the
uniform grid of all nodes (the kernels depend on node differences only: a circulant embedding, zero padded to a
fast FFT length; in float32, pruned to the rows that hold charges, :func:`_convolve`), and the potentials are
interpolated back to the points with the same weights (:func:`.interpolation_kernels.gather_part`).
Work: O(n points^2) for the two interpolations and O(G log G) for the FFT of a grid of
G = (extent / box * points)^2 nodes, so it depends on the embedding's extent, not on n^2.

Accuracy is measured, not assumed (``tests/test_sparse_tsne.py``): on a converged t-SNE embedding of n = 4096
points, the relative error of the repulsion forces (norm of the error over norm of the forces) and of Z is
stated next to :data:`POINTS` and :data:`BOX`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.fft
from numpy.typing import ArrayLike

from .._parallel import in_shares, shares
from . import interpolation_kernels as ik
from . import near_kernels as nk
from .grid_plan import MIN_BOXES, GridPlanner, Plan, ladder
from .near_field import NEAR_PIECES, NearField

__all__ = ["BOX", "MIN_BOXES", "NEAR_PIECES", "POINTS", "Repulsion", "exact_repulsion", "interpolated_repulsion"]

#: interpolation nodes per box and dimension (FIt-SNE's and openTSNE's default: 3)
POINTS = 3
#: largest side of a box of the trimmed grid, in embedding units (FIt-SNE and openTSNE: 1, 6 times the error)
BOX = 0.5
#: the split grid's cutoff r_c over its box side. 2.25 since its far field interpolates w^2 (y_i - y_j) as a whole
#: (:data:`.interpolation_kernels.VECTOR_TERMS`): at 2 that was less accurate than w^2 alone had been (the states
#: of iterations 500 and 1000 of a 65536-point run: 5.9e-3 and 1.1e-2 against 4.5e-3 and 7.4e-3; the test's
#: converged disk of 4096 points 1.1e-3 against 8.9e-4), at 2.25 it is more accurate than that everywhere
#: (4.0e-3, 6.8e-3, 6.3e-4) for 27 % more near pairs
RATIO = 2.25
#: points from which the gathering runs in shares on the worker threads
_SHARE_MIN_POINTS = 16384
#: the near field's cells per cutoff r_c: cells of side r_c / REACH, each point against the (2 REACH + 1)^2 cells
#: around its own (1: 9 cells of side r_c, 9 r_c^2 of pairs visited for the pi r_c^2 inside; 2: 6.25 r_c^2)
REACH = 2


def _taylor_coefficients(power: int, cut: float) -> np.ndarray:
    """Coefficients c_k of the cubic Taylor polynomial of (1 + u)^-power about u = ``cut``: sum_k c_k (u - cut)^k
    (the split kernels are C^3 at r_c: enough for interpolation of third order)."""
    k = np.arange(4)
    if power == 1:
        return (-1.0) ** k / (1.0 + cut) ** (k + 1)
    return (-1.0) ** k * (k + 1) / (1.0 + cut) ** (k + 2)


class Repulsion:
    """The interpolated repulsion of one embedding at a time, with its buffers kept between calls.

    ``repulsion(x, y, out, z)`` fills ``out`` (2, n) with sum_j w_ij^2 (y_i - y_j) and ``z`` (n,) with
    sum_{j != i} w_ij, both approximated, and returns Z = sum z (float64).

    Each call picks the cheaper of two grids for the embedding as it is (a t-SNE embedding is a dense core with
    a few far points during early exaggeration, then a wide disk whose points lie units apart):

    - **trimmed**: the box holding all points but the ``trim`` share beyond each side's quantile, cut into
      boxes at most ``box`` wide (1: the kernel's own scale; and at least ``min_boxes`` of them, so a compact
      embedding gets boxes as fine as its own scale); the points outside that box act on the grid's nodes, and
      the nodes' charges on them, directly (O(outside x nodes)), and on each other exactly;
    - **split** (as particle-mesh methods do): the kernels w and w^2 are split at r_c = ``ratio`` x box; on the
      grid (boxes of ``box`` = extent / ``split_boxes``, at least ``far_box``) go smooth kernels, equal to w and
      w^2 beyond r_c and to their cubic Taylor polynomials in d^2 inside; the pairs closer than r_c get
      the difference exactly (cell lists of side r_c, :func:`.interpolation_kernels.near_part`). The grid then
      needs boxes on the scale of r_c, not of 1: a wide embedding gets a small grid and a few near pairs.

    ``mode`` forces one of them ("trimmed", "split") or picks by estimated cost ("auto").
    """

    def __init__(
        self,
        n: int,
        *,
        points: int = POINTS,
        box: float = BOX,
        min_boxes: int = MIN_BOXES,
        trim: float | None = None,
        mode: str = "auto",
        ratio: float = RATIO,
        far_box: float = 1.0,
        split_boxes: int | None = None,
        workers: int = 1,
        reach: int = REACH,
    ):
        if points < 2 or box <= 0 or min_boxes < 1 or ratio <= 0 or far_box <= 0:
            raise ValueError("interpolation needs points >= 2 and positive sizes")
        if mode not in ("auto", "trimmed", "split"):
            raise ValueError(f"mode must be 'auto', 'trimmed' or 'split', got {mode!r}")
        if trim is not None and not 0 <= trim < 0.5:
            raise ValueError(f"trim must be in [0, 0.5), got {trim!r}")
        self.points, self.box, self.min_boxes, self.trim, self.mode = (
            int(points),
            float(box),
            int(min_boxes),
            trim,
            mode,
        )
        self.ratio, self.far_box, self.split_boxes = float(ratio), float(far_box), split_boxes
        self.workers = int(workers)
        self.reach = int(reach)
        self.planner = GridPlanner(self.points, self.box, self.min_boxes, trim, mode, self.ratio, self.far_box,
                                   split_boxes, self.reach)  # fmt: skip
        self.all = np.arange(n, dtype=np.int64)
        self.near = NearField(n, self.reach)
        self._kernel_key: tuple | None = None
        self._call: tuple = ()
        self._kernel_hat: np.ndarray | None = None
        self._products = np.empty((0, 0, 0), np.complex64)  # the FFT's products, kept: see :func:`_convolve`
        #: what the last call did (for benchmarks and tests): "split" or "trimmed", grid boxes, near pairs, outside
        self.last: dict[str, Any] = {}

    def _plan(self, x: np.ndarray, y: np.ndarray) -> Plan:
        """The cheapest grid for the embedding as it is (:meth:`.grid_plan.GridPlanner.plan`)."""
        return self.planner.plan(x, y, self.all)

    # -------------------------------------------------------------- the sums

    def _kernel(self, spacing: float, lx: int, ly: int, cut: float) -> np.ndarray:
        """FFTs (kernels, ly, lx // 2 + 1, complex64) of the grid's kernels at every node offset o = target - source
        placed circularly on an (ly, lx) grid (each of the two offsets up to half the grid); cached while the grid
        keeps its size, spacing and cut. The trimmed grid's (``cut`` 0): w^2 and w; the split grid's: w^2 o_x,
        w^2 o_y and w, with w and w^2 their cubic Taylor polynomials in |o|^2 within ``cut``."""
        key = (spacing, lx, ly, cut)
        if key != self._kernel_key:
            ox = np.arange(lx, dtype=np.float64)
            ox = np.where(ox < lx // 2 + 1, ox, ox - lx)[None, :] * spacing
            oy = np.arange(ly, dtype=np.float64)
            oy = np.where(oy < ly // 2 + 1, oy, oy - ly)[:, None] * spacing
            u = oy**2 + ox**2
            w = 1.0 / (1.0 + u)
            w2 = w * w
            if cut > 0:
                inside = u < cut
                w[inside] = np.polynomial.polynomial.polyval(u[inside] - cut, _taylor_coefficients(1, cut))
                w2[inside] = np.polynomial.polynomial.polyval(u[inside] - cut, _taylor_coefficients(2, cut))
            kernels = np.stack([w2 * ox, w2 * oy, w] if cut > 0 else [w2, w])
            self._kernel_hat = scipy.fft.rfft2(kernels, workers=self.workers).astype(np.complex64)
            self._kernel_key = key
        assert self._kernel_hat is not None
        return self._kernel_hat

    def __call__(self, x: np.ndarray, y: np.ndarray, out: np.ndarray, z: np.ndarray) -> float:
        pieces = self.begin(x, y, out, z)
        parallel = x.shape[0] >= _SHARE_MIN_POINTS
        self.far(parallel)
        if parallel:
            shares(pieces, self.near_piece)
        else:
            for k in range(pieces):
                self.near_piece(k)
        return self.finish()

    # The steps of a call, for a caller that runs them beside other work (:class:`.sparse_engine.SparseEngine`:
    # the far field on one thread while the others take the attraction and the near field's pieces):
    # ``begin``, then ``far`` and every ``near_piece`` in any order or at once, then ``finish``.

    def begin(self, x: np.ndarray, y: np.ndarray, out: np.ndarray, z: np.ndarray) -> int:
        """Plan the grid for (x, y) (and sort the points into the near field's cells); returns the number of
        near-field pieces (0 without a near field)."""
        self._call = (x, y, out, z, self._plan(x, y))
        plan = self._call[4]
        if not plan.split:
            return 0
        assert plan.start is not None
        cut = plan.cutoff**2
        coefficients = (_taylor_coefficients(1, cut), _taylor_coefficients(2, cut))
        return self.near.sort(
            x,
            y,
            origin=(plan.x0, plan.y0),
            cells=plan.cells,
            start=plan.start,
            cutoff=plan.cutoff,
            coefficients=coefficients,
        )

    def near_piece(self, k: int) -> None:
        """The near field's k-th piece (a range of cell rows: :class:`.near_field.NearField`)."""
        self.near.piece(k)

    def far(self, parallel: bool = False) -> None:
        """The grid's part: spread, FFT convolution, gather into ``out`` and ``z`` (the gathering in shares on the
        worker threads where ``parallel``)."""
        x, y, out, z, plan = self._call
        p = self.points
        box, x0, y0, nbx, nby, inside, outside = (
            plan.box,
            plan.x0,
            plan.y0,
            plan.nbx,
            plan.nby,
            plan.inside,
            plan.outside,
        )
        gx, gy = nbx * p, nby * p
        cx, cy = x0 + 0.5 * nbx * box, y0 + 0.5 * nby * box
        # the split plan's points in the near field's cell order (its float32 copies: the coordinates themselves
        # for a float32 embedding), so that the grid's nodes are met in order; the trimmed plan's as they come
        near = self.near
        xg, yg, src, dst = (near.xs, near.ys, self.all, near.order) if plan.split else (x, y, inside, inside)
        charges = np.empty((1 if plan.split else ik.CHARGES, gy, gx))
        ik.spread(xg, yg, src, x0, y0, box, nbx, nby, cx, cy, charges)
        # a fast FFT length, from a ladder of sizes that changes rarely (the kernel's FFT is reused meanwhile)
        lx = scipy.fft.next_fast_len(int(ladder(2 * gx - 1)), real=True)
        ly = scipy.fft.next_fast_len(int(ladder(2 * gy - 1)), real=True)
        kernel_hat = self._kernel(box / p, lx, ly, plan.cutoff**2)
        terms = kernel_hat.shape[0] if plan.split else ik.TERMS
        if self._products.shape != (terms, ly, lx // 2 + 1):
            self._products = np.empty((terms, ly, lx // 2 + 1), np.complex64)
        potentials = _convolve(charges, kernel_hat, ly, lx, self.workers, self._products)
        spacing = box / p
        m = outside.shape[0]
        if m:
            ik.nodes_from_points(x, y, outside, cx, cy, x0, y0, spacing, potentials)
        own = 0.0 if plan.split else 1.0

        def part(lo: int, hi: int) -> None:
            ik.gather_part(xg, yg, src, dst, x0, y0, box, nbx, nby, cx, cy, potentials, own, out, z, lo, hi)

        if parallel:
            in_shares(inside.shape[0], part, 4)
        else:
            part(0, inside.shape[0])
        if m:
            ik.outside_part(x, y, outside, cx, cy, x0, y0, spacing, charges, out, z, 0, m)
        self.last = {"split": plan.split, "boxes": (nby, nbx), "fft": (ly, lx), "outside": m, "near_pairs": 0}

    def finish(self) -> float:
        """Add the near field to the far field's sums; returns Z = sum z (float64)."""
        _, _, out, z, plan = self._call
        if plan.split:
            assert plan.start is not None
            self.near.add_to(out, z)
            ncx, ncy = plan.cells
            self.last["near_pairs"] = int(nk.near_pairs(plan.start, ncx, ncy, self.reach))
        return float(z.sum(dtype=np.float64))


def _convolve(
    charges: np.ndarray, kernel_hat: np.ndarray, ly: int, lx: int, workers: int, products: np.ndarray
) -> np.ndarray:
    """The node potentials float32 by FFTs of length (ly, lx) in float32: the split grid's charge (1, Gy, Gx)
    convolved with each of its :data:`.VECTOR_TERMS` kernels, or the trimmed grid's charges (CHARGES, Gy, Gx) with
    w^2 and the first with w (:data:`.TERMS` potentials). Pruned: the charges fill the first Gy rows only and only
    the first Gy rows of the result are wanted, so the transforms along x run on Gy rows, not ly. Error: 6e-7 of
    the largest potential. The split grid's one forward transform and three inverse ones took 13 ms where the
    trimmed grid's three and four took 26-28 (800 x 800, the state of iteration 1000 of a 65536-point run, one
    thread).

    ``products`` (potentials, ly, lx // 2 + 1) complex64: the caller's buffer, kept between calls, in which the
    spectra are multiplied and transformed back in place (``overwrite_x``). A fresh 7.7 MB array for each and a
    copy for the transform took 22-24 ms of the chain's FFTs where this takes 13-16 (800 x 800, one thread)."""
    gy, gx = charges.shape[1], charges.shape[2]
    rows = scipy.fft.rfft(charges.astype(np.float32), n=lx, axis=-1, workers=workers)
    charges_hat = scipy.fft.fft(rows, n=ly, axis=-2, workers=workers, overwrite_x=True)
    if charges.shape[0] == 1:
        np.multiply(kernel_hat, charges_hat, out=products)
    else:
        np.multiply(charges_hat, kernel_hat[0], out=products[:3])
        np.multiply(charges_hat[0], kernel_hat[1], out=products[3])
    rows = scipy.fft.ifft(products, axis=-2, workers=workers, overwrite_x=True)[:, :gy]
    return np.ascontiguousarray(scipy.fft.irfft(rows, n=lx, axis=-1, workers=workers)[:, :, :gx])


def interpolated_repulsion(Y: ArrayLike, **grid: Any) -> tuple[np.ndarray, float]:
    """(repulsion (n, 2) float64, Z): the interpolated sum_j w_ij^2 (y_i - y_j) and sum_{i != j} w_ij of an
    embedding Y (n, 2). ``grid``: the keywords of :class:`Repulsion` (points, box, cutoff, far_box, degree)."""
    Y = np.ascontiguousarray(np.asarray(Y, dtype=np.float64).T)
    n = Y.shape[1]
    out, z = np.empty((2, n)), np.empty(n)
    Z = Repulsion(n, **grid)(Y[0], Y[1], out, z)
    return out.T.copy(), Z


def exact_repulsion(Y: ArrayLike) -> tuple[np.ndarray, float]:
    """(repulsion (n, 2), Z) of :func:`interpolated_repulsion`, summed exactly over all pairs in float64
    (O(n^2) time, O(n) memory; rows in shares on the worker threads)."""
    Y = np.ascontiguousarray(np.asarray(Y, dtype=np.float64).T)
    n = Y.shape[1]
    out, z = np.empty((2, n)), np.empty(n)
    in_shares(n, lambda lo, hi: ik.exact_repulsion_part(Y[0], Y[1], out, z, lo, hi))
    return out.T.copy(), float(z.sum())
