import { test } from "node:test";
import assert from "node:assert/strict";
import { foldCase, parseQuery, plainSpans, searchOf, tokensTouched } from "./search.js";

// BERT's pieces of a piece of the t-SNE abstract: "t-SNE" is four tokens
const TEXT = 'called "t-SNE" that. The t-sne map';
const TOKENS = [
  "[CLS]",
  "called",
  '"',
  "t",
  "-",
  "s",
  "##ne",
  '"',
  "that",
  ".",
  "the",
  "t",
  "-",
  "s",
  "##ne",
  "map",
  "[SEP]",
];
const OFFSETS = [
  null, [0, 6], [7, 8], [8, 9], [9, 10], [10, 11], [11, 13], [13, 14], [15, 19], [19, 20],
  [21, 24], [25, 26], [26, 27], [27, 28], [28, 30], [31, 34], null,
]; // prettier-ignore
const DOC = { text: TEXT, tokens: TOKENS, offsets: OFFSETS, special: [], subword: () => false };

test("a plain query matches the text in any case, across token boundaries, and counts its matches", () => {
  const s = searchOf("t-SNE", DOC);
  assert.deepEqual([...s.matches], [3, 4, 5, 6, 11, 12, 13, 14]);
  assert.equal(s.count, 2);
  assert.deepEqual([...searchOf('NE" tha', DOC).matches], [6, 7, 8], "a match touches every token it meets");
  assert.deepEqual([...searchOf("the", DOC).matches], [10]);
  assert.deepEqual([...searchOf("[cls]", DOC).matches], [0], "a token without a span matches by its text");
  assert.equal(searchOf("  ", DOC).count, 0);
  assert.equal(searchOf("zebra", DOC).count, 0);
});

test("a /regex/ is left to the worker; a bad one is an error, not an exception", () => {
  assert.equal(searchOf("/t-?sne/i", DOC).pending, true);
  assert.deepEqual(parseQuery("/t-?sne/gi"), { kind: "regex", source: "t-?sne", flags: "i" });
  const bad = searchOf("/(/", DOC);
  assert.ok(bad.error && !bad.pending && bad.matches.size === 0);
});

test("spans and tokens: non-overlapping matches, indices into the original text, linear coverage", () => {
  assert.deepEqual(plainSpans("aaaa", "aa"), [0, 2, 2, 4]);
  assert.equal(foldCase("İstanbul").length, "İstanbul".length, "a letter whose lower case is longer stays");
  assert.deepEqual(plainSpans("İstanbul ISTANBUL", "stan"), [1, 5, 10, 14]);
  assert.deepEqual(tokensTouched([2, 3], [[0, 2], [2, 4], null, [4, 6]], 6), [1]);
  assert.deepEqual(tokensTouched([1, 5], [[0, 2], [2, 4], null, [4, 6]], 6), [0, 1, 3]);
  assert.deepEqual(tokensTouched([0, 0], [[0, 2]], 6), [], "an empty match touches nothing");
});
