import { test } from "node:test";
import assert from "node:assert/strict";
import { partnersOf, shownPartners, partnerLines, partnerTokens } from "./partners.js";

// 3 tokens, k = 2: row i of A (attends to) and column i (attended by)
const edges = (rows) => ({
  indices: Int32Array.from(rows.flatMap((r) => r[0])),
  weights: Float32Array.from(rows.flatMap((r) => r[1])),
  n: rows.length,
  k: 2,
});
const TO = edges([
  [
    [1, 2],
    [0.6, 0.3],
  ],
  [
    [0, 2],
    [0.5, 0.4],
  ],
  [
    [1, 0],
    [0.7, 0.2],
  ],
]);
const FROM = edges([
  [
    [1, 2],
    [0.5, 0.2],
  ],
  [
    [2, 0],
    [0.7, 0.6],
  ],
  [
    [0, 1],
    [0.3, 0.4],
  ],
]);
const NEAR = edges([
  [
    [2, 1],
    [0.9, 0.1],
  ],
  [
    [0, 2],
    [0.8, 0.7],
  ],
  [
    [0, 1],
    [0.9, 0.7],
  ],
]);

test("attention mode: attends to and attended by, strongest first", () => {
  const p = partnersOf(0, { edges: NEAR, attendsTo: TO, attendedBy: FROM, k: 5, tokenRow: null, hidden: false });
  assert.deepEqual(
    p.to.map((q) => q.token),
    [1, 2],
  );
  assert.deepEqual(
    p.from.map((q) => q.token),
    [1, 2],
  );
  assert.deepEqual(p.near, []);
  assert.deepEqual(shownPartners(p, "to").from, []);
  assert.deepEqual(shownPartners(p, "off").to, []);
  assert.deepEqual(partnerTokens(p), [1, 2]);
});

test("hidden mode: the nearest neighbours, never attention partners", () => {
  const p = partnersOf(1, { edges: NEAR, attendsTo: TO, attendedBy: FROM, k: 5, tokenRow: null, hidden: true });
  assert.deepEqual(p.to, []);
  assert.deepEqual(
    p.near.map((q) => q.token),
    [0, 2],
  );
  assert.match(partnerLines(p, ["a", "b", "c"], 3)[0], /^nearest in layer 3 hidden space: a 0.80, c 0.70$/);
});

test("tooltip lines give weights and mark repeated tokens with their index", () => {
  const p = partnersOf(0, { edges: null, attendsTo: TO, attendedBy: FROM, k: 5, tokenRow: null, hidden: false });
  const lines = partnerLines(p, ["the", "the", "cat"]);
  assert.deepEqual(lines, ["attends to: the#1 0.60, cat 0.30", "attended by: the#1 0.50, cat 0.20"]);
});
