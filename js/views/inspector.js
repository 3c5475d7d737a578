// The inspector beside the map (data-testid="headsne-inspector"): one tab on view at a time, the answer to the last
// click (issue 52): a click on a point opens "token" (its partners, what wrote its state), a click on a partner
// opens "edge" (why the head attends), a click on a grid row opens "heads" (the head map, related heads and what
// feeds the head); "atlas" and "settings" open from their tabs. The tab is the state's `tab` (js/store/intents.js
// sets it); arrows move between tabs as in any tab list. In word mode (the occurrences of a word across texts) the
// tabs that need attention within one text are hidden.

import { disposer } from "../lib/dom.js";
import { TABS } from "./skeleton.js";

/**
 * @typedef {import("../store/state.js").State} State
 * @typedef {import("../store/state.js").Tab} Tab
 */

/** The tabs word mode hides (each occurrence is in a text of its own: no edges, heads or atlas of one text). */
export const WORD_HIDDEN = /** @type {Tab[]} */ (["edge", "heads", "atlas"]);

/**
 * The tab shown for the state: its own, or "token" where word mode hides it.
 * @param {State} s
 * @returns {Tab}
 */
export function shownTab(s) {
  return s.doc.word && WORD_HIDDEN.includes(s.tab) ? "token" : s.tab;
}

/**
 * @param {{dom: {inspector: HTMLElement, tabList: HTMLElement, tabs: Record<string, HTMLButtonElement>,
 *   panes: Record<string, HTMLElement>}, store: import("../store/store.js").Store<State>,
 *   intents: import("../store/intents.js").Intents}} ctx
 */
export function createInspector({ dom, store, intents }) {
  const scope = disposer();
  const names = /** @type {Tab[]} */ (TABS.map(([name]) => name));
  for (const name of names) scope.listen(dom.tabs[name], "click", () => intents.showTab(name));
  scope.listen(dom.tabList, "keydown", (/** @type {KeyboardEvent} */ event) => {
    const step = /** @type {Record<string, number>} */ ({ ArrowLeft: -1, ArrowRight: 1 })[event.key];
    if (!step) return;
    event.preventDefault();
    const visible = names.filter((name) => !dom.tabs[name].hidden);
    const next = visible[(visible.indexOf(shownTab(store.state)) + step + visible.length) % visible.length];
    intents.showTab(next);
    dom.tabs[next].focus();
  });

  /** @param {State} s */
  function show(s) {
    const tab = shownTab(s);
    dom.inspector.dataset.tab = tab;
    for (const name of names) {
      const on = name === tab;
      dom.tabs[name].hidden = Boolean(s.doc.word) && WORD_HIDDEN.includes(name);
      dom.tabs[name].setAttribute("aria-selected", String(on));
      dom.tabs[name].tabIndex = on ? 0 : -1;
      dom.panes[name].hidden = !on;
    }
  }
  scope.add(store.watch(["tab", "doc"], show));
  return { destroy: () => scope.dispose() };
}
