"""The split grid's near field (:class:`.interpolation.Repulsion`): the pairs closer than the cutoff r_c, where the
grid's far kernels are smooth polynomials, get the difference to the true kernels exactly.

The points are sorted into square cells of side r_c / ``reach`` (:func:`.near_kernels.cell_sort`), so that the
pairs closer than r_c lie within ``reach`` cells of each other, and :func:`.near_kernels.near_part` takes each such
pair once: a point against the rest of its own row of cells (its cell and the next ``reach``, the points after it)
and the ``reach`` rows above (``reach`` cells either side), adding each pair's terms to both points. Work goes in
pieces of whole cell rows (:data:`NEAR_PIECES`, fixed whatever the threads); a piece's pairs reach ``reach`` rows
past its own, which another piece owns, so each piece adds into a buffer of its own (its rows and the ``reach``
after them) and :meth:`NearField.add_to` sums the buffers in piece order: the same bits on any number of threads.
"""

from __future__ import annotations

import numpy as np

from . import near_kernels as nk
from .near_kernels import NEAR_PAD

__all__ = ["NEAR_PIECES", "NearField"]

#: pieces (ranges of cell rows) the near field is cut into for the worker threads
NEAR_PIECES = 16


class NearField:
    """The near field of one :class:`.interpolation.Repulsion`, its buffers kept between calls: the points sorted
    into cells (:meth:`sort`: ``order``, ``xs``, ``ys``, ``start``), then :meth:`pieces` pieces (:meth:`piece`, in
    any order or at once), then :meth:`add_to`."""

    def __init__(self, n: int, reach: int):
        self.reach = reach
        self.order = np.empty(n, np.int64)
        self.xs = np.zeros(n + NEAR_PAD, np.float32)  # (the near field reads whole vectors past a row's end)
        self.ys = np.zeros(n + NEAR_PAD, np.float32)
        self.start = np.zeros(2, np.int64)
        self.cells = (1, 1)
        self.cut = 0.0
        self.coefficients = (np.zeros(4), np.zeros(4))
        self.rows = np.zeros(1, np.int64)  # the pieces' first cell rows, and the end
        self.bases = np.zeros(1, np.int64)  # each piece's first sorted place, its buffer's offset, and the end
        self.offsets = np.zeros(1, np.int64)
        self.sums = np.zeros((3, 0), np.float32)
        self.total = np.empty((3, n + NEAR_PAD), np.float32)  # the pieces summed (:meth:`add_to`)

    def sort(self, x: np.ndarray, y: np.ndarray, *, origin: tuple[float, float], cells: tuple[int, int],
             start: np.ndarray, cutoff: float, coefficients: tuple[np.ndarray, np.ndarray]) -> int:  # fmt: skip
        """Sort the points into ``cells`` (ncx, ncy) of side ``cutoff`` / reach from ``origin`` (``start``: their
        counts' array, filled here) and cut the rows into pieces; returns the number of pieces. ``coefficients``:
        the far kernels' Taylor polynomials within the cutoff (w's, w^2's)."""
        ncx, ncy = cells
        x0, y0 = origin
        nk.cell_sort(x, y, x0, y0, cutoff / self.reach, ncx, ncy, start, self.order, self.xs, self.ys)
        self.start, self.cells, self.cut, self.coefficients = start, cells, cutoff**2, coefficients
        self.rows = np.unique(np.linspace(0, ncy, min(ncy, NEAR_PIECES) + 1).astype(np.int64))
        first = start[self.rows[:-1] * ncx]
        last = start[np.minimum(self.rows[1:] + self.reach, ncy) * ncx]
        self.bases = first
        self.offsets = np.concatenate([[0], np.cumsum(last - first + NEAR_PAD)])
        if self.sums.shape[1] < self.offsets[-1]:
            self.sums = np.empty((3, int(self.offsets[-1] * 1.25)), np.float32)
        return len(self.rows) - 1

    def piece(self, k: int) -> None:
        """The pairs of the k-th range of cell rows, into its buffer."""
        (ncx, ncy), (c1, c2), a, b = self.cells, self.coefficients, int(self.offsets[k]), int(self.offsets[k + 1])
        sx, sy, sz = self.sums[0, a:b], self.sums[1, a:b], self.sums[2, a:b]
        nk.near_part(self.xs, self.ys, self.start, ncx, ncy, self.reach, self.cut, c1, c2, sx, sy, sz,
                  int(self.bases[k]), int(self.rows[k]), int(self.rows[k + 1]))  # fmt: skip

    def add_to(self, out: np.ndarray, z: np.ndarray) -> None:
        """Add the pieces' buffers, in piece order, to the far field's ``out`` (2, n) and ``z`` (n,), and take off
        poly1(0), the pair (i, i)'s far kernel the grid counted."""
        self_term = np.float32(np.polynomial.polynomial.polyval(-self.cut, self.coefficients[0]))
        nk.near_add(self.sums, self.offsets, self.bases, self.order, self_term, self.total, out, z)
