import { test } from "node:test";
import assert from "node:assert/strict";
import { NO_LINKS, syntaxLinks } from "./syntax.js";

// [CLS] the old farm ##er sold . [SEP]: "farmer" (tokens 3, 4) is the subject of "sold" (5), "the" and "old" its
// dependents, "sold" the root
const FIRST = [-1, 1, 2, 3, 3, 5, 6, -1];
const HEAD = [-1, 3, 3, 5, 5, -1, 5, -1];
const TREE = { data: Int32Array.from([...FIRST, ...HEAD]), shape: [2, 8] };

test("a token's head and its word's dependents, from any of its pieces", () => {
  assert.deepEqual(syntaxLinks(TREE, 3), { head: 5, dependents: [1, 2] });
  assert.deepEqual(syntaxLinks(TREE, 4), { head: 5, dependents: [1, 2] });
  assert.deepEqual(syntaxLinks(TREE, 5), { head: -1, dependents: [3, 6] });
  assert.deepEqual(syntaxLinks(TREE, 1), { head: 3, dependents: [] });
});

test("special tokens, tokens out of range and no tree have none", () => {
  assert.equal(syntaxLinks(TREE, 0), NO_LINKS);
  assert.equal(syntaxLinks(TREE, 8), NO_LINKS);
  assert.equal(syntaxLinks(TREE, -1), NO_LINKS);
  assert.equal(syntaxLinks(null, 3), NO_LINKS);
});
