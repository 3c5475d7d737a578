// The hover tooltip view: the token (with #index), where it was hovered (grid cell), its context in the
// text, and its partners. Text only (textContent), placed next to the pointer inside the widget. Shown
// while the pointer is over a token (the state's `hoverInfo`); a hover set by Python shows none.

import { el, span } from "./dom.js";
import { tokenContext } from "./segments.js";
import { partnerLines } from "./partners.js";
import { partnersAt } from "./state.js";

/**
 * @param {HTMLElement} root the widget root (the tooltip is positioned in its box)
 * @param {HTMLElement} tooltip
 */
export function createTooltip(root, tooltip) {
  /** @param {{x: number, y: number} | undefined} pointer client px */
  function place(pointer) {
    if (!pointer || pointer.x == null) return;
    const event = { clientX: pointer.x, clientY: pointer.y };
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
     * @param {{x: number, y: number} | undefined} pointer client px
     */
    show(token, data, { above = [], below = [] }, pointer) {
      const { text, tokens, offsets, special } = data;
      const ctx = tokenContext(text, tokens, offsets, token, 6);
      const head = el("div", {}, [
        span("hs-tip-token", tokens[token] ?? ""),
        span("hs-tip-meta", `  #${token}${special[token] ? " · special" : ""}`),
      ]);
      const context = el("div", { className: "hs-tip-context" }, [ctx.before, el("b", { text: ctx.token }), ctx.after]);
      const meta = (/** @type {string} */ line) => el("div", { className: "hs-tip-meta", text: line });
      tooltip.replaceChildren(head, ...above.map(meta), context, ...below.map(meta));
      tooltip.hidden = false;
      place(pointer);
    },
    hide() {
      tooltip.hidden = true;
    },
  };
}

/**
 * The tooltip's lines for a hover: a grid cell's head and value above the context, or the token's
 * partners below it.
 * @param {import("./state.js").State} state
 * @param {import("./state.js").HoverInfo} info
 */
export function tooltipLines(state, info) {
  const cell = info.cell;
  if (info.source === "grid" && cell) {
    const group = cell.group >= 0 ? ` · kv group ${cell.group}` : "";
    return { above: [`layer ${cell.layer} · head ${cell.head}${group} · max attention ${cell.value.toFixed(3)}`] };
  }
  return { below: partnerLines(partnersAt(state, state.hover), state.doc.tokens, state.layer) };
}

/**
 * @param {{dom: {root: HTMLElement, tooltip: HTMLElement}, store: import("./store.js").Store<import("./state.js").State>}} ctx
 */
export function createTooltipView({ dom, store }) {
  const tooltip = createTooltip(dom.root, dom.tooltip);
  const stop = store.subscribe(["hover", "hoverInfo", "doc"], (s) => {
    const info = s.hoverInfo;
    if (s.hover < 0 || !info) tooltip.hide();
    else tooltip.show(s.hover, s.doc, tooltipLines(s, info), info);
  });
  return { destroy: stop };
}
