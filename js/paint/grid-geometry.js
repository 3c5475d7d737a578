// Geometry of the maximum-attention grid (CSS pixels): one h x n block per layer under a title band,
// head labels on the left. The token axis shows the range [t0, t1) (zoom); when it holds more tokens
// than there are pixels, columns are bins of several tokens (the overview: each bin's maximum).

export const MIN_ROW = 8; // CSS px of a head row: tall enough for its label (issue 52), the box scrolls past it
const MAX_ROW = 14;
const MAX_HEIGHT = 12000; // CSS px of the whole grid at most (a canvas of 2x that fits chromium's 32767 px)

/**
 * Geometry of the stacked per-layer heat maps: a layer title band of `gap` px above each block, `labelW`
 * px of head labels on the left. cellW is the width of one token (fractional when binned), cellH of one
 * head. Every row is at least MIN_ROW px, tall enough for its head's label; given the box's `height`, rows
 * grow up to MAX_ROW px to fill it, and a grid taller than the box scrolls in it. A model whose rows of MIN_ROW
 * px would pass MAX_HEIGHT (thousands of heads) gets thinner rows, a label every `labelEvery`-th head (each row's
 * head is still named by the tooltip). Without a box every head row is 8 to 12 px.
 * @param {number} L
 * @param {number} H
 * @param {number} n
 * @param {number} width available CSS px
 * @param {{labelW?: number, rightPad?: number, gap?: number, maxCellW?: number, t0?: number, t1?: number,
 *   height?: number}} [options]
 */
export function gridGeometry(
  L,
  H,
  n,
  width,
  { labelW = 46, rightPad = 8, gap: band = 15, maxCellW = 28, t0 = 0, t1 = n, height: box = 0 } = {},
) {
  const rows = L * H;
  const fit = (/** @type {number} */ budget) => Math.floor(budget / Math.max(rows, 1));
  const least = Math.max(1, Math.min(MIN_ROW, fit(MAX_HEIGHT - L * band)));
  const cellH =
    box > 0 ? Math.max(least, Math.min(MAX_ROW, fit(box - L * band - 4))) : Math.max(least, Math.min(12, fit(440)));
  const gap = band;
  const labelEvery = cellH >= MIN_ROW ? 1 : Math.ceil(MIN_ROW / cellH);
  const lo = Math.max(0, Math.min(t0, n - 1));
  const hi = Math.max(lo + 1, Math.min(t1, n));
  const count = hi - lo;
  const zoomed = count < n;
  const avail = Math.max(1, width - labelW - rightPad);
  const cellW = Math.min(zoomed ? 4 * maxCellW : maxCellW, avail / Math.max(count, 1));
  const columns = Math.max(1, Math.min(count, Math.floor(avail))); // pixel columns (bins when < count)
  const blockH = H * cellH;
  const height = L * (gap + blockH) + 4;
  return {
    L,
    H,
    n,
    t0: lo,
    t1: hi,
    count,
    columns,
    binned: columns < count,
    labelW,
    cellW,
    cellH,
    labelEvery,
    gap,
    blockH,
    height,
    width: labelW + count * cellW + rightPad,
  };
}

/**
 * What the grid's columns are, in plain words: how many tokens a pixel column holds (the largest of them shown)
 * or which tokens a zoomed grid shows; "" when each token has its own column.
 * @param {{n: number, t0: number, t1: number, count: number, columns: number, binned: boolean}} g
 */
export function columnsNote(g) {
  const zoomed = g.count < g.n;
  const range = zoomed ? `tokens ${g.t0}–${g.t1 - 1} of ${g.n} (double-click shows all)` : "";
  if (!g.binned) return range || "";
  const per = g.count / g.columns;
  const [lo, hi] = [Math.floor(per), Math.ceil(per)];
  const what = `${g.count} tokens in ${g.columns} pixel columns: a column shows the largest of ${lo === hi ? lo : `${lo} or ${hi}`} neighbouring tokens`;
  return zoomed ? `${range}; ${what}` : `${what} · ctrl + wheel zooms in`;
}

/**
 * Top (CSS px) of layer l's heat map in the grid canvas.
 * @param {{gap: number, blockH: number}} g
 * @param {number} l
 */
export function layerTop(g, l) {
  return l * (g.gap + g.blockH) + g.gap;
}

/**
 * Column maxima of one (rows, n) block over the tokens [t0, t1) in `columns` bins: out[row * columns + c].
 * @param {ArrayLike<number>} values row-major (rows, n)
 * @param {{rows: number, n: number, t0: number, t1: number, columns: number}} bins
 */
export function binColumns(values, { rows, n, t0, t1, columns }) {
  const out = new Float32Array(rows * columns);
  const count = t1 - t0;
  for (let r = 0; r < rows; r++) {
    const base = r * n;
    for (let c = 0; c < columns; c++) {
      const a = t0 + Math.floor((c * count) / columns);
      const b = Math.max(a + 1, t0 + Math.floor(((c + 1) * count) / columns));
      let best = -Infinity;
      for (let j = a; j < b; j++) if (values[base + j] > best) best = values[base + j];
      out[r * columns + c] = best;
    }
  }
  return out;
}

/**
 * The token range after zooming [t0, t1) by `factor` (< 1 zooms in) around token `at`, inside [0, n).
 * @param {number} t0
 * @param {number} t1
 * @param {number} n
 * @param {number} factor
 * @param {number} at
 * @returns {[number, number]}
 */
export function zoomRange(t0, t1, n, factor, at) {
  const count = Math.max(1, Math.min(n, Math.round((t1 - t0) * factor)));
  const frac = (at - t0) / Math.max(1, t1 - t0);
  let lo = Math.round(at - frac * count);
  lo = Math.max(0, Math.min(n - count, lo));
  return [lo, lo + count];
}

/**
 * The key/value group of `head` when every `perGroup` consecutive query heads share one key/value head
 * (GQA; the `kv_groups` trait); -1 when heads do not share (perGroup 1) or the count does not divide H.
 * @param {number} head
 * @param {number} H
 * @param {number} perGroup
 */
export function kvGroup(head, H, perGroup) {
  if (!(perGroup > 1 && perGroup < H && H % perGroup === 0)) return -1;
  return Math.floor(head / perGroup);
}

/**
 * The keyboard cursor after an arrow key: up/down move by head (across layers), left/right by layer;
 * in hidden-state mode (layers are selected) up/down move by layer. Null for any other key.
 * @param {{layer: number, head: number}} cursor
 * @param {string} key
 * @param {{L: number, H: number, hidden: boolean}} grid
 * @returns {{layer: number, head: number} | null}
 */
export function moveCursor(cursor, key, { L, H, hidden }) {
  const { layer, head } = cursor;
  const byLayer = hidden
    ? { ArrowUp: -1, ArrowDown: 1, ArrowLeft: -1, ArrowRight: 1 }
    : { ArrowLeft: -1, ArrowRight: 1 };
  const step = /** @type {Record<string, number>} */ (byLayer)[key];
  if (step !== undefined) return { layer: Math.max(0, Math.min(L - 1, layer + step)), head };
  if (key === "ArrowUp") {
    if (head > 0) return { layer, head: head - 1 };
    return layer > 0 ? { layer: layer - 1, head: H - 1 } : { layer, head };
  }
  if (key === "ArrowDown") {
    if (head < H - 1) return { layer, head: head + 1 };
    return layer < L - 1 ? { layer: layer + 1, head: 0 } : { layer, head };
  }
  return null;
}
