// The text strip view: the input text with one span per token (textContent only, never HTML), underlined
// in the token's colour. Hovering a span hovers the token; other views' hovers highlight it here (with
// its partners and, while the colouring is a parse's, its syntactic head and dependents). A click selects a token,
// shift-click the range from the last clicked one, ctrl/cmd-click toggles one. Only the spans near the strip's scrolled view exist (js/views/text/text-blocks.js): a span is made
// with the marks of the moment when its block comes into view. In word mode (the points are a word's occurrences
// across texts, one sentence a line) the strip shows the sentences, each occurrence a span: every sentence while
// nothing is selected, else only those that hold a selected occurrence.

import { sentencePieces, textSegments } from "../../lib/segments.js";
import { createTextBlocks } from "./text-blocks.js";
import { partnerTokens, shownPartners } from "../../lib/partners.js";
import { syntaxLinks } from "../../lib/syntax.js";
import { disposer, el } from "../../lib/dom.js";
import { changed } from "../../store/store.js";
import { directionOf, partnersAt } from "../../store/state.js";

/** @typedef {{head: number[], dependents: number[]}} SyntaxMarks */
/** @type {SyntaxMarks} */
const NO_MARKS = { head: [], dependents: [] };
/** @type {["head" | "dependents", string][]} each list's class */
const SYNTAX_CLASSES = [
  ["head", "hs-syntax-head"],
  ["dependents", "hs-syntax-dep"],
];

/**
 * The tokens to mark as the syntactic head and dependents of `token` (js/lib/syntax.js).
 * @param {import("../../lib/syntax.js").Tree | null} tree
 * @param {number} token
 * @returns {SyntaxMarks}
 */
function syntaxMarks(tree, token) {
  const links = syntaxLinks(tree, token);
  return { head: links.head >= 0 ? [links.head] : [], dependents: links.dependents };
}

/**
 * Move `className` from the tokens of `before` to those of `after`, on the spans in the DOM.
 * @param {Map<number, HTMLElement>} spans
 * @param {Iterable<number>} before
 * @param {Iterable<number>} after
 * @param {string} className
 */
function markTokens(spans, before, after, className) {
  const next = new Set(after);
  for (const i of before) if (!next.has(i)) spans.get(i)?.classList.remove(className);
  for (const i of next) spans.get(i)?.classList.add(className);
}

/**
 * @typedef {import("../../store/state.js").State} State
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
 * The strip's pieces (js/lib/segments.js) and title: the text's tokens; in word mode the sentences, only those of
 * the selected occurrences when some are selected.
 * @param {import("../../store/state.js").Doc} doc
 * @param {Set<number>} selected
 */
export function stripPieces(doc, selected) {
  const { text, tokens, offsets } = doc;
  if (!doc.word) {
    const title = tokens.length
      ? `text · ${tokens.length} tokens · hover a token, click to select (shift: a range)`
      : "text";
    return { pieces: textSegments(text || "", tokens, offsets), title };
  }
  const shown = sentencePieces({ text: text || "", tokens, offsets }, selected);
  return { pieces: shown.pieces, title: sentencesTitle(doc, selected.size, shown) };
}

/**
 * The strip's title in word mode: what the lines are, and which of them are shown.
 * @param {import("../../store/state.js").Doc} doc
 * @param {number} selected how many occurrences are selected
 * @param {{lines: number, shown: number}} shown
 */
export function sentencesTitle(doc, selected, { lines, shown }) {
  const n = doc.tokens.length;
  const what = `sentences · ${n} occurrence${n === 1 ? "" : "s"} of '${doc.word}'`;
  if (!selected) return `${what} · hover one, click to select (shift: a range)`;
  return `${what} · ${shown} of ${lines} sentences shown: those of the ${selected} selected (Escape: all)`;
}

/**
 * Scroll the strip itself (not the page) so that `span` is visible.
 * @param {HTMLElement} container
 * @param {HTMLElement} span
 */
function reveal(container, span) {
  // from the boxes on screen: the strip's containment (widget.css) makes it the span's offsetParent
  const top = span.getBoundingClientRect().top - container.getBoundingClientRect().top + container.scrollTop;
  if (top < container.scrollTop || top + span.offsetHeight > container.scrollTop + container.clientHeight) {
    container.scrollTop = Math.max(0, top - container.clientHeight / 2);
  }
}

/**
 * @param {{dom: {textStrip: HTMLElement, textTitle: HTMLElement}, store: import("../../store/store.js").Store<State>,
 *   intents: import("../../store/intents.js").Intents}} ctx
 */
