// Hit testing: which scatter point or grid cell is under the pointer (pure maths, CSS pixels).

import { polygonContains } from "d3-polygon";
import { layerTop } from "../../paint/grid-geometry.js";

/**
 * Index of the point (screen coordinates sx, sy of m points) nearest to (px, py) within maxDist; -1 if none.
 * A scan of every point: the map asks its grid index (js/views/scatter/point-index.js), which answers the same.
 * @param {{sx: ArrayLike<number>, sy: ArrayLike<number>, m: number}} points
 * @param {[number, number]} at
 * @param {number} maxDist
 */
export function nearestPoint({ sx, sy, m }, [px, py], maxDist) {
  let best = -1;
  let bestD = maxDist * maxDist;
  for (let r = 0; r < m; r++) {
    const dx = sx[r] - px,
      dy = sy[r] - py;
    const d = dx * dx + dy * dy;
    if (d <= bestD) {
      bestD = d;
      best = r;
    }
  }
  return best;
}

/**
 * {layer, head, token} under the point (x, y) in CSS px, or null outside every block. The head label
 * column answers token -1 (a click there selects the head); x is mapped through the zoomed range.
 * @param {{L: number, n: number, gap: number, blockH: number, cellH: number, labelW: number, cellW: number,
 *   count?: number, t0?: number}} g
 * @param {number} x
 * @param {number} y
 * @returns {{layer: number, head: number, token: number} | null}
 */
export function gridHit(g, x, y) {
  const l = Math.floor(y / (g.gap + g.blockH));
  if (l < 0 || l >= g.L) return null;
  const inBlock = y - layerTop(g, l);
  if (inBlock < 0 || inBlock >= g.blockH) return null;
  const head = Math.floor(inBlock / g.cellH);
  if (x < g.labelW) return x >= 0 ? { layer: l, head, token: -1 } : null;
  const col = Math.floor((x - g.labelW) / g.cellW);
  if (col < 0 || col >= (g.count ?? g.n)) return null;
  return { layer: l, head, token: (g.t0 ?? 0) + col };
}

/**
 * Rows of the points (screen coordinates sx, sy of m points) inside `polygon` ([[x, y], ...], a lasso or
 * a box's four corners); fewer than three vertices select nothing.
 * @param {ArrayLike<number>} sx
 * @param {ArrayLike<number>} sy
 * @param {number} m
 * @param {[number, number][]} polygon
 */
export function pointsInPolygon(sx, sy, m, polygon) {
  if (!polygon || polygon.length < 3) return [];
  const xs = polygon.map((p) => p[0]);
  const ys = polygon.map((p) => p[1]);
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const out = [];
  for (let r = 0; r < m; r++) {
    // the polygon's bounding box first: at 65536 points most are outside it
    if (!(sx[r] >= x0 && sx[r] <= x1 && sy[r] >= y0 && sy[r] <= y1)) continue;
    if (polygonContains(polygon, [sx[r], sy[r]])) out.push(r);
  }
  return out;
}

/**
 * The four corners of the box spanned by two points (a box selection as a polygon).
 * @param {[number, number]} a
 * @param {[number, number]} b
 */
export function boxPolygon([x0, y0], [x1, y1]) {
  return /** @type {[number, number][]} */ ([
    [x0, y0],
    [x1, y0],
    [x1, y1],
    [x0, y1],
  ]);
}
