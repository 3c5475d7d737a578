// The heads as the head map shows them (pure): the kinds' colours and legend, each head's place on the
// canvas (`head_map`, in [-1, 1]), its hover line and the related heads' lines. The kinds are Python's
// (headsne_widget/capture/scores.py KIND_RULES, docs/which-head.md "Kinds").

import { categorical } from "../../lib/colors.js";

/** Every kind Python names, in the order of its rules (the legend's order). */
export const KINDS = ["sink", "previous", "next", "self", "special", "local", "broad", "focused"];

/**
 * The colour of a kind: d3's category10 by its place in KINDS (a kind Python adds later gets the next ones).
 * @param {string} kind
 * @param {string[]} [seen] the kinds on the map, for the place of an unknown one
 */
export function kindColour(kind, seen = []) {
  const known = KINDS.indexOf(kind);
  if (known >= 0) return categorical(known);
  const extra = [...new Set(seen.filter((k) => !KINDS.includes(k)))].indexOf(kind);
  return categorical(KINDS.length + Math.max(0, extra));
}

/**
 * The categorical legend of the kinds on the map (in KINDS' order, unknown ones after), with their counts.
 * @param {string[]} kinds one per head
 * @returns {{kind: string, colour: string, count: number}[]}
 */
export function kindLegend(kinds) {
  /** @type {Map<string, number>} */
  const counts = new Map();
  for (const kind of kinds) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  const order = [...KINDS.filter((k) => counts.has(k)), ...[...counts.keys()].filter((k) => !KINDS.includes(k))];
  return order.map((kind) => ({ kind, colour: kindColour(kind, kinds), count: counts.get(kind) ?? 0 }));
}

/** The head map's label of a head that tracks no relation (headsne_widget/widget/syntax_view.py NO_WORD). */
export const NO_RELATION = "(none)";

/**
 * The head map's legend of the relations the heads track best (`head_relations`): category10 by how many heads
 * track each (most first, ties by name), then the heads that track none, in `muted`.
 * @param {string[]} relations one per head
 * @param {string} muted
 * @returns {{kind: string, colour: string, count: number}[]}
 */
export function relationLegend(relations, muted) {
  /** @type {Map<string, number>} */
  const counts = new Map();
  for (const r of relations) counts.set(r, (counts.get(r) ?? 0) + 1);
  const order = [...counts.keys()].filter((r) => r !== NO_RELATION);
  order.sort((a, b) => (counts.get(b) ?? 0) - (counts.get(a) ?? 0) || (a < b ? -1 : a > b ? 1 : 0));
  const entries = order.map((kind, k) => ({ kind, colour: categorical(k), count: counts.get(kind) ?? 0 }));
  const none = counts.get(NO_RELATION);
  return none ? [...entries, { kind: NO_RELATION, colour: muted, count: none }] : entries;
}

/**
 * The screen places (CSS px) of N heads at `positions` (N x 2, in [-1, 1]) in a box of `width` x `height`
 * with `pad` px on every side, y up; the box's aspect is kept (the map's distances are Euclidean).
 * @param {ArrayLike<number>} positions
 * @param {number} N
 * @param {{width: number, height: number, pad: number}} box
 */
export function headPlaces(positions, N, { width, height, pad }) {
  const half = Math.max(1, Math.min(width, height) / 2 - pad);
  const [cx, cy] = [width / 2, height / 2];
  const sx = new Float32Array(N);
  const sy = new Float32Array(N);
  for (let i = 0; i < N; i++) {
    const x = Number(positions[2 * i]);
    const y = Number(positions[2 * i + 1]);
    sx[i] = cx + (Number.isFinite(x) ? x : 0) * half;
    sy[i] = cy - (Number.isFinite(y) ? y : 0) * half;
  }
  return { sx, sy, m: N };
}

/**
 * A head's scores, largest first (undefined ones, -1 on the wire, left out).
 * @param {{data: ArrayLike<number>, shape: number[]} | null} scores (L, H, S)
 * @param {string[]} names
 * @param {number} index layer * H + head
 * @param {number} [top]
 */
export function topScores(scores, names, index, top = 3) {
  if (!scores || scores.shape.length !== 3) return [];
  const S = scores.shape[2];
  /** @type {{name: string, value: number}[]} */
  const out = [];
  for (let s = 0; s < S; s++) {
    const value = Number(scores.data[index * S + s]);
    if (Number.isFinite(value) && value >= 0) out.push({ name: names[s] ?? `score ${s}`, value });
  }
  return out.sort((a, b) => b.value - a.value).slice(0, top);
}

/**
 * The hover line of head (layer, head): "L{layer} H{head} · kind · top scores".
 * @param {{layer: number, head: number, kind: string, top: {name: string, value: number}[]}} head
 */
export function headLine({ layer, head, kind, top }) {
  const scores = top.map(({ name, value }) => `${name} ${value.toFixed(2)}`).join(", ");
  return [`L${layer} H${head}`, kind, scores].filter(Boolean).join(" · ");
}

/**
 * The related heads Python sent (`related`), checked: [{layer, head, similarity}] of heads in the model.
 * @param {unknown} related
 * @param {number} L
 * @param {number} H
 * @returns {{layer: number, head: number, similarity: number}[]}
 */
export function relatedHeads(related, L, H) {
  if (!Array.isArray(related)) return [];
  return related
    .map((r) => ({ layer: Number(r?.layer), head: Number(r?.head), similarity: Number(r?.similarity) }))
    .filter(({ layer, head }) => Number.isInteger(layer) && Number.isInteger(head))
    .filter(({ layer, head }) => layer >= 0 && layer < L && head >= 0 && head < H);
}
