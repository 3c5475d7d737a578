// The decomposition panel's pure parts (js/views/decomposition/decomposition.js): a token's shares by term kind
// from `decomposition_terms` (4, n), their stacked bars (positive shares stacked up from 0, negative ones down), the
// diverging colour of a head's share, and which head row a pointer is over. No DOM here.

/** The rows of `decomposition_terms`, in Python's order (headsne_widget/widget/decomposition_view.py TERM_KINDS). */
export const TERMS = [
  { kind: "input", label: "input", colour: "#8c8c8c" },
  { kind: "head", label: "attention", colour: "#1f77b4" },
  { kind: "mlp", label: "feed-forward", colour: "#ff7f0e" },
  { kind: "correction", label: "correction", colour: "#9467bd" },
];

/**
 * Token `token`'s four shares, or null when `terms` is not (4, n) or the token is out of range.
 * @param {{data: Float32Array | Int32Array, shape: number[]} | null} terms
 * @param {number} token
 * @returns {number[] | null}
 */
export function tokenShares(terms, token) {
  if (!terms || terms.shape.length !== 2 || terms.shape[0] !== TERMS.length) return null;
  const n = terms.shape[1];
  if (!Number.isInteger(token) || token < 0 || token >= n) return null;
  return TERMS.map((_, k) => terms.data[k * n + token]);
}

/**
 * The stacked bar of `shares`: each term's [y0, y1] (y0 < y1) in share units, positive ones stacked up from 0 in
 * the terms' order, negative ones down; `low` and `high` the extent (0 included).
 * @param {number[]} shares
 */
export function stackShares(shares) {
  let up = 0,
    down = 0;
  const segments = shares.map((value, k) => {
    const v = Number.isFinite(value) ? value : 0;
    if (v >= 0) {
      const seg = { term: k, value: v, y0: up, y1: up + v };
      up += v;
      return seg;
    }
    const seg = { term: k, value: v, y0: down + v, y1: down };
    down += v;
    return seg;
  });
  return { segments, low: down, high: up };
}

/**
 * RGB of a share on a diverging scale symmetric about 0: `limit` and beyond full red (positive) or blue
 * (negative), 0 the neutral `base`.
 * @param {number} value
 * @param {number} limit > 0
 * @param {[number, number, number]} base
 * @returns {[number, number, number]}
 */
export function shareRgb(value, limit, base) {
  if (!Number.isFinite(value) || !(limit > 0)) return base;
  const t = Math.max(-1, Math.min(1, value / limit));
  const end = t >= 0 ? [202, 0, 32] : [5, 113, 176];
  const a = Math.abs(t);
  return /** @type {[number, number, number]} */ (base.map((b, i) => Math.round(b + (end[i] - b) * a)));
}

/**
 * The largest |share| of `heads` (the colour scale's limit), at least 1e-6.
 * @param {Float32Array | Int32Array} data
 */
export function shareLimit(data) {
  let m = 0;
  for (const v of data) if (Number.isFinite(v)) m = Math.max(m, Math.abs(v));
  return Math.max(m, 1e-6);
}

/**
 * The head row at `y` (CSS px from the map's top) of `rows` rows of `rowHeight` each, or -1.
 * @param {number} y
 * @param {number} rows
 * @param {number} rowHeight
 */
export function rowAt(y, rows, rowHeight) {
  const k = Math.floor(y / rowHeight);
  return rowHeight > 0 && y >= 0 && k < rows ? k : -1;
}

/**
 * A share as the panel writes it: "+0.412", "−0.031".
 * @param {number} v
 */
export function shareText(v) {
  if (!Number.isFinite(v)) return "–";
  return `${v < 0 ? "−" : "+"}${Math.abs(v).toFixed(3)}`;
}
