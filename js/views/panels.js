// The fold of the text strip below the map (open at first; its button's aria-expanded and the panel's data-open say
// which; a folded panel keeps its title bar), and the inspector's tab following what Python starts: an atlas that
// starts (w.atlas() from the notebook, or the atlas tab's button) shows the atlas tab.

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
 * @param {{dom: {textPanel: HTMLElement, textFold: HTMLElement}, store: import("../store/store.js").Store<State>,
 *   intents: import("../store/intents.js").Intents}} ctx
 */
export function createPanels({ dom, store, intents }) {
  const scope = disposer();
  const { textPanel, textFold } = dom;
  scope.listen(textFold, "click", () => setFold(textPanel, textFold, "text", textPanel.dataset.open !== "true"));
  setFold(textPanel, textFold, "text", true);
  scope.add(
    store.subscribe(["atlas_state"], (s, prev) => {
      if (prev && s.atlas_state === "running" && prev.atlas_state !== "running") intents.showTab("atlas");
    }),
  );
  return { destroy: () => scope.dispose() };
}
