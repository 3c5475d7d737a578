import { test } from "node:test";
import assert from "node:assert/strict";
import {
  quantileKnots,
  quantileForward,
  quantileInverse,
  quantileRescale,
  quantileRescaleFrame,
  quantileTicks,
} from "./rescaling.js";
import { close, rng } from "../test-helpers/testing.js";

test("quantile knots use numpy's linear quantile definition", () => {
  const { q, levels } = quantileKnots([4, 1, 3, 2], 3);
  assert.deepEqual(Array.from(levels), [0, 0.5, 1]);
  assert.deepEqual(Array.from(q), [1, 2.5, 4]); // median of 1..4 is 2.5
  assert.throws(() => quantileKnots([1, 2], 1), /quantile_k must be an integer in \[2, 1000\]/);
  // never asked for more knots than Python allows: k = 1e7 cost 3.2 s a frame, k = 1e308 never returned
  for (const k of [1001, 1e7, 1e308, Infinity, 2.5]) assert.throws(() => quantileKnots([1, 2], k), /\[2, 1000\]/);
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
  assert.deepEqual(
    Array.from(knots.levels).map((v) => +v.toFixed(12)),
    [0, 0.6, 1],
  );
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
