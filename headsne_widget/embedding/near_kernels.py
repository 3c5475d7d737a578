"""Compiled kernels of the split grid's near field (:mod:`.near_field`): the points' counting sort into cells, the
cells' counts, the stencil's pair count, and the pairs' corrections."""

from __future__ import annotations

import numpy as np
from numba import njit

from .kernel_common import FASTMATH as _FASTMATH

__all__ = ["NEAR_PAD", "cell_counts", "cell_sort", "near_add", "near_pairs", "near_part"]

#: entries past n in the near field's sorted coordinates and past each piece's buffer: each row of cells is read in
#: whole vectors of this many points, those past its end masked (LLVM's float32 loop on AVX2 takes 8 lanes twice an
#: iteration; AVX-512, 16)
NEAR_PAD = 16


@njit(cache=True, nogil=True, error_model="numpy")
def cell_sort(x, y, x0, y0, side, ncx, ncy, start, order, xs, ys):  # pragma: no cover - compiled
    """Counting sort of the points into square cells of ``side``: ``start[c] .. start[c + 1]`` are cell c's
    points (c = row * ncx + column) in ``order`` (their indices) and ``xs``, ``ys`` (their coordinates)."""
    n = x.shape[0]
    cells = ncx * ncy
    cell = np.empty(n, np.int64)
    start[:] = 0
    inv = 1.0 / side
    for i in range(n):
        cx = int((np.float64(x[i]) - x0) * inv)
        cy = int((np.float64(y[i]) - y0) * inv)
        cx = min(max(cx, 0), ncx - 1)
        cy = min(max(cy, 0), ncy - 1)
        c = cy * ncx + cx
        cell[i] = c
        start[c + 1] += 1
    for c in range(cells):
        start[c + 1] += start[c]
    fill = start[:-1].copy()
    for i in range(n):
        c = cell[i]
        k = fill[c]
        fill[c] = k + 1
        order[k] = i
        xs[k] = x[i]
        ys[k] = y[i]


@njit(cache=True, nogil=True, error_model="numpy")
def cell_counts(x, y, x0, y0, side, ncx, ncy, start):  # pragma: no cover - compiled
    """``start[c + 1]`` = the number of points in cell c (``start[0]`` = 0), without sorting them."""
    start[:] = 0
    inv = 1.0 / side
    for i in range(x.shape[0]):
        cx = min(max(int((np.float64(x[i]) - x0) * inv), 0), ncx - 1)
        cy = min(max(int((np.float64(y[i]) - y0) * inv), 0), ncy - 1)
        start[cy * ncx + cx + 1] += 1
    for c in range(ncx * ncy):
        start[c + 1] += start[c]


@njit(cache=True, nogil=True, error_model="numpy")
def near_add(sums, offsets, bases, order, self_term, total, out, z):  # pragma: no cover - compiled
    """The pieces' buffers ``sums`` (3, ...) summed in piece order into ``total`` (3, n + NEAR_PAD, float32, zeroed
    here), then added to the far field's ``out`` (2, n) and ``z`` (n,) at the points' own places ``order``, less
    ``self_term`` (float32) from each z: the arithmetic of the numpy code it replaced in
    :meth:`.near_field.NearField.add_to`, in one pass each (numpy's zeros, slices and fancy-indexed adds took
    1.4-1.6 ms of every pass at 65536 points, serial)."""
    total[:] = 0
    for k in range(offsets.shape[0] - 1):
        a, base = offsets[k], bases[k]
        for t in range(offsets[k + 1] - a):
            for c in range(3):
                total[c, base + t] += sums[c, a + t]
    for t in range(order.shape[0]):
        o = order[t]
        out[0, o] += total[0, t]
        out[1, o] += total[1, t]
        z[o] += total[2, t] - self_term


@njit(cache=True, nogil=True, error_model="numpy")
def near_pairs(start, ncx, ncy, reach):  # pragma: no cover - compiled
    """The near field's stencil pairs (its work; :func:`near_part` visits each pair once, about half of them): each
    point against the points of the cells up to ``reach`` cells away in x and in y."""
    total = 0
    for cy in range(ncy):
        for cx in range(ncx):
            own = start[cy * ncx + cx + 1] - start[cy * ncx + cx]
            around = 0
            for ny in range(max(cy - reach, 0), min(cy + reach + 1, ncy)):
                around += start[ny * ncx + min(cx + reach + 1, ncx)] - start[ny * ncx + max(cx - reach, 0)]
            total += own * around
    return total


@njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def near_part(xs, ys, start, ncx, ncy, reach, cut, c1, c2, sx, sy, sz, base, row_lo, row_hi):  # pragma: no cover
    """The near-field corrections of the pairs whose first point lies in cell rows ``row_lo .. row_hi - 1``, into
    this piece's buffers ``sx``, ``sy``, ``sz`` (float32, zeroed here; entry k - ``base`` for the point at sorted
    place k): each pair once, its terms added to one point and, with the sign of (y_i - y_j), to the other.

    The far kernels on the grid equal w = 1 / (1 + u) and w^2 (u = d^2) beyond ``cut`` = r_c^2 and their cubic
    Taylor polynomials about ``cut`` (coefficients ``c1``, ``c2``, 4 each) inside, so that they are smooth; here
    each pair closer than r_c gets w - poly1(u) added to z and (w^2 - poly2(u)) (y_i - y_j) to the repulsion (the
    pair (i, i) is left out: the caller takes the grid's poly1(0) off). The loop over a row of cells is one
    contiguous, vectorised loop (selects, no branches) in float32 (``xs``, ``ys`` are the float32 coordinates, so
    each difference is exact, with :data:`NEAR_PAD` entries past n), over slices from 0 (numba's wrap-around of a
    negative index, on ``xs[m]`` for m from a cell's start, made LLVM load the points one at a time: 1.7 against
    1.2 ns a pair at 65536 points, one thread) rounded up to whole vectors, the points past the row masked (the
    scalar remainder of up to 15 points a row cost as much as the vectors of a row of 50: 0.9 ns a pair). Each
    pair once, its other point's terms added in the same vectorised loop: 10.9 against 15.8 ms at the state of
    iteration 1000 of a 65536-point run (19.8 M stencil pairs), 18.6 against 28.0 at 500 (42.0 M), one thread."""
    f32 = np.float32
    a0, a1, a2, a3 = f32(c1[0]), f32(c1[1]), f32(c1[2]), f32(c1[3])
    b0, b1, b2, b3 = f32(c2[0]), f32(c2[1]), f32(c2[2]), f32(c2[3])
    cut32, one, zero = f32(cut), f32(1.0), f32(0.0)
    sx[:] = 0.0
    sy[:] = 0.0
    sz[:] = 0.0
    for cy in range(row_lo, row_hi):
        for cx in range(ncx):
            row_end = start[cy * ncx + min(cx + reach + 1, ncx)]
            for k in range(start[cy * ncx + cx], start[cy * ncx + cx + 1]):
                xi = xs[k]
                yi = ys[k]
                rx = ry = rz = zero
                for ny in range(cy, min(cy + reach + 1, ncy)):
                    lo = k + 1 if ny == cy else start[ny * ncx + max(cx - reach, 0)]
                    count = (row_end if ny == cy else start[ny * ncx + min(cx + reach + 1, ncx)]) - lo
                    whole = (count + NEAR_PAD - 1) // NEAR_PAD * NEAR_PAD
                    px = xs[lo : lo + whole]
                    py = ys[lo : lo + whole]
                    tx = sx[lo - base : lo - base + whole]
                    ty = sy[lo - base : lo - base + whole]
                    tz = sz[lo - base : lo - base + whole]
                    for m in range(whole):
                        dx = xi - px[m]
                        dy = yi - py[m]
                        u = dx * dx + dy * dy
                        w = one / (one + u)
                        t = u - cut32
                        k1 = w - (a0 + t * (a1 + t * (a2 + t * a3)))
                        k2 = w * w - (b0 + t * (b1 + t * (b2 + t * b3)))
                        inside = (u < cut32) & (m < count)
                        k1 = k1 if inside else zero
                        fx = k2 * dx if inside else zero
                        fy = k2 * dy if inside else zero
                        rx += fx
                        ry += fy
                        rz += k1
                        tx[m] -= fx
                        ty[m] -= fy
                        tz[m] += k1
                sx[k - base] += rx
                sy[k - base] += ry
                sz[k - base] += rz
