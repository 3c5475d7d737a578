import { test } from "node:test";
import assert from "node:assert/strict";
import { placeLabels, labelBudget, labelCandidates, chooseLabels } from "./labels.js";
import { rng } from "../test-helpers/testing.js";

const overlap = (a, b) => a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h;

test("placed labels never overlap and stay inside the bounds, even for dense points", () => {
  const random = rng(5);
  const items = Array.from({ length: 600 }, (_, key) => ({
    x: 200 + 40 * (random() - 0.5),
    y: 150 + 40 * (random() - 0.5),
    w: 10 + 40 * random(),
    h: 14,
    key,
  }));
  const bounds = { x0: 0, y0: 0, x1: 400, y1: 300 };
  const placed = placeLabels(items, bounds);
  assert.ok(placed.length > 10 && placed.length < 600, `placed ${placed.length}`);
  for (let i = 0; i < placed.length; i++) {
    const a = placed[i];
    assert.ok(a.x >= 0 && a.y >= 0 && a.x + a.w <= 400 && a.y + a.h <= 300);
    for (let j = 0; j < i; j++) assert.ok(!overlap(a, placed[j]), `labels ${a.key} and ${placed[j].key} overlap`);
  }
});

test("spread-out points (zoomed in) all get labels; the first item always wins its spot", () => {
  const items = Array.from({ length: 50 }, (_, key) => ({
    x: 20 + (key % 10) * 90,
    y: 20 + Math.floor(key / 10) * 40,
    w: 30,
    h: 12,
    key,
  }));
  assert.equal(placeLabels(items, { x0: 0, y0: 0, x1: 1000, y1: 300 }).length, 50);
  const crowded = [7, 3, 9].map((key) => ({ x: 100, y: 100, w: 60, h: 12, key }));
  assert.equal(placeLabels(crowded, { x0: 0, y0: 0, x1: 300, y1: 300 })[0].key, 7);
  assert.equal(placeLabels(crowded, { x0: 0, y0: 0, x1: 300, y1: 300 }, { max: 2 }).length, 2);
});

/** Points of `tokens` (token t at row t) at (x(t), y(t)), in a plot of 1000 x 1000 px. */
function scene(n, at, extra = {}) {
  const sx = Float32Array.from({ length: n }, (_, t) => at(t)[0]);
  const sy = Float32Array.from({ length: n }, (_, t) => at(t)[1]);
  const kept = Array.from({ length: n }, (_, t) => t);
  return {
    points: { sx, sy, m: n, kept, tokenRow: Int32Array.from(kept) },
    plot: { x0: 0, y0: 0, x1: 1000, y1: 1000 },
    hovered: -1,
    selected: new Set(),
    partners: [],
    matches: new Set(),
    subword: () => false,
    ...extra,
  };
}

test("label priority: hovered, selected, partners, matches, word starts, pieces; each once, in view only", () => {
  const spread = scene(9, (t) => [50 + 100 * t, t === 8 ? 2000 : 500]); // token 8 is out of view
  const order = labelCandidates({
    ...spread,
    hovered: 4,
    selected: new Set([2, 9, 8]),
    partners: [1, 2],
    matches: new Set([6]),
    subword: (t) => t === 0 || t === 3,
  });
  assert.deepEqual(order, [4, 2, 1, 6, 5, 7, 0, 3]);
});

test("crowded points: a few candidates per cell of the plot, the hovered token and its partners always", () => {
  const random = rng(8);
  const n = 65536;
  const crowd = scene(n, () => [500 + 200 * random(), 500 + 200 * random()]);
  const partners = [10, 11, 12, 13, 14, 15];
  const order = labelCandidates({ ...crowd, hovered: 9, partners, selected: new Set(crowd.points.kept) });
  const cells = Math.ceil(200 / 14 + 1) ** 2;
  assert.ok(order.length <= 4 * cells + 7, `${order.length} candidates for ${cells} cells`);
  for (const t of [9, ...partners]) assert.ok(order.includes(t), `token ${t}`);
  const stacked = scene(10, () => [300, 300]); // ten on one pixel: four tried
  assert.equal(labelCandidates(stacked).length, 4);
  let sized = 0;
  const size = () => (sized++, [30, 14]);
  const placed = chooseLabels({ ...crowd, hovered: 9, partners, density: 1, radius: 3.6, size, labelH: 14 });
  assert.ok(sized <= order.length + 7, `${sized} labels sized of ${order.length}`); // the emphasised twice
  for (let i = 0; i < placed.length; i++) {
    for (let j = 0; j < i; j++) assert.ok(!overlap(placed[i], placed[j]), `labels ${i} and ${j} overlap`);
  }
  assert.ok(placed.length > 30, `${placed.length} placed`);
});

test("label budget: none at 0, all at 1, growing in between", () => {
  assert.equal(labelBudget(0, 1e5, 100), 0);
  assert.equal(labelBudget(1, 1e5, 100), Infinity);
  assert.ok(labelBudget(0.3, 1e5, 100) < labelBudget(0.6, 1e5, 100));
});
