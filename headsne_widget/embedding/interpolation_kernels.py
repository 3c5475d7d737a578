"""Compiled CPU kernels of the t-SNE for a sparse P (:mod:`.sparse_engine`): the exact attraction over P's
non-zeros, the spreading and gathering steps of the interpolated repulsion (:mod:`.interpolation`), the KL
over P's non-zeros, and the exact O(n^2) sums the approximation is checked against.

Embeddings are (runs, 2, n) as in :mod:`.kernels`; P is CSR (``indptr``, ``indices``, ``data``), symmetric,
so row i holds every j with p_ij > 0. Every kernel works on a range of rows ``lo .. hi`` and writes only
those rows (no atomics): :mod:`.sparse_engine` hands ranges of equal work to the worker threads of
:mod:`.._parallel`, and a range's result does not depend on which thread ran it. Sums go in float64.

The grid steps follow Linderman et al. (2019), "Fast interpolation-based t-SNE for improved visualization
of single-cell RNA-seq data" (Nature Methods 16, 243-245): each point's charges are spread to the ``p x p``
equispaced nodes of its box with Lagrange weights, and the potentials at the nodes are interpolated back
with the same weights. Nodes sit at ``(k + 0.5) / p`` of a box (k = 0 .. p - 1), so all the nodes of a
grid of boxes form one uniform grid (spacing box / p) and the node-to-node kernel sums are one FFT
convolution (:mod:`.interpolation`). This is our own code (numba), written from the paper.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .kernel_common import FASTMATH as _FASTMATH
from .kernel_common import flush_denormals, restore_fp_state

#: charges per point on the grid: 1, x, y (see :func:`spread`)
CHARGES = 3
#: potentials per node: the squared kernel's sums of the three charges, the kernel's sum of the charge 1
TERMS = 4


@njit(inline="always", error_model="numpy")
def _lagrange(u, p, out):  # pragma: no cover - compiled
    """``out[k]`` = the Lagrange basis polynomial of node k at ``u`` (a position in the box, in [0, 1]),
    for the p nodes (k + 0.5) / p."""
    for k in range(p):
        tk = (k + 0.5) / p
        value = 1.0
        for m in range(p):
            if m != k:
                tm = (m + 0.5) / p
                value *= (u - tm) / (tk - tm)
        out[k] = value


@njit(cache=True, nogil=True, error_model="numpy")
def locate(x, members, origin, box, boxes, p, first, weights):  # pragma: no cover - compiled
    """For one coordinate of the points ``members``: ``first[i]``, the grid index of the first node of its box,
    and ``weights[i, k]``, the Lagrange weight of the box's node k. The last box is closed on the right."""
    inv = 1.0 / box
    for i in members:
        s = (np.float64(x[i]) - origin) * inv
        b = int(np.floor(s))
        b = 0 if b < 0 else (boxes - 1 if b > boxes - 1 else b)
        first[i] = b * p
        _lagrange(s - b, p, weights[i])


@njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def spread(x, y, members, cx, cy, fx, fy, wx, wy, grid):  # pragma: no cover - compiled
    """``grid[t]`` (CHARGES, Gy, Gx), zeroed here: the charges 1, x', y' of the points ``members`` (x' = x - cx,
    y' = y - cy, coordinates about the grid's centre) times the weights of the nodes of their boxes."""
    grid[:] = 0.0
    p = wx.shape[1]
    for i in members:
        xi = np.float64(x[i]) - cx
        yi = np.float64(y[i]) - cy
        gx = fx[i]
        gy = fy[i]
        for a in range(p):
            wa = wy[i, a]
            row0 = grid[0, gy + a]
            row1 = grid[1, gy + a]
            row2 = grid[2, gy + a]
            for b in range(p):
                w = wa * wx[i, b]
                row0[gx + b] += w
                row1[gx + b] += w * xi
                row2[gx + b] += w * yi


@njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def gather_part(x, y, members, cx, cy, fx, fy, wx, wy, potentials, own, repulsion, z, lo, hi):  # pragma: no cover
    """Repulsion and kernel sums of the points ``members[lo:hi]`` from the node potentials (TERMS, Gy, Gx): the squared
    kernel's sums of the charges 1, x', y' (phi_0, phi_1, phi_2) and the kernel's sum of the charge 1 (phi_3):

        repulsion_i = sum_j w_ij^2 (y_i - y_j) = y_i phi_0 - (phi_1, phi_2),   z_i = phi_3 - ``own``

    (``own``: the self term the grid counted, w_ii = 1, or 0 when the near field removes it). The difference
    y_i phi_0 - phi_1 cancels to about |y'_i| / (distance to the neighbours) relative: harmless in float64,
    and coordinates are taken about the grid's centre."""
    p = wx.shape[1]
    for m in range(lo, hi):
        i = members[m]
        gx = fx[i]
        gy = fy[i]
        s0 = s1 = s2 = s3 = 0.0
        for a in range(p):
            wa = wy[i, a]
            for b in range(p):
                w = wa * wx[i, b]
                s0 += w * potentials[0, gy + a, gx + b]
                s1 += w * potentials[1, gy + a, gx + b]
                s2 += w * potentials[2, gy + a, gx + b]
                s3 += w * potentials[3, gy + a, gx + b]
        xi = np.float64(x[i]) - cx
        yi = np.float64(y[i]) - cy
        repulsion[0, i] = xi * s0 - s1
        repulsion[1, i] = yi * s0 - s2
        z[i] = s3 - own


@njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def attraction_part(indptr, indices, data, Y, exaggeration, attraction, lo, hi):  # pragma: no cover - compiled
    """``attraction[r, :, i] = exaggeration * sum_j p_ij w_ij (y_i - y_j)`` over row i's non-zeros, rows
    ``lo .. hi - 1``, every run (each row of P is read once for all runs)."""
    runs = Y.shape[0]
    fp_state = flush_denormals()
    for i in range(lo, hi):
        start = indptr[i]
        stop = indptr[i + 1]
        for r in range(runs):
            x = Y[r, 0]
            y = Y[r, 1]
            xi = x[i]
            yi = y[i]
            ax = 0.0
            ay = 0.0
            for k in range(start, stop):
                j = indices[k]
                dx = xi - x[j]
                dy = yi - y[j]
                pw = data[k] / (1.0 + dx * dx + dy * dy)
                ax += pw * dx
                ay += pw * dy
            attraction[r, 0, i] = exaggeration * ax
            attraction[r, 1, i] = exaggeration * ay
    restore_fp_state(fp_state)


@njit(cache=True, nogil=True, error_model="numpy")
def kl_part(indptr, indices, data, Y, log_z, kl, lo, hi):  # pragma: no cover - compiled
    """``kl[r, i] = sum_j p_ij log(p_ij / q_ij)`` over row i's non-zeros, q_ij = w_ij / Z (log Z = ``log_z[r]``),
    in float64. With sum p = 1 the KL is the sum of these rows: the pairs with p_ij = 0 add nothing."""
    runs = Y.shape[0]
    for i in range(lo, hi):
        for r in range(runs):
            x = Y[r, 0]
            y = Y[r, 1]
            xi = np.float64(x[i])
            yi = np.float64(y[i])
            total = 0.0
            for k in range(indptr[i], indptr[i + 1]):
                j = indices[k]
                pij = np.float64(data[k])
                if pij > 0.0:
                    dx = xi - x[j]
                    dy = yi - y[j]
                    total += pij * (np.log(pij) + np.log1p(dx * dx + dy * dy) + log_z[r])
            kl[r, i] = total


@njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def exact_z_part(x, y, z, lo, hi):  # pragma: no cover - compiled
    """``z[i] = sum_{j > i} 1 / (1 + |y_i - y_j|^2)`` in float64 for rows ``lo .. hi - 1`` (Z = 2 sum_i z_i):
    the exact normaliser in O(n) memory."""
    n = x.shape[0]
    for i in range(lo, hi):
        xi = x[i]
        yi = y[i]
        total = 0.0
        for start in range(i + 1, n, 1024):
            block = 0.0
            for j in range(start, min(start + 1024, n)):
                dx = xi - x[j]
                dy = yi - y[j]
                block += 1.0 / (1.0 + dx * dx + dy * dy)
            total += block
        z[i] = total


@njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def exact_repulsion_part(x, y, repulsion, z, lo, hi):  # pragma: no cover - compiled
    """The exact sums the interpolation approximates, for rows ``lo .. hi - 1`` (float64, O(n) a row):
    ``repulsion[:, i] = sum_j w_ij^2 (y_i - y_j)`` and ``z[i] = sum_{j != i} w_ij``."""
    n = x.shape[0]
    for i in range(lo, hi):
        xi = x[i]
        yi = y[i]
        rx = ry = zi = 0.0
        for j in range(n):
            dx = xi - x[j]
            dy = yi - y[j]
            w = 1.0 / (1.0 + dx * dx + dy * dy)
            w = 0.0 if j == i else w
            w2 = w * w
            rx += w2 * dx
            ry += w2 * dy
            zi += w
        repulsion[0, i] = rx
        repulsion[1, i] = ry
        z[i] = zi


# ------------------------------------------------------------------ the near field of a split kernel


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
def near_pairs(start, ncx, ncy, reach):  # pragma: no cover - compiled
    """Pairs the near field visits: each point against the points of the cells up to ``reach`` cells away in x
    and in y (its cell and the 8 around it for ``reach`` 1)."""
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
def near_part(xs, ys, order, start, ncx, ncy, reach, cut, c1, c2, repulsion, z, row_lo, row_hi):  # pragma: no cover
    """The near-field correction of the split kernel for the points in cell rows ``row_lo .. row_hi - 1``, written
    to ``repulsion`` and ``z`` (each point once; the caller adds them to the grid's sums).

    The far kernels on the grid equal w = 1 / (1 + u) and w^2 (u = d^2) beyond ``cut`` = r_c^2 and their cubic
    Taylor polynomials about ``cut`` (coefficients ``c1``, ``c2``, 4 each) inside, so that they are smooth; here
    each pair closer than r_c gets w - poly1(u) added to z and (w^2 - poly2(u)) (y_i - y_j) to the repulsion.
    Cells have side r_c, so the pairs closer than r_c lie in a point's cell and the 8 around it; the loop over
    a row of three cells is one contiguous, vectorised loop (selects, no branches) in float32 (``xs``, ``ys``
    are the float32 coordinates, so each difference is exact), its sums added up in float64: 16 pairs a vector
    instructions with AVX-512 (1.4 ns a pair in float64)."""
    f32 = np.float32
    a0, a1, a2, a3 = f32(c1[0]), f32(c1[1]), f32(c1[2]), f32(c1[3])
    b0, b1, b2, b3 = f32(c2[0]), f32(c2[1]), f32(c2[2]), f32(c2[3])
    cut32, one, zero = f32(cut), f32(1.0), f32(0.0)
    for cy in range(row_lo, row_hi):
        for cx in range(ncx):
            first = start[cy * ncx + cx]
            last = start[cy * ncx + cx + 1]
            for k in range(first, last):
                xi = xs[k]
                yi = ys[k]
                rx = ry = zi = 0.0
                for ny in range(max(cy - reach, 0), min(cy + reach + 1, ncy)):
                    lo = start[ny * ncx + max(cx - reach, 0)]
                    hi = start[ny * ncx + min(cx + reach + 1, ncx)]
                    sx = sy = sz = zero
                    for m in range(lo, hi):
                        dx = xi - xs[m]
                        dy = yi - ys[m]
                        u = dx * dx + dy * dy
                        w = one / (one + u)
                        t = u - cut32
                        k1 = w - (a0 + t * (a1 + t * (a2 + t * a3)))
                        k2 = w * w - (b0 + t * (b1 + t * (b2 + t * b3)))
                        inside = u < cut32
                        k1 = k1 if inside else zero
                        k2 = k2 if inside else zero
                        sz += k1
                        sx += k2 * dx
                        sy += k2 * dy
                    rx += sx
                    ry += sy
                    zi += sz
                i = order[k]
                # the grid counted poly1(0) for the pair (i, i), this loop 1 - poly1(0): w_ii = 0 takes both
                z[i] = zi - 1.0
                repulsion[0, i] = rx
                repulsion[1, i] = ry


