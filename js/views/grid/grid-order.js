// The order of the grid's rows (`head_order`, js/PROTOCOL.md): row k of layer l shows head order[l][k]
// (the heads sorted by a score, `sort_heads`), the model's order when there is none. The grid paints its
// rows in this order, and maps every row it hit back to its head (a click, a hover, the keyboard cursor).

/**
 * @typedef {object} RowOrder
 * @property {boolean} sorted whether any row shows another head than the model's order
 * @property {(layer: number, row: number) => number} headAt the head row `row` of layer `layer` shows
 * @property {(layer: number, head: number) => number} rowOf the row that shows head `head`
 * @property {number[][]} layers per layer, the heads of its rows, top to bottom
 */

/**
 * Whether `heads` holds each of 0..H-1 once.
 * @param {ArrayLike<number>} heads
 * @param {number} H
 */
function isPermutation(heads, H) {
  if (heads.length !== H) return false;
  const seen = new Uint8Array(H);
  for (let k = 0; k < H; k++) {
    const h = heads[k];
    if (!Number.isInteger(h) || h < 0 || h >= H || seen[h]) return false;
    seen[h] = 1;
  }
  return true;
}

/**
 * The row order of a grid of L layers x H heads from the decoded `head_order` (int32 (L, H)); the model's
 * order when it is null, of another shape, or a layer of it is not a permutation of the heads.
 * @param {{data: ArrayLike<number>, shape: number[]} | null} order
 * @param {number} L
 * @param {number} H
 * @returns {RowOrder}
 */
export function rowOrder(order, L, H) {
  /** @type {number[][]} */
  const layers = [];
  for (let l = 0; l < L; l++) {
    const given =
      order && order.shape.length === 2 && order.shape[0] === L && order.shape[1] === H
        ? Array.from({ length: H }, (_, k) => order.data[l * H + k])
        : null;
    layers.push(given && isPermutation(given, H) ? given : Array.from({ length: H }, (_, h) => h));
  }
  const rows = layers.map((heads) => {
    const row = new Array(H);
    heads.forEach((h, k) => (row[h] = k));
    return row;
  });
  const sorted = layers.some((heads) => heads.some((h, k) => h !== k));
  return {
    sorted,
    layers,
    headAt: (layer, row) => layers[layer]?.[row] ?? row,
    rowOf: (layer, head) => rows[layer]?.[head] ?? head,
  };
}

/**
 * The grid's values (L, H, n) with each layer's rows in the shown order (`values` itself when unsorted).
 * @param {Float32Array} values
 * @param {RowOrder} order
 * @param {{L: number, H: number, n: number}} shape
 */
export function rowsInOrder(values, order, { L, H, n }) {
  if (!order.sorted) return values;
  const out = new Float32Array(values.length);
  for (let l = 0; l < L; l++)
    for (let k = 0; k < H; k++) {
      const from = (l * H + order.headAt(l, k)) * n;
      out.set(values.subarray(from, from + n), (l * H + k) * n);
    }
  return out;
}

/**
 * A cell or cursor of the model's order as the grid shows it (head -> row), or back (row -> head).
 * @template {{layer: number, head: number}} C
 * @param {RowOrder} order
 * @param {C} cell
 * @param {"toRow" | "toHead"} way
 * @returns {C}
 */
export function mapRow(order, cell, way) {
  const head = way === "toRow" ? order.rowOf(cell.layer, cell.head) : order.headAt(cell.layer, cell.head);
  return { ...cell, head };
}
