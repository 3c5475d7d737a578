// The widget before its data, and its errors: the header's progress bar (determinate when Python gives
// `progress`, sliding while the model loads or a P is built), the placeholder in the grid's box that
// says what is being done ("loading the model", "capturing layer 3 of 16") or, in the error state before a grid,
// the whole error, and the map's message box (data-testid="headsne-map-message"): in the error state the whole
// error, wrapped, with the fix it names, over the map where the user looks (the status line cuts it to one line).
// Python's HeadSNE(text, model) returns at once with state "loading"; this is what the user sees until the grid is
// in.

import { disposer } from "../lib/dom.js";
import { setText } from "../lib/schedule.js";

/**
 * @typedef {import("../store/state.js").State} State
 */

/**
 * What the grid's placeholder says, or "" when the grid is drawn.
 * @param {State} s
 */
export function placeholderText(s) {
  if (s.state === "error") return s.grid ? "" : s.status || "error";
  if (s.grid) return "";
  if (s.state === "loading") return `${s.status || "loading the model"}…`;
  return s.doc.tokens.length ? "no attention grid for this text" : "no text yet";
}

/**
 * The progress bar's fill in [0, 1], null for a sliding (indeterminate) bar, or undefined for no bar.
 * @param {State} s
 * @returns {number | null | undefined}
 */
export function progressOf(s) {
  if (typeof s.progress === "number" && Number.isFinite(s.progress)) return Math.max(0, Math.min(1, s.progress));
  if (s.state === "loading") return null;
  if (s.state === "running" && s.readout.count === 0 && s.readout.iteration === 0) return null; // building P
  return undefined;
}

/**
 * What the map's message box says: the error in full in the error state, else nothing.
 * @param {State} s
 */
export function mapErrorText(s) {
  return s.state === "error" ? s.status || "error" : "";
}

/**
 * Show `text` (an error) in the map's message box, or hide the box ("").
 * @param {HTMLElement} box
 * @param {string} text
 */
function showMapMessage(box, text) {
  box.hidden = !text;
  if (!text) {
    box.replaceChildren();
    return;
  }
  if (box.dataset.text === text) return;
  box.dataset.text = text;
  const title = document.createElement("span");
  title.className = "hs-map-message-title";
  title.textContent = "The widget could not do this:";
  box.replaceChildren(title, text);
}

/**
 * @param {{dom: {root: HTMLElement, progress: HTMLElement, progressBar: HTMLElement,
 *   gridPlaceholder: HTMLElement, mapMessage: HTMLElement}, store: import("../store/store.js").Store<State>}} ctx
 */
export function createLoading({ dom, store }) {
  const scope = disposer();
  const { progress, progressBar, gridPlaceholder, mapMessage } = dom;

  /** @param {State} s */
  function update(s) {
    const fill = progressOf(s);
    progress.hidden = fill === undefined;
    progress.dataset.indeterminate = String(fill === null);
    if (typeof fill === "number") {
      progressBar.style.width = `${(100 * fill).toFixed(1)}%`;
      progress.setAttribute("aria-valuenow", String(Math.round(100 * fill)));
    } else {
      progressBar.style.width = "";
      progress.removeAttribute("aria-valuenow");
    }
    const text = placeholderText(s);
    gridPlaceholder.hidden = !text;
    gridPlaceholder.dataset.state = s.state === "error" ? "error" : "loading";
    setText(gridPlaceholder, text);
    if (s.state === "loading") dom.root.setAttribute("aria-busy", "true");
    else dom.root.removeAttribute("aria-busy");
    showMapMessage(mapMessage, mapErrorText(s));
  }
  scope.add(store.watch(["state", "status", "progress", "grid", "doc", "readout"], update));
  scope.add(
    store.on("error", (/** @type {string} */ message) => {
      showMapMessage(mapMessage, message);
      if (store.state.grid) return;
      gridPlaceholder.hidden = false;
      gridPlaceholder.dataset.state = "error";
      setText(gridPlaceholder, message);
    }),
  );
  return { destroy: () => scope.dispose() };
}
