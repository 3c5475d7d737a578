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

/**
 * The line of `text` that holds character `at`: its [start, end) (end before the "\n").
 * @param {string} text
 * @param {number} at
 * @returns {[number, number]}
 */
export function lineAt(text, at) {
  const start = text.lastIndexOf("\n", Math.max(0, at) - 1) + 1;
  const next = text.indexOf("\n", Math.max(start, at));
  return [start, next < 0 ? text.length : next];
}

/**
 * The sentence of occurrence `i` when the points are the occurrences of a word across texts (a Doc whose `word`
 * is set: `text` holds the sentences, one a line, `offsets[i]` the word in its line): the line cut around the
 * word, the number of the line, and the word as written there.
 * @param {{text: string, tokens: string[], offsets: ([number, number] | null)[] | null}} doc
 * @param {number} i
 * @returns {{before: string, word: string, after: string, line: number}}
 */
export function sentenceOf(doc, i) {
  const span = doc.offsets && doc.offsets.length === doc.tokens.length ? doc.offsets[i] : null;
  if (!span || span[1] <= span[0]) return { before: "", word: String(doc.tokens[i] ?? ""), after: "", line: -1 };
  const [s, e] = span;
  const [start, end] = lineAt(doc.text, s);
  let line = 0;
  for (let k = doc.text.indexOf("\n"); k >= 0 && k < start; k = doc.text.indexOf("\n", k + 1)) line++;
  return { before: doc.text.slice(start, s), word: doc.text.slice(s, e), after: doc.text.slice(e, end), line };
}

const SNIPPET_MAX = 22; // characters of an occurrence's label at most

/**
 * An occurrence's label on the map (word mode, where Python sent no labels): the word with the words next to it
 * in its sentence ("the bank of"), at most SNIPPET_MAX characters, so that the points of one word are told apart
 * (issue 52: every point read "bank").
 * @param {{text: string, tokens: string[], offsets: ([number, number] | null)[] | null}} doc
 * @param {number} i
 */
export function occurrenceSnippet(doc, i) {
  const { before, word, after } = sentenceOf(doc, i);
  const left = (before.trimEnd().split(/\s+/).pop() ?? "").replace(/^[("'[]+/, "");
  const right = (after.trimStart().split(/\s+/)[0] ?? "").replace(/[.,;:!?)"'\]]+$/, "");
  const snippet = [left, word, right].filter(Boolean).join(" ");
  return snippet.length <= SNIPPET_MAX ? snippet : `${snippet.slice(0, SNIPPET_MAX - 1)}…`;
}

/**
 * The texts the map labels its points with: Python's per-token labels where it sent one for each token
 * (`point_labels`: a sense, a snippet), else in word mode each occurrence's snippet (occurrenceSnippet), else the
 * tokens themselves.
 * @param {{text: string, tokens: string[], offsets: ([number, number] | null)[] | null, word?: string,
 *   labels?: string[] | null}} doc
 * @returns {string[]}
 */
export function pointLabels(doc) {
  if (doc.labels && doc.labels.length === doc.tokens.length) return doc.labels;
  if (!doc.word) return doc.tokens;
  return doc.tokens.map((_, i) => occurrenceSnippet(doc, i));
}

/**
 * The text strip's pieces for the occurrences of a word across texts: every line (sentence) when `selected` is
 * empty, else only the lines that hold a selected occurrence, each with its occurrences as token pieces
 * (their global index), the lines joined by "\n".
 * @param {{text: string, tokens: string[], offsets: ([number, number] | null)[] | null}} doc
 * @param {Set<number>} selected
 * @returns {{pieces: {text: string, token: number}[], lines: number, shown: number}}
 */
export function sentencePieces(doc, selected) {
  const { text, tokens, offsets } = doc;
  if (!offsets || offsets.length !== tokens.length) {
    return { pieces: textSegments(text, tokens, offsets), lines: 0, shown: 0 };
  }
  /** @type {{start: number, end: number, tokens: number[]}[]} */
  const lines = [];
  for (let start = 0; start <= text.length;) {
    const next = text.indexOf("\n", start);
    const end = next < 0 ? text.length : next;
    lines.push({ start, end, tokens: [] });
    if (next < 0) break;
    start = next + 1;
  }
  let l = 0;
  /** @type {Map<number, [number, number]>} the occurrences with a span */
  const spans = new Map();
  tokens.forEach((_, i) => {
    const span = offsets[i];
    if (span && span[1] > span[0]) spans.set(i, span);
  });
  const startOf = (/** @type {number} */ i) => /** @type {[number, number]} */ (spans.get(i))[0];
  const order = [...spans.keys()].sort((a, b) => startOf(a) - startOf(b));
  for (const i of order) {
    const s = startOf(i);
    while (l < lines.length - 1 && s >= lines[l].end + 1) l++;
    lines[l].tokens.push(i);
  }
  const keep = lines.filter((line) =>
    selected.size ? line.tokens.some((t) => selected.has(t)) : line.end > line.start,
  );
  /** @type {{text: string, token: number}[]} */
  const pieces = [];
  keep.forEach((line, k) => {
    if (k > 0) pieces.push({ text: "\n", token: -1 });
    let cursor = line.start;
    for (const t of line.tokens) {
      const [s, e] = /** @type {[number, number]} */ (spans.get(t));
      if (s < cursor) continue;
      if (s > cursor) pieces.push({ text: text.slice(cursor, s), token: -1 });
      pieces.push({ text: text.slice(s, Math.min(e, line.end)), token: t });
      cursor = Math.min(e, line.end);
    }
    if (cursor < line.end) pieces.push({ text: text.slice(cursor, line.end), token: -1 });
  });
  return { pieces, lines: lines.filter((line) => line.tokens.length).length, shown: keep.length };
}
