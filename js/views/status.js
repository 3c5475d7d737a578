// The status line's whole text (issue 52): the header's status keeps one line of fixed height (a longer text is cut
// with an ellipsis: nothing under it moves while a run streams), and a click on it (or Enter) opens its whole text,
// wrapped, under the header (data-testid="headsne-status-full"); another click, Escape or a click on the box closes
// it. The line's title holds the whole text too. Text via textContent only.

import { disposer } from "../lib/dom.js";
import { setText } from "../lib/schedule.js";

/**
 * @param {{dom: {status: HTMLElement, statusFull: HTMLElement}}} ctx
 */
export function createStatus({ dom }) {
  const { status, statusFull } = dom;
  const scope = disposer();
  const follow = () => {
    const text = status.textContent || "";
    if (status.title !== text) status.title = text;
    if (!statusFull.hidden) setText(statusFull, text);
    status.setAttribute("aria-expanded", String(!statusFull.hidden));
  };
  /** @param {boolean} open */
  const toggle = (open) => {
    statusFull.hidden = !open || !status.textContent;
    follow();
  };
  scope.listen(status, "click", () => toggle(Boolean(statusFull.hidden)));
  scope.listen(statusFull, "click", () => toggle(false));
  scope.listen(status, "keydown", (/** @type {KeyboardEvent} */ event) => {
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      toggle(Boolean(statusFull.hidden));
    } else if (event.key === "Escape") {
      toggle(false);
    }
  });
  const observer = new MutationObserver(follow);
  observer.observe(status, { childList: true, characterData: true, subtree: true });
  scope.add(() => observer.disconnect());
  follow();
  return { destroy: () => scope.dispose() };
}
