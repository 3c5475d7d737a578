// The hover tooltip view: the token (with #index), where it was hovered (grid cell), its context in the
// text, and its partners; in word mode (the points are a word's occurrences across texts) the occurrence's
// whole sentence with the word in bold, and which occurrence it is. Text only (textContent), placed next to the pointer inside the part of the widget
// the user sees (the window, the notebook's scrolling output area: never cut at their edges). Shown while the
// pointer is over a token (the state's `hoverInfo`); a hover set by Python shows none.

import { el, span } from "../lib/dom.js";
import { sentenceOf, tokenContext } from "../lib/segments.js";
import { partnerLines } from "../lib/partners.js";
import { partnersAt } from "../store/state.js";

/**
 * The part of `root` the user can see (client px): inside the window and inside every ancestor that clips
 * (a notebook's scrolling output area, a cell), so that a tooltip placed in it is never cut.
 * @param {HTMLElement} root
 * @param {HTMLElement[]} clips
 */
export function visibleBox(root, clips) {
  const r = root.getBoundingClientRect();
  const box = { left: Math.max(r.left, 0), top: Math.max(r.top, 0), right: r.right, bottom: r.bottom };
  box.right = Math.min(box.right, window.innerWidth || box.right);
  box.bottom = Math.min(box.bottom, window.innerHeight || box.bottom);
  for (const clip of clips) {
    const c = clip.getBoundingClientRect();
    box.left = Math.max(box.left, c.left);
    box.top = Math.max(box.top, c.top);
    box.right = Math.min(box.right, c.right);
    box.bottom = Math.min(box.bottom, c.bottom);
  }
  return box;
}

/**
 * Where a `size` tooltip goes next to `pointer` inside `box` (client px): below right of the pointer, flipped
 * to the other side where it would leave the box, and kept inside it.
 * @param {{x: number, y: number}} pointer
 * @param {{w: number, h: number}} size
 * @param {{left: number, top: number, right: number, bottom: number}} box
 */
export function tooltipAt(pointer, size, box) {
  const gap = 14;
  const place = (
    /** @type {number} */ at,
    /** @type {number} */ len,
    /** @type {number} */ lo,
    /** @type {number} */ hi,
  ) => {
    let v = at + gap;
    if (v + len > hi - 4) v = at - len - gap;
    return Math.max(lo + 4, Math.min(v, hi - len - 4));
  };
  return { x: place(pointer.x, size.w, box.left, box.right), y: place(pointer.y, size.h, box.top, box.bottom) };
}

/**
 * A token's head line (its text, #index) and its context: a few words each side, the token in bold.
 * @param {string} text @param {string[]} tokens @param {any} offsets @param {boolean[]} special @param {number} token
 */
function tokenParts(text, tokens, offsets, special, token) {
  const ctx = tokenContext(text, tokens, offsets, token, 6);
  const head = el("div", {}, [
    span("hs-tip-token", tokens[token] ?? ""),
    span("hs-tip-meta", `  #${token}${special[token] ? " · special" : ""}`),
  ]);
  const context = el("div", { className: "hs-tip-context" }, [ctx.before, el("b", { text: ctx.token }), ctx.after]);
  return { head, context };
}

/**
 * Word mode: an occurrence's head line (the word as written, #index, which occurrence of how many) and its whole
 * sentence, the word in bold (text nodes and a <b>, never HTML).
 * @param {{text: string, tokens: string[], offsets: any}} doc
 * @param {number} token
 */
export function occurrenceParts(doc, token) {
  const { before, word, after } = sentenceOf(doc, token);
  const n = doc.tokens.length;
  const head = el("div", {}, [
    span("hs-tip-token", doc.tokens[token] ?? ""),
    span("hs-tip-meta", `  #${token} · occurrence ${token + 1} of ${n}`),
  ]);
  const context = el(
    "div",
    { className: "hs-tip-context hs-tip-sentence", dataset: { testid: "headsne-tip-sentence" } },
    [before, el("b", { text: word }), after],
  );
  return { head, context };
}

/**
 * @param {HTMLElement} root the widget root (the tooltip is positioned in its box)
 * @param {HTMLElement} tooltip
 */
export function createTooltip(root, tooltip) {
  /** @type {HTMLElement[] | null} the ancestors that clip what they hold (found at the first hover) */
  let clips = null;
  const clipping = () => {
    const found = [];
    for (let p = root.parentElement; p && p !== document.body; p = p.parentElement) {
      const style = getComputedStyle(p);
      if (/auto|scroll|hidden|clip/.test(`${style.overflowX} ${style.overflowY}`)) found.push(p);
    }
    return found;
  };

  /** @param {{x: number, y: number} | undefined} pointer client px */
  function place(pointer) {
    if (!pointer || pointer.x == null) return;
    if (!clips || !clips.every((c) => c.isConnected)) clips = clipping();
    const r = root.getBoundingClientRect();
    const at = tooltipAt(pointer, { w: tooltip.offsetWidth, h: tooltip.offsetHeight }, visibleBox(root, clips));
    tooltip.style.left = `${at.x - r.left}px`;
    tooltip.style.top = `${at.y - r.top}px`;
  }

  return {
    /**
     * Show token `token` of `data` ({text, tokens, offsets, special}) with lines of text above and
     * below its context.
     * @param {number} token
     * @param {{text: string, tokens: string[], offsets: any, special: boolean[], word?: string}} data
     * @param {{above?: string[], below?: string[]}} lines
     * @param {{x: number, y: number} | undefined} pointer client px
     */
    show(token, data, { above = [], below = [] }, pointer) {
      const { text, tokens, offsets, special } = data;
      const { head, context } = data.word
        ? occurrenceParts(data, token)
        : tokenParts(text, tokens, offsets, special, token);
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
 * @param {import("../store/state.js").State} state
 * @param {import("../store/state.js").HoverInfo} info
 */
export function tooltipLines(state, info) {
  const cell = info.cell;
  if (info.source === "grid" && cell) {
    const group = cell.group >= 0 ? ` · kv group ${cell.group}` : "";
    const what = state.doc.word ? `max attention to '${state.doc.word}' in its sentence` : "max attention";
    return { above: [`layer ${cell.layer} · head ${cell.head}${group} · ${what} ${cell.value.toFixed(3)}`] };
  }
  return { below: partnerLines(partnersAt(state, state.hover), state.doc.tokens, state.layer) };
}

/**
 * @param {{dom: {root: HTMLElement, tooltip: HTMLElement}, store: import("../store/store.js").Store<import("../store/state.js").State>}} ctx
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
