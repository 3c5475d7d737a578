// Token search: a plain string (case-insensitive substring) or a /regular expression/flags, matched
// against each token as written in the text (its offsets' slice) and as the tokenizer spells it.

/**
 * Parse a query: null for an empty one, {error} for a bad regular expression, else {test}.
 * @param {string} query
 * @returns {null | {error: string} | {test: (s: string) => boolean, regex: boolean}}
 */
export function parseQuery(query) {
  const q = String(query ?? "").trim();
  if (!q) return null;
  const re = /^\/(.+)\/([a-z]*)$/s.exec(q);
  if (re) {
    try {
      const pattern = new RegExp(re[1], re[2].replace(/[gy]/g, ""));
      return { test: (s) => pattern.test(s), regex: true };
    } catch (err) {
      return { error: /** @type {Error} */ (err).message };
    }
  }
  const needle = q.toLowerCase();
  return { test: (s) => s.toLowerCase().includes(needle), regex: false };
}

/**
 * Indices of the tokens that match `query` (string or parsed), in order.
 * @param {string | ReturnType<typeof parseQuery>} query
 * @param {string[]} tokens
 * @param {string} text
 * @param {([number, number] | null)[] | null} offsets
 */
export function searchTokens(query, tokens, text, offsets) {
  const parsed = typeof query === "string" ? parseQuery(query) : query;
  if (!parsed || "error" in parsed) return [];
  /** @type {number[]} */
  const out = [];
  tokens.forEach((tok, i) => {
    const span = offsets && offsets[i];
    const written = span && span[1] > span[0] ? text.slice(span[0], span[1]) : null;
    if (parsed.test(String(tok)) || (written != null && parsed.test(written))) out.push(i);
  });
  return out;
}
