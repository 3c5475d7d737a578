// The text strip view: the input text with one span per token (textContent only, never HTML), underlined
// in the token's colour. Hovering a span hovers the token; other views' hovers highlight it here (with
// its partners). A click selects a token, shift-click the range from the last clicked one, ctrl/cmd-click
// toggles one.

import { textSegments } from "./segments.js";
import { partnerTokens, shownPartners } from "./partners.js";
import { disposer, el } from "./dom.js";
import { changed } from "./store.js";
import { directionOf, partnersAt } from "./state.js";

/**
 * @typedef {import("./state.js").State} State
 */

/**
 * The selection after a click on token `i`: shift extends from `anchor`, ctrl/cmd toggles.
 * @param {number} i
 * @param {{shiftKey: boolean, ctrlKey: boolean, metaKey: boolean}} keys
 * @param {number} anchor the token clicked last (-1: none)
 * @param {Set<number>} selected
 * @returns {{next: number[], anchor: number}}
 */
export function clickSelection(i, keys, anchor, selected) {
  if (keys.shiftKey && anchor >= 0) {
    const next = [];
    for (let j = Math.min(anchor, i); j <= Math.max(anchor, i); j++) next.push(j);
    return { next, anchor };
  }
  if (keys.ctrlKey || keys.metaKey) {
    const set = new Set(selected);
    if (set.has(i)) set.delete(i);
    else set.add(i);
    return { next: [...set].sort((a, b) => a - b), anchor: i };
  }
  return { next: [i], anchor: i };
}

/**
 * @param {{dom: {textStrip: HTMLElement, textTitle: HTMLElement}, store: import("./store.js").Store<State>,
 *   intents: import("./intents.js").Intents}} ctx
 */
export function createTextStrip({ dom, store, intents }) {
  const container = dom.textStrip;
  const scope = disposer();
  const title = el("span", { className: "hs-text-title", text: "text" });
  dom.textTitle.append(title);
  const strip = {
    /** @type {(HTMLElement | null)[]} token index -> span */
    spans: [],
    hover: -1,
    /** @type {number[]} */
    partners: [],
    /** @type {Set<number>} */
    selected: new Set(),
    /** @type {Set<number>} */
    matches: new Set(),
    anchor: -1,
  };

  /** @param {Event} event */
  const tokenOf = (event) => {
    const target = /** @type {HTMLElement} */ (event.target);
    const span = target.closest ? /** @type {HTMLElement | null} */ (target.closest("[data-index]")) : null;
    return span ? Number(span.dataset.index) : -1;
  };
  /** @param {MouseEvent} event */
  const onOver = (event) => {
    const token = tokenOf(event);
    intents.hover(token, token >= 0 ? { source: "text", x: event.clientX, y: event.clientY } : null);
  };
  scope.listen(container, "mouseover", onOver);
  scope.listen(container, "mousemove", onOver);
  scope.listen(container, "mouseleave", () => intents.hover(-1, null));
  scope.listen(container, "click", (/** @type {MouseEvent} */ event) => {
    const i = tokenOf(event);
    if (i < 0) return;
    const { next, anchor } = clickSelection(i, event, strip.anchor, strip.selected);
    strip.anchor = anchor;
    if (event.shiftKey) window.getSelection?.()?.removeAllRanges();
    intents.select(next);
  });

  /** Scroll the strip itself (not the page) so that `span` is visible. @param {HTMLElement} span */
  function reveal(span) {
    const top = span.offsetTop - container.offsetTop;
    if (top < container.scrollTop || top + span.offsetHeight > container.scrollTop + container.clientHeight) {
      container.scrollTop = Math.max(0, top - container.clientHeight / 2);
    }
  }

  /** Rebuild the spans of the text. @param {import("./state.js").Doc} doc */
  function rebuild({ text, tokens, offsets, special }) {
    container.replaceChildren();
    strip.spans = new Array(tokens.length).fill(null);
    strip.hover = -1;
    strip.partners = [];
    strip.anchor = -1;
    const fragment = document.createDocumentFragment();
    for (const piece of textSegments(text || "", tokens, offsets)) {
      if (piece.token < 0) {
        fragment.appendChild(document.createTextNode(piece.text));
        continue;
      }
      const span = document.createElement("span");
      span.className = "hs-tok";
      if (piece.special || special[piece.token]) span.classList.add("hs-special");
      span.dataset.index = String(piece.token);
      span.textContent = piece.text;
      span.style.setProperty("--hs-tok-color", "transparent");
      if (strip.selected.has(piece.token)) span.classList.add("hs-selected");
      if (strip.matches.has(piece.token)) span.classList.add("hs-match");
      strip.spans[piece.token] = span;
      fragment.appendChild(span);
    }
    container.appendChild(fragment);
  }

  /**
   * Move `className` from the tokens of `before` to those of `after`.
   * @param {Iterable<number>} before
   * @param {Iterable<number>} after
   * @param {string} className
   */
  function mark(before, after, className) {
    const next = new Set(after);
    for (const i of before) if (!next.has(i)) strip.spans[i]?.classList.remove(className);
    for (const i of next) strip.spans[i]?.classList.add(className);
  }

  /** @param {State} s */
  function setHover(s) {
    if (strip.hover >= 0) strip.spans[strip.hover]?.classList.remove("hs-hover");
    const token = s.hover;
    const partners = partnerTokens(shownPartners(partnersAt(s, token), directionOf(s)));
    mark(strip.partners, partners, "hs-partner");
    strip.hover = token;
    strip.partners = partners;
    const span = token >= 0 ? strip.spans[token] : null;
    if (!span) return;
    span.classList.add("hs-hover");
    if (s.hoverInfo && s.hoverInfo.source !== "text") reveal(span);
  }

  /** @param {State} s @param {State | null} prev */
  function update(s, prev) {
    const is = (/** @type {keyof State} */ key) => changed(s, prev, key);
    if (is("doc")) {
      rebuild(s.doc);
      const n = s.doc.tokens.length;
      title.textContent = n ? `text · ${n} tokens · hover a token, click to select (shift: a range)` : "text";
    }
    if (is("doc") || is("colours")) {
      const colours = s.colours ? s.colours.colours : [];
      strip.spans.forEach((span, i) => span?.style.setProperty("--hs-tok-color", colours[i] || "transparent"));
    }
    if (is("doc") || is("rows")) {
      // the tokens without a point in the map (excluded special tokens) are dimmed
      strip.spans.forEach((span, i) => span?.classList.toggle("hs-dropped", !(s.rows.tokenRow[i] >= 0)));
    }
    if (is("doc") || is("selected")) {
      mark(strip.selected, s.selected, "hs-selected");
      strip.selected = s.selected;
    }
    if (is("doc") || is("search")) {
      mark(strip.matches, s.search.matches, "hs-match");
      strip.matches = s.search.matches;
      const first = Math.min(...strip.matches);
      const span = Number.isFinite(first) ? strip.spans[first] : null;
      if (span) reveal(span);
    }
    if (is("hover")) setHover(s);
  }
  scope.add(store.watch(["doc", "colours", "rows", "selected", "search", "hover"], update));

  return { destroy: () => scope.dispose() };
}
