import { test } from "node:test";
import assert from "node:assert/strict";
import {
  quantileKnots, quantileForward, quantileInverse, quantileRescale, quantileRescaleFrame, quantileTicks,
  frameExtent, fitDomains, easeDomains, topEdges, nearestPoint, tokenRows, textSegments, tokenContext,
  gridGeometry, gridHit, layerTop, shownFrameIndex,
} from "./layout.js";

const close = (a, b, tol = 1e-12) => assert.ok(Math.abs(a - b) <= tol, `${a} != ${b}`);

function rng(seed) {
  let s = seed >>> 0;
  return () => ((s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32);
}

test("quantile knots use numpy's linear quantile definition", () => {
  const { q, levels } = quantileKnots([4, 1, 3, 2], 3);
  assert.deepEqual(Array.from(levels), [0, 0.5, 1]);
  assert.deepEqual(Array.from(q), [1, 2.5, 4]); // median of 1..4 is 2.5
  assert.throws(() => quantileKnots([1, 2], 1), /quantile_k must be an integer >= 2/);
  assert.throws(() => quantileKnots([], 5), /at least one value/);
  assert.throws(() => quantileKnots([1, NaN], 5), /finite/);
});

test("with k = n quantile rescaling is the empirical CDF (ranks / (n - 1))", () => {
  const random = rng(1);
  const x = Array.from({ length: 50 }, () => random() * 100 - 50);
  const t = quantileRescale(x, x.length);
  const rank = (v) => x.filter((u) => u < v).length;
  x.forEach((v, i) => close(t[i], rank(v) / (x.length - 1), 1e-9));
});

test("rescaled values are monotone in the originals, span [0, 1], and roughly uniform", () => {
  const random = rng(7);
  // heavy-tailed data: most points near 0, a few far out
  const x = Array.from({ length: 400 }, () => Math.tan((random() - 0.5) * 3));
  const t = quantileRescale(x, 100);
  const order = x.map((_, i) => i).sort((a, b) => x[a] - x[b]);
  for (let i = 1; i < order.length; i++) assert.ok(t[order[i]] >= t[order[i - 1]]);
  close(Math.min(...t), 0);
  close(Math.max(...t), 1);
  const quarter = t.filter((v) => v < 0.25).length / t.length;
  assert.ok(Math.abs(quarter - 0.25) < 0.02, `first quarter holds ${quarter}`);
});

test("the inverse map returns original values at knots and inverts phi between them", () => {
  const random = rng(3);
  const x = Array.from({ length: 200 }, () => random() ** 3 * 10);
  const knots = quantileKnots(x, 20);
  for (let i = 0; i < 20; i++) close(quantileInverse(knots, knots.levels[i]), knots.q[i], 1e-9);
  for (const v of [0.01, 0.5, 3, 7.7]) close(quantileInverse(knots, quantileForward(knots, v)), v, 1e-9);
  close(quantileInverse(knots, -1), knots.q[0]);
  close(quantileInverse(knots, 2), knots.q[19]);
});

test("tied quantiles merge into one knot at their mean level; a constant axis maps to 0.5", () => {
  // sorted: 0 0 0 0 1 2 3 4 5 6 ; k = 4: quantiles at 0, 1/3, 2/3, 1 are 0, 0, 3, 6
  const knots = quantileKnots([0, 0, 3, 0, 1, 2, 0, 4, 5, 6], 4);
  assert.deepEqual(Array.from(knots.q), [0, 3, 6]);
  // mean levels 1/6, 2/3, 1 renormalised to [0, 1]
  assert.deepEqual(Array.from(knots.levels).map((v) => +v.toFixed(12)), [0, 0.6, 1]);
  close(quantileForward(knots, 0), 0);
  close(quantileForward(knots, 1.5), 0.3);
  close(quantileForward(knots, -5), 0);
  close(quantileForward(knots, 50), 1);
  close(quantileInverse(knots, 0.3), 1.5);
  assert.deepEqual(Array.from(quantileRescale([3, 3, 3], 10)), [0.5, 0.5, 0.5]);
  close(quantileInverse(quantileKnots([3, 3], 5), 0.9), 3);
});

test("frame rescaling works per axis and fills the reusable output", () => {
  const data = new Float32Array([0, 100, 1, 200, 2, 300, 10, 1000]);
  const out = new Float32Array(8);
  const knots = quantileRescaleFrame(data, 4, 4, out);
  assert.deepEqual(Array.from(out), [0, 0, 1 / 3, 1 / 3, 2 / 3, 2 / 3, 1, 1].map(Math.fround));
  const ticks = quantileTicks(knots.x, 0, 1, 5);
  assert.equal(ticks[0].t, 0);
  assert.equal(ticks[0].value, 0);
  assert.equal(ticks.at(-1).t, 1);
  assert.equal(ticks.at(-1).value, 10);
  // equidistant in rescaled space
  const steps = ticks.slice(1).map((tk, i) => tk.t - ticks[i].t);
  steps.forEach((s) => close(s, steps[0], 1e-12));
  assert.deepEqual(quantileTicks(knots.x, 0.5, 0.5), []);
});

test("frameExtent skips non-finite rows and returns null for none", () => {
  const data = new Float32Array([1, 2, NaN, 5, -3, 4, 0, -1]);
  assert.deepEqual(frameExtent(data, 4), [-3, 1, -1, 4]);
  assert.deepEqual(frameExtent(data, 1), [1, 1, 2, 2]);
  assert.equal(frameExtent(new Float32Array([NaN, 1]), 1), null);
  assert.equal(frameExtent(new Float32Array(0), 0), null);
});

test("fitDomains contains the extent with equal units per pixel and handles a single point", () => {
  const d = fitDomains([-1e-4, 3e-4, 0, 1e-4], 600, 300, 0.05);
  assert.ok(d.x[0] < -1e-4 && d.x[1] > 3e-4 && d.y[0] < 0 && d.y[1] > 1e-4);
  close((d.x[1] - d.x[0]) / 600, (d.y[1] - d.y[0]) / 300, 1e-18);
  const p = fitDomains([2, 2, 5, 5], 100, 100);
  assert.ok(p.x[1] > p.x[0] && p.y[1] > p.y[0]);
  close((p.x[0] + p.x[1]) / 2, 2);
  close((p.y[0] + p.y[1]) / 2, 5);
});

test("easeDomains approaches the target smoothly and settles on it", () => {
  const target = { x: [-50, 50], y: [-30, 30] };
  let cur = { x: [-1e-4, 1e-4], y: [-1e-4, 1e-4] };
  let settled = false;
  let steps = 0;
  let prevSpan = cur.x[1] - cur.x[0];
  while (!settled && steps < 1000) {
    [cur, settled] = easeDomains(cur, target, 0.25);
    const span = cur.x[1] - cur.x[0];
    assert.ok(span >= prevSpan, "zooms out monotonically");
    prevSpan = span;
    steps++;
  }
  assert.ok(settled);
  assert.ok(steps > 5 && steps < 200, `took ${steps} steps`);
  assert.deepEqual(cur, target);
  assert.deepEqual(easeDomains(null, target), [target, true]);
});

test("topEdges keeps the k strongest partners that have a point, strongest first", () => {
  const edges = {
    n: 4, k: 3,
    indices: Int32Array.from([1, 2, 3, 0, 0, 3, 3, 1, 0, 2, 0, 1]),
    weights: Float32Array.from([0.2, 0.7, 0.1, 0.9, 0.05, 0, 0.3, 0.3, 0.4, 0.6, 0.5, 0.4]),
  };
  assert.deepEqual(topEdges(edges, 0, 2).map((e) => e.token), [2, 1]);
  assert.deepEqual(topEdges(edges, 1, 5).map((e) => e.token), [0, 0]); // zero weight dropped
  const rows = tokenRows([0, 1, 3], 4); // token 2 has no point
  assert.deepEqual(topEdges(edges, 0, 3, rows).map((e) => e.token), [1, 3]);
  assert.deepEqual(topEdges(edges, 3, 3).map((e) => e.token), [2, 0, 1]);
  assert.deepEqual(topEdges(null, 0, 3), []);
  assert.deepEqual(topEdges(edges, 9, 3), []);
});

test("tokenRows and nearestPoint", () => {
  assert.deepEqual(Array.from(tokenRows([1, 2, 4], 5)), [-1, 0, 1, -1, 2]);
  const sx = Float32Array.from([0, 10, 20]);
  const sy = Float32Array.from([0, 0, 0]);
  assert.equal(nearestPoint(sx, sy, 3, 11, 2, 5), 1);
  assert.equal(nearestPoint(sx, sy, 3, 50, 50, 5), -1);
  assert.equal(nearestPoint(sx, sy, 2, 20, 0, 5), -1, "only the first m points count");
});

test("textSegments rebuilds the text from offsets and keeps tokens as plain strings", () => {
  const text = "t-SNE maps <img src=x> data.";
  const tokens = ["[CLS]", "t", "-", "sne", "maps", "<", "img", "src", "=", "x", ">", "data", ".", "[SEP]"];
  const offsets = [null, [0, 1], [1, 2], [2, 5], [6, 10], [11, 12], [12, 15], [16, 19], [19, 20], [20, 21], [21, 22], [23, 27], [27, 28], null];
  const pieces = textSegments(text, tokens, offsets);
  assert.equal(pieces.filter((p) => !p.special).map((p) => p.text).join(""), text);
  assert.deepEqual(pieces[0], { text: "[CLS]", token: 0, special: true });
  assert.equal(pieces.find((p) => p.token === 3).text, "SNE");
  assert.equal(pieces.find((p) => p.token === 5).text, "<");
  assert.equal(pieces.at(-1).token, 13);
  const plain = textSegments("", ["a", "<b>"], null);
  assert.deepEqual(plain.map((p) => p.text), ["a", " ", "<b>"]);
});

test("tokenContext gives the surrounding words with ellipses", () => {
  const text = "one two three four five six seven eight nine ten";
  const tokens = text.split(" ");
  let pos = 0;
  const offsets = tokens.map((t) => { const s = text.indexOf(t, pos); pos = s + t.length; return [s, pos]; });
  const c = tokenContext(text, tokens, offsets, 5, 2);
  assert.equal(c.token, "six");
  assert.equal(c.before, "…four five ");
  assert.equal(c.after, " seven eight…");
  const first = tokenContext(text, tokens, offsets, 0, 2);
  assert.equal(first.before, "");
  const noOffsets = tokenContext("", ["[CLS]", "a", "b", "[SEP]"], null, 1, 1);
  assert.deepEqual(noOffsets, { before: "[CLS] ", token: "a", after: " b …" });
});

test("gridHit inverts gridGeometry cell by cell and misses gaps and labels", () => {
  const g = gridGeometry(6, 12, 200, 420);
  assert.equal(g.L, 6);
  assert.ok(g.cellW > 1.5 && g.cellW < 2);
  for (const [l, h, j] of [[0, 0, 0], [2, 5, 17], [5, 11, 199]]) {
    const x = g.labelW + (j + 0.5) * g.cellW;
    const y = layerTop(g, l) + (h + 0.5) * g.cellH;
    assert.deepEqual(gridHit(g, x, y), { layer: l, head: h, token: j });
  }
  assert.equal(gridHit(g, 10, layerTop(g, 0) + 1), null, "head label area");
  assert.equal(gridHit(g, g.labelW + 1, layerTop(g, 1) - 2), null, "layer title band");
  assert.equal(gridHit(g, g.labelW + 201 * g.cellW, layerTop(g, 0) + 1), null);
  assert.ok(g.height >= layerTop(g, 5) + g.blockH);
  const big = gridGeometry(12, 12, 512, 420);
  assert.equal(big.cellH, 4);
});

test("shownFrameIndex follows the newest frame unless scrubbed", () => {
  assert.equal(shownFrameIndex(0, null, true), -1);
  assert.equal(shownFrameIndex(10, 3, true), 9);
  assert.equal(shownFrameIndex(10, 3, false), 3);
  assert.equal(shownFrameIndex(10, 30, false), 9);
});
