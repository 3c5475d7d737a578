// Collision-free label placement for the scatter (pure maths, CSS pixels): labels are placed greedily in
// priority order (hovered, selected, the hovered token's partners, search matches, then the rest), each
// at the first of four spots around its point where it overlaps no label placed before; a uniform grid
// of buckets keeps the overlap test local, so placing all n labels costs about O(n).

/** Candidate spots of a w x h label around a point of radius r at (x, y): right, left, above, below. */
/** @param {number} x @param {number} y @param {number} w @param {number} h @param {number} r */
function spots(x, y, w, h, r) {
  return [
    [x + r + 2, y - h / 2],
    [x - r - 2 - w, y - h / 2],
    [x - w / 2, y - r - 1 - h],
    [x - w / 2, y + r + 1],
  ];
}

/**
 * Place labels without overlap.
 * @param {Iterable<{x: number, y: number, w: number, h: number, key: number}>} items in priority order
 * @param {{x0: number, y0: number, x1: number, y1: number}} bounds the labels must lie inside
 * @param {{radius?: number, max?: number, pad?: number}} [options] max = most labels to place
 * @returns {{key: number, x: number, y: number, w: number, h: number}[]} placed boxes, in priority order
 */
export function placeLabels(items, bounds, { radius = 3.6, max = Infinity, pad = 1 } = {}) {
  const cell = 48;
  /** @type {Map<number, number[][]>} */
  const buckets = new Map();
  const keyOf = (/** @type {number} */ i, /** @type {number} */ j) => i * 100003 + j;
  const placed = [];
  /** @type {(x: number, y: number, w: number, h: number) => boolean} */
  const overlaps = (x, y, w, h) => {
    for (let i = Math.floor(x / cell); i <= Math.floor((x + w) / cell); i++) {
      for (let j = Math.floor(y / cell); j <= Math.floor((y + h) / cell); j++) {
        for (const b of buckets.get(keyOf(i, j)) ?? []) {
          if (x < b[0] + b[2] + pad && b[0] < x + w + pad && y < b[1] + b[3] + pad && b[1] < y + h + pad) return true;
        }
      }
    }
    return false;
  };
  const add = (/** @type {number[]} */ box) => {
    for (let i = Math.floor(box[0] / cell); i <= Math.floor((box[0] + box[2]) / cell); i++) {
      for (let j = Math.floor(box[1] / cell); j <= Math.floor((box[1] + box[3]) / cell); j++) {
        const k = keyOf(i, j);
        const bucket = buckets.get(k);
        if (bucket) bucket.push(box);
        else buckets.set(k, [box]);
      }
    }
  };
  for (const item of items) {
    if (placed.length >= max) break;
    if (!(item.w > 0 && item.h > 0)) continue;
    for (const [x, y] of spots(item.x, item.y, item.w, item.h, radius)) {
      if (x < bounds.x0 || y < bounds.y0 || x + item.w > bounds.x1 || y + item.h > bounds.y1) continue;
      if (overlaps(x, y, item.w, item.h)) continue;
      const box = [x, y, item.w, item.h];
      add(box);
      placed.push({ key: item.key, x, y, w: item.w, h: item.h });
      break;
    }
  }
  return placed;
}

/**
 * How many labels a density in [0, 1] allows in a plot of `area` px^2 with labels of `labelArea` px^2:
 * 0 = none, 1 = as many as fit; in between the fill fraction grows as density^2.
 */
/** @param {number} density @param {number} area @param {number} labelArea */
export function labelBudget(density, area, labelArea) {
  if (!(density > 0)) return 0;
  if (density >= 1) return Infinity;
  return Math.max(1, Math.round(density * density * (area / Math.max(labelArea, 1)) * 0.5));
}

// Label candidates per cell of CELL_PX x CELL_PX (CSS px) of the plot, first in priority order: more
// rarely fit (a label is at least a cell high and sits beside its point), and placement then costs
// O(plot area) instead of O(points) (65536 points in view: 80-160 ms a frame -> a few ms).
const CELL_PX = 14;
const PER_CELL = 4;