# ------------------------------------------------------------------ points outside the grid


@njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def nodes_from_points(x, y, outside, cx, cy, x0, y0, spacing, potentials):  # pragma: no cover - compiled
    """Add to the node potentials (TERMS, Gy, Gx) the exact sums over the points ``outside`` the grid: the
    squared kernel times their charges 1, x', y' and the kernel times 1 (O(nodes x outside))."""
    gy, gx = potentials.shape[1], potentials.shape[2]
    m = outside.shape[0]
    ox = np.empty(m)
    oy = np.empty(m)
    for k in range(m):
        ox[k] = np.float64(x[outside[k]]) - cx
        oy[k] = np.float64(y[outside[k]]) - cy
    for a in range(gy):
        ny = y0 + (a + 0.5) * spacing - cy
        for b in range(gx):
            nx = x0 + (b + 0.5) * spacing - cx
            s0 = s1 = s2 = s3 = 0.0
            for k in range(m):
                dx = nx - ox[k]
                dy = ny - oy[k]
                w = 1.0 / (1.0 + dx * dx + dy * dy)
                w2 = w * w
                s0 += w2
                s1 += w2 * ox[k]
                s2 += w2 * oy[k]
                s3 += w
            potentials[0, a, b] += s0
            potentials[1, a, b] += s1
            potentials[2, a, b] += s2
            potentials[3, a, b] += s3


@njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def outside_part(x, y, outside, cx, cy, x0, y0, spacing, charges, repulsion, z, lo, hi):  # pragma: no cover
    """Repulsion and kernel sums of the points ``outside[lo:hi]`` (outside the grid): from the grid's spread
    charges (CHARGES, Gy, Gx) node by node, and exactly from the other points outside."""
    gy, gx = charges.shape[1], charges.shape[2]
    m = outside.shape[0]
    for k in range(lo, hi):
        i = outside[k]
        xi = np.float64(x[i]) - cx
        yi = np.float64(y[i]) - cy
        s0 = s1 = s2 = s3 = 0.0
        for a in range(gy):
            dy = yi - (y0 + (a + 0.5) * spacing - cy)
            for b in range(gx):
                dx = xi - (x0 + (b + 0.5) * spacing - cx)
                w = 1.0 / (1.0 + dx * dx + dy * dy)
                w2 = w * w
                s0 += w2 * charges[0, a, b]
                s1 += w2 * charges[1, a, b]
                s2 += w2 * charges[2, a, b]
                s3 += w * charges[0, a, b]
        rx = xi * s0 - s1
        ry = yi * s0 - s2
        for q in range(m):
            j = outside[q]
            dx = xi - (np.float64(x[j]) - cx)
            dy = yi - (np.float64(y[j]) - cy)
            w = 1.0 / (1.0 + dx * dx + dy * dy)
            w = 0.0 if j == i else w
            w2 = w * w
            rx += w2 * dx
            ry += w2 * dy
            s3 += w
        repulsion[0, i] = rx
        repulsion[1, i] = ry
        z[i] = s3
