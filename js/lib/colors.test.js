import { test } from "node:test";
import assert from "node:assert/strict";
import { colourTokens, sentenceIds, tokenKinds, categorical, KIND_LABELS } from "./colors.js";

const TEXT = "The cat sat. It purred!\nDone";
const TOKENS = ["[CLS]", "the", "cat", "sat", ".", "it", "pur", "##red", "!", "done", "[SEP]"];
const OFFSETS = [null, [0, 3], [4, 7], [8, 11], [11, 12], [13, 15], [16, 19], [19, 22], [22, 23], [24, 28], null];
const SPECIAL = TOKENS.map((t) => t.startsWith("["));
const CTX = {
  text: TEXT,
  tokens: TOKENS,
  offsets: OFFSETS,
  special: SPECIAL,
  values: null,
  categories: [],
  muted: "#888",
};

test("sentences end at . ! ? before white space and at newlines; special tokens join their neighbour", () => {
  assert.deepEqual(Array.from(sentenceIds(TEXT, TOKENS, OFFSETS)), [0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2]);
  assert.deepEqual(
    Array.from(
      sentenceIds(
        "a.b c. d",
        ["a.b", "c", ".", "d"],
        [
          [0, 3],
          [4, 5],
          [5, 6],
          [7, 8],
        ],
      ),
    ),
    [0, 0, 0, 1],
  );
  assert.deepEqual(Array.from(sentenceIds("", ["a", ".", "b"], null)), [0, 0, 1]);
  const lines = "a b\nc d";
  assert.deepEqual(
    Array.from(
      sentenceIds(
        lines,
        ["a", "b", "c", "d"],
        [
          [0, 1],
          [2, 3],
          [4, 5],
          [6, 7],
        ],
      ),
    ),
    [0, 0, 1, 1],
  );
});

test("token kinds: special, word start, word piece glued to the previous token", () => {
  const kinds = Array.from(tokenKinds(TEXT, TOKENS, OFFSETS, SPECIAL)).map((k) => KIND_LABELS[k]);
  assert.deepEqual(kinds.slice(0, 4), ["special", "word start", "word start", "word start"]);
  assert.equal(kinds[4], "word start"); // punctuation is not a word piece
  assert.deepEqual(kinds.slice(6, 8), ["word start", "word piece"]);
  assert.equal(kinds[10], "special");
  assert.deepEqual(Array.from(tokenKinds("", ["a", "##b"], null, [false, false])), [1, 2]);
});

test("categorical colourings agree with their legend", () => {
  const ctx = { ...CTX, dark: false };
  const kind = colourTokens("kind", ctx);
  assert.equal(kind.legend.kind, "categorical");
  assert.equal(kind.colours[0], kind.legend.entries[0].colour);
  assert.equal(kind.colours[7], kind.legend.entries[2].colour);
  const sentence = colourTokens("sentence", ctx);
  assert.deepEqual(
    sentence.legend.entries.map((e) => e.label),
    ["sentence 1", "sentence 2", "sentence 3"],
  );
  assert.equal(sentence.colours[9], categorical(2));
  const user = colourTokens("user", {
    ...ctx,
    values: Float32Array.from(TOKENS, (_, i) => i % 2),
    categories: ["even", "odd"],
  });
  assert.deepEqual(
    user.legend.entries.map((e) => e.label),
    ["even", "odd"],
  );
  assert.equal(user.colours[3], user.legend.entries[1].colour);
});

test("numeric colourings span the values; missing values fall back to position and say so", () => {
  const ctx = { ...CTX, dark: true };
  const values = Float32Array.from(TOKENS, (_, i) => i / 10);
  const user = colourTokens("user", { ...ctx, values });
  assert.equal(user.legend.kind, "sequential");
  assert.equal(user.legend.low, "0");
  assert.equal(user.legend.high, "1");
  assert.notEqual(user.colours[0], user.colours[10]);
  const waiting = colourTokens("max_attention", ctx);
  assert.match(waiting.legend.title, /no max attention yet/);
  assert.equal(colourTokens("position", ctx).legend.title, "position in the text");
});

test("a parse's categories get a legend that names them; before they come, position says it waits", () => {
  const ctx = { ...CTX, dark: false };
  const categories = ["det", "nsubj", "ROOT", "punct", "(none)"];
  const values = Float32Array.from([4, 0, 1, 2, 3, 1, 2, 2, 3, 1, 4]);
  const dep = colourTokens("dep", { ...ctx, values, categories });
  assert.equal(dep.mode, "dep");
  assert.equal(dep.legend.kind, "categorical");
  assert.equal(dep.legend.title, "dependency relation (spaCy)");
  assert.deepEqual(
    dep.legend.entries.map((e) => e.label),
    categories,
  );
  assert.equal(dep.colours[1], categorical(0));
  assert.equal(dep.colours[10], categorical(4));
  assert.equal(colourTokens("pos", { ...ctx, values, categories }).legend.title, "part of speech (spaCy)");
  const waiting = colourTokens("dep", { ...ctx, values: null, categories: [] });
  assert.match(waiting.legend.title, /no relations \(the text is parsed\) yet/);
});
