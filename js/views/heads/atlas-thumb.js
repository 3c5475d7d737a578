// The head atlas's thumbnails (js/views/heads/atlas.js): where each token of a head's small t-SNE is drawn and how. Each
// thumbnail is scaled to its tokens' 5%-95% box (far tokens drawn as rings on its edge), relative to the
// spread whatever its size, and tokens on one spot are one ringed disc, the largest with their counts: a few
// far points or a t-SNE that barely moved never leave a thumbnail showing one dot.

export const SIZE = 92; // CSS px of a thumbnail
const INSET = 5; // CSS px kept clear at the edges: off-scale marks sit there
const LOW = 0.05; // the quantiles whose box a thumbnail shows (widened by WIDEN of its span on each side)
const HIGH = 0.95;
const WIDEN = 0.4; // a Gaussian cloud: +-3 sigma shown, 0.3% of its tokens on the edge
const CELL = 2; // CSS px: tokens whose positions round to one cell are one stacked mark
const COUNTED = 3; // the largest stacks whose counts are written

/**
 * @typedef {{x: number, y: number, rows: number[], outside: boolean}} ThumbMark
 */

/** The q-quantile of sorted values (linear between neighbours). @param {Float64Array} v @param {number} q */
function quantile(v, q) {
  if (v.length === 0) return NaN;
  const at = q * (v.length - 1);
  const i = Math.floor(at);
  return i + 1 < v.length ? v[i] + (at - i) * (v[i + 1] - v[i]) : v[i];
}

/**
 * A box [lo, hi] of one axis: the values within the LOW..HIGH quantiles widened by WIDEN of their span (a
 * thumbnail with no far points shows all of them, one with far points the rest from edge to edge); the full
 * range when the quantiles coincide (most tokens on one spot, a few apart).
 * @param {Float64Array} v sorted
 */
function axisBox(v) {
  const lo = quantile(v, LOW),
    hi = quantile(v, HIGH);
  if (!(hi > lo)) return [v[0], v[v.length - 1]];
  const pad = WIDEN * (hi - lo);
  let a = 0,
    b = v.length - 1;
  while (v[a] < lo - pad) a++;
  while (v[b] > hi + pad) b--;
  return [v[a], v[b]];
}

/**
 * Where a thumbnail draws each token (CSS px in a size x size square): the scale is set by the 5%-95%
 * quantile box of each axis (widened), not by the farthest points, so a few far tokens do not squeeze the
 * rest into one dot; tokens beyond the box are drawn on its edge, flagged `outside`. The scale is relative to
 * the spread, whatever its magnitude (a head whose t-SNE never left 1e-13 is spread as one of 1e1). Tokens
 * that fall in one CELL are one mark with all their rows: a stacked mark. Non-finite rows are left out.
 * @param {ArrayLike<number>} data (m, 2) flat
 * @param {number} m
 * @param {number} [size]
 * @returns {{marks: ThumbMark[], outside: number, stacked: number}} stacked: the most tokens of one mark
 */
export function thumbMarks(data, m, size = SIZE) {
  /** @type {number[]} */
  const rows = [];
  for (let r = 0; r < m; r++) if (Number.isFinite(data[2 * r]) && Number.isFinite(data[2 * r + 1])) rows.push(r);
  if (rows.length === 0) return { marks: [], outside: 0, stacked: 0 };
  const xs = Float64Array.from(rows, (r) => data[2 * r]).sort();
  const ys = Float64Array.from(rows, (r) => data[2 * r + 1]).sort();
  const [x0, x1] = axisBox(xs);
  const [y0, y1] = axisBox(ys);
  const inner = size - 2 * INSET;
  const span = Math.max(x1 - x0, y1 - y0); // equal units on both axes: t-SNE distances are isotropic
  const ppu = span > 0 ? inner / span : 0; // 0: every token on one spot, drawn in the middle
  const cx = (x0 + x1) / 2,
    cy = (y0 + y1) / 2;
  const edge = (/** @type {number} */ v) => Math.min(size - INSET, Math.max(INSET, v));
  /** @type {Map<string, ThumbMark>} */
  const cells = new Map();
  let outside = 0;
  for (const r of rows) {
    const x = data[2 * r],
      y = data[2 * r + 1];
    const out = x < x0 || x > x1 || y < y0 || y > y1;
    if (out) outside++;
    const px = edge(size / 2 + (x - cx) * ppu);
    const py = edge(size / 2 - (y - cy) * ppu);
    const key = `${out ? "o" : ""}${Math.round(px / CELL)},${Math.round(py / CELL)}`;
    const mark = cells.get(key);
    if (mark) mark.rows.push(r);
    else cells.set(key, { x: px, y: py, rows: [r], outside: out });
  }
  const marks = [...cells.values()];
  return { marks, outside, stacked: Math.max(...marks.map((k) => k.rows.length)) };
}

