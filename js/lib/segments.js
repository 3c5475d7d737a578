// Text segments: the text strip's pieces and the tooltip's context words, from text + token offsets.

/**
 * Pieces of the text strip: [{text, token}] where token is the token index of a span or -1 for the text
 * between tokens. Built from `text` + `offsets`; tokens without an offset (special tokens) become their
 * own pieces at their place in the sequence. Without offsets: tokens joined by spaces.
 * @param {string} text
 * @param {string[]} tokens
 * @param {([number, number] | null)[] | null} offsets
 * @returns {{text: string, token: number, special?: boolean}[]}
 */
export function textSegments(text, tokens, offsets) {
  /** @type {{text: string, token: number, special?: boolean}[]} */
  const pieces = [];
  if (!offsets || offsets.length !== tokens.length) {
    tokens.forEach((tok, i) => {
      if (i > 0) pieces.push({ text: " ", token: -1 });
      pieces.push({ text: String(tok), token: i });
    });
    return pieces;
  }
  let cursor = 0;
  tokens.forEach((tok, i) => {
    const span = offsets[i];
    if (!span || span[1] <= span[0]) {
      pieces.push({ text: String(tok), token: i, special: true });
      return;
    }
    const start = Math.max(span[0], cursor);
    const end = Math.max(span[1], start);
    if (start > cursor) pieces.push({ text: text.slice(cursor, start), token: -1 });
    pieces.push({ text: end > start ? text.slice(start, end) : String(tok), token: i });
    cursor = end;
  });
  if (cursor < text.length) pieces.push({ text: text.slice(cursor), token: -1 });
  return pieces;
}

/**
 * The hovered token with its surrounding words: {before, token, after}, about `words` words each side,
 * cut at word boundaries and marked with an ellipsis where the text goes on.
 * @param {string} text
 * @param {string[]} tokens
 * @param {([number, number] | null)[] | null} offsets
 * @param {number} i
 * @param {number} [words]
 */
export function tokenContext(text, tokens, offsets, i, words = 6) {
  const span = offsets && offsets.length === tokens.length ? offsets[i] : null;
  if (!span || span[1] <= span[0] || !text) return tokensAround(tokens, i, words);
  const [s, e] = span;
  const before = text.slice(Math.max(0, s - 200), s).match(new RegExp(`(?:\\S+\\s*){0,${words}}$`))?.[0] ?? "";
  const after = text.slice(e, e + 200).match(new RegExp(`^(?:\\s*\\S+){0,${words}}`))?.[0] ?? "";
  return {
    before: (before.length < s ? "…" : "") + before,
    token: text.slice(s, e),
    after: after + (after.length < text.length - e ? "…" : ""),
  };
}

/**
 * The context of token `i` without offsets: the tokens around it, joined by spaces.
 * @param {string[]} tokens
 * @param {number} i
 * @param {number} words
 */
function tokensAround(tokens, i, words) {
  const lo = Math.max(0, i - words),
    hi = Math.min(tokens.length, i + words + 1);
  return {
    before: (lo > 0 ? "… " : "") + tokens.slice(lo, i).join(" ") + (i > lo ? " " : ""),
    token: String(tokens[i] ?? ""),
    after: (hi > i + 1 ? " " : "") + tokens.slice(i + 1, hi).join(" ") + (hi < tokens.length ? " …" : ""),
  };
}
