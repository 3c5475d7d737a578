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
 * The order in which tokens get labels: hovered, selected, the hovered token's partners, search
 * matches, then the rest (word starts before word pieces, then by position). Each token once.
 * @param {{hovered: number, selected: Iterable<number>, partners: Iterable<number>, matches: Iterable<number>,
 *   tokens: number[], subword: (token: number) => boolean}} groups `tokens` = every candidate token
 */
export function labelPriority({ hovered, selected, partners, matches, tokens, subword }) {
  // token ids are small non-negative integers: marks in typed arrays instead of Sets (8192 tokens: 2.5 -> 0.3 ms)
  let size = hovered + 1;
  for (const t of tokens) if (t >= size) size = t + 1;
  const candidate = new Uint8Array(size);
  for (const t of tokens) if (t >= 0) candidate[t] = 1;
  const seen = new Uint8Array(size);
  /** @type {number[]} */
  const order = [];
  const push = (/** @type {number} */ t) => {
    if (t >= 0 && t < size && !seen[t]) {
      seen[t] = 1;
      order.push(t);
    }
  };
  const only = (/** @type {Iterable<number>} */ list) => {
    for (const t of list) if (t >= 0 && t < size && candidate[t]) push(t);
  };
  if (hovered >= 0 && candidate[hovered]) push(hovered);
  only(selected);
  only(partners);
  only(matches);
  for (const t of tokens) if (!subword(t)) push(t);
  for (const t of tokens) push(t);
  return order;
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
export function chooseLabels({
  points,
  plot,
  hovered,
  selected,
  partners,
  matches,
  subword,
  density,
  radius,
  size,
  labelH,
}) {
  const { sx, sy, m, kept, tokenRow } = points;
  const inView = [];
  for (let r = 0; r < m; r++) {
    if (sx[r] >= plot.x0 && sx[r] <= plot.x1 && sy[r] >= plot.y0 && sy[r] <= plot.y1) inView.push(kept[r]);
  }
  const order = labelPriority({ hovered, selected, partners, matches, tokens: inView, subword });
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
