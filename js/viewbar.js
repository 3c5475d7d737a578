// The view row: token search, the selection (count, clear), box-select mode, colour by, label density
// and the direction of the hover edges. View traits are written through the intents and followed when
// Python changes them; a trait Python does not have yet still works locally.

import { button, disposer, el } from "./dom.js";
import { T } from "./model.js";
import { changed } from "./store.js";

const COLOUR_MODES = [
  ["position", "position"],
  ["kind", "token kind"],
  ["sentence", "sentence"],
  ["max_attention", "max attention"],
  ["user", "your values"],
];
const DIRECTIONS = [
  ["both", "to + from"],
  ["to", "attends to"],
  ["from", "attended by"],
  ["off", "off"],
];

/**
 * @typedef {import("./state.js").State} State
 */

/** The view row's elements. */
function buildRow() {
  const e = {
    search: el("input", {
      type: "search",
      className: "hs-search",
      placeholder: "search tokens or /regex/",
      dataset: { testid: "headsne-search" },
      "aria-label": "search tokens (a string or /regular expression/); Enter selects the matches",
      spellcheck: false,
    }),
    found: el("span", { className: "hs-found", dataset: { testid: "headsne-search-count" } }),
    chosen: button("", "headsne-selection", "selected tokens: click to clear (or Escape)", { className: "hs-chip" }),
    box: button("▭ box", "headsne-box", "box select in the map (shift + drag always lassoes)"),
    colour: el(
      "select",
      { dataset: { testid: "headsne-color" }, title: "colour the tokens by", "aria-label": "colour by" },
      COLOUR_MODES.map(([value, text]) => el("option", { value, text })),
    ),
    labels: el("input", {
      type: "range",
      min: "0",
      max: "1",
      step: "0.05",
      className: "hs-density",
      dataset: { testid: "headsne-labels" },
      title: "label density (0 = no labels)",
      "aria-label": "label density",
    }),
    edges: el(
      "select",
      { dataset: { testid: "headsne-edges" }, title: "hover edges of the selected head", "aria-label": "edges" },
      DIRECTIONS.map(([value, text]) => el("option", { value, text })),
    ),
  };
  e.box.setAttribute("aria-pressed", "false");
  const row = [
    el("span", { className: "hs-group" }, [e.search, e.found]),
    e.chosen,
    e.box,
    el("label", {}, ["colour", e.colour]),
    el("label", {}, ["labels", e.labels]),
    el("label", {}, ["edges", e.edges]),
  ];
  return { e, row };
}

/**
 * @param {{dom: {viewRow: HTMLElement}, store: import("./store.js").Store<State>,
 *   intents: import("./intents.js").Intents}} ctx
 */
export function createViewBar({ dom, store, intents }) {
  const { e, row } = buildRow();
  dom.viewRow.append(...row);
  const scope = disposer();
  scope.listen(e.search, "input", () => intents.search(e.search.value));
  scope.listen(e.search, "keydown", (/** @type {KeyboardEvent} */ event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      intents.selectMatches();
    } else if (event.key === "Escape") {
      e.search.value = "";
      intents.search("");
    }
  });
  scope.listen(e.chosen, "click", () => intents.clearSelection());
  scope.listen(e.box, "click", () => {
    const pressed = e.box.getAttribute("aria-pressed") !== "true";
    e.box.setAttribute("aria-pressed", String(pressed));
    intents.setBoxMode(pressed);
  });
  scope.listen(e.colour, "change", () => intents.write({ [T.color_mode]: e.colour.value }));
  scope.listen(e.labels, "input", () => intents.preview(T.label_density, Number(e.labels.value)));
  scope.listen(e.labels, "change", () => intents.write({ [T.label_density]: Number(e.labels.value) }));
  scope.listen(e.edges, "change", () => intents.write({ [T.edge_direction]: e.edges.value }));

  /** The trait-backed inputs follow the state. @param {State} s */
  function syncInputs(s) {
    e.colour.value = s.color_mode || "position";
    e.labels.value = String(s.label_density ?? 0.5);
    e.edges.value = s.edge_direction || "both";
    const hidden = s.mode === "hidden";
    e.edges.disabled = hidden;
    e.edges.title = hidden
      ? "hidden-state mode: hover edges are the nearest neighbours"
      : "hover edges of the selected head";
  }

  /** Matches of the current query: a count, or the reason the query is invalid. @param {State} s */
  function showFound(s) {
    const { matches, error } = s.search;
    e.found.textContent = error ? "invalid /regex/" : e.search.value.trim() ? `${matches.size} found` : "";
    e.found.title = error || "";
    if (error) e.search.setAttribute("aria-invalid", "true");
    else e.search.removeAttribute("aria-invalid");
  }

  /** @param {State} s @param {State | null} prev */
  function update(s, prev) {
    const is = (/** @type {keyof State} */ key) => changed(s, prev, key);
    if (is("color_mode") || is("label_density") || is("edge_direction") || is("mode")) syncInputs(s);
    if (is("search")) showFound(s);
    if (is("selected")) {
      e.chosen.textContent = s.selected.size ? `${s.selected.size} selected ✕` : "none selected";
      e.chosen.disabled = s.selected.size === 0;
    }
  }
  scope.add(store.watch(["color_mode", "label_density", "edge_direction", "mode", "search", "selected"], update));
  return { destroy: () => scope.dispose() };
}
