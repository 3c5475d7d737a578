// Colour by position, token kind, sentence, the selected head's max attention, the user's values, or each token's
// word's part of speech or dependency relation (categories Python parses);
// and the legend describing whichever is active. One palette family everywhere (light, dark, and the
// bokeh figures): matplotlib's perceptually uniform maps (viridis for the attention heat map, plasma
// for ordered token values) and category10 for categories.

import { interpolatePlasma, schemeCategory10 } from "d3-scale-chromatic";

/** The bokeh palette names of the same colours, for headsne_widget/figures/plots.py. */
export const BOKEH_PALETTES = { heat: "Viridis256", sequential: "Plasma256", categorical: "Category10_10" };

export const KIND_SPECIAL = 0;
export const KIND_WORD = 1;
export const KIND_PIECE = 2;
export const KIND_LABELS = ["special", "word start", "word piece"];

const WORD_CHAR = /[\p{L}\p{N}_]/u;

/**
 * Token kind per token: 0 special, 1 word start, 2 word piece (continues the previous token's word).
 * @param {string} text
 * @param {string[]} tokens
 * @param {([number, number] | null)[] | null} offsets
 * @param {boolean[]} special
 */
export function tokenKinds(text, tokens, offsets, special) {
  const kinds = new Int8Array(tokens.length);
  let prevEnd = -1;
  tokens.forEach((tok, i) => {
    const span = offsets && offsets[i];
    if (special[i]) {
      kinds[i] = KIND_SPECIAL;
      return;
    }
    if (!span || !(span[1] > span[0])) {
      const t = String(tok);
      kinds[i] = t.startsWith("##") ? KIND_PIECE : KIND_WORD;
      return;
    }
    const s = span[0];
    const glued = s > 0 && prevEnd === s && WORD_CHAR.test(text[s - 1] ?? "") && WORD_CHAR.test(text[s] ?? "");
    kinds[i] = glued ? KIND_PIECE : KIND_WORD;
    prevEnd = span[1];
  });
  return kinds;
}

/**
 * Sentence index per token: a sentence ends after '.', '!' or '?' followed by white space (or the end),
 * or at a newline. Tokens without an offset (special tokens) join the previous token's sentence.
 * @param {string} text
 * @param {string[]} tokens
 * @param {([number, number] | null)[] | null} offsets
 */
export function sentenceIds(text, tokens, offsets) {
  const ids = new Int32Array(tokens.length);
  if (!offsets || offsets.length !== tokens.length) {
    let id = 0;
    tokens.forEach((tok, i) => {
      ids[i] = id;
      if (/^[.!?]+$/.test(String(tok).trim())) id++;
    });
    return ids;
  }
  /** @type {number[]} */
  const ends = []; // exclusive end of each sentence but the last
  for (let p = 0; p < text.length; p++) {
    const c = text[p];
    if (c === "\n" || (".!?".includes(c) && (p + 1 === text.length || /\s/.test(text[p + 1])))) ends.push(p + 1);
  }
  let prev = 0;
  tokens.forEach((_, i) => {
    const span = offsets[i];
    if (!span || !(span[1] > span[0])) {
      ids[i] = prev;
      return;
    }
    let id = 0;
    while (id < ends.length && ends[id] <= span[0]) id++;
    ids[i] = id;
    prev = id;
  });
  // a sentence id counts ends before the token: renumber so that the used ids are 0, 1, 2, ...
  const used = [...new Set(ids)].sort((a, b) => a - b);
  const rank = new Map(used.map((id, k) => [id, k]));
  return ids.map((id) => rank.get(id) ?? 0);
}

/**
 * Sequential colour in [0, 1] for the theme: plasma, its ends kept readable on the background.
 * @param {boolean} dark
 * @returns {(t: number) => string}
 */
export function sequential(dark) {
  return dark ? (t) => interpolatePlasma(0.15 + 0.85 * t) : (t) => interpolatePlasma(0.85 * t);
}

/**
 * Categorical colour of code k (cycles after 10).
 * @param {number} k
 */
export function categorical(k) {
  return schemeCategory10[((k % 10) + 10) % 10];
}

/**
 * @typedef {{kind: "sequential", title: string, low: string, high: string, colour: (t: number) => string}
 *   | {kind: "categorical", title: string, entries: {label: string, colour: string}[], more: number}} Legend
 */

/**
 * @typedef {{text: string, tokens: string[], offsets: any, special: boolean[], values: Float32Array | null,
 *   categories: string[], dark: boolean, muted: string, layer?: number, head?: number}} ColourContext
 * @typedef {{colours: string[], legend: Legend, mode: string}} Colouring
 */

/** @param {ColourContext} ctx @returns {Colouring} */
function byKind({ text, tokens, offsets, special }) {
  const kinds = tokenKinds(text, tokens, offsets, special);
  const entries = KIND_LABELS.map((label, k) => ({ label, colour: categorical(k) }));
  return {
    mode: "kind",
    colours: Array.from(kinds, (k) => entries[k].colour),
    legend: { kind: "categorical", title: "token kind", entries, more: 0 },
  };
}

