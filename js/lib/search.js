// Search over the text: a query matches the text's characters (a plain query in any case, across token
// boundaries: "t-SNE" finds "t", "-", "s", "##ne"; or a /regular expression/flags), and every token whose
// character span a match touches is a match; a token without a span (a special token) matches by its own
// text. A user's regular expression can backtrack for minutes (/(a+)+$/ on a long word): it runs in a Web
// Worker that is stopped after REGEX_MS (js/workers/search-worker.js), never on the page's thread.

/**
 * @typedef {{kind: "plain", needle: string} | {kind: "regex", source: string, flags: string}} Query
 * @typedef {import("../store/state.js").Doc} Doc
 * @typedef {import("../store/state.js").Search} Search
 */

/**
 * Parse a query: null for an empty one, {error} for a bad regular expression.
 * @param {string} query
 * @returns {null | {error: string} | Query}
 */
export function parseQuery(query) {
  const q = String(query ?? "").trim();
  if (!q) return null;
  const re = /^\/(.+)\/([a-z]*)$/s.exec(q);
  if (!re) return { kind: "plain", needle: q };
  const flags = re[2].replace(/[gy]/g, "");
  try {
    new RegExp(re[1], flags);
  } catch (err) {
    return { error: /** @type {Error} */ (err).message };
  }
  return { kind: "regex", source: re[1], flags };
}

/**
 * `s` in lower case, character by character (a character whose lower case is longer stays as it is), so
 * that indices into it are indices into `s`.
 * @param {string} s
 */
export function foldCase(s) {
  let out = "";
  for (let i = 0; i < s.length; i++) {
    const low = s[i].toLowerCase();
    out += low.length === 1 ? low : s[i];
  }
  return out;
}

/**
 * Every occurrence of `needle` in `text`, in any case, without overlaps: [start, end) pairs, flat.
 * @param {string} text
 * @param {string} needle
 * @returns {number[]}
 */
export function plainSpans(text, needle) {
  const hay = foldCase(text);
  const pin = foldCase(needle);
  const spans = [];
  for (let i = hay.indexOf(pin); pin && i >= 0; i = hay.indexOf(pin, i + pin.length)) spans.push(i, i + pin.length);
  return spans;
}

/**
 * The tokens whose character span meets one of `spans` ([start, end) pairs, flat) in a text of `length`
 * characters: linear in the text, the spans and the tokens.
 * @param {number[] | Int32Array} spans
 * @param {([number, number] | null)[] | null} offsets
 * @param {number} length
 * @returns {number[]}
 */
export function tokensTouched(spans, offsets, length) {
  if (!offsets || !spans.length) return [];
  const starts = new Int32Array(length + 1);
  for (let k = 0; k < spans.length; k += 2) {
    const [a, b] = [Math.max(0, spans[k]), Math.min(length, spans[k + 1])];
    if (b > a) {
      starts[a] += 1;
      starts[b] -= 1;
    }
  }
  // covered[i]: characters before i inside a match
  const covered = new Int32Array(length + 1);
  let depth = 0;
  for (let i = 0; i < length; i++) {
    depth += starts[i];
    covered[i + 1] = covered[i] + (depth > 0 ? 1 : 0);
  }
  const out = [];
  for (let t = 0; t < offsets.length; t++) {
    const span = offsets[t];
    if (!span) continue;
    const a = Math.max(0, Math.min(length, span[0]));
    const b = Math.max(a, Math.min(length, span[1]));
    if (covered[b] > covered[a]) out.push(t);
  }
  return out;
}

/**
 * The tokens without a character span (special tokens), by index and text, for the worker.
 * @param {Doc} doc
 * @returns {[number, string][]}
 */
export function spanless(doc) {
  return doc.tokens.flatMap((tok, i) =>
    doc.offsets && doc.offsets[i] ? [] : [/** @type {[number, string]} */ ([i, tok])],
  );
}

/**
 * Word mode (the points are a word's occurrences across texts, one sentence a line): the occurrences in the
 * lines (sentences) a match of `spans` touches.
 * @param {number[] | Int32Array} spans [start, end) pairs, flat
 * @param {Doc} doc
 * @returns {number[]}
 */
export function occurrencesTouched(spans, doc) {
  const { text, offsets } = doc;
  if (!offsets || !spans.length) return [];
  // the lines a match meets, as [start, end) character ranges widened to whole lines
  const wide = [];
  for (let k = 0; k < spans.length; k += 2) {
    const a = Math.max(0, Math.min(text.length, spans[k]));
    const b = Math.max(a, Math.min(text.length, spans[k + 1]));
    if (b <= a) continue;
    const start = text.lastIndexOf("\n", a - 1) + 1;
    const next = text.indexOf("\n", b - 1 >= start ? b - 1 : start);
    wide.push(start, next < 0 ? text.length : next);
  }
  return tokensTouched(wide, offsets, text.length);
}

/**
 * The search state of matches `spans` in the text plus the spanless tokens `hits` that matched (in word mode,
 * the occurrences whose sentence a match touches).
 * @param {string} query
 * @param {Doc} doc
 * @param {number[] | Int32Array} spans
 * @param {number[]} hits
 * @returns {Search}
 */
export function found(query, doc, spans, hits) {
  const touched = doc.word ? occurrencesTouched(spans, doc) : tokensTouched(spans, doc.offsets, doc.text.length);
  const tokens = [...touched, ...hits].sort((a, b) => a - b);
  return { query, matches: new Set(tokens), count: spans.length / 2 + hits.length, error: "", pending: false };
}

/**
 * The search state of `query` over `doc`: complete for a plain query; for a regular expression `pending`
 * (the searcher runs it off the page's thread).
 * @param {string} query
 * @param {Doc} doc
 * @returns {Search}
 */
export function searchOf(query, doc) {
  const parsed = parseQuery(query);
  const none = { query, matches: new Set(), count: 0, error: "", pending: false };
  if (!parsed) return none;
  if ("error" in parsed) return { ...none, error: parsed.error };
  if (parsed.kind === "regex") return { ...none, pending: true };
  const needle = foldCase(parsed.needle);
  const hits = spanless(doc)
    .filter(([, tok]) => foldCase(tok).includes(needle))
    .map(([i]) => i);
  return found(query, doc, plainSpans(doc.text, parsed.needle), hits);
}
