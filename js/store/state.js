// The widget's state: one object in one store (js/store/store.js). Python's traits come in through
// js/model/sync.js (the simple ones mirrored under their own names, the arrays decoded), the user's intents
// through js/store/intents.js; the views (js/views/views.js) only read it. The update functions below are the only
// writers of the shared UI state (hover, selection, search).

import { partnersOf } from "../lib/partners.js";
import { MIRRORED } from "../model/protocol.generated.js";
import { sourceOf } from "../model/sources.js";

/** Traits mirrored into the state under their own names (protocol.py declares which: `mirrored`). */
export { MIRRORED };

/**
 * @typedef {typeof MIRRORED[number]} Mirrored
 * @typedef {import("../model/model.js").Traits} Traits
 */

/**
 * The text and its tokens. `subword(t)`: token t continues a word (labelled last). `word`: the word whose
 * occurrences across texts are the points (`HeadSNE.contexts`, "word mode": `text` holds their sentences, one a
 * line, each token is one occurrence), "" for a widget of one text.
 * @typedef {{text: string, tokens: string[], offsets: ([number, number] | null)[] | null, special: boolean[],
 *   subword: (t: number) => boolean, word: string, labels: string[]}} Doc `labels`: what the map labels each
 *   token's point with (js/lib/segments.js pointLabels: Python's `point_labels`, a word's occurrences' snippets, or
 *   the tokens)
 * @typedef {{kept: number[], tokenRow: Int32Array}} Rows frame row of each token (-1: no point)
 * @typedef {{data: Float32Array, shape: number[], norm: "raw" | "above_uniform"}} Grid the decoded grid (L, H, n)
 *   drawn: `max_attention`, or `max_attention_above_uniform` when `norm` is "above_uniform"
 * @typedef {{data: Float32Array | Int32Array, shape: number[]}} Decoded a decoded array (js/model/codecs.js)
 * @typedef {import("../lib/partners.js").Edges} Edges
 * @typedef {{edges: Edges | null, attendsTo: Edges | null, attendedBy: Edges | null}} EdgeSet
 * @typedef {{colours: string[], legend: import("../lib/colors.js").Legend, mode: string}} Colouring
 * @typedef {{layer: number, head: number, token: number, value: number, group: number}} GridCell
 * @typedef {{source: "grid" | "scatter" | "text", x: number, y: number, cell?: GridCell}} HoverInfo where the
 *   pointer is (client px) and what it is over
 * @typedef {{query: string, matches: Set<number>, count: number, error: string, pending: boolean}} Search the
 *   search over the text (js/lib/search.js): the tokens the matches touch, how many matches, a regular
 *   expression still running (js/workers/search-worker.js)
 * @typedef {{data: Float32Array, count: number, animate: boolean, tag: any}} ShownFrame the frame to show
 * @typedef {"live" | "now" | "throttled"} Pace how soon the run panel shows a readout: "live" in the next
 *   animation frame while running (at once otherwise), "now" at once, "throttled" within PANEL_MS
 * @typedef {{iteration: number, kl: number | null, count: number, index: number, pace: Pace}} Readout
 *   what the counter, KL and timeline show
 */

/**
 * @typedef {object} UiState
 * @property {import("../lib/theme.js").Theme | null} theme
 * @property {Doc} doc
 * @property {Rows} rows
 * @property {Grid | null} grid
 * @property {Decoded | null} headScores `scores` decoded: float32 (L, H, S)
 * @property {Decoded | null} headMap `head_map` decoded: float32 (L * H, 2), null until its job is done
 * @property {Decoded | null} headOrder `head_order` decoded: int32 (L, H), row k of layer l shows head [l][k]
 * @property {Decoded | null} clusterOf `cluster_of` decoded: int32 (m,), each frame row's cluster (-1: none)
 * @property {Decoded | null} syntaxTree `syntax_tree` decoded: int32 (2, n) while the colouring is a parse's
 * @property {EdgeSet} edges
 * @property {Colouring | null} colours
 * @property {number} hover the hovered token, -1: none
 * @property {number} pinned the token clicked last in the map (the inspector's token tab shows it), -1: none
 * @property {HoverInfo | null} hoverInfo null when Python set the hover or the pointer left
 * @property {Set<number>} selected
 * @property {Search} search
 * @property {boolean} userValues Python gave per-token values (w.color_by): "your values" can be chosen
 * @property {boolean} boxMode the map's drag selects a box
 * @property {boolean} replaying
 * @property {boolean} playingLayers word mode's "play layers" is stepping through the layers (js/store/layer-play.js)
 * @property {boolean} recording a WebM video is being recorded
 * @property {ShownFrame | null} frame null: no frame (clear the map)
 * @property {Readout} readout
 * @property {import("../model/static-page.js").Offline | null} offline a saved page's: no kernel, and the heads it
 *   holds a map of
 * @property {Tab} tab the inspector's tab on view (js/views/inspector.js): the answer to the last click
 */