/** @param {ColourContext} ctx @returns {Colouring} */
function bySentence({ text, tokens, offsets }) {
  const ids = sentenceIds(text, tokens, offsets);
  const count = tokens.length ? Math.max(...ids) + 1 : 0;
  const shown = Math.min(count, 10);
  const entries = Array.from({ length: shown }, (_, k) => ({ label: `sentence ${k + 1}`, colour: categorical(k) }));
  return {
    mode: "sentence",
    colours: Array.from(ids, (k) => categorical(k)),
    legend: { kind: "categorical", title: "sentence (colours repeat after 10)", entries, more: count - shown },
  };
}

/** The legend's title of the modes of categories from Python: the user's, and the parse's (Python's syntax_view). */
const CATEGORY_TITLES = /** @type {Record<string, string>} */ ({
  user: "your categories",
  pos: "part of speech (spaCy)",
  dep: "dependency relation (spaCy)",
});

/**
 * Categories from Python (the user's labels, or each token's word's part of speech or relation): values are integer
 * codes into them.
 * @param {string} mode
 * @param {Float32Array} values
 * @param {ColourContext} ctx
 * @returns {Colouring}
 */
function byCategory(mode, values, { categories, muted }) {
  const entries = categories.slice(0, 10).map((label, k) => ({ label: String(label), colour: categorical(k) }));
  const colours = Array.from(values, (v) =>
    Number.isInteger(v) && v >= 0 && v < categories.length ? categorical(v) : muted,
  );
  const title = CATEGORY_TITLES[mode] ?? mode;
  return { mode, colours, legend: { kind: "categorical", title, entries, more: categories.length - entries.length } };
}

/** The modes coloured by values from Python, and what their legend says while the values have not come. */
const WAITING = /** @type {Record<string, string>} */ ({
  user: "values",
  max_attention: "max attention",
  head_share: "head's share (the decomposition is computed)",
  pos: "parts of speech (the text is parsed)",
  dep: "relations (the text is parsed)",
});
/** The legend's title of the modes of Python's values other than the user's. */
const VALUE_TITLES = /** @type {Record<string, string>} */ ({
  max_attention: "max attention to the token",
  head_share: "the head's share t·e/‖e‖² of the token's state",
});

/**
 * Ordered values (the user's, the selected head's max attention or its share of the state, from 0) on the
 * sequential palette.
 * @param {string} mode
 * @param {Float32Array} values
 * @param {ColourContext} ctx
 * @returns {Colouring}
 */
function byValue(mode, values, ctx) {
  const seq = sequential(ctx.dark);
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (!Number.isFinite(v)) continue;
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  if (mode === "max_attention" || mode === "head_share") lo = Math.min(lo, 0);
  const span = hi > lo ? hi - lo : 1;
  const colours = Array.from(values, (v) => (Number.isFinite(v) ? seq((v - lo) / span) : ctx.muted));
  const fmt = (/** @type {number} */ v) => (Number.isFinite(v) ? Number(v.toPrecision(3)).toString() : "–");
  const head = ctx.layer != null ? ` · layer ${ctx.layer} head ${ctx.head}` : "";
  const title = VALUE_TITLES[mode] ? `${VALUE_TITLES[mode]}${head}` : "your values";
  return { mode, colours, legend: { kind: "sequential", title, low: fmt(lo), high: fmt(hi), colour: seq } };
}

/**
 * Position in the text; also what "user" and "max_attention" show while their values have not come.
 * @param {string} mode
 * @param {ColourContext} ctx
 * @returns {Colouring}
 */
function byPosition(mode, { tokens, dark }) {
  const n = tokens.length;
  const seq = sequential(dark);
  const colours = tokens.map((_, i) => seq(n > 1 ? i / (n - 1) : 0));
  const waiting = mode in WAITING;
  return {
    mode: waiting ? `${mode} (waiting for values)` : "position",
    colours,
    legend: {
      kind: "sequential",
      title: waiting ? `position in the text (no ${WAITING[mode]} yet)` : "position in the text",
      low: "first token",
      high: `token #${Math.max(0, n - 1)}`,
      colour: seq,
    },
  };
}

/**
 * Per-token colours and the legend for a colour mode.
 * @param {string} mode "position" | "kind" | "sentence" | "max_attention" | "user" | "head_share" | "pos" | "dep"
 * @param {ColourContext} ctx
 * @returns {Colouring}
 */
export function colourTokens(mode, ctx) {
  const { values, categories } = ctx;
  if (mode === "kind") return byKind(ctx);
  if (mode === "sentence") return bySentence(ctx);
  const hasValues = mode in WAITING && values && values.length === ctx.tokens.length;
  if (!hasValues || !values) return byPosition(mode, ctx);
  if (mode in CATEGORY_TITLES && categories && categories.length) return byCategory(mode, values, ctx);
  return byValue(mode, values, ctx);
}
