// The hover tooltip: the token (with #index), where it was hovered (grid cell), its context in the
// text, and its partners. Text only (textContent), placed next to the pointer inside the widget.

import { el, span } from "./dom.js";
import { tokenContext } from "./segments.js";

/**
 * @param {HTMLElement} root the widget root (the tooltip is positioned in its box)
 * @param {HTMLElement} tooltip
 */
export function createTooltip(root, tooltip) {
  function place(event) {
    if (!event || event.clientX == null) return;
    const box = root.getBoundingClientRect();
    const tw = tooltip.offsetWidth;
    const th = tooltip.offsetHeight;
    let x = event.clientX - box.left + 14;
    let y = event.clientY - box.top + 14;
    if (x + tw > box.width - 4) x = Math.max(4, event.clientX - box.left - tw - 14);
    if (y + th > box.height - 4) y = Math.max(4, event.clientY - box.top - th - 14);
    tooltip.style.left = `${x}px`;
    tooltip.style.top = `${y}px`;
  }

  return {
    /**
     * Show token `token` of `data` ({text, tokens, offsets, special}) with lines of text above and
     * below its context.
     * @param {number} token
     * @param {{text: string, tokens: string[], offsets: any, special: boolean[]}} data
     * @param {{above?: string[], below?: string[]}} lines
     * @param {MouseEvent | undefined} event
     */
    show(token, data, { above = [], below = [] }, event) {
      const { text, tokens, offsets, special } = data;
      const ctx = tokenContext(text, tokens, offsets, token, 6);
      const head = el("div", {}, [
        span("hs-tip-token", tokens[token] ?? ""),
        span("hs-tip-meta", `  #${token}${special[token] ? " · special" : ""}`),
      ]);
      const context = el("div", { className: "hs-tip-context" }, [ctx.before, el("b", { text: ctx.token }), ctx.after]);
      const meta = (line) => el("div", { className: "hs-tip-meta", text: line });
      tooltip.replaceChildren(head, ...above.map(meta), context, ...below.map(meta));
      tooltip.hidden = false;
      place(event);
    },
    hide() {
      tooltip.hidden = true;
    },
  };
}
