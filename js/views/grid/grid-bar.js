// The grid's bar (under its title): "sort heads by" (`sort_heads`: the model's order or a score, largest
// first; Python sends the rows' order, `head_order`), "grid" (`grid_norm`: the raw maximum attention or the
// grid above uniform) and one line saying what the colour means in the grid drawn. In word mode (the points are
// a word's occurrences across texts: no head scores) the grid's title says so, the sort is hidden and "play
// layers" (js/store/layer-play.js) takes its place: the grid is where the layer is chosen.

import { disposer, el } from "../../lib/dom.js";
import { T } from "../../model/model.js";
import { setText } from "../../lib/schedule.js";
import { wordMode } from "../../store/state.js";

/**
 * @typedef {import("../../store/state.js").State} State
 */

/** The grids the `grid_norm` trait allows (headsne_widget/widget/protocol.py), as the select names them. */
export const GRID_NORMS = /** @type {const} */ ([
  ["raw", "max attention"],
  ["above_uniform", "above uniform"],
]);

export const GRID_TITLE = "max attention: click a head";

/**
 * The grid's title: in word mode what its columns are.
 * @param {State} s
 */
export function gridTitle(s) {
  return s.doc.word ? `max attention to '${s.doc.word}' · head × occurrence` : GRID_TITLE;
}

/**
 * What the colour of a cell means in the grid drawn (`norm`, the grid's own: Python may lack the other); in word
 * mode, of the word in each occurrence's own sentence.
 * @param {"raw" | "above_uniform" | undefined} norm
 * @param {string} [word]
 */
export function gridMeaning(norm, word = "") {
  if (word)
    return norm === "above_uniform"
      ? `colour: attention to '${word}' above uniform, in each occurrence's own sentence; a row is a head, a column an occurrence`
      : `colour: the largest attention any token of its sentence gives '${word}'; a row is a head, a column an occurrence`;
  if (norm === "above_uniform")
    return (
      "colour: attention above uniform, the largest over queries of (A_ij m_i - 1) / (m_i - 1) with m_i the keys " +
      "query i may see; 0 = no query attends to the token more than uniformly, 1 = a query attends only to it"
    );
  return "colour: max attention, the largest attention any query gives the token";
}

/**
 * What the grid drawn leaves out where the map is value-weighted (mode "norm"): the grid is the attention weights
 * themselves, not weighted by what each key sends, unless Python sent a grid of its own for the mode ("" else).
 * @param {string | undefined} mode
 * @param {string | undefined} norm the grid drawn
 */
export function gridCaveat(mode, norm) {
  if (mode !== "norm" || norm === "norm") return "";
  return " · the map is value-weighted; this grid is the raw attention weights";
}

/**
 * The options of the sort select: the model's order, then every score, then the dependency relation the heads are
 * sorted by when Python set one (w.sort_heads = "det": each head's accuracy on it in this text).
 * @param {string[]} names
 * @param {string} [current] the sort in force
 * @returns {[string, string][]}
 */
export function sortOptions(names, current = "") {
  const relation = current && !names.includes(current) ? [[current, `relation ${current}`]] : [];
  return /** @type {[string, string][]} */ ([["", "model order"], ...names.map((name) => [name, name]), ...relation]);
}

/**
 * @param {{dom: {gridBar: HTMLElement, gridWhat: HTMLElement}, store: import("../../store/store.js").Store<State>,
 *   intents: import("../../store/intents.js").Intents}} ctx
 */
export function createGridBar({ dom, store, intents }) {
  const scope = disposer();
  const sort = el("select", {
    dataset: { testid: "headsne-sort-heads" },
    title: "order each layer's heads by a score, largest first (w.sort_heads)",
    "aria-label": "sort heads by",
  });
  const norm = el(
    "select",
    {
      dataset: { testid: "headsne-grid-norm" },
      title: "which grid: raw maximum attention, or above uniform (no causal mask drawn) (w.grid_norm)",
      "aria-label": "grid",
    },
    GRID_NORMS.map(([value, text]) => el("option", { value, text })),
  );
  const note = el("div", { className: "hs-grid-note", dataset: { testid: "headsne-grid-note" } });
  const sortLabel = el("label", {}, ["sort heads by", sort]);
  const play = el("button", {
    className: "hs-play-layers",
    dataset: { testid: "headsne-play-layers" },
    "aria-pressed": "false",
  });
  play.hidden = true;
  dom.gridBar.append(sortLabel, play, el("label", {}, ["grid", norm]), note);
  scope.listen(play, "click", () => intents.togglePlayLayers());
  scope.listen(sort, "change", () => intents.write({ [T.sort_heads]: sort.value }));
  scope.listen(norm, "change", () =>
    intents.write({ [T.grid_norm]: /** @type {"raw" | "above_uniform"} */ (norm.value) }),
  );

  /** @param {State} s @param {State | null} prev */
  function update(s, prev) {
    if (!prev || s.score_names !== prev.score_names || s.sort_heads !== prev.sort_heads) {
      const options = sortOptions(s.score_names ?? [], s.sort_heads ?? "");
      sort.replaceChildren(...options.map(([value, text]) => el("option", { value, text })));
    }
    sort.value = s.sort_heads ?? "";
    sort.disabled = !(s.score_names ?? []).length || Boolean(s.offline); // the order comes from the kernel
    norm.value = s.grid_norm ?? "raw";
    const shown = s.grid ? s.grid.norm : s.grid_norm;
    setText(note, gridMeaning(shown, s.doc.word) + gridCaveat(s.mode, shown));
    note.title =
      s.grid && s.grid_norm && s.grid.norm !== s.grid_norm ? `the ${s.grid_norm} grid is not here: ${shown} shown` : "";
  }
  scope.add(store.watch(["score_names", "sort_heads", "grid_norm", "grid", "offline", "doc", "mode"], update));

  /** Word mode: the title, no sort, the play button (a stop button while playing). @param {State} s */
  function showWordMode(s) {
    const word = wordMode(s);
    setText(dom.gridWhat, gridTitle(s));
    dom.gridWhat.title = word
      ? `per layer, each head's largest attention to '${s.doc.word}' in each occurrence's own sentence; click a row to select that layer (the map) and head (colour by max attention)`
      : "per layer, each head's row of maximum attention to each token; click a row to map that head";
    sortLabel.hidden = word;
    play.hidden = !word;
    play.disabled = Boolean(s.offline) || !(s.n_layers ?? 0);
    play.textContent = s.playingLayers ? "■ stop layers" : "▶ play layers";
    play.setAttribute("aria-pressed", String(s.playingLayers));
    play.title = s.playingLayers
      ? `stop at layer ${s.layer} (a layer chosen in the grid stops it too)`
      : `show the map of each layer in turn, from layer 0 to ${Math.max(0, (s.n_layers ?? 1) - 1)}: each run is aligned to the map before, so the same points move`;
  }
  scope.add(store.watch(["doc", "playingLayers", "layer", "n_layers", "offline"], showWordMode));
  return { destroy: () => scope.dispose() };
}
