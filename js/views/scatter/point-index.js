// A uniform grid over the scatter's screen positions (CSS px), for hit testing at tens of thousands of
// points: built once per drawn frame (lazily, at the first pointer move after it: a counting sort, O(m)),
// it answers "the point nearest the pointer within r" by looking at the few cells within r instead of
// scanning every point. Only points within `box` (the canvas, widened by the pick radius) are indexed:
// the pointer never hits the others.

/**
 * @typedef {{x0: number, y0: number, x1: number, y1: number}} Box
 * @typedef {{sx: ArrayLike<number>, sy: ArrayLike<number>, m: number}} ScreenPoints
 */

const MAX_CELLS = 1 << 20; // a huge box (a far zoom) gets bigger cells, never more than this many

/**
 * The grid of `points` inside `box`, with cells of `cell` CSS px (larger when the box would need more
 * than MAX_CELLS): `rows` lists the indexed rows cell by cell, `start[c]` .. `start[c + 1] - 1` are
 * cell c's entries.
 * @param {ScreenPoints} points
 * @param {Box} box
 * @param {number} cell
 */
export function buildGrid({ sx, sy, m }, box, cell) {
  const w = Math.max(box.x1 - box.x0, 1);
  const h = Math.max(box.y1 - box.y0, 1);
  const size = Math.max(cell, Math.sqrt((w * h) / MAX_CELLS));
  const cols = Math.max(1, Math.ceil(w / size));
  const rowsN = Math.max(1, Math.ceil(h / size));
  const cellOf = new Int32Array(m);
  const start = new Int32Array(cols * rowsN + 1);
  for (let r = 0; r < m; r++) {
    const i = Math.floor((sx[r] - box.x0) / size);
    const j = Math.floor((sy[r] - box.y0) / size);
    // NaN fails both tests: not indexed
    if (i >= 0 && i < cols && j >= 0 && j < rowsN) {
      const c = j * cols + i;
      cellOf[r] = c;
      start[c + 1]++;
    } else cellOf[r] = -1;
  }
  for (let c = 0; c < cols * rowsN; c++) start[c + 1] += start[c];
  const fill = start.slice(0, cols * rowsN);
  const rows = new Int32Array(start[cols * rowsN]);
  for (let r = 0; r < m; r++) if (cellOf[r] >= 0) rows[fill[cellOf[r]]++] = r;
  return { box, size, cols, rowsN, start, rows };
}

/**
 * The row nearest (px, py) within `maxDist` in `grid`, or -1; ties go to the later row (drawn on top),
 * as a scan of every point does (js/views/scatter/hittest.js nearestPoint). `visited` counts the points looked at.
 * @param {ReturnType<typeof buildGrid>} grid
 * @param {ScreenPoints} points
 * @param {[number, number]} at
 * @param {number} maxDist
 */
export function nearestInGrid(grid, { sx, sy }, [px, py], maxDist) {
  const { box, size, cols, rowsN, start, rows } = grid;
  const i0 = Math.max(0, Math.floor((px - maxDist - box.x0) / size));
  const i1 = Math.min(cols - 1, Math.floor((px + maxDist - box.x0) / size));
  const j0 = Math.max(0, Math.floor((py - maxDist - box.y0) / size));
  const j1 = Math.min(rowsN - 1, Math.floor((py + maxDist - box.y0) / size));
  let best = -1;
  let bestD = maxDist * maxDist;
  let visited = 0;
  for (let j = j0; j <= j1; j++) {
    for (let c = j * cols + i0; c <= j * cols + i1; c++) {
      for (let k = start[c]; k < start[c + 1]; k++) {
        const r = rows[k];
        const dx = sx[r] - px;
        const dy = sy[r] - py;
        const d = dx * dx + dy * dy;
        visited++;
        if (d < bestD || (d === bestD && r > best)) {
          bestD = d;
          best = r;
        }
      }
    }
  }
  return { row: best, visited };
}

/**
 * The hit index of the scatter: `invalidate()` after the screen positions change (each paint), and
 * `nearest` rebuilds the grid only when asked after a change.
 * @param {{box: () => Box, cell?: number}} options `box()`: the region the pointer can be in (CSS px)
 */
export function createPointIndex({ box, cell = 16 }) {
  /** @type {ReturnType<typeof buildGrid> | null} */
  let grid = null;
  /** @type {ScreenPoints | null} */
  let indexed = null;
  let builds = 0;
  return {
    invalidate() {
      grid = null;
    },
    /**
     * The row of `points` nearest `at` within `maxDist` (CSS px), or -1.
     * @param {ScreenPoints} points
     * @param {[number, number]} at
     * @param {number} maxDist
     */
    nearest(points, at, maxDist) {
      if (!grid || indexed !== points) {
        const b = box();
        const pad = Math.max(maxDist, 0);
        grid = buildGrid(points, { x0: b.x0 - pad, y0: b.y0 - pad, x1: b.x1 + pad, y1: b.y1 + pad }, cell);
        indexed = points;
        builds++;
      }
      return nearestInGrid(grid, points, at, maxDist).row;
    },
    /** Grids built so far (the tests count them). */
    get builds() {
      return builds;
    },
  };
}