export function createTextStrip({ dom, store, intents }) {
  const container = dom.textStrip;
  const scope = disposer();
  const title = el("span", { className: "hs-text-title", text: "text" });
  dom.textTitle.append(title);
  const strip = {
    /** @type {Map<number, HTMLElement>} token index -> span, for the spans in the DOM */
    spans: new Map(),
    hover: -1,
    /** @type {number[]} */
    partners: [],
    /** the hovered token's syntactic head and its word's dependents, marked (js/lib/syntax.js) */
    syntax: NO_MARKS,
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

  /**
   * The node of a piece of the text: a token's span with the marks of the moment, or plain text.
   * @param {import("./text-blocks.js").Piece} piece
   */
  function fill(piece) {
    if (piece.token < 0) return document.createTextNode(piece.text);
    const t = piece.token;
    const { doc, colours, rows } = store.state;
    const span = document.createElement("span");
    span.className = "hs-tok";
    if (piece.special || doc.special[t]) span.classList.add("hs-special");
    span.dataset.index = String(t);
    span.textContent = piece.text;
    span.style.setProperty("--hs-tok-color", (colours && colours.colours[t]) || "transparent");
    span.classList.toggle("hs-dropped", !(rows.tokenRow[t] >= 0));
    span.classList.toggle("hs-selected", strip.selected.has(t));
    span.classList.toggle("hs-match", strip.matches.has(t));
    span.classList.toggle("hs-hover", strip.hover === t);
    span.classList.toggle("hs-partner", strip.partners.includes(t));
    SYNTAX_CLASSES.forEach(([key, name]) => span.classList.toggle(name, strip.syntax[key].includes(t)));
    strip.spans.set(t, span);
    return span;
  }
  const blocks = createTextBlocks(container, {
    fill,
    emptied: (first, last) => {
      for (let t = first; t < last; t++) strip.spans.delete(t);
    },
  });
  scope.add(() => blocks.destroy());

  /**
   * Rebuild the spans of the text (in word mode, of the sentences shown for `selected`).
   * @param {import("../../store/state.js").Doc} doc
   * @param {Set<number>} selected
   */
  function rebuild(doc, selected) {
    strip.spans = new Map();
    strip.hover = -1;
    strip.partners = [];
    strip.syntax = NO_MARKS;
    if (!doc.word) strip.anchor = -1; // word mode keeps it: a selection shows fewer sentences
    const shown = stripPieces(doc, selected);
    blocks.build(shown.pieces);
    title.textContent = shown.title;
  }

  const mark = (/** @type {Iterable<number>} */ before, /** @type {Iterable<number>} */ after, className = "") =>
    markTokens(strip.spans, before, after, className);

  /** @param {State} s */
  function setHover(s) {
    if (strip.hover >= 0) strip.spans.get(strip.hover)?.classList.remove("hs-hover");
    const token = s.hover;
    const partners = partnerTokens(shownPartners(partnersAt(s, token), directionOf(s)));
    mark(strip.partners, partners, "hs-partner");
    const syntax = syntaxMarks(s.syntaxTree, token);
    SYNTAX_CLASSES.forEach(([key, name]) => mark(strip.syntax[key], syntax[key], name));
    strip.hover = token;
    strip.partners = partners;
    strip.syntax = syntax;
    if (token >= 0 && s.hoverInfo && s.hoverInfo.source !== "text") blocks.show(token);
    const span = token >= 0 ? strip.spans.get(token) : null;
    if (!span) return;
    span.classList.add("hs-hover");
    if (s.hoverInfo && s.hoverInfo.source !== "text") reveal(container, span);
  }

  /** Mark the search's matches and scroll to the first. @param {State} s */
  function showMatches(s) {
    mark(strip.matches, s.search.matches, "hs-match");
    strip.matches = s.search.matches;
    let first = Infinity; // not Math.min(...matches): 65536 arguments overflow the stack
    for (const t of strip.matches) first = Math.min(first, t);
    if (Number.isFinite(first)) blocks.show(first);
    const span = Number.isFinite(first) ? strip.spans.get(first) : null;
    if (span) reveal(container, span);
  }

  /** @param {State} s @param {State | null} prev */
  function update(s, prev) {
    const is = (/** @type {keyof State} */ key) => changed(s, prev, key);
    const rebuilt = is("doc") || (Boolean(s.doc.word) && is("selected"));
    if (rebuilt) rebuild(s.doc, s.selected);
    if (is("colours")) {
      const colours = s.colours ? s.colours.colours : [];
      strip.spans.forEach((span, i) => span.style.setProperty("--hs-tok-color", colours[i] || "transparent"));
    }
    if (is("rows")) {
      // the tokens without a point in the map (excluded special tokens) are dimmed
      strip.spans.forEach((span, i) => span.classList.toggle("hs-dropped", !(s.rows.tokenRow[i] >= 0)));
    }
    if (is("doc") || is("selected")) {
      mark(strip.selected, s.selected, "hs-selected");
      strip.selected = s.selected;
    }
    if (is("doc") || is("search")) showMatches(s);
    if (is("hover") || is("syntaxTree") || (rebuilt && s.hover >= 0)) setHover(s);
  }
  scope.add(store.watch(["doc", "colours", "rows", "selected", "search", "hover", "syntaxTree"], update));

  return { destroy: () => scope.dispose() };
}
