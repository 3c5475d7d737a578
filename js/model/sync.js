// Model wiring: every trait change from Python becomes a state change (js/store/state.js). This is the only
// module that listens to the model; the views read the state, and the user's writes go through
// js/store/intents.js. Several traits of one message fire one after the other: the derived state that needs
// several of them (the text, the colours, the frames) is computed once, a microtask later (`coalesce`).

import { decodeArray, decodeEdges } from "./codecs.js";
import { T, changes } from "./model.js";
import { coalesce } from "../lib/schedule.js";
import { tokenRows } from "../lib/tokens.js";
import { colourTokens, tokenKinds, KIND_PIECE } from "../lib/colors.js";
import { MIRRORED, hoverOf, selectionOf } from "../store/state.js";
import { searchOf } from "../lib/search.js";
import { pointLabels } from "../lib/segments.js";

/**
 * @typedef {import("../store/state.js").State} State
 * @typedef {import("../store/store.js").Store<State>} StateStore
 * @typedef {import("./model.js").Model} Model
 */

/**
 * The mirrored traits as Python has them now.
 * @param {Model} model
 * @returns {Partial<State>}
 */
export function readMirrored(model) {
  return Object.fromEntries(MIRRORED.map((name) => [name, model.get(name)]));
}

/**
 * The text, its tokens and which tokens continue a word.
 * @param {Model} model
 * @returns {import("../store/state.js").Doc}
 */
export function readDoc(model) {
  const text = model.get(T.text) || "";
  const tokens = (model.get(T.tokens) || []).map(String);
  const special = model.get(T.special) || [];
  const off = model.get(T.offsets);
  const offsets = Array.isArray(off) && off.length === tokens.length ? off : null;
  const kinds = tokenKinds(text, tokens, offsets, special);
  const word = String(model.get(T.word) || "");
  const given = model.get(T.point_labels);
  const labels = pointLabels({ text, tokens, offsets, word, labels: Array.isArray(given) ? given.map(String) : null });
  return { text, tokens, offsets, special, subword: (t) => kinds[t] === KIND_PIECE, word, labels };
}

/**
 * @param {Model} model
 * @param {number} n tokens in the text
 * @returns {import("../store/state.js").Rows}
 */
export function readRows(model, n) {
  const kept = model.get(T.kept) || [];
  return { kept, tokenRow: tokenRows(kept, n) };
}

/**
 * The token colours and their legend for the colour mode, or null before the theme is known.
 * @param {Model} model
 * @param {State} state
 * @param {(message: string) => void} onError
 * @returns {import("../store/state.js").Colouring | null}
 */
export function readColours(model, state, onError) {
  const { theme, doc } = state;
  if (!theme) return null;
  let values = null;
  try {
    const decoded = decodeArray(model.get(T.color_values) ?? null);
    values = decoded ? /** @type {Float32Array} */ (decoded.data) : null;
  } catch (err) {
    onError(`cannot read the colour values: ${/** @type {Error} */ (err).message}`);
  }
  return colourTokens(model.get(T.color_mode) || "position", {
    ...doc,
    values,
    categories: model.get(T.color_categories) ?? [],
    dark: theme.dark,
    muted: theme.muted,
    layer: model.get(T.layer),
    head: model.get(T.head),
  });
}

/**
 * The decoded grid the state draws (null when there is none, or it cannot be read): the grid above uniform
 * when `grid_norm` asks for it and Python sent it, else the raw maximum attention.
 * @param {Model} model
 * @param {(message: string) => void} onError
 * @returns {import("../store/state.js").Grid | null}
 */
export function readGrid(model, onError) {
  try {
    const above =
      model.get(T.grid_norm) === "above_uniform" ? decodeArray(model.get(T.max_attention_above_uniform)) : null;
    const grid = above ?? decodeArray(model.get(T.max_attention));
    if (grid && grid.shape.length !== 3) throw new RangeError(`max_attention must be (L, H, n), got [${grid.shape}]`);
    const norm = above ? "above_uniform" : "raw";
    return grid ? { data: /** @type {Float32Array} */ (grid.data), shape: grid.shape, norm } : null;
  } catch (err) {
    onError(`cannot draw the maximum-attention grid: ${/** @type {Error} */ (err).message}`);
    return null;
  }
}

/**
 * The decoded array of trait `name` with `dims` dimensions (null when there is none, or it cannot be read).
 * @param {Model} model
 * @param {"scores" | "head_map" | "head_order" | "cluster_of" | "syntax_tree"} name
 * @param {number} dims
 * @param {(message: string) => void} onError
 * @returns {import("../store/state.js").Decoded | null}
 */
export function readHeadArray(model, name, dims, onError) {
  try {
    const array = decodeArray(model.get(name) ?? null);
    if (array && array.shape.length !== dims)
      throw new RangeError(`must have ${dims} dimensions, got [${array.shape}]`);
    return array;
  } catch (err) {
    onError(`cannot read ${name}: ${/** @type {Error} */ (err).message}`);
    return null;
  }
}

