// The text strip: the input text with one span per token (textContent only, never HTML), underlined in
// the token's colour. Hovering a span reports the token; other views' hovers highlight it here. A click
// selects a token, shift-click the range from the last clicked one, ctrl/cmd-click toggles one.

import { textSegments } from "./segments.js";

export function createTextStrip({ container, onHover, onSelect }) {
  let spans = []; // token index -> span
  let hover = -1;
  let partners = [];
  let selected = new Set();
  let matches = new Set();
  let anchor = -1;

  const onOver = (event) => {
    const span = event.target.closest ? event.target.closest("[data-index]") : null;
    onHover(span ? Number(span.dataset.index) : -1, event);
  };
  const onLeave = (event) => onHover(-1, event);
  const onClick = (event) => {
    const span = event.target.closest ? event.target.closest("[data-index]") : null;
    if (!span) return;
    const i = Number(span.dataset.index);
    let next;
    if (event.shiftKey && anchor >= 0) {
      next = [];
      for (let j = Math.min(anchor, i); j <= Math.max(anchor, i); j++) next.push(j);
    } else if (event.ctrlKey || event.metaKey) {
      const set = new Set(selected);
      if (set.has(i)) set.delete(i);
      else set.add(i);
      next = [...set].sort((a, b) => a - b);
      anchor = i;
    } else {
      next = [i];
      anchor = i;
    }
    if (event.shiftKey) window.getSelection?.()?.removeAllRanges();
    onSelect(next);
  };
  container.addEventListener("click", onClick);
  container.addEventListener("mouseover", onOver);
  container.addEventListener("mousemove", onOver);
  container.addEventListener("mouseleave", onLeave);

  /** Scroll the strip itself (not the page) so that `span` is visible. */
  function reveal(span) {
    const top = span.offsetTop - container.offsetTop;
    if (top < container.scrollTop || top + span.offsetHeight > container.scrollTop + container.clientHeight) {
      container.scrollTop = Math.max(0, top - container.clientHeight / 2);
    }
  }

  return {
    /** Rebuild from the text, tokens, offsets (or null), special flags and per-token colours. */
    setData(text, tokens, offsets, special, colours) {
      container.replaceChildren();
      spans = new Array(tokens.length).fill(null);
      hover = -1;
      partners = [];
      anchor = -1;
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
        span.style.setProperty("--hs-tok-color", colours[piece.token] || "transparent");
        if (selected.has(piece.token)) span.classList.add("hs-selected");
        if (matches.has(piece.token)) span.classList.add("hs-match");
        spans[piece.token] = span;
        fragment.appendChild(span);
      }
      container.appendChild(fragment);
    },
    /** Token colours (per token index) as underlines. */
    setColours(colours) {
      spans.forEach((span, i) => span && span.style.setProperty("--hs-tok-color", colours[i] || "transparent"));
    },
    /** Mark the selected tokens (a Set of token indices). */
    setSelection(set) {
      for (const i of selected) if (spans[i] && !set.has(i)) spans[i].classList.remove("hs-selected");
      for (const i of set) if (spans[i]) spans[i].classList.add("hs-selected");
      selected = set;
    },
    /** Mark the search matches (a Set of token indices) and bring the first into view. */
    setMatches(set) {
      for (const i of matches) if (spans[i] && !set.has(i)) spans[i].classList.remove("hs-match");
      for (const i of set) if (spans[i]) spans[i].classList.add("hs-match");
      matches = set;
      const first = Math.min(...set);
      if (Number.isFinite(first) && spans[first]) reveal(spans[first]);
    },
    /** Dim the tokens that have no point in the scatter (excluded special tokens). */
    setKept(tokenRow) {
      spans.forEach((span, i) => span && span.classList.toggle("hs-dropped", !(tokenRow[i] >= 0)));
    },
    setHover(token, partnerTokens = [], scroll = false) {
      if (hover >= 0 && spans[hover]) spans[hover].classList.remove("hs-hover");
      for (const p of partners) if (spans[p]) spans[p].classList.remove("hs-partner");
      hover = token;
      partners = partnerTokens;
      for (const p of partners) if (spans[p]) spans[p].classList.add("hs-partner");
      if (hover >= 0 && spans[hover]) {
        spans[hover].classList.add("hs-hover");
        if (scroll) reveal(spans[hover]);
      }
    },
    destroy() {
      container.removeEventListener("click", onClick);
      container.removeEventListener("mouseover", onOver);
      container.removeEventListener("mousemove", onOver);
      container.removeEventListener("mouseleave", onLeave);
    },
  };
}
