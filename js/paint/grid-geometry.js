// Geometry of the maximum-attention grid (CSS pixels): one h x n block per layer under a title band,
// head labels on the left. The token axis shows the range [t0, t1) (zoom); when it holds more tokens
// than there are pixels, columns are bins of several tokens (the overview: each bin's maximum).

const MIN_ROW = 5; // CSS px of a head row when the rows shrink to show every layer in the box
const LABEL_ROW = 8; // head rows this tall get a label each; smaller ones one every `labelEvery`
const MIN_GAP = 12; // CSS px of a layer's title band when rows of MIN_ROW px alone do not fit the box

/**
 * Geometry of the stacked per-layer heat maps: a layer title band of `gap` px above each block, `labelW`
 * px of head labels on the left. cellW is the width of one token (fractional when binned), cellH of one
 * head. Given the box's `height`, the rows shrink (down to MIN_ROW px) so that every layer fits in it,
 * and grow up to 14 px to fill it; when rows of MIN_ROW px still do not fit, the title bands shrink (down to
 * MIN_GAP px). Without a box every head row is 8 to 12 px. Rows under 8 px label every `labelEvery`-th head.
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
  { labelW = 46, rightPad = 8, gap: band = 18, maxCellW = 28, t0 = 0, t1 = n, height: box = 0 } = {},
) {
  const rows = L * H;
  const fit = (/** @type {number} */ budget) => Math.floor(budget / Math.max(rows, 1));
  const cellH =
    box > 0 ? Math.max(MIN_ROW, Math.min(14, fit(box - L * band - 4))) : Math.max(8, Math.min(12, fit(440)));
  const fitBand = box > 0 ? Math.floor((box - 4) / Math.max(L, 1)) - H * cellH : band;
  const gap = Math.max(Math.min(MIN_GAP, band), Math.min(band, fitBand));
  const labelEvery = cellH >= LABEL_ROW ? 1 : Math.ceil(LABEL_ROW / cellH);
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
