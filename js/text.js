// The text strip: the input text with one span per token (textContent only, never HTML), underlined in
// the token's position colour. Hovering a span reports the token; other views' hovers highlight it here.

import { textSegments } from "./layout.js";

export function createTextStrip({ container, onHover }) {
  let spans = []; // token index -> span
  let hover = -1;
  let partners = [];

  const onOver = (event) => {
    const span = event.target.closest ? event.target.closest("[data-index]") : null;
    onHover(span ? Number(span.dataset.index) : -1, event);
  };
  const onLeave = (event) => onHover(-1, event);
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
        spans[piece.token] = span;
        fragment.appendChild(span);
      }
      container.appendChild(fragment);
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
      container.removeEventListener("mouseover", onOver);
      container.removeEventListener("mousemove", onOver);
      container.removeEventListener("mouseleave", onLeave);
    },
  };
}
