"""Compiled CPU kernels of the t-SNE for a sparse P (:mod:`.sparse_engine`): the exact attraction over P's
non-zeros, the spreading and gathering steps of the interpolated repulsion (:mod:`.interpolation`), the KL
over P's non-zeros, and the exact O(n^2) sums the approximation is checked against.

Embeddings are (runs, 2, n) as in :mod:`.kernels`; P is CSR (``indptr``, ``indices``, ``data``), symmetric,
so row i holds every j with p_ij > 0. Every kernel works on a range of rows ``lo .. hi`` and writes only
those rows (no atomics): :mod:`.sparse_engine` hands ranges of equal work to the worker threads of
:mod:`.._parallel`, and a range's result does not depend on which thread ran it.

The grid steps follow Linderman et al. (2019), "Fast interpolation-based t-SNE for improved visualization
of single-cell RNA-seq data" (Nature Methods 16, 243-245): each point's charge 1 is spread to the ``p x p``
equispaced nodes of its box with Lagrange weights, and the potentials at the nodes are interpolated back
with the same weights. Nodes sit at ``(k + 0.5) / p`` of a box (k = 0 .. p - 1), so all the nodes of a
grid of boxes form one uniform grid (spacing box / p) and the node-to-node kernel sums are one FFT
convolution (:mod:`.interpolation`). This is our own code (numba), written from the paper. The trimmed grid
spreads the charges 1, x, y through w^2 and 1 through w (:data:`CHARGES`, :data:`TERMS`; FIt-SNE spreads
1, y, |y|^2 through w^2); the split grid, whose far kernels are smooth polynomials within r_c, spreads the
charge 1 through three kernels, w^2 (y_i - y_j) in x and in y, and w (:data:`VECTOR_TERMS`): one forward FFT
and three inverse ones instead of three and four.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .kernel_common import FASTMATH as _FASTMATH
from .kernel_common import flush_denormals, restore_fp_state

#: charges per point on the trimmed grid: 1, x, y (see :func:`spread`); the split grid spreads the charge 1 only
CHARGES = 3
#: potentials per node on the trimmed grid: w^2's sums of the three charges, w's sum of the charge 1 (see
#: :func:`gather_part`)
TERMS = 4
#: potentials per node on the split grid: the sums of w^2 (y_i - y_j) in x and in y, and of w, over the charges 1
VECTOR_TERMS = 3


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


#: the nodes a box and dimension the grid kernels are specialised for (FIt-SNE's, and :mod:`.interpolation`'s default)
SPECIALISED_POINTS = 3


@njit(inline="always", error_model="numpy")
def _node_weights(x, y, x0, y0, inv, nbx, nby, p, wx, wy):  # pragma: no cover - compiled
    """The grid index of the first node of the box of point (x, y) in each dimension and the Lagrange weights of
    the box's p nodes (into ``wx``, ``wy``). The last box is closed on the right."""
    sx = (np.float64(x) - x0) * inv
    sy = (np.float64(y) - y0) * inv
    bx = min(max(int(np.floor(sx)), 0), nbx - 1)
    by = min(max(int(np.floor(sy)), 0), nby - 1)
    _lagrange(sx - bx, p, wx)
    _lagrange(sy - by, p, wy)
    return bx * p, by * p


@njit(inline="always", fastmath=_FASTMATH, error_model="numpy")
def _spread(x, y, src, x0, y0, box, nbx, nby, cx, cy, grid, p):  # pragma: no cover - compiled
    wx = np.empty(p)
    wy = np.empty(p)
    inv = 1.0 / box
    vector = grid.shape[0] == 1
    for k in range(src.shape[0]):
        i = np.uint64(src[k])
        gx, gy = _node_weights(x[i], y[i], x0, y0, inv, nbx, nby, p, wx, wy)
        xi = np.float64(x[i]) - cx
        yi = np.float64(y[i]) - cy
        for a in range(p):
            for b in range(p):
                w = wy[a] * wx[b]
                grid[0, gy + a, gx + b] += w
                if not vector:
                    grid[1, gy + a, gx + b] += w * xi
                    grid[2, gy + a, gx + b] += w * yi


@njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def spread(x, y, src, x0, y0, box, nbx, nby, cx, cy, grid):  # pragma: no cover - compiled
    """``grid`` (charges, Gy, Gx), zeroed here: the charge 1 of the points ``src`` (and where ``grid`` holds
    :data:`CHARGES` of them, x' = x - cx and y' = y - cy too, coordinates about the grid's centre) times the
    weights of the nodes of their boxes (boxes ``box`` wide from (x0, y0), ``grid.shape[2] // nbx`` nodes a box
    and dimension).

    Each point's box and weights are found here and again in :func:`gather_part` rather than stored between
    them (n x 2 x (p + 1) numbers written and read twice), by code compiled with the nodes' count a constant
    where it is :data:`SPECIALISED_POINTS` (its loops unrolled: with the count a variable the two took 4.5 times
    as long), and points given in the near field's cell order reach the grid's nodes in order: at 65536 points
    on a 126-box grid, one thread, the two 10.5 ms before against about 4 ms."""
    grid[:] = 0.0
    p = grid.shape[2] // nbx
    if p == SPECIALISED_POINTS:
        _spread(x, y, src, x0, y0, box, nbx, nby, cx, cy, grid, SPECIALISED_POINTS)
    else:
        _spread(x, y, src, x0, y0, box, nbx, nby, cx, cy, grid, p)