/** @typedef {"token" | "edge" | "heads" | "atlas" | "settings"} Tab */

/** @typedef {UiState & {[K in Mirrored]: Traits[K] | undefined}} State */

/** @returns {Doc} */
export function emptyDoc() {
  return { text: "", tokens: [], offsets: null, special: [], subword: () => false, word: "", labels: [] };
}

/** @returns {State} */
export function initialState() {
  /** @type {UiState} */
  const ui = {
    theme: null,
    doc: emptyDoc(),
    rows: { kept: [], tokenRow: new Int32Array(0) },
    grid: null,
    headScores: null,
    headMap: null,
    headOrder: null,
    clusterOf: null,
    syntaxTree: null,
    edges: { edges: null, attendsTo: null, attendedBy: null },
    colours: null,
    hover: -1,
    pinned: -1,
    hoverInfo: null,
    selected: new Set(),
    search: { query: "", matches: new Set(), count: 0, error: "", pending: false },
    userValues: false,
    boxMode: false,
    replaying: false,
    playingLayers: false,
    recording: false,
    frame: null,
    readout: { iteration: 0, kl: null, count: 0, index: 0, pace: "live" },
    offline: null,
    tab: "heads",
  };
  const mirrored = Object.fromEntries(MIRRORED.map((name) => [name, undefined]));
  return /** @type {State} */ ({ ...mirrored, ...ui });
}

/**
 * The selection of `list` that exists in a text of `n` tokens.
 * @param {unknown[] | null | undefined} list
 * @param {number} n
 * @returns {Set<number>}
 */
export function selectionOf(list, n) {
  return new Set(
    /** @type {number[]} */ ((list || []).filter((t) => Number.isInteger(t) && Number(t) >= 0 && Number(t) < n)),
  );
}

/**
 * The hovered token of a `hovered` trait value in a text of `n` tokens (-1: none).
 * @param {unknown} value
 * @param {number} n
 */
export function hoverOf(value, n) {
  return Number.isInteger(value) && Number(value) >= 0 && Number(value) < n ? Number(value) : -1;
}

/**
 * The partners of `token` (js/lib/partners.js) in the current head, or its neighbours in hidden-state mode.
 * @param {State} state
 * @param {number} token
 */
export function partnersAt(state, token) {
  return partnersOf(token, {
    ...state.edges,
    k: state.edge_k ?? 5,
    tokenRow: state.rows.tokenRow,
    hidden: sourceOf(state.mode).partners === "neighbours",
  });
}

/**
 * Which hover edges to draw.
 * @param {State} state
 * @returns {import("../model/model.js").EdgeDirection}
 */
export function directionOf(state) {
  return state.edge_direction || "both";
}

/**
 * Whether the page can show head (`layer`, `head`): always with a kernel; on a saved page only the heads it
 * holds a map of.
 * @param {State} state
 * @param {number} layer
 * @param {number} head
 */
export function headHeld(state, layer, head) {
  return !state.offline || state.offline.heads.some(([l, h]) => l === layer && h === head);
}

/**
 * Whether the points are the occurrences of a word across texts (`HeadSNE.contexts`): then only the hidden
 * states make a map, and the grid is each head's largest attention to the word in each occurrence's own text.
 * @param {State} state
 */
export function wordMode(state) {
  return Boolean(state.doc.word);
}

/**
 * The layer and head on display: the head selected in attention mode, the layer in hidden-state mode. In word
 * mode a head is selected too (`hidden` false): the map is the layer's hidden states, and the head colours the
 * points by its max attention to the word.
 * @param {State} state
 */
export function headOf(state) {
  const hidden = !sourceOf(state.mode).perHead && !wordMode(state);
  return { layer: state.layer ?? 0, head: state.head ?? 0, hidden };
}
