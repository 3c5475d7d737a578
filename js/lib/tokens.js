// Token facts: frame rows of the kept tokens and each token's strongest partners from the edges trait.

/**
 * @typedef {{token: number, weight: number}} Partner a partner token and the weight joining it
 * @typedef {{indices: Int32Array, weights: Float32Array, n: number, k: number}} Edges top-k partners per token
 */

/**
 * Map token index -> frame row (-1 when the token has no point) from the `kept` trait.
 * @param {number[] | null | undefined} kept
 * @param {number} n
 */
export function tokenRows(kept, n) {
  const rows = new Int32Array(Math.max(n, 0)).fill(-1);
  (kept || []).forEach((t, r) => {
    if (t >= 0 && t < n) rows[t] = r;
  });
  return rows;
}

/**
 * The strongest attention partners of `token` from the `edges` trait (indices/weights (n, K)), at most
 * `k`, strongest first, leaving out the token itself, non-positive weights and tokens without a point
 * (tokenRow[j] < 0). Returns [{token, weight}].
 * @param {Edges | null} edges
 * @param {number} token
 * @param {number} k
 * @param {Int32Array | null} [tokenRow]
 * @returns {Partner[]}
 */
export function topEdges(edges, token, k, tokenRow = null) {
  if (!edges || token < 0 || token >= edges.n || k <= 0) return [];
  const out = [];
  const base = token * edges.k;
  for (let c = 0; c < edges.k; c++) {
    const j = edges.indices[base + c];
    const w = edges.weights[base + c];
    if (j === token || j < 0 || j >= edges.n || !(w > 0)) continue;
    if (tokenRow && !(tokenRow[j] >= 0)) continue;
    out.push({ token: j, weight: w });
  }
  out.sort((a, b) => b.weight - a.weight);
  return out.slice(0, k);
}
