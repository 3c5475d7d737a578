// The view row: token search, the selection (count, clear), box-select mode, colour by, label density
// and the direction of the hover edges. View traits are written with model.set + save_changes and
// followed when Python changes them; a trait Python does not have yet still works locally.

import { button, el } from "./dom.js";
import { T, changes, write } from "./model.js";

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
 * @param {{model: import("./model.js").Model, row: HTMLElement, onSearch: (query: string) => void,
 *   onSearchEnter: () => void, onClearSelection: () => void, onBoxMode: (on: boolean) => void}} options
 */
export function createViewBar({ model, row, onSearch, onSearchEnter, onClearSelection, onBoxMode }) {
  const listeners = [];
  const on = (name, fn) => {
    model.on(name, fn);
    listeners.push([name, fn]);
  };
  const search = el("input", {
    type: "search",
    className: "hs-search",
    placeholder: "search tokens or /regex/",
    dataset: { testid: "headsne-search" },
    "aria-label": "search tokens (a string or /regular expression/); Enter selects the matches",
    spellcheck: false,
  });
  const found = el("span", { className: "hs-found", dataset: { testid: "headsne-search-count" } });
  const chosen = button("", "headsne-selection", "selected tokens: click to clear (or Escape)", {
    className: "hs-chip",
  });
  const box = button("▭ box", "headsne-box", "box select in the map (shift + drag always lassoes)");
  box.setAttribute("aria-pressed", "false");
  const colour = el(
    "select",
    { dataset: { testid: "headsne-color" }, title: "colour the tokens by", "aria-label": "colour by" },
    COLOUR_MODES.map(([value, text]) => el("option", { value, text })),
  );
  const labels = el("input", {
    type: "range",
    min: "0",
    max: "1",
    step: "0.05",
    className: "hs-density",
    dataset: { testid: "headsne-labels" },
    title: "label density (0 = no labels)",
    "aria-label": "label density",
  });
  const edges = el(
    "select",
    { dataset: { testid: "headsne-edges" }, title: "hover edges of the selected head", "aria-label": "edges" },
    DIRECTIONS.map(([value, text]) => el("option", { value, text })),
  );
  row.append(
    el("span", { className: "hs-group" }, [search, found]),
    chosen,
    box,
    el("label", {}, ["colour", colour]),
    el("label", {}, ["labels", labels]),
    el("label", {}, ["edges", edges]),
  );

  search.addEventListener("input", () => onSearch(search.value));
  search.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      onSearchEnter();
    } else if (event.key === "Escape") {
      search.value = "";
      onSearch("");
    }
  });
  chosen.addEventListener("click", () => onClearSelection());
  box.addEventListener("click", () => {
    const pressed = box.getAttribute("aria-pressed") !== "true";
    box.setAttribute("aria-pressed", String(pressed));
    onBoxMode(pressed);
  });
  colour.addEventListener("change", () => write(model, { [T.color_mode]: colour.value }));
  labels.addEventListener("input", () => model.set(T.label_density, Number(labels.value)));
  labels.addEventListener("change", () => write(model, { [T.label_density]: Number(labels.value) }));
  edges.addEventListener("change", () => write(model, { [T.edge_direction]: edges.value }));

  function sync() {
    colour.value = model.get(T.color_mode) || "position";
    const density = model.get(T.label_density);
    labels.value = String(density ?? 0.5);
    edges.value = model.get(T.edge_direction) || "both";
    const hidden = model.get(T.mode) === "hidden";
    edges.disabled = hidden;
    edges.title = hidden
      ? "hidden-state mode: hover edges are the nearest neighbours"
      : "hover edges of the selected head";
  }
  on(changes(T.color_mode, T.label_density, T.edge_direction, T.mode), sync);
  sync();

  return {
    /** Matches of the current query: a count, or the reason the query is invalid. */
    showFound(count, error) {
      found.textContent = error ? "invalid /regex/" : search.value.trim() ? `${count} found` : "";
      found.title = error || "";
      if (error) search.setAttribute("aria-invalid", "true");
      else search.removeAttribute("aria-invalid");
    },
    showSelected(count) {
      chosen.textContent = count ? `${count} selected ✕` : "none selected";
      chosen.disabled = count === 0;
    },
    get query() {
      return search.value;
    },
    destroy() {
      for (const [name, fn] of listeners) model.off(name, fn);
    },
  };
}