/**
 * A thumbnail: the head's small t-SNE, each token in its colour (thumbMarks places them). A token alone is a
 * 2.5 px square; a stack of k tokens a disc of area growing with k, ringed in the text colour, the counts of
 * the COUNTED largest stacks of at least 5% of the tokens (and 5) written beside them; an off-scale token a
 * hollow ring on the edge.
 * Returns what it drew, for the thumbnail's title and test hooks.
 * @param {CanvasRenderingContext2D} c
 * @param {{data: ArrayLike<number>, m: number, dpr: number, kept: number[], colours: string[],
 *   theme: import("../../lib/theme.js").Theme}} thumb
 */
export function paintThumb(c, { data, m, dpr, kept, colours, theme }) {
  c.setTransform(dpr, 0, 0, dpr, 0, 0);
  c.fillStyle = theme.panel;
  c.fillRect(0, 0, SIZE, SIZE);
  const layout = thumbMarks(data, m);
  const total = layout.marks.reduce((a, k) => a + k.rows.length, 0);
  const colour = (/** @type {ThumbMark} */ k) => colours[kept[k.rows[0]]] || theme.muted;
  const singles = layout.marks.filter((k) => k.rows.length === 1 && !k.outside);
  const stacks = layout.marks.filter((k) => k.rows.length > 1 && !k.outside);
  for (const k of singles) {
    c.fillStyle = colour(k);
    c.fillRect(k.x - 1.25, k.y - 1.25, 2.5, 2.5);
  }
  c.lineWidth = 1;
  c.font = `9px ${theme.font}`;
  for (const k of stacks.sort((a, b) => a.rows.length - b.rows.length)) {
    const radius = Math.min(1.6 + 0.9 * Math.sqrt(k.rows.length - 1), 8);
    c.beginPath();
    c.arc(k.x, k.y, radius, 0, 2 * Math.PI);
    c.fillStyle = colour(k);
    c.fill();
    c.strokeStyle = theme.fg;
    c.stroke();
  }
  const least = Math.max(5, 0.05 * total);
  c.textBaseline = "middle";
  c.lineWidth = 2.5;
  /** @type {number[][]} the counts written, [x0, y0, x1, y1]: a count that would overlap one is left out */
  const written = [];
  for (const k of stacks.slice(-COUNTED).reverse()) {
    if (k.rows.length < least) break;
    const radius = Math.min(1.6 + 0.9 * Math.sqrt(k.rows.length - 1), 8);
    const right = k.x > SIZE / 2;
    const text = `×${k.rows.length}`;
    const w = c.measureText(text).width;
    const x = k.x + (right ? -radius - 1.5 : radius + 1.5);
    const box = right ? [x - w, k.y - 5, x, k.y + 5] : [x, k.y - 5, x + w, k.y + 5];
    if (written.some((b) => b[0] < box[2] && box[0] < b[2] && b[1] < box[3] && box[1] < b[3])) continue;
    written.push(box);
    c.textAlign = right ? "right" : "left";
    c.strokeStyle = theme.panel; // a halo: the count stays readable over the marks
    c.strokeText(text, x, k.y);
    c.fillStyle = theme.fg;
    c.fillText(text, x, k.y);
  }
  c.lineWidth = 1;
  for (const k of layout.marks.filter((k) => k.outside)) {
    c.beginPath();
    c.arc(k.x, k.y, k.rows.length > 1 ? 3 : 2, 0, 2 * Math.PI);
    c.strokeStyle = colour(k);
    c.stroke();
  }
  return layout;
}
