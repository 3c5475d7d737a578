// The root element's test hooks (js/PROTOCOL.md, "Test hooks"): data-state, data-run-id,
// data-selected-count, data-match-count and data-replaying follow the state; an error shows as
// data-state="error" until the run's state changes again. Escape (outside an input) clears the selection.

import { disposer } from "../lib/dom.js";
import { setData } from "../lib/schedule.js";

/**
 * @param {{dom: {root: HTMLElement}, store: import("../store/store.js").Store<import("../store/state.js").State>,
 *   intents: import("../store/intents.js").Intents}} ctx
 */
export function createHooks({ dom, store, intents }) {
  const { root } = dom;
  const scope = disposer();
  root.dataset.selectedCount = "0";
  root.dataset.matchCount = "0";
  root.dataset.replaying = "false";
  scope.add(
    store.watch(["state", "status", "run_id", "best_kl", "kl"], (s) => {
      setData(root, "state", s.state || "idle");
      setData(root, "runId", String(s.run_id ?? 0));
    }),
  );
  scope.add(store.subscribe(["selected"], (s) => (root.dataset.selectedCount = String(s.selected.size))));
  scope.add(store.subscribe(["search"], (s) => (root.dataset.matchCount = String(s.search.matches.size))));
  scope.add(store.subscribe(["replaying"], (s) => setData(root, "replaying", String(s.replaying))));
  scope.add(store.on("error", () => (root.dataset.state = "error")));
  scope.listen(root, "keydown", (/** @type {KeyboardEvent} */ event) => {
    const target = /** @type {HTMLElement | null} */ (event.target);
    if (event.key === "Escape" && !(target && target.closest && target.closest("input, select"))) {
      intents.clearSelection();
    }
  });
  return { destroy: () => scope.dispose() };
}