/**
 * The hover partners: attends to / attended by, or the undirected edges.
 * @param {Model} model
 * @param {import("../store/state.js").EdgeSet} previous kept when the new ones cannot be read
 * @param {(message: string) => void} onError
 * @returns {import("../store/state.js").EdgeSet}
 */
export function readEdges(model, previous, onError) {
  const edges = { ...previous };
  try {
    edges.edges = decodeEdges(model.get(T.edges));
    edges.attendsTo = decodeEdges(model.get(T.attends_to) ?? null);
    edges.attendedBy = decodeEdges(model.get(T.attended_by) ?? null);
  } catch (err) {
    onError(`cannot read the attention edges: ${/** @type {Error} */ (err).message}`);
  }
  return edges;
}

/**
 * Keep `store` in step with `model`; `feed.ingest()` takes the frames (js/model/recorder.js). Returns
 * {start(): read everything once, stop(): remove every listener}.
 * @param {{model: Model, store: StateStore, feed: {ingest: () => void}, onError: (message: string) => void}} parts
 */
export function connectModel({ model, store, feed, onError }) {
  /** @type {(() => void)[]} */
  const stops = [];
  const listen = (/** @type {string} */ events, /** @type {() => void} */ fn) => {
    model.on(events, fn);
    stops.push(() => model.off(events, fn));
  };
  const n = () => store.state.doc.tokens.length;
  const recolour = () => {
    // Python's values in "user" mode are the user's (w.color_by): from then on "your values" can be chosen
    const user = model.get(T.color_mode) === "user" && model.get(T.color_values) != null;
    store.set({ colours: readColours(model, store.state, onError), ...(user ? { userValues: true } : {}) });
  };

  /** The text changed: everything that depends on it, in one change of the state. */
  function onText() {
    const doc = readDoc(model);
    const n = doc.tokens.length;
    store.set({
      doc,
      rows: readRows(model, n),
      hover: -1,
      pinned: -1,
      hoverInfo: null,
      colours: readColours(model, { ...store.state, doc }, onError),
      selected: selectionOf(model.get(T.selected), n),
      search: searchOf(store.state.search.query, doc),
      grid: readGrid(model, onError),
    });
  }
  const onHovered = () => {
    const token = hoverOf(model.get(T.hovered), n());
    if (token !== store.state.hover) store.set({ hover: token, hoverInfo: null });
  };

  function start() {
    store.set(readMirrored(model));
    onText();
    store.set({ edges: readEdges(model, store.state.edges, onError) });
    listen(changes(...MIRRORED), () => store.set(readMirrored(model)));
    listen(changes(T.text, T.word, T.tokens, T.offsets, T.special, T.point_labels), coalesce(onText));
    // the grid shown follows `grid_norm` (no coalescing: a new text's grid is there in the same change)
    listen(changes(T.max_attention, T.max_attention_above_uniform, T.grid_norm), () =>
      store.set({ grid: readGrid(model, onError) }),
    );
    const array = (
      /** @type {"scores" | "head_map" | "head_order" | "cluster_of" | "syntax_tree"} */ name,
      /** @type {number} */ dims,
    ) => readHeadArray(model, name, dims, onError);
    store.set({ headScores: array(T.scores, 3), headMap: array(T.head_map, 2), headOrder: array(T.head_order, 2) });
    listen(changes(T.scores), () => store.set({ headScores: array(T.scores, 3) }));
    listen(changes(T.head_map), () => store.set({ headMap: array(T.head_map, 2) }));
    listen(changes(T.head_order), () => store.set({ headOrder: array(T.head_order, 2) }));
    store.set({ clusterOf: array(T.cluster_of, 1) });
    listen(changes(T.cluster_of), () => store.set({ clusterOf: array(T.cluster_of, 1) }));
    store.set({ syntaxTree: array(T.syntax_tree, 2) });
    listen(changes(T.syntax_tree), () => store.set({ syntaxTree: array(T.syntax_tree, 2) }));
    listen(changes(T.kept), () => store.set({ rows: readRows(model, n()) }));
    listen(changes(T.edges, T.attends_to, T.attended_by), () =>
      store.set({ edges: readEdges(model, store.state.edges, onError) }),
    );
    listen(changes(T.selected), () => store.set({ selected: selectionOf(model.get(T.selected), n()) }));
    listen(changes(T.hovered), onHovered);
    listen(changes(T.color_mode, T.color_values, T.color_categories), coalesce(recolour));
    listen(
      changes(T.layer, T.head),
      coalesce(() => ["max_attention", "head_share"].includes(model.get(T.color_mode) ?? "") && recolour()),
    );
    listen(changes(T.frame, T.iteration, T.kl, T.run_id), coalesce(feed.ingest));
    stops.push(store.subscribe(["theme"], recolour));
    feed.ingest();
  }

  return {
    start,
    stop: () => stops.splice(0).forEach((stop) => stop()),
  };
}
