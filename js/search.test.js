import { test } from "node:test";
import assert from "node:assert/strict";
import { parseQuery, searchTokens } from "./search.js";

const TEXT = "The Cat and the cats";
const TOKENS = ["[CLS]", "the", "cat", "and", "the", "cats", "[SEP]"];
const OFFSETS = [null, [0, 3], [4, 7], [8, 11], [12, 15], [16, 20], null];

test("a plain query is a case-insensitive substring of the token or its written text", () => {
  assert.deepEqual(searchTokens("cat", TOKENS, TEXT, OFFSETS), [2, 5]);
  assert.deepEqual(searchTokens("THE", TOKENS, TEXT, OFFSETS), [1, 4]);
  assert.deepEqual(searchTokens("  ", TOKENS, TEXT, OFFSETS), []);
  assert.deepEqual(searchTokens("[cls]", TOKENS, TEXT, OFFSETS), [0]);
});

test("/regex/flags queries; a bad pattern is an error, not an exception", () => {
  assert.deepEqual(searchTokens("/^cat$/", TOKENS, TEXT, OFFSETS), [2]);
  assert.deepEqual(searchTokens("/^C/", TOKENS, TEXT, OFFSETS), [2]); // matches the written "Cat"
  assert.deepEqual(searchTokens("/^t/gi", TOKENS, TEXT, OFFSETS), [1, 4]);
  assert.deepEqual(searchTokens("/t/g", ["t", "t", "t"], "", null), [0, 1, 2], "a global flag keeps no state");
  const bad = parseQuery("/(/");
  assert.ok(bad && "error" in bad);
  assert.deepEqual(searchTokens("/(/", TOKENS, TEXT, OFFSETS), []);
});
