// The folds of the panels below the map: the text strip (open at first), the head map (folded at first, so that
// the widget fits a laptop's 900 px window: issue 22) and the head atlas (folded until an atlas is asked for: it
// opens when one starts). A fold button's aria-expanded and its panel's
// data-open say which; a folded panel keeps its title bar (the atlas's holds its compute button).

import { disposer } from "../lib/dom.js";

/**
 * @typedef {import("../store/state.js").State} State
 */

/**
 * Fold or open `panel` with `button`.
 * @param {HTMLElement} panel
 * @param {HTMLElement} button
 * @param {string} label what the panel holds
 * @param {boolean} open
 */
export function setFold(panel, button, label, open) {
  panel.dataset.open = String(open);
  button.setAttribute("aria-expanded", String(open));
  button.textContent = open ? "▾" : "▸";
  button.title = open ? `fold the ${label}` : `show the ${label}`;
}

/**
 * @param {{dom: {textPanel: HTMLElement, textFold: HTMLElement, atlasPanel: HTMLElement, atlasFold: HTMLElement,
 *   headMapPanel: HTMLElement, headMapFold: HTMLElement},
 *   store: import("../store/store.js").Store<State>}} ctx
 */
export function createPanels({ dom, store }) {
  const scope = disposer();
  const folds = [
    { panel: dom.textPanel, button: dom.textFold, label: "text" },
    { panel: dom.atlasPanel, button: dom.atlasFold, label: "head atlas" },
    { panel: dom.headMapPanel, button: dom.headMapFold, label: "head map" },
  ];
  for (const { panel, button, label } of folds) {
    scope.listen(button, "click", () => setFold(panel, button, label, panel.dataset.open !== "true"));
  }
  setFold(dom.textPanel, dom.textFold, "text", true);
  setFold(dom.headMapPanel, dom.headMapFold, "head map", false);
  setFold(dom.atlasPanel, dom.atlasFold, "head atlas", false);
  // an atlas that starts, or one there already (a view rendered again), opens the fold
  scope.add(
    store.subscribe(["atlas_state", "atlas"], (s, prev) => {
      const started = s.atlas_state === "running" && prev?.atlas_state !== "running";
      if (started || (s.atlas && !prev?.atlas)) setFold(dom.atlasPanel, dom.atlasFold, "head atlas", true);
    }),
  );
  return { destroy: () => scope.dispose() };
}