/**
 * The tokens to try to label, in priority order: hovered, selected, the hovered token's partners, search
 * matches, then the rest (word starts before word pieces, then by row); each token once, at most PER_CELL
 * per cell of the plot besides the hovered token and its partners (always tried); points outside the
 * plot get none.
 * @param {{points: {sx: ArrayLike<number>, sy: ArrayLike<number>, m: number, kept: number[], tokenRow: Int32Array},
 *   plot: {x0: number, y0: number, x1: number, y1: number}, hovered: number, selected: Set<number>,
 *   partners: number[], matches: Set<number>, subword: (t: number) => boolean}} scene
 */
export function labelCandidates({ points, plot, hovered, selected, partners, matches, subword }) {
  const { sx, sy, m, kept, tokenRow } = points;
  const cols = Math.max(1, Math.ceil((plot.x1 - plot.x0) / CELL_PX));
  const rows = Math.max(1, Math.ceil((plot.y1 - plot.y0) / CELL_PX));
  const used = new Uint8Array(cols * rows);
  const seen = new Uint8Array(tokenRow.length);
  /** @type {number[]} */
  const order = [];
  /** @param {number} t @param {boolean} capped */
  const push = (t, capped) => {
    const r = t >= 0 && t < tokenRow.length && !seen[t] ? tokenRow[t] : -1;
    if (r < 0 || r >= m) return;
    const [x, y] = [sx[r], sy[r]];
    if (!(x >= plot.x0 && x <= plot.x1 && y >= plot.y0 && y <= plot.y1)) return;
    const c =
      Math.min(rows - 1, Math.floor((y - plot.y0) / CELL_PX)) * cols +
      Math.min(cols - 1, Math.floor((x - plot.x0) / CELL_PX));
    if (capped && used[c] >= PER_CELL) return;
    used[c]++;
    seen[t] = 1;
    order.push(t);
  };
  push(hovered, false);
  for (const t of selected) push(t, true);
  for (const t of partners) push(t, false);
  for (const t of matches) push(t, true);
  for (let r = 0; r < m; r++) if (!subword(kept[r])) push(kept[r], true);
  for (let r = 0; r < m; r++) push(kept[r], true);
  return order;
}

/**
 * The labels of a scatter: the points in the plot, in priority order, sized by `size(token, emphasis)`
 * ([w, h] in CSS px; emphasis "main" for the hovered token, "partner" for its partners, else null),
 * placed without overlap. The hovered token and its partners are labelled at any density, the rest
 * within the density's budget.
 * @param {{points: {sx: ArrayLike<number>, sy: ArrayLike<number>, m: number, kept: number[], tokenRow: Int32Array},
 *   plot: {x0: number, y0: number, x1: number, y1: number}, hovered: number, selected: Set<number>,
 *   partners: number[], matches: Set<number>, subword: (t: number) => boolean, density: number, radius: number,
 *   size: (t: number, emphasis: string | null) => number[], labelH: number}} scene
 */
export function chooseLabels(scene) {
  const { points, plot, hovered, partners, density, radius, size, labelH } = scene;
  const { sx, sy, tokenRow } = points;
  const order = labelCandidates(scene);
  const partnerSet = new Set(partners);
  const emphasis = (/** @type {number} */ t) => (t === hovered ? "main" : partnerSet.has(t) ? "partner" : null);
  const item = (/** @type {number} */ t) => {
    const [w, h] = size(t, emphasis(t));
    return { x: sx[tokenRow[t]], y: sy[tokenRow[t]], w, h, key: t };
  };
  const always = order.filter((t) => emphasis(t)).map(item);
  if (!(density > 0)) return placeLabels(always, plot, { radius });
  const budget = labelBudget(density, (plot.x1 - plot.x0) * (plot.y1 - plot.y0), 40 * labelH);
  // items are sized as placement reaches them: it stops at the budget, long before 8192 points' end
  function* items() {
    for (const t of order) yield item(t);
  }
  return placeLabels(items(), plot, { radius, max: Math.max(always.length, budget) });
}
