// The view row: search over the text, the selection (count, clear; shown when there is one), box-select
// mode; and in the legend row under the map, at the head of the legends they change, colour by and the direction of
// the hover edges. View traits are written through the intents and
// followed when Python changes them. "your values" can be chosen once Python gave values (w.color_by =
// values): before that it is disabled, with the hint of how to give them.

import { button, disposer, el } from "../../lib/dom.js";
import { T } from "../../model/model.js";
import { changed } from "../../store/store.js";
import { sourceOf } from "../../model/sources.js";

const COLOUR_MODES = [
  ["position", "position"],
  ["kind", "token kind"],
  ["sentence", "sentence"],
  ["max_attention", "max attention"],
  ["head_share", "head's share"],
  ["pos", "part of speech"],
  ["dep", "dependency relation"],
  ["user", "your values"],
];
const DIRECTIONS = [
  ["both", "both directions"],
  ["to", "attends to"],
  ["from", "attended by"],
  ["off", "none"],
];
const USER_HINT = "your values: set them from Python first, w.color_by = [one number or label per token]";

/**
 * @typedef {import("../../store/state.js").State} State
 */

/** The view row's elements. */
function buildRow() {
  const e = {
    search: el("input", {
      type: "search",
      className: "hs-search",
      placeholder: "search the text or /regex/",
      dataset: { testid: "headsne-search" },
      title:
        "search the text (any case, across word pieces: t-SNE finds its 4 tokens) or a /regular expression/flags; " +
        "Enter selects the tokens the matches touch",
      "aria-label": "search the text (a string or /regular expression/); Enter selects the matched tokens",
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
    edges: el(
      "select",
      {
        dataset: { testid: "headsne-edges" },
        title: "which hover edges of the selected head to draw",
        "aria-label": "hover edges",
      },
      DIRECTIONS.map(([value, text]) => el("option", { value, text })),
    ),
  };
  e.box.setAttribute("aria-pressed", "false");
  e.chosen.hidden = true;
  const row = [el("span", { className: "hs-group hs-search-group" }, [e.search, e.found]), e.chosen, e.box];
  return { e, row, colour: el("label", {}, ["colour", e.colour]), edges: el("label", {}, ["hover edges", e.edges]) };
}

/**
 * @param {{dom: {viewRow: HTMLElement, colourSlot: HTMLElement, edgeSlot: HTMLElement},
 *   store: import("../../store/store.js").Store<State>, intents: import("../../store/intents.js").Intents}} ctx
 */
export function createViewBar({ dom, store, intents }) {
  const { e, row, colour, edges } = buildRow();
  dom.viewRow.append(...row);
  dom.colourSlot.append(colour);
  dom.edgeSlot.append(edges);
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
  scope.listen(e.edges, "change", () => intents.write({ [T.edge_direction]: e.edges.value }));

  /** The trait-backed inputs follow the state. @param {State} s */
  function syncInputs(s) {
    const user = /** @type {HTMLOptionElement} */ (e.colour.querySelector("option[value=user]"));
    // word mode: no decomposition of the occurrences (each is in a text of its own), so no head's share
    const share = /** @type {HTMLOptionElement} */ (e.colour.querySelector("option[value=head_share]"));
    share.hidden = share.disabled = Boolean(s.doc.word) && s.color_mode !== "head_share";
    user.disabled = !s.userValues && s.color_mode !== "user";

    user.title = user.disabled ? USER_HINT : "the values given with w.color_by";
    e.colour.title = user.disabled ? `colour the tokens by; ${USER_HINT}` : "colour the tokens by";
    e.colour.value = s.color_mode || "position";
    e.edges.value = s.edge_direction || "both";
    const neighbours = sourceOf(s.mode).partners === "neighbours";
    e.edges.disabled = neighbours;
    e.edges.title = neighbours
      ? `${sourceOf(s.mode).option}: hover edges are the nearest neighbours`
      : "hover edges of the selected head";
  }

  /** Matches of the current query: a count, or the reason the query is invalid. @param {State} s */
  function showFound(s) {
    const { matches, error, count, pending } = s.search;
    const tokens = `${matches.size} token${matches.size === 1 ? "" : "s"}`;
    const typed = e.search.value.trim();
    const short = /stopped|refused/.test(error) ? "too slow" : "invalid /regex/";
    const matched = `${count} match${count === 1 ? "" : "es"}`;
    e.found.textContent = error ? short : pending ? "searching…" : typed ? matched : "";
    e.found.title = error || (e.search.value.trim() ? `${count} in the text, touching ${tokens}` : "");
    if (error) e.search.setAttribute("aria-invalid", "true");
    else e.search.removeAttribute("aria-invalid");
  }

  /** @param {State} s @param {State | null} prev */
  function update(s, prev) {
    const is = (/** @type {keyof State} */ key) => changed(s, prev, key);
    if (is("color_mode") || is("userValues") || is("edge_direction") || is("mode") || is("doc")) syncInputs(s);
    if (is("search")) showFound(s);
    if (is("selected")) {
      e.chosen.textContent = s.selected.size ? `${s.selected.size} selected ✕` : "none selected";
      e.chosen.hidden = s.selected.size === 0;
    }
  }
  scope.add(store.watch(["color_mode", "userValues", "edge_direction", "mode", "search", "selected", "doc"], update));
  return { destroy: () => scope.dispose() };
}
