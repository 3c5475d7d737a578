import { test } from "node:test";
import assert from "node:assert/strict";
import { topEdges, tokenRows } from "./tokens.js";

test("topEdges keeps the k strongest partners that have a point, strongest first", () => {
  const edges = {
    n: 4,
    k: 3,
    indices: Int32Array.from([1, 2, 3, 0, 0, 3, 3, 1, 0, 2, 0, 1]),
    weights: Float32Array.from([0.2, 0.7, 0.1, 0.9, 0.05, 0, 0.3, 0.3, 0.4, 0.6, 0.5, 0.4]),
  };
  assert.deepEqual(
    topEdges(edges, 0, 2).map((e) => e.token),
    [2, 1],
  );
  assert.deepEqual(
    topEdges(edges, 1, 5).map((e) => e.token),
    [0, 0],
  ); // zero weight dropped
  const rows = tokenRows([0, 1, 3], 4); // token 2 has no point
  assert.deepEqual(
    topEdges(edges, 0, 3, rows).map((e) => e.token),
    [1, 3],
  );
  assert.deepEqual(
    topEdges(edges, 3, 3).map((e) => e.token),
    [2, 0, 1],
  );
  assert.deepEqual(topEdges(null, 0, 3), []);
  assert.deepEqual(topEdges(edges, 9, 3), []);
});
