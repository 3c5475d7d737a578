// A token's partners for hover lines, labels and the tooltip: in attention mode "attends to" (row i of
// the selected head's A) and "attended by" (column i), or the undirected `edges` when Python sends no
// directed ones; in hidden-state mode the nearest neighbours in that layer's hidden space (`edges`).

import { topEdges } from "./tokens.js";

/**
 * @typedef {import("./tokens.js").Partner} Partner
 * @typedef {{to: Partner[], from: Partner[], near: Partner[], hidden: boolean}} Partners
 * @typedef {import("./tokens.js").Edges} Edges
 */

/**
 * @param {number} token
 * @param {{edges: Edges | null, attendsTo: Edges | null, attendedBy: Edges | null, k: number,
 *   tokenRow: Int32Array | null, hidden: boolean}} source
 * @returns {Partners}
 */
export function partnersOf(token, { edges, attendsTo, attendedBy, k, tokenRow, hidden }) {
  const none = { to: [], from: [], near: [], hidden };
  if (token < 0) return none;
  if (hidden) return { ...none, near: topEdges(edges, token, k, tokenRow) };
  if (attendsTo || attendedBy) {
    return {
      ...none,
      to: topEdges(attendsTo, token, k, tokenRow),
      from: topEdges(attendedBy, token, k, tokenRow),
    };
  }
  return { ...none, near: topEdges(edges, token, k, tokenRow) };
}

/**
 * The partners drawn for an edge direction ("both" | "to" | "from" | "off"); undirected ones are drawn
 * unless "off".
 * @param {Partners} p
 * @param {string} direction
 */
export function shownPartners(p, direction) {
  const d = direction || "both";
  return {
    to: d === "both" || d === "to" ? p.to : [],
    from: d === "both" || d === "from" ? p.from : [],
    near: d === "off" ? [] : p.near,
  };
}

/**
 * Every partner token once (for highlighting in the text strip and label priority).
 * @param {{to: Partner[], from: Partner[], near: Partner[]}} p
 */
export function partnerTokens(p) {
  return [...new Set([...p.to, ...p.from, ...p.near].map((q) => q.token))];
}

/**
 * The tooltip's partner lines, "attends to: the 0.31, cat#12 0.20"; a token whose text occurs more than
 * once in the sequence is told apart by its position (#index).
 * @param {Partners} p
 * @param {string[]} tokens
 * @param {number} [layer]
 */
export function partnerLines(p, tokens, layer) {
  /** @type {Map<string, number>} */
  const counts = new Map();
  for (const t of tokens) counts.set(t, (counts.get(t) ?? 0) + 1);
  const name = (/** @type {number} */ j) => `${tokens[j]}${(counts.get(tokens[j]) ?? 0) > 1 ? `#${j}` : ""}`;
  const list = (/** @type {Partner[]} */ ps) => ps.map((q) => `${name(q.token)} ${q.weight.toFixed(2)}`).join(", ");
  const lines = [];
  if (p.to.length) lines.push(`attends to: ${list(p.to)}`);
  if (p.from.length) lines.push(`attended by: ${list(p.from)}`);
  if (p.near.length) {
    lines.push(
      p.hidden ? `nearest in layer ${layer ?? ""} hidden space: ${list(p.near)}` : `attends with: ${list(p.near)}`,
    );
  }
  return lines;
}
