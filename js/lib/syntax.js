// The hovered token's syntax, from Python's `syntax_tree` (int32 (2, n), sent while the tokens are coloured by part
// of speech or relation): row 0 each token's word's first token, row 1 its word's syntactic head's first token,
// -1 for none. A word is named by its first token: the head is one token, the dependents each dependent word's
// first token.

/**
 * @typedef {{data: ArrayLike<number>, shape: number[]}} Tree
 * @typedef {{head: number, dependents: number[]}} SyntaxLinks tokens; head -1 for none
 */

/** @type {SyntaxLinks} */
export const NO_LINKS = Object.freeze({ head: -1, dependents: [] });

/**
 * The syntactic head and dependents of `token`'s word (their first tokens), or none.
 * @param {Tree | null} tree
 * @param {number} token
 * @returns {SyntaxLinks}
 */
export function syntaxLinks(tree, token) {
  if (!tree || tree.shape.length !== 2 || tree.shape[0] !== 2) return NO_LINKS;
  const n = tree.shape[1];
  if (token < 0 || token >= n) return NO_LINKS;
  const { data } = tree;
  const word = data[token];
  if (word < 0) return NO_LINKS;
  /** @type {number[]} */
  const dependents = [];
  for (let j = 0; j < n; j++) if (data[j] === j && j !== word && data[n + j] === word) dependents.push(j);
  return { head: data[n + token], dependents };
}