@njit(inline="always", fastmath=_FASTMATH, error_model="numpy")
def _gather(x, y, src, dst, x0, y0, box, nbx, nby, cx, cy, nodes, own, repulsion, z, lo, hi, p):  # pragma: no cover
    wx = np.empty(p)
    wy = np.empty(p)
    inv = 1.0 / box
    vector = nodes.shape[0] == VECTOR_TERMS
    for k in range(lo, hi):
        i = np.uint64(src[k])
        gx, gy = _node_weights(x[i], y[i], x0, y0, inv, nbx, nby, p, wx, wy)
        s0 = s1 = s2 = s3 = 0.0
        for a in range(p):
            for b in range(p):
                w = wy[a] * wx[b]
                s0 += w * nodes[0, gy + a, gx + b]
                s1 += w * nodes[1, gy + a, gx + b]
                s2 += w * nodes[2, gy + a, gx + b]
                if not vector:
                    s3 += w * nodes[3, gy + a, gx + b]
        d = np.uint64(dst[k])
        if vector:
            repulsion[0, d] = s0
            repulsion[1, d] = s1
            z[d] = s2 - own
        else:
            xi = np.float64(x[i]) - cx
            yi = np.float64(y[i]) - cy
            repulsion[0, d] = xi * s0 - s1
            repulsion[1, d] = yi * s0 - s2
            z[d] = s3 - own


@njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def gather_part(x, y, src, dst, x0, y0, box, nbx, nby, cx, cy, nodes, own, repulsion, z, lo, hi):  # pragma: no cover
    """Repulsion and kernel sums of the points ``src[lo:hi]`` (written at ``dst[lo:hi]``) from the potentials at the
    nodes of the grid of :func:`spread` (and compiled as it is), interpolated with the same weights. From the
    split grid's :data:`VECTOR_TERMS` (phi_0, phi_1, phi_2: the sums of w^2 (y_i - y_j) in x and y, and of w),
    ``repulsion_i`` = (phi_0, phi_1) and ``z_i`` = phi_2 - ``own``; from the trimmed grid's :data:`TERMS`
    (w^2's sums of the charges 1, x', y', w's of 1),

        repulsion_i = sum_j w_ij^2 (y_i - y_j) = y'_i phi_0 - (phi_1, phi_2),   z_i = phi_3 - ``own``

    (``own``: the self term the grid counted, w_ii = 1, or 0 when the near field removes it). The difference
    y'_i phi_0 - phi_1 cancels to about |y'_i| / (distance to the neighbours) relative: harmless in float64,
    and coordinates are taken about the grid's centre. It interpolates w^2 alone, the factor (y_i - y_j) being
    exact: on the trimmed grid, whose w^2 is curved within a box, w^2 (y_i - y_j) interpolated as a whole was 5
    times less accurate (the test's core of 4096 points: 2.5e-2 against 5.0e-3); on the split grid's smooth far
    kernels they are close (1.1e-3 against 8.9e-4 on its converged disk) for half the FFTs."""
    p = nodes.shape[2] // nbx
    if p == SPECIALISED_POINTS:
        _gather(x, y, src, dst, x0, y0, box, nbx, nby, cx, cy, nodes, own, repulsion, z, lo, hi, SPECIALISED_POINTS)
    else:
        _gather(x, y, src, dst, x0, y0, box, nbx, nby, cx, cy, nodes, own, repulsion, z, lo, hi, p)


@njit(cache=True, nogil=True, fastmath=_FASTMATH, error_model="numpy")
def attraction_part(indptr, indices, data, XY, exaggeration, one, attraction, lo, hi):  # pragma: no cover - compiled
    """``attraction[r, :, i] = exaggeration * sum_j p_ij w_ij (y_i - y_j)`` over row i's non-zeros, rows
    ``lo .. hi - 1``, every run (each row of P is read once for all runs), in the working precision (``one``: its
    1; a row's hundred-odd terms summed in float32 are within 1e-7 of float64's).

    ``XY`` (runs, n, 2): each point's two coordinates side by side, so that a y_j costs one cache line, not two.
    The row's entries are slices and j is unsigned: numba's negative-index wrap-around on ``indices[k]`` for k
    from ``indptr[i]`` and on ``x[j]`` for a signed j kept LLVM from vectorising the loop (65536 points, the
    synthetic top-64 P, 8.4 M non-zeros, one thread: 28.7 ms against 13.3 ms; reading P alone takes 8-9 ms)."""
    runs = XY.shape[0]
    fp_state = flush_denormals()
    for i in range(lo, hi):
        cols = indices[indptr[i] : indptr[i + 1]]
        vals = data[indptr[i] : indptr[i + 1]]
        for r in range(runs):
            xy = XY[r]
            xi = xy[i, 0]
            yi = xy[i, 1]
            ax = ay = xi - xi
            for k in range(cols.shape[0]):
                j = np.uint32(cols[k])
                dx = xi - xy[j, 0]
                dy = yi - xy[j, 1]
                pw = vals[k] / (one + dx * dx + dy * dy)
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
    the exact normaliser in O(n) memory. Blocks of 1024 points as slices from 0 (a loop from ``start`` read the
    points one at a time for numba's negative-index wrap-around: 1.2-1.6 against 0.39 ns a pair, the same bits)."""
    n = x.shape[0]
    for i in range(lo, hi):
        xi = x[i]
        yi = y[i]
        total = 0.0
        for start in range(i + 1, n, 1024):
            bx = x[start : min(start + 1024, n)]
            by = y[start : min(start + 1024, n)]
            block = 0.0
            for j in range(bx.shape[0]):
                dx = xi - bx[j]
                dy = yi - by[j]
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
