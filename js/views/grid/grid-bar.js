// The grid's bar (under its title): "sort heads by" (`sort_heads`: the model's order or a score, largest
// first; Python sends the rows' order, `head_order`), "grid" (`grid_norm`: the raw maximum attention or the
// grid above uniform) and one line saying what the colour means in the grid drawn.

import { disposer, el } from "../../lib/dom.js";
import { T } from "../../model/model.js";
import { setText } from "../../lib/schedule.js";

/**
 * @typedef {import("../../store/state.js").State} State
 */

/** The grids the `grid_norm` trait allows (headsne_widget/widget/protocol.py), as the select names them. */
export const GRID_NORMS = /** @type {const} */ ([
  ["raw", "max attention"],
  ["above_uniform", "above uniform"],
]);

/**
 * What the colour of a cell means in the grid drawn (`norm`, the grid's own: Python may lack the other).
 * @param {"raw" | "above_uniform" | undefined} norm
 */
export function gridMeaning(norm) {
  if (norm === "above_uniform")
    return (
      "colour: attention above uniform, the largest over queries of (A_ij m_i - 1) / (m_i - 1) with m_i the keys " +
      "query i may see; 0 = no query attends to the token more than uniformly, 1 = a query attends only to it"
    );
  return "colour: max attention, the largest attention any query gives the token (thesis Def. 4.2)";
}

/**
 * The options of the sort select: the model's order, then every score.
 * @param {string[]} names
 * @returns {[string, string][]}
 */
export function sortOptions(names) {
  return [["", "model order"], ...names.map((name) => /** @type {[string, string]} */ ([name, name]))];
}

/**
 * @param {{dom: {gridBar: HTMLElement}, store: import("../../store/store.js").Store<State>,
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
  dom.gridBar.append(el("label", {}, ["sort heads by", sort]), el("label", {}, ["grid", norm]), note);
  scope.listen(sort, "change", () => intents.write({ [T.sort_heads]: sort.value }));
  scope.listen(norm, "change", () =>
    intents.write({ [T.grid_norm]: /** @type {"raw" | "above_uniform"} */ (norm.value) }),
  );

  /** @param {State} s @param {State | null} prev */
  function update(s, prev) {
    if (!prev || s.score_names !== prev.score_names)
      sort.replaceChildren(...sortOptions(s.score_names ?? []).map(([value, text]) => el("option", { value, text })));
    sort.value = s.sort_heads ?? "";
    sort.disabled = !(s.score_names ?? []).length || Boolean(s.offline); // the order comes from the kernel
    norm.value = s.grid_norm ?? "raw";
    const shown = s.grid ? s.grid.norm : s.grid_norm;
    setText(note, gridMeaning(shown));
    note.title =
      s.grid && s.grid_norm && s.grid.norm !== s.grid_norm ? `the ${s.grid_norm} grid is not here: ${shown} shown` : "";
  }
  scope.add(store.watch(["score_names", "sort_heads", "grid_norm", "grid", "offline"], update));
  return { destroy: () => scope.dispose() };
}
